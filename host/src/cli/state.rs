//! `toolhost state`: plugins' durable state, read and moved by an operator.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::operator_store;
use crate::manifest::Manifest;
use crate::store::operator as cli_operator;

#[derive(Debug, Args)]
pub struct StateArgs {
    /// The manifest, for its state_dir.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    #[command(subcommand)]
    pub command: StateCommand,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// List a plugin's keys.
    List {
        plugin: String,
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Print the value of one key.
    Get { plugin: String, key: String },
    /// Move a value to another key of the same plugin.
    Move {
        plugin: String,
        from: String,
        to: String,
    },
}

pub(super) async fn state(args: StateArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let changes = matches!(args.command, StateCommand::Move { .. });
    let store = operator_store(&manifest, changes).await?;
    match args.command {
        StateCommand::List { plugin, prefix } => {
            for key in store.state_list(&plugin, &prefix).await? {
                println!("{key}");
            }
        }
        StateCommand::Get { plugin, key } => {
            let value = store
                .state_get(&plugin, &key)
                .await?
                .with_context(|| format!("plugin `{plugin}` has no key `{key}`"))?;
            println!("{value}");
        }
        StateCommand::Move { plugin, from, to } => {
            store
                .state_rename(&plugin, &from, &to, &cli_operator())
                .await?;
            println!("{plugin}: moved `{from}` to `{to}`");
        }
    }
    Ok(())
}
