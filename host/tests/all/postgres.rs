//! Host replicas on a throwaway PostgreSQL server (`pg_server`, shared
//! with the benchmark), and operator commands against its database.

use std::path::PathBuf;
use std::time::Duration;

pub use crate::pg_server::{ADMIN_TOKEN, Postgres};
use crate::support::*;

/// One `toolhost serve --http` replica on the shared database, with its
/// own state_dir and an admin listener.
pub struct Replica {
    pub host: HttpHost,
    pub state_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Replica {
    pub fn start(m: &TestManifest, pg: &Postgres, name: &str) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("state");
        let env = pg.env(&state_dir, name);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let host = http_env(m, &["--admin", "127.0.0.1:0"], &env);
        Replica {
            host,
            state_dir,
            _dir: dir,
        }
    }

    pub fn url(&self) -> &str {
        &self.host.url
    }

    /// A request to this replica's admin API: (status, JSON body).
    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let base = self.host.admin.as_ref().expect("--admin was given");
        let mut request = http_client()
            .request(method, format!("{base}{path}"))
            .bearer_auth(ADMIN_TOKEN)
            .timeout(Duration::from_secs(30));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or_default())
    }
}

/// A `toolhost` operator command against the database, as if run on
/// another machine that has the manifest and the URL (its own state_dir).
pub fn cli_on(m: &TestManifest, pg: &Postgres, args: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    toolhost()
        .envs(pg.env(&dir.path().join("operator"), "operator-laptop"))
        .args(args)
        .arg("--manifest")
        .arg(&m.path)
        .output()
        .unwrap()
}

/// [`cli_on`] that must succeed; its stdout.
pub fn cli_ok(m: &TestManifest, pg: &Postgres, args: &[&str]) -> String {
    let out = cli_on(m, pg, args);
    assert!(
        out.status.success(),
        "toolhost {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Opens a task on the database with `toolhost task open --json`.
pub fn open_task_on(
    m: &TestManifest,
    pg: &Postgres,
    grants: &[&str],
    extra: &[&str],
) -> OpenedTask {
    let mut args = vec!["task", "open", "--json", "--purpose", "replica test"];
    for grant in grants {
        args.extend(["--grant", grant]);
    }
    if !extra.contains(&"--ttl") {
        args.extend(["--ttl", "10m"]);
    }
    args.extend(extra);
    let out: serde_json::Value = serde_json::from_str(&cli_ok(m, pg, &args)).unwrap();
    OpenedTask {
        id: out["task"]["id"].as_str().unwrap().to_string(),
        token: out["token"].as_str().unwrap().to_string(),
    }
}
