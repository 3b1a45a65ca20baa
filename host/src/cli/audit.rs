//! `toolhost audit`: verify, export and follow the trail; print its key.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};

use super::{Backend, open_backend, open_trail};
use crate::audit;
use crate::manifest::Manifest;
use crate::store::postgres::CheckpointRow;

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The manifest, for its state_dir.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    /// A replica's state_dir whose trail to read (repeatable); several are
    /// merged by time. `NAME=DIR` also says which replica wrote it, which
    /// `verify --against-db` then holds it to. Default: the manifest's
    /// state_dir, as replica `host.replica`.
    #[arg(long = "trail", value_name = "[NAME=]DIR", global = true, value_parser = parse_trail)]
    pub trails: Vec<TrailArg>,
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check every record's chain and every signed checkpoint. Exit 0: the
    /// trail verifies; 1: it was changed, cut or forged (the first break is
    /// printed); 2: it could not be read.
    Verify {
        /// The public key to check signatures with (`ed25519:<hex>`, from
        /// `toolhost audit key`), kept where the host cannot write.
        /// Default: the key in state_dir, which proves less.
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// Also check each trail against the checkpoints its replica copied
        /// to the shared database (host.store = "postgres"): shows a trail
        /// whose newest records were cut together with its checkpoints.
        #[arg(long)]
        against_db: bool,
    },
    /// Print the records that match every filter given.
    Export {
        /// From this time on: RFC 3339, a date (2026-11-30) or an age (2h, 7d).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Before this time (same forms as --since).
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// Only records of this task.
        #[arg(long, value_name = "TASK_ID")]
        task: Option<String>,
        /// Only records of this tool.
        #[arg(long, value_name = "TOOL")]
        tool: Option<String>,
        /// Only records of tools of this risk class.
        #[arg(long, value_enum)]
        risk: Option<crate::manifest::RiskClass>,
        #[arg(long, value_enum, default_value = "jsonl")]
        format: audit::export::Format,
    },
    /// Print the newest records; with -f, keep printing new ones.
    Tail {
        /// How many records to print first.
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: usize,
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Print the public key that verifies the trail's checkpoints.
    Key,
}

pub(super) async fn audit_command(args: AuditArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let state_dir = &manifest.state_dir;
    let named = if args.trails.is_empty() {
        vec![TrailArg {
            replica: Some(manifest.replica.clone()),
            dir: state_dir.clone(),
        }]
    } else {
        args.trails.clone()
    };
    let trails: Vec<PathBuf> = named.iter().map(|t| t.dir.clone()).collect();
    match args.command {
        AuditCommand::Verify { key, against_db } => {
            match verify(&manifest, &named, key.as_deref(), against_db).await {
                Ok(false) => Ok(()),
                Ok(true) => std::process::exit(1),
                // 1 means tampering; not being able to look is another
                // matter (a database outage, an unreadable key).
                Err(e) => {
                    eprintln!("toolhost: cannot verify: {e:#}");
                    std::process::exit(2);
                }
            }
        }
        AuditCommand::Export {
            since,
            until,
            task,
            tool,
            risk,
            format,
        } => {
            let time = |text: Option<String>| {
                text.map(|t| audit::export::parse_time(&t))
                    .transpose()
                    .map_err(anyhow::Error::msg)
            };
            let filter = audit::export::Filter {
                since: time(since)?,
                until: time(until)?,
                task,
                tool,
                risk: risk.map(|r| r.as_str().to_string()),
                outcome: None,
            };
            let stdout = std::io::stdout();
            audit::export::export(&trails, &filter, format, &mut stdout.lock())?;
            Ok(())
        }
        AuditCommand::Tail { lines, follow } => {
            let stdout = std::io::stdout();
            audit::browse::tail(&trails, lines, follow, &mut stdout.lock())?;
            Ok(())
        }
        AuditCommand::Key => {
            let path = audit::key::key_path(state_dir);
            if !path.exists() {
                // The key is made with the trail; make both now rather than
                // print nothing an operator could pin.
                drop(open_trail(&manifest)?);
            }
            let key = audit::key::load(&path)?;
            println!("{}", audit::key::public_text(&key.verifying_key()));
            Ok(())
        }
    }
}

/// Verifies each trail and prints what it found; returns whether any is
/// broken. A trail that cannot be read at all exits 2.
async fn verify(
    manifest: &Manifest,
    trails: &[TrailArg],
    key: Option<&str>,
    against_db: bool,
) -> anyhow::Result<bool> {
    if key.is_some() && trails.len() > 1 {
        bail!(
            "--key checks one trail; each replica signs with its own key, so give one --trail with it"
        );
    }
    let database = if against_db {
        Some(database_checkpoints(manifest).await?)
    } else {
        None
    };
    let mut broken = false;
    let mut compared: std::collections::HashSet<(String, u64)> = Default::default();
    for TrailArg {
        replica: given,
        dir,
    } in trails
    {
        let public = match key {
            Some(text) => {
                audit::key::parse_public(text).map_err(|e| anyhow::anyhow!("--key: {e}"))?
            }
            None => audit::key::load(&audit::key::key_path(dir))?.verifying_key(),
        };
        // Which replica wrote the trail: as the operator named it, else as
        // its records say (which whoever rewrote them also chose).
        let replica = match given {
            Some(name) => Some(name.clone()),
            None => audit::browse::replica_of(dir)?,
        };
        // The database's checkpoints of this trail: those filed under its
        // replica's name, and those signed by its key under any name, so
        // that neither a renamed nor an emptied trail escapes them.
        let key_id = audit::key::public_text(&public);
        let mine: Vec<&CheckpointRow> = database
            .iter()
            .flatten()
            .filter(|row| row.key_id == key_id || replica.as_ref() == Some(&row.replica))
            .collect();
        compared.extend(mine.iter().map(|row| (row.replica.clone(), row.seq)));
        let elsewhere: Vec<String> = mine.iter().map(|row| row.line.clone()).collect();
        if trails.len() > 1 {
            println!(
                "trail {} (replica {}):",
                dir.display(),
                replica.as_deref().unwrap_or("unnamed")
            );
        }
        match audit::verify::verify(dir, &public, &elsewhere) {
            Ok(Ok(verified)) => {
                print_verified(manifest, &verified);
                if database.is_some() {
                    println!(
                        "database: {} checkpoint(s) of this trail, all signed by its key and holding",
                        elsewhere.len()
                    );
                }
            }
            Ok(Err(failure)) => {
                println!("BROKEN: {failure}");
                broken = true;
            }
            Err(e) => {
                eprintln!("toolhost: cannot verify {}: {e}", dir.display());
                std::process::exit(2);
            }
        }
    }
    if let Some(rows) = &database {
        let mut others: Vec<&CheckpointRow> = Vec::new();
        for row in rows {
            if !compared.contains(&(row.replica.clone(), row.seq)) {
                others.retain(|o| o.replica != row.replica);
                others.push(row);
            }
        }
        for row in others {
            println!(
                "note: the database holds checkpoints of replica {} through seq {}; its trail was not given (--trail {}=DIR)",
                row.replica, row.seq, row.replica
            );
        }
    }
    Ok(broken)
}

fn print_verified(manifest: &Manifest, verified: &audit::verify::Verified) {
    println!(
        "OK: {} records in {} segment(s), {} checkpoint(s); head {} (seq {})",
        verified.records, verified.segments, verified.checkpoints, verified.head, verified.records
    );
    if let Some(at) = &verified.last_signed_at {
        println!(
            "newest checkpoint: seq {} signed at {at}",
            verified.signed_through
        );
    }
    let unsigned = verified.records - verified.signed_through;
    if unsigned > 0 {
        println!(
            "note: the last {unsigned} record(s) are chained but not yet under a signed checkpoint (a serving host signs every {} s and at stop)",
            manifest.audit.checkpoint_every.as_secs()
        );
    }
    if let Some((segment, bytes)) = &verified.torn_tail {
        println!(
            "note: {segment} ends in a half-written record ({bytes} bytes, a crash mid-write); the next host start saves and cuts it and records the repair"
        );
    }
}

/// Every checkpoint the replicas copied to the shared database.
async fn database_checkpoints(manifest: &Manifest) -> anyhow::Result<Vec<CheckpointRow>> {
    let Backend::Postgres(postgres) = open_backend(manifest, false).await? else {
        bail!(
            "--against-db needs the shared database: host.store = \"postgres\" (or TOOLHOST_STORE=postgres)"
        );
    };
    Ok(postgres.checkpoints().await?)
}

/// One `--trail`: a state_dir, and the replica that wrote it if named.
#[derive(Debug, Clone)]
pub struct TrailArg {
    pub replica: Option<String>,
    pub dir: PathBuf,
}

fn parse_trail(text: &str) -> Result<TrailArg, String> {
    match text.split_once('=') {
        Some((name, dir)) if !name.is_empty() && !name.contains('/') => Ok(TrailArg {
            replica: Some(name.to_string()),
            dir: PathBuf::from(dir),
        }),
        _ => Ok(TrailArg {
            replica: None,
            dir: PathBuf::from(text),
        }),
    }
}
