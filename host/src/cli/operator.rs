//! `toolhost operator`: the named people who sign in to the console and
//! decide approvals there.

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use super::operator_store;
use crate::manifest::Manifest;
use crate::operator::accounts::{hash_password, new_account};
use crate::store::{Role, operator as cli_operator, rfc3339};

#[derive(Debug, Args)]
pub struct OperatorArgs {
    /// The manifest, for its store.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    #[command(subcommand)]
    pub command: OperatorCommand,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum RoleArg {
    /// Decides approvals.
    Approver,
    /// Also opens, revokes and extends tasks and manages operators.
    Admin,
}

#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Add a person who can sign in to the console; asks for the password.
    Add {
        name: String,
        #[arg(long, value_enum, default_value = "approver")]
        role: RoleArg,
        /// Read the password from the first line of stdin instead of asking.
        #[arg(long)]
        password_stdin: bool,
    },
    /// List operators and their roles.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove an operator; their console sign-ins end at once.
    Remove { name: String },
    /// Set an operator's password; their console sign-ins end at once.
    Passwd {
        name: String,
        /// Read the password from the first line of stdin instead of asking.
        #[arg(long)]
        password_stdin: bool,
    },
}

pub(super) async fn operator(args: OperatorArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let changes = !matches!(args.command, OperatorCommand::List { .. });
    let store = operator_store(&manifest, changes).await?;
    match args.command {
        OperatorCommand::Add {
            name,
            role,
            password_stdin,
        } => {
            let role = match role {
                RoleArg::Approver => Role::Approver,
                RoleArg::Admin => Role::Admin,
            };
            crate::operator::accounts::check_name(&name)?;
            let password = password(&name, password_stdin)?;
            let account = new_account(&name, role, &password, &cli_operator())?;
            store.add_account(&account).await?;
            println!("operator {name} added ({})", role.as_str());
        }
        OperatorCommand::List { json } => {
            let accounts = store.accounts().await?;
            if json {
                let list: Vec<_> = accounts
                    .iter()
                    .map(|a| {
                        serde_json::json!({
                            "name": a.name,
                            "role": a.role,
                            "created_at": rfc3339(a.created_at),
                            "created_by": a.created_by,
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(list));
            } else if accounts.is_empty() {
                println!(
                    "no operators; add one with `toolhost operator add NAME --role admin` to sign in to the console"
                );
            } else {
                for a in accounts {
                    println!(
                        "{:<24} {:<9} added {} by {}",
                        a.name,
                        a.role.as_str(),
                        rfc3339(a.created_at),
                        a.created_by
                    );
                }
            }
        }
        OperatorCommand::Remove { name } => {
            store.remove_account(&name, &cli_operator()).await?;
            println!("operator {name} removed");
        }
        OperatorCommand::Passwd {
            name,
            password_stdin,
        } => {
            if store.account(&name).await?.is_none() {
                bail!("no operator named `{name}`");
            }
            let password = password(&name, password_stdin)?;
            let hash = hash_password(&password)?;
            store.set_password(&name, &hash, &cli_operator()).await?;
            println!("password of {name} changed; their console sign-ins ended");
        }
    }
    Ok(())
}

/// The new password: one line of stdin, or asked twice on the terminal
/// without echo.
fn password(name: &str, from_stdin: bool) -> anyhow::Result<String> {
    if from_stdin {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("reading the password from stdin")?;
        return Ok(line.trim_end_matches(['\r', '\n']).to_string());
    }
    let first = rpassword::prompt_password(format!("password for {name}: "))
        .context("asking for the password (no terminal? use --password-stdin)")?;
    let second = rpassword::prompt_password("again: ").context("asking for the password")?;
    if first != second {
        bail!("the two passwords differ; nothing changed");
    }
    Ok(first)
}
