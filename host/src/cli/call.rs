//! `toolhost call`: one tool call against the manifest, without an MCP
//! client, through the same host a serving process loads.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;
use clap::Args;

use super::serve::load_host;
use super::{open_store, open_trail, task_of_token};
use crate::audit::store::AuditedStore;
use crate::audit::{Audit, Event};
use crate::manifest::Manifest;
use crate::redact::LogRedaction;
use crate::sandbox::OPEN_FILES;
use crate::session::{Peer, Session, Transport};
use crate::store::Store;
use crate::text;

#[derive(Args)]
pub struct CallArgs {
    /// The tool to call, as the manifest declares it.
    pub tool: String,
    /// Its arguments: a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub args: String,
    /// The manifest; component paths in it are relative to its folder.
    #[arg(long, default_value = "tools-manifest.toml")]
    pub manifest: PathBuf,
    /// Call as the task this token belongs to (needed for write and destructive tools).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "TOOLHOST_TASK_TOKEN",
        hide_env_values = true
    )]
    pub task_token: Option<String>,
}

pub(super) async fn call(args: CallArgs, logs: LogRedaction) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let arguments = match serde_json::from_str::<serde_json::Value>(&args.args) {
        Ok(serde_json::Value::Object(map)) => map,
        Ok(_) => bail!("--args must be a JSON object, e.g. --args '{{\"key\": \"T-1041\"}}'"),
        Err(e) => bail!("--args is not JSON: {e}"),
    };
    let audit = Audit::start(open_trail(&manifest)?, manifest.audit.checkpoint_every);
    audit.record(Event::HostStarted {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        transport: "cli".to_string(),
        manifest: manifest.path.display().to_string(),
        manifest_sha256: manifest.digest.to_string(),
    });
    let outcome = call_recorded(&args, &manifest, &audit, &logs, arguments).await;
    let stopped = audit.stop(Event::HostStopped {
        pid: std::process::id(),
        reason: match &outcome {
            Err(e) => format!("{e:#}"),
            Ok(_) => "stopped".to_string(),
        },
    });
    if let Err(e) = stopped {
        tracing::error!("the audit trail was not closed cleanly: {e}");
    }
    let (text, succeeded) = outcome?;
    println!("{text}");
    if !succeeded {
        std::process::exit(1);
    }
    Ok(())
}

/// The call itself; returns what to print and whether the call succeeded.
async fn call_recorded(
    args: &CallArgs,
    manifest: &Manifest,
    audit: &Audit,
    logs: &LogRedaction,
    arguments: serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<(String, bool)> {
    let store: Arc<dyn Store> = Arc::new(AuditedStore::new(
        open_store(manifest).await?,
        audit.clone(),
    ));
    let (host, _) = load_host(manifest, OPEN_FILES, store, audit, logs).await?;
    if host.catalog.tool(&args.tool).is_none() {
        if let Some((plugin, _)) = manifest.tool(&args.tool)
            && let Some(refusal) = host
                .catalog
                .refusals
                .iter()
                .find(|r| r.plugin == plugin.name)
        {
            // The reason may quote what the plugin described.
            bail!("{}", text::escape_hidden(&refusal.to_string()));
        }
        bail!(
            "no tool `{}` in {}; the manifest declares: {}",
            args.tool,
            manifest.path.display(),
            host.catalog
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let task = match &args.task_token {
        Some(token) => Some(task_of_token(token, manifest, &*host.store).await?),
        None => None,
    };
    let session = Session::new(Transport::Cli);
    session.record_opened(&host.audit, || Peer {
        client: Some("toolhost call".to_string()),
        client_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        protocol: None,
        task: task.clone(),
    });
    let outcome = host
        .call(&session, task.as_deref(), &args.tool, Some(arguments))
        .await;
    drop(session);
    let succeeded = outcome.is_ok();
    let result =
        crate::mcp::reply::tool_result(outcome).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let value = result.structured_content.unwrap_or(serde_json::Value::Null);
    // A result is the plugin's text: printed with hidden characters escaped
    // (still JSON, with the same value).
    Ok((text::json(&value, true), succeeded))
}
