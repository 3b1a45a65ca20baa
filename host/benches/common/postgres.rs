//! A throwaway PostgreSQL server, for the tests and the benchmark.
//!
//! Each user starts its own server: `initdb` into a temporary folder, a
//! free loopback port, stopped (and the folder removed) when dropped.
//! PostgreSQL refuses to run as root, so as root the server runs as the
//! `postgres` user that Debian's package creates.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The admin token of the hosts [`Postgres::env`] configures.
pub const ADMIN_TOKEN: &str = "admin-token-for-replica-tests-0123456789";

/// A running PostgreSQL server.
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
}

impl Postgres {
    pub fn start() -> Postgres {
        let bin = server_bin();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let as_root = is_root();
        if as_root {
            // The parent must be reachable by the server's user, too.
            run(Command::new("chmod").arg("755").arg(dir.path()));
            run(Command::new("chown").arg("postgres").arg(&data));
        }
        run(pg(&bin, "initdb", as_root)
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(&data));
        let pg = Postgres {
            dir,
            bin,
            port: free_port(),
        };
        pg.resume();
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `postgres://` URL of the server's default database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server (fast shutdown: open transactions roll back).
    pub fn stop(&self) {
        run(pg(&self.bin, "pg_ctl", is_root())
            .args(["-m", "fast", "-w", "stop", "-D"])
            .arg(self.data()));
    }

    /// Starts the server again on the same port and data.
    pub fn resume(&self) {
        let data = self.data();
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            self.port,
            data.display()
        );
        run(pg(&self.bin, "pg_ctl", is_root())
            .args(["-w", "-t", "30", "start", "-D"])
            .arg(&data)
            .arg("-o")
            .arg(options)
            .arg("-l")
            .arg(data.join("log")));
    }

    /// Freezes the server: each of its processes stopped (`SIGSTOP`), its
    /// connections left open. The kernel still acknowledges what clients
    /// send, so nothing looks lost at the TCP level: a server hung on its
    /// disk, or a commit waiting for a standby that is gone, looks the same.
    pub fn freeze(&self) {
        self.signal(rustix::process::Signal::STOP);
    }

    /// Lets a frozen server run again.
    pub fn thaw(&self) {
        self.signal(rustix::process::Signal::CONT);
    }

    /// Sends `signal` to the postmaster and to every process it started.
    fn signal(&self, signal: rustix::process::Signal) {
        let Ok(pid_file) = std::fs::read_to_string(self.data().join("postmaster.pid")) else {
            return;
        };
        let Some(main) = pid_file
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<i32>().ok())
        else {
            return;
        };
        let mut pids = vec![main];
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may hold spaces, so read
            // from the last parenthesis.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let parent = after
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<i32>().ok());
            if parent == Some(main)
                && let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>()
            {
                pids.push(pid);
            }
        }
        for pid in pids.into_iter().filter_map(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    /// Restarts the server with TLS on, its certificate (for `localhost`
    /// and 127.0.0.1) issued by a fresh CA; returns the CA's PEM file.
    pub fn enable_tls(&self) -> PathBuf {
        let data = self.data();
        let tls = self.dir.path().join("tls");
        std::fs::create_dir_all(&tls).unwrap();
        let openssl = |args: &[&str]| {
            run(Command::new("openssl").current_dir(&tls).args(args));
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=toolhost test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ]);
        std::fs::write(
            tls.join("san.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.pem",
        ]);
        for file in ["server.pem", "server.key"] {
            std::fs::copy(tls.join(file), data.join(file)).unwrap();
            if is_root() {
                run(Command::new("chown").arg("postgres").arg(data.join(file)));
            }
            run(Command::new("chmod").arg("600").arg(data.join(file)));
        }
        let mut conf = std::fs::read_to_string(data.join("postgresql.conf")).unwrap();
        conf.push_str("\nssl = on\nssl_cert_file = 'server.pem'\nssl_key_file = 'server.key'\n");
        std::fs::write(data.join("postgresql.conf"), conf).unwrap();
        self.stop();
        self.resume();
        tls.join("ca.pem")
    }

    /// Runs SQL through the driver the host uses; returns the first column
    /// of every row as text.
    pub async fn query(&self, sql: &str) -> Vec<String> {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .expect("connect to the test database");
        let driver = tokio::spawn(connection);
        let rows = client.simple_query(sql).await.expect(sql);
        drop(client);
        let _ = driver.await;
        rows.into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => {
                    Some(row.get(0).unwrap_or("").to_string())
                }
                _ => None,
            })
            .collect()
    }

    /// The environment that puts a host on this database.
    pub fn env(&self, state_dir: &Path, replica: &str) -> Vec<(String, String)> {
        vec![
            ("TOOLHOST_STORE".into(), "postgres".into()),
            ("TOOLHOST_DATABASE_URL".into(), self.url()),
            ("TOOLHOST_STATE_DIR".into(), state_dir.display().to_string()),
            ("TOOLHOST_REPLICA".into(), replica.into()),
            ("TOOLHOST_ADMIN_TOKEN".into(), ADMIN_TOKEN.into()),
        ]
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // A frozen server would not stop.
        self.thaw();
        let _ = pg(&self.bin, "pg_ctl", is_root())
            .args(["-m", "immediate", "-w", "stop", "-D"])
            .arg(self.data())
            .output();
    }
}

/// The server binaries of Debian's package (`/usr/lib/postgresql/N/bin`),
/// newest version first; `just test` installs the package.
fn server_bin() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (just services-setup)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort();
    found
        .pop()
        .expect("initdb under /usr/lib/postgresql/*/bin (just services-setup)")
}

fn is_root() -> bool {
    // The effective uid, as the shell sees it; no libc binding needed.
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn pg(bin: &Path, program: &str, as_root: bool) -> Command {
    if as_root {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(bin.join(program));
        // The server's user cannot enter root's working directory.
        cmd.current_dir("/");
        cmd
    } else {
        Command::new(bin.join(program))
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
