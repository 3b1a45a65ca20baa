//! `toolhost audit`: verify, export and follow the trail; print its key.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::open_trail;
use crate::audit;
use crate::manifest::Manifest;

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The manifest, for its state_dir.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
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

pub(super) fn audit_command(args: AuditArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let state_dir = &manifest.state_dir;
    match args.command {
        AuditCommand::Verify { key } => {
            let public = match key {
                Some(text) => {
                    audit::key::parse_public(&text).map_err(|e| anyhow::anyhow!("--key: {e}"))?
                }
                None => audit::key::load(&audit::key::key_path(state_dir))?.verifying_key(),
            };
            match audit::verify::verify(state_dir, &public) {
                Ok(Ok(verified)) => {
                    println!(
                        "OK: {} records in {} segment(s), {} checkpoint(s); head {} (seq {})",
                        verified.records,
                        verified.segments,
                        verified.checkpoints,
                        verified.head,
                        verified.records
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
                    if let Some((segment, bytes)) = verified.torn_tail {
                        println!(
                            "note: {segment} ends in a half-written record ({bytes} bytes, a crash mid-write); the next host start saves and cuts it and records the repair"
                        );
                    }
                    Ok(())
                }
                Ok(Err(broken)) => {
                    println!("BROKEN: {broken}");
                    std::process::exit(1);
                }
                Err(e) => {
                    eprintln!("toolhost: cannot verify: {e}");
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
            };
            let stdout = std::io::stdout();
            audit::export::export(state_dir, &filter, format, &mut stdout.lock())?;
            Ok(())
        }
        AuditCommand::Tail { lines, follow } => {
            let stdout = std::io::stdout();
            audit::export::tail(state_dir, lines, follow, &mut stdout.lock())?;
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
