//! `toolhost approval`: list and decide approvals of destructive calls.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::operator_store;
use crate::manifest::Manifest;
use crate::operator::approval_json;
use crate::store::operator as cli_operator;
use crate::store::{ApprovalState, Decision, rfc3339};

#[derive(Debug, Args)]
pub struct ApprovalArgs {
    /// The manifest, for its state_dir.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    #[command(subcommand)]
    pub command: ApprovalCommand,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalCommand {
    /// List pending approvals (all with --all), newest first.
    List {
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Show one approval as JSON.
    Show { id: String },
    /// Approve a pending call: the same call, repeated, runs once.
    Approve { id: String },
    /// Deny a pending call.
    Deny { id: String },
}

pub(super) async fn approval(args: ApprovalArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let changes = matches!(
        args.command,
        ApprovalCommand::Approve { .. } | ApprovalCommand::Deny { .. }
    );
    let store = operator_store(&manifest, changes).await?;
    let decide = async |id: &str, decision| -> anyhow::Result<()> {
        let approval = store
            .decide(id, decision, &cli_operator(), "cli", None)
            .await?;
        let verb = match decision {
            Decision::Approve => "approved; the same call, repeated, runs once",
            Decision::Deny => "denied",
        };
        println!("{} {verb}: {}", approval.id, approval.summary);
        Ok(())
    };
    match args.command {
        ApprovalCommand::List { all, json } => {
            let list = store.approvals(!all).await?;
            if json {
                let list: Vec<_> = list.iter().map(approval_json).collect();
                println!("{}", serde_json::Value::Array(list));
            } else if list.is_empty() {
                println!("no {}approvals", if all { "" } else { "pending " });
            } else {
                for a in &list {
                    // A decided approval's expiry means nothing any more;
                    // who decided, and when, does.
                    let when = match (a.state, a.decided_at) {
                        (ApprovalState::Pending | ApprovalState::Approved, _) => {
                            format!("until {}", rfc3339(a.expires_at))
                        }
                        (_, Some(at)) => format!(
                            "by {} at {}",
                            a.decided_by.as_deref().unwrap_or("?"),
                            rfc3339(at)
                        ),
                        (_, None) => format!("since {}", rfc3339(a.expires_at)),
                    };
                    println!("{}  {:<8}  {when}  {}", a.id, a.state.as_str(), a.summary);
                }
            }
        }
        ApprovalCommand::Show { id } => {
            let approval = store
                .approval(&id)
                .await?
                .with_context(|| format!("no approval `{id}`"))?;
            println!("{:#}", approval_json(&approval));
        }
        ApprovalCommand::Approve { id } => decide(&id, Decision::Approve).await?,
        ApprovalCommand::Deny { id } => decide(&id, Decision::Deny).await?,
    }
    Ok(())
}
