//! `toolhost task`: open, list, show, revoke and extend tasks.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::operator_store;
use crate::manifest::Manifest;
use crate::operator::{self, OpenTask, task_json};
use crate::store::operator as cli_operator;
use crate::store::{TaskState, now, rfc3339};

#[derive(Debug, Args)]
pub struct TaskArgs {
    /// The manifest, for its state_dir and to check granted tools.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    #[command(subcommand)]
    pub command: TaskCommand,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Open a task and print its id and token (shown only this once).
    Open {
        /// What the task is for, in words an auditor understands.
        #[arg(long)]
        purpose: String,
        /// A write or destructive tool the task may call (repeatable).
        #[arg(long = "grant", value_name = "TOOL", required = true)]
        grants: Vec<String>,
        /// How long the task lasts, e.g. 30m, 2h, 1d (at most 30 days).
        #[arg(long, value_name = "DURATION")]
        ttl: String,
        /// Total calls the task may make, reads included.
        #[arg(long, value_name = "N")]
        max_calls: Option<u64>,
        /// Write and destructive calls the task may make in any hour.
        #[arg(long, value_name = "N")]
        writes_per_hour: Option<u32>,
        /// A granted destructive tool whose calls need no per-call approval (repeatable).
        #[arg(long = "pre-approve", value_name = "TOOL")]
        pre_approve: Vec<String>,
        /// Approvals come from an operator only (console, CLI or admin API); the client is never asked, not even to open the page.
        #[arg(long, conflicts_with = "approve_in_client")]
        operator_approval: bool,
        /// Let the agent's own client approve in a form (attended use, where the client is the person).
        #[arg(long)]
        approve_in_client: bool,
        /// Print JSON: {"task": {...}, "token": "..."}.
        #[arg(long)]
        json: bool,
    },
    /// List tasks, newest first.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one task as JSON.
    Show { id: String },
    /// Revoke a task: its sessions' next write or destructive call is refused.
    Revoke { id: String },
    /// Set a task's expiry to DURATION from now.
    Extend {
        id: String,
        #[arg(long, value_name = "DURATION")]
        ttl: String,
    },
}

/// `toolhost task …`: works on the store directly, so a serving host sees
/// the change at its very next call.
pub(super) async fn task(args: TaskArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let changes = matches!(
        args.command,
        TaskCommand::Open { .. } | TaskCommand::Revoke { .. } | TaskCommand::Extend { .. }
    );
    let store = operator_store(&manifest, changes).await?;
    match args.command {
        TaskCommand::Open {
            purpose,
            grants,
            ttl,
            max_calls,
            writes_per_hour,
            pre_approve,
            operator_approval,
            approve_in_client,
            json,
        } => {
            let request = OpenTask {
                purpose,
                grants,
                ttl,
                max_calls,
                writes_per_hour,
                pre_approve,
                operator_approval,
                approve_in_client,
            };
            let new = request.vet(&manifest, cli_operator())?;
            let (task, token) = store.open_task(new).await?;
            if json {
                let out = serde_json::json!({ "task": task_json(&task), "token": token.as_str() });
                println!("{out}");
            } else {
                println!("task:    {}", task.id);
                println!("expires: {}", rfc3339(task.expires_at));
                println!("token:   {}", token.as_str());
                println!();
                println!("The token is shown only this once. Give it to the agent's MCP client:");
                println!("  Streamable HTTP: header `Authorization: Bearer <token>`");
                println!("  stdio:           TOOLHOST_TASK_TOKEN=<token> toolhost serve --stdio");
            }
        }
        TaskCommand::List { json } => {
            let tasks = store.tasks().await?;
            if json {
                let list: Vec<_> = tasks.iter().map(task_json).collect();
                println!("{}", serde_json::Value::Array(list));
            } else if tasks.is_empty() {
                println!("no tasks");
            } else {
                let at = now();
                println!(
                    "{:<20} {:<8} {:<21} {:>9}  GRANTS / PURPOSE",
                    "ID", "STATE", "EXPIRES", "CALLS"
                );
                for t in &tasks {
                    let state = match t.state(at) {
                        TaskState::Open => "open",
                        TaskState::Revoked => "revoked",
                        TaskState::Expired => "expired",
                    };
                    let calls = match t.max_calls {
                        Some(max) => format!("{}/{max}", t.calls_used),
                        None => t.calls_used.to_string(),
                    };
                    println!(
                        "{:<20} {:<8} {:<21} {:>9}  {} / {}",
                        t.id,
                        state,
                        rfc3339(t.expires_at),
                        calls,
                        t.grants.join(","),
                        t.purpose
                    );
                }
            }
        }
        TaskCommand::Show { id } => {
            let task = store
                .task(&id)
                .await?
                .with_context(|| format!("no task `{id}`"))?;
            println!("{:#}", task_json(&task));
        }
        TaskCommand::Revoke { id } => {
            let task = store.revoke_task(&id, &cli_operator()).await?;
            println!(
                "task {} revoked; its sessions' next write or destructive call is refused",
                task.id
            );
        }
        TaskCommand::Extend { id, ttl } => {
            let task = store
                .extend_task(&id, operator::parse_ttl(&ttl)?, &cli_operator())
                .await?;
            println!(
                "task {} now expires at {}",
                task.id,
                rfc3339(task.expires_at)
            );
        }
    }
    Ok(())
}
