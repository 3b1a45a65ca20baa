//! `toolhost plugin new` (the scaffold), `toolhost plugin inspect` (a
//! component before it is declared), with the inspection's printing, and
//! `toolhost plugin diff` (in `vet.rs`); `push`, `pull`, `sign` and
//! `keygen` are in `registry.rs`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::LintFormat;
use crate::manifest::{PluginName, Sha256Digest};
use crate::{inspect, scaffold, signing, text};

#[derive(Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    pub command: PluginCommand,
}

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Scaffold a plugin project (one read tool, one write tool, a test) on
    /// the guest SDK of its language, build it, and print the manifest
    /// block to paste.
    New {
        /// The plugin's name: the prefix of its tools (a-z, 0-9).
        name: String,
        /// The language: rust (cargo), python (componentize-py) or js (componentize-js).
        #[arg(long, value_enum, default_value_t = scaffold::Lang::Rust)]
        lang: scaffold::Lang,
        /// Where to create it [default: ./NAME]; must be new or empty.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// For rust: the guest SDK (plugins/sdk of a toolhost checkout) [default: the one this binary was built from].
        #[arg(long)]
        sdk: Option<PathBuf>,
        /// Only write the crate; do not build it.
        #[arg(long)]
        no_build: bool,
    },
    /// Show a component's digest, imports and exports, whether it fits the
    /// plugin world, the tools it describes with their schemas, and lint findings.
    Inspect {
        /// The component: a .wasm file or an oci://REGISTRY/REPOSITORY:TAG|@sha256:DIGEST reference.
        component: String,
        /// `text` for people, `json` for scripts.
        #[arg(long, value_enum, default_value_t = LintFormat::Text)]
        format: LintFormat,
        /// Reach a registry that is not on loopback over plain HTTP.
        #[arg(long)]
        plain_http: bool,
    },
    /// Push a component to an OCI registry (wasm artifact layout), with the
    /// signatures in FILE.sig as its referrers; prints the digest reference
    /// to pin.
    Push {
        /// The component (.wasm).
        file: PathBuf,
        /// Where: oci://REGISTRY/REPOSITORY:TAG.
        target: String,
        /// Reach a registry that is not on loopback over plain HTTP.
        #[arg(long)]
        plain_http: bool,
    },
    /// Pull a component from an OCI registry, checked against its digest,
    /// into a file (its signatures beside it, in FILE.sig), for review.
    Pull {
        /// oci://REGISTRY/REPOSITORY:TAG or …@sha256:DIGEST.
        source: String,
        /// The file to write.
        #[arg(long)]
        out: PathBuf,
        /// Reach a registry that is not on loopback over plain HTTP.
        #[arg(long)]
        plain_http: bool,
    },
    /// Sign a component with a private key: a file (the signature goes to
    /// FILE.sig, a Sigstore bundle per line) or a registry artifact (the
    /// signature is attached as an OCI referrer).
    Sign {
        /// A .wasm file or oci://REGISTRY/REPOSITORY:TAG|@sha256:DIGEST.
        component: String,
        /// The private key: PKCS#8 PEM, Ed25519 or ECDSA P-256 (`plugin keygen` writes one).
        #[arg(long)]
        key: PathBuf,
        /// Reach a registry that is not on loopback over plain HTTP.
        #[arg(long)]
        plain_http: bool,
    },
    /// Create a signing key pair: PREFIX.key (private, mode 0600) and
    /// PREFIX.pub (for the manifest's [[trust]]).
    Keygen {
        /// Path and file name without extension.
        prefix: PathBuf,
        #[arg(long, value_enum, default_value_t = signing::Algorithm::Ed25519)]
        algorithm: signing::Algorithm,
    },
    /// Show what a new version changes, for a reviewer: imports gained and
    /// lost (flagging sockets, HTTP and file system), tools added and
    /// removed, texts changed (hidden characters escaped), grants changed,
    /// and the lint's findings on the new version. Either two component
    /// files or oci:// references, a plugin of the manifest and a new
    /// candidate, or one plugin as it loads now against tools-manifest.lock.
    Diff {
        /// The old component (.wasm or oci://…), or a plugin name (its lock entry).
        old: String,
        /// The new component (.wasm or oci://…); omit it to compare a plugin as it loads now with the lock.
        new: Option<String>,
        /// The manifest whose lock a plugin name is compared with, and whose
        /// [[trust]] names signers.
        #[arg(long, default_value = "tools-manifest.toml")]
        manifest: PathBuf,
        /// `text` for people, `json` for scripts and CI.
        #[arg(long, value_enum, default_value_t = LintFormat::Text)]
        format: LintFormat,
        /// Reach a registry that is not on loopback over plain HTTP.
        #[arg(long)]
        plain_http: bool,
    },
}

pub(super) async fn plugin(args: PluginArgs) -> anyhow::Result<()> {
    match args.command {
        PluginCommand::New {
            name,
            lang,
            dir,
            sdk,
            no_build,
        } => {
            let name = PluginName::try_from(name).map_err(|e| anyhow::anyhow!("{e}"))?;
            let dir = dir.unwrap_or_else(|| PathBuf::from(name.as_str()));
            let sdk = sdk.unwrap_or_else(scaffold::default_sdk);
            scaffold::write(&dir, &name, lang, &sdk)?;
            eprintln!("created plugin `{name}` in {}", dir.display());
            let (component, digest) = if no_build {
                let wasm = dir.join(scaffold::component_path(&name, lang));
                (std::path::absolute(&wasm).unwrap_or(wasm), None)
            } else {
                eprintln!("building it into a component …");
                let wasm = scaffold::build(&dir, &name, lang)?;
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
        PluginCommand::Diff {
            old,
            new,
            manifest,
            format,
            plain_http,
        } => super::vet::diff(old, new, manifest, format, plain_http).await,
        PluginCommand::Push {
            file,
            target,
            plain_http,
        } => super::registry::push(&file, &target, plain_http).await,
        PluginCommand::Pull {
            source,
            out,
            plain_http,
        } => super::registry::pull(&source, &out, plain_http).await,
        PluginCommand::Sign {
            component,
            key,
            plain_http,
        } => super::registry::sign(&component, &key, plain_http).await,
        PluginCommand::Keygen { prefix, algorithm } => super::registry::keygen(&prefix, algorithm),
        PluginCommand::Inspect {
            component,
            format,
            plain_http,
        } => {
            let named = super::registry::read_named(&component, None, plain_http).await?;
            let inspection =
                inspect::inspect_bytes(std::path::Path::new(&named.label), named.bytes).await?;
            match format {
                LintFormat::Json => {
                    println!("{}", text::json(&serde_json::to_value(&inspection)?, true))
                }
                LintFormat::Text => print_inspection(&inspection),
            }
            if inspection.misfit.is_some() || inspection.lint.has_errors() {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

fn print_inspection(i: &inspect::Inspection) {
    // Everything a component said is shown as the model reads it, with
    // hidden characters escaped: never raw to the terminal.
    let shown = text::visible;
    println!("component  {} ({} bytes)", i.file.display(), i.bytes);
    println!("sha256     {}", i.sha256);
    match &i.misfit {
        None => println!("world      fits toolhost:plugin@0.2.0, world `plugin`"),
        Some(why) => println!("world      does not fit: {}", text::escape_hidden(why)),
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
        println!("    input:       {}", text::json(&t.input_schema, false));
        if let Some(output) = &t.output_schema {
            println!("    output:      {}", text::json(output, false));
        }
    }
    println!("\nlint");
    for finding in &i.lint.findings {
        for line in finding.to_string().lines() {
            println!("  {line}");
        }
    }
    println!(
        "  {} error(s), {} warning(s); risk classes assumed from the verbs (`toolhost lint` on a manifest is the check that counts)",
        i.lint.errors().count(),
        i.lint.warnings().count()
    );
}
