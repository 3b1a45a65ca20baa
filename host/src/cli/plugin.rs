//! `toolhost plugin new` (the scaffold) and `toolhost plugin inspect`
//! (a component before it is declared), with the inspection's printing.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::LintFormat;
use crate::manifest::{PluginName, Sha256Digest};
use crate::{inspect, scaffold};

#[derive(Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    pub command: PluginCommand,
}

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Scaffold a plugin crate (one read tool, one write tool, a test) on
    /// the guest SDK, build it, and print the manifest block to paste.
    New {
        /// The plugin's name: the prefix of its tools (a-z, 0-9).
        name: String,
        /// Where to create it [default: ./NAME]; must be new or empty.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The guest SDK (plugins/sdk of a toolhost checkout) [default: the one this binary was built from].
        #[arg(long)]
        sdk: Option<PathBuf>,
        /// Only write the crate; do not build it.
        #[arg(long)]
        no_build: bool,
    },
    /// Show a component's digest, imports and exports, whether it fits the
    /// plugin world, the tools it describes with their schemas, and lint findings.
    Inspect {
        /// The component (.wasm).
        file: PathBuf,
        /// `text` for people, `json` for scripts.
        #[arg(long, value_enum, default_value_t = LintFormat::Text)]
        format: LintFormat,
    },
}

pub(super) async fn plugin(args: PluginArgs) -> anyhow::Result<()> {
    match args.command {
        PluginCommand::New {
            name,
            dir,
            sdk,
            no_build,
        } => {
            let name = PluginName::try_from(name).map_err(|e| anyhow::anyhow!("{e}"))?;
            let dir = dir.unwrap_or_else(|| PathBuf::from(name.as_str()));
            let sdk = sdk.unwrap_or_else(scaffold::default_sdk);
            scaffold::write(&dir, &name, &sdk)?;
            eprintln!("created plugin `{name}` in {}", dir.display());
            let (component, digest) = if no_build {
                let wasm = dir.join(scaffold::component_path(&name));
                (std::path::absolute(&wasm).unwrap_or(wasm), None)
            } else {
                eprintln!("building it for wasm32-wasip2 …");
                let wasm = scaffold::build(&dir, &name)?;
                let digest = Sha256Digest::of(&std::fs::read(&wasm)?);
                (wasm, Some(digest))
            };
            eprintln!("add this to your manifest, then run `toolhost lint`:\n");
            print!(
                "{}",
                scaffold::manifest_block(&name, &component, digest.as_ref())
            );
            Ok(())
        }
        PluginCommand::Inspect { file, format } => {
            let inspection = inspect::inspect(&file).await?;
            match format {
                LintFormat::Json => println!("{}", serde_json::to_string_pretty(&inspection)?),
                LintFormat::Text => print_inspection(&inspection),
            }
            if inspection.misfit.is_some() || inspection.lint.has_errors() {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

/// Text from an unvetted component, made safe for a terminal: control
/// characters (escape sequences among them) are shown escaped.
fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn print_inspection(i: &inspect::Inspection) {
    println!("component  {} ({} bytes)", i.file.display(), i.bytes);
    println!("sha256     {}", i.sha256);
    match &i.misfit {
        None => println!("world      fits toolhost:plugin@0.2.0, world `plugin`"),
        Some(why) => println!("world      does not fit: {}", shown(why)),
    }
    let list = |names: &[String]| {
        names
            .iter()
            .map(|n| shown(n))
            .collect::<Vec<_>>()
            .join("\n           ")
    };
    println!("imports    {}", list(&i.imports));
    println!("exports    {}", list(&i.exports));
    println!("\ntools ({})", i.tools.len());
    for t in &i.tools {
        println!(
            "  {}  [{} by its verb; the manifest decides]",
            shown(&t.name),
            t.risk
        );
        println!("    title:       {}", shown(&t.title));
        println!("    description: {}", shown(&t.description));
        println!("    input:       {}", t.input_schema);
        if let Some(output) = &t.output_schema {
            println!("    output:      {output}");
        }
    }
    println!("\nlint");
    for finding in &i.lint.findings {
        for line in finding.to_string().lines() {
            println!("  {}", shown(line));
        }
    }
    println!(
        "  {} error(s), {} warning(s); risk classes assumed from the verbs (`toolhost lint` on a manifest is the check that counts)",
        i.lint.errors().count(),
        i.lint.warnings().count()
    );
}
