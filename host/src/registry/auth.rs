//! Registry credentials: from the host's secret store when the manifest's
//! `[[registry]] credential` names a secret (`USER:PASSWORD`), otherwise
//! from a docker-style config file (`$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`, its `auths` entry for the registry), otherwise
//! anonymous. Never from the manifest itself.

use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use crate::gate::SecretStore;
use crate::manifest::RegistryDecl;

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::HashMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// The docker config file consulted, if any.
fn docker_config() -> Option<PathBuf> {
    match std::env::var_os("DOCKER_CONFIG").filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join("config.json")),
        None => {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker/config.json"))
        }
    }
}

/// How to authenticate to `decl.host`; the error says which source failed.
pub fn credentials(
    decl: &RegistryDecl,
    secrets: Option<&SecretStore>,
) -> Result<RegistryAuth, String> {
    if let Some(name) = &decl.credential {
        let Some(secrets) = secrets else {
            return Err(format!(
                "[[registry]] {} names secret `{name}`, but no secret store is open",
                decl.host
            ));
        };
        let value = secrets.get(name)?;
        let (user, password) = value.split_once(':').ok_or_else(|| {
            format!(
                "secret `{name}` (for registry {}) must be USER:PASSWORD",
                decl.host
            )
        })?;
        return Ok(RegistryAuth::Basic(user.to_string(), password.to_string()));
    }
    let Some(path) = docker_config() else {
        return Ok(RegistryAuth::Anonymous);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryAuth::Anonymous),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    from_docker_config(&text, &decl.host).map_err(|e| format!("{}: {e}", path.display()))
}

/// The credentials a docker config file's text holds for `host`.
fn from_docker_config(text: &str, host: &str) -> Result<RegistryAuth, String> {
    let config: DockerConfig =
        serde_json::from_str(text).map_err(|e| format!("not a docker config file: {e}"))?;
    // Keys are `host[:port]`, sometimes written as a URL.
    let entry = config.auths.iter().find(|(key, _)| {
        let key = key
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches('/');
        key == host || key.strip_suffix("/v2").is_some_and(|k| k == host)
    });
    let Some((_, entry)) = entry else {
        return Ok(RegistryAuth::Anonymous);
    };
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
    }
    let Some(auth) = &entry.auth else {
        return Ok(RegistryAuth::Anonymous);
    };
    let decoded = BASE64
        .decode(auth.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| format!("the auth of {host} is not base64 of USER:PASSWORD"))?;
    let (user, password) = decoded
        .split_once(':')
        .ok_or_else(|| format!("the auth of {host} is not USER:PASSWORD"))?;
    Ok(RegistryAuth::Basic(user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(auth: RegistryAuth) -> Option<(String, String)> {
        match auth {
            RegistryAuth::Basic(user, password) => Some((user, password)),
            _ => None,
        }
    }

    #[test]
    fn docker_config_entries_are_found_by_host_in_either_form() {
        let text = r#"{"auths": {
            "https://registry.example.com/v2/": {"auth": "Ym90OnMzY3JldA=="},
            "127.0.0.1:5000": {"username": "ci", "password": "pw"},
            "broken.example.com": {"auth": "not base64!"}
        }}"#;
        assert_eq!(
            basic(from_docker_config(text, "registry.example.com").unwrap()),
            Some(("bot".into(), "s3cret".into()))
        );
        assert_eq!(
            basic(from_docker_config(text, "127.0.0.1:5000").unwrap()),
            Some(("ci".into(), "pw".into()))
        );
        assert!(basic(from_docker_config(text, "ghcr.io").unwrap()).is_none());
        assert!(from_docker_config(text, "broken.example.com").is_err());
        assert!(from_docker_config("not json", "ghcr.io").is_err());
    }
}
