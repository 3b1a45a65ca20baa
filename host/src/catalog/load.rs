//! Vetting each declared plugin at start-up: pin, compile, `describe()`,
//! declaration match, schemas, name clashes. A plugin that fails any check is
//! refused as a whole and the others are still served.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::texts::{HiddenText, hidden_in_tool};
use super::vetted::{Difference, differences, vetted_tool};
use super::{Catalog, CatalogPlugin, CatalogTool, ToolSchema};
use crate::gate::Network;
use crate::manifest::{
    ComponentSource, FileMode, Grants, Manifest, PluginDecl, PluginName, Sha256Digest, ToolName,
    Vetted,
};
use crate::queue::CallQueue;
use crate::sandbox::{
    Described, DescribedTool, FileStamp, GrantedDir, Interfaces, OUTGOING_BODIES, Origin, Places,
    PluginShared, PreparedPlugin, Sandbox, ToolSpec,
};
use crate::store::Store;

/// A plugin that will not be served, and why.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub manifest: PathBuf,
    pub plugin: PluginName,
    /// Line of its `[[plugin]]` in the manifest.
    pub line: usize,
    pub reason: String,
    /// What the reason is about, where that points the author (and the
    /// lint) at one tool.
    pub cause: RefusalCause,
}

/// The refusals that name a place in a tool, beside the reason's text.
#[derive(Debug, Clone, Default)]
pub enum RefusalCause {
    #[default]
    Other,
    /// Another plugin declared this tool's name first.
    NameClash(ToolName),
    /// Text the plugin hands the model holds hidden characters (each one,
    /// up to [`MAX_HIDDEN_REPORTED`]).
    HiddenText(Vec<HiddenText>),
}

/// At most this many hidden characters are listed per refused plugin:
/// enough to see what the author did, bounded whatever the plugin sends.
pub const MAX_HIDDEN_REPORTED: usize = 20;

/// Why `vet` refused a plugin.
struct Refused {
    reason: String,
    cause: RefusalCause,
}

impl From<String> for Refused {
    fn from(reason: String) -> Refused {
        Refused {
            reason,
            cause: RefusalCause::Other,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: plugin `{}` refused: {}",
            self.manifest.display(),
            self.line,
            self.plugin,
            self.reason
        )
    }
}

/// Loads every plugin the manifest declares, compiling them in parallel.
/// Never fails as a whole: see [`Catalog::refusals`] for what was left out.
pub async fn load(
    manifest: &Manifest,
    sandbox: &Sandbox,
    store: &Arc<dyn Store>,
    network: &Network,
) -> Catalog {
    load_with(manifest, sandbox, store, Some(network), Lockstep::Enforce).await
}

/// Loads the catalog as [`load`] does, for reading what it describes (lint,
/// inspection) rather than serving it: no secret is needed and no `files`
/// directory is opened, since neither changes what `describe()` returns.
/// Its plugins can reach nothing outside the host.
pub async fn load_described(
    manifest: &Manifest,
    sandbox: &Sandbox,
    store: &Arc<dyn Store>,
) -> Catalog {
    load_with(manifest, sandbox, store, None, Lockstep::Enforce).await
}

/// Loads the catalog as [`load_described`] does, but without holding it
/// against `tools-manifest.lock`: for `toolhost vet`, which writes the lock
/// from what it finds. Every other check still refuses.
pub async fn load_for_vetting(
    manifest: &Manifest,
    sandbox: &Sandbox,
    store: &Arc<dyn Store>,
) -> Catalog {
    load_with(manifest, sandbox, store, None, Lockstep::Ignore).await
}

/// Whether loading refuses plugins that differ from the lock.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lockstep {
    Enforce,
    Ignore,
}

async fn load_with(
    manifest: &Manifest,
    sandbox: &Sandbox,
    store: &Arc<dyn Store>,
    network: Option<&Network>,
    lockstep: Lockstep,
) -> Catalog {
    if lockstep == Lockstep::Enforce && manifest.lock.is_none() {
        tracing::warn!(
            lock = %manifest.lock_path().display(),
            "no lock: plugins are not held against what was vetted; run `toolhost vet` to write one"
        );
    }
    let lock = match lockstep {
        Lockstep::Enforce => manifest.lock.as_ref(),
        Lockstep::Ignore => None,
    };
    // A clash is decided on declarations, before anything is compiled, so
    // the outcome does not depend on which component loads.
    let mut owners: HashMap<&str, (&PluginName, usize)> = HashMap::new();
    let mut clashes: Vec<Option<(ToolName, String)>> = Vec::with_capacity(manifest.plugins.len());
    for decl in &manifest.plugins {
        let clash = decl.tools.iter().find_map(|t| {
            owners.get(t.name.as_str()).map(|(other, line)| {
                (t.name.clone(), format!(
                    "tool `{}` (line {}) is already declared by plugin `{other}` (line {line}); tool names must be unique across plugins",
                    t.name, t.line
                ))
            })
        });
        if clash.is_none() {
            for t in &decl.tools {
                owners.insert(t.name.as_str(), (&decl.name, t.line));
            }
        }
        clashes.push(clash);
    }

    let files = match network {
        Some(_) => granted_directories(manifest, &clashes, sandbox.cache_folder()),
        None => manifest.plugins.iter().map(|_| Ok(Vec::new())).collect(),
    };

    let outcomes = futures::future::join_all(manifest.plugins.iter().zip(&clashes).zip(files).map(
        |((decl, clash), files)| async move {
            match (clash, files) {
                (Some((tool, reason)), _) => Err(Refused {
                    reason: reason.clone(),
                    cause: RefusalCause::NameClash(tool.clone()),
                }),
                (None, Err(reason)) => Err(Refused::from(reason)),
                (None, Ok(files)) => {
                    let vetted = lock.map(|l| l.plugin.get(decl.name.as_str()));
                    vet(decl, manifest, files, sandbox, store, network, vetted).await
                }
            }
        },
    ))
    .await;

    let mut catalog = Catalog::default();
    for (decl, outcome) in manifest.plugins.iter().zip(outcomes) {
        match outcome {
            Ok((prepared, origin, tools, vetted)) => {
                let index = catalog.plugins.len();
                catalog.plugins.push(CatalogPlugin {
                    prepared,
                    sha256: vetted.sha256.clone(),
                    vetted,
                    instance: decl.instance,
                    queue: CallQueue::new(
                        decl.limits.concurrent,
                        decl.limits.queue,
                        decl.limits.session_share,
                        decl.limits.task_share,
                    ),
                });
                for mut tool in tools {
                    tool.plugin = index;
                    catalog.add_tool(tool);
                }
                tracing::info!(plugin = %decl.name, tools = decl.tools.len(), ?origin, "plugin loaded");
            }
            Err(Refused { reason, cause }) => {
                let refusal = Refusal {
                    manifest: manifest.path.clone(),
                    plugin: decl.name.clone(),
                    line: decl.line,
                    reason,
                    cause,
                };
                tracing::error!("{refusal}");
                catalog.refusals.push(refusal);
            }
        }
    }
    catalog
}

/// Each plugin's `files`, each directory opened once (instances reopen that
/// handle) and checked where it really is, or why they cannot be granted.
/// A directory may not hold, or lie in, the host's own state (the store, the
/// audit trail and the compiled-code cache, which the host loads as native
/// code, wherever `TOOLHOST_CACHE_DIR` puts it), nor hold the secrets file,
/// the database URL file, the manifest or another file the host reads
/// (`Manifest::host_files`).
/// Two grants may not nest where either is writable: the writable one would
/// reach into the other, past its mode or its plugin.
fn granted_directories(
    manifest: &Manifest,
    clashes: &[Option<(ToolName, String)>],
    cache: Option<&Path>,
) -> Vec<Result<Vec<GrantedDir>, String>> {
    let canonical =
        |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let state_dir = canonical(&manifest.state_dir);
    // Where state_dir is or will be made: its nearest existing folder.
    let state_device = state_dir
        .ancestors()
        .find_map(|dir| std::fs::metadata(dir).ok())
        .map(|m| std::os::unix::fs::MetadataExt::dev(&m));
    let cache = cache.map(canonical);
    let mut protected = vec![canonical(&manifest.path)];
    protected.extend(manifest.secrets_file.as_deref().map(canonical));
    protected.extend(manifest.store.database_url_file.as_deref().map(canonical));
    protected.extend(manifest.host_files.iter().map(|f| canonical(f)));
    // Every grant so far: its plugin, real path and mode.
    let mut granted: Vec<(&PluginName, PathBuf, FileMode)> = Vec::new();
    let mut outcomes = Vec::with_capacity(manifest.plugins.len());
    for (decl, clash) in manifest.plugins.iter().zip(clashes) {
        // A plugin refused for its name is never served: its grants bind no one.
        if clash.is_some() {
            outcomes.push(Ok(Vec::new()));
            continue;
        }
        let mut grants: Vec<GrantedDir> = Vec::with_capacity(decl.files.len());
        let outcome = decl.files.iter().try_for_each(|grant| {
            // A missing directory, or a file, refuses the plugin at start
            // rather than at its first call.
            let opened = GrantedDir::open(&grant.host, &grant.guest, grant.mode).map_err(|e| {
                format!(
                    "files: cannot open directory {} (for {}): {e}",
                    grant.host.display(),
                    grant.guest
                )
            })?;
            let host = &opened.real;
            let shown = host.display();
            if host.starts_with(&state_dir) || state_dir.starts_with(host) {
                return Err(format!(
                    "files: {shown} overlaps the host's state_dir {}; grant a directory outside it",
                    state_dir.display()
                ));
            }
            if let Some(cache) = cache.as_ref().filter(|c| host.starts_with(c) || c.starts_with(host)) {
                return Err(format!(
                    "files: {shown} overlaps the compiled-component cache {} (TOOLHOST_CACHE_DIR), whose native code the host runs; grant a directory outside it",
                    cache.display()
                ));
            }
            if let Some(file) = protected.iter().find(|f| f.starts_with(host)) {
                return Err(format!(
                    "files: {shown} holds {}, which no plugin may see; grant a directory without it",
                    file.display()
                ));
            }
            let mine = grants.iter().map(|g| (&decl.name, &g.real, g.mode));
            let others = granted.iter().map(|(owner, real, mode)| (*owner, real, *mode));
            let nested = others.chain(mine).find(|(_, other, mode)| {
                (host.starts_with(other) || other.starts_with(host))
                    && (grant.mode == FileMode::Rw || *mode == FileMode::Rw)
            });
            if let Some((owner, other, _)) = nested {
                return Err(format!(
                    "files: {shown} overlaps {} (granted to plugin `{owner}`) and one of them is writable; grant directories that do not contain each other",
                    other.display()
                ));
            }
            if grant.mode == FileMode::Rw && opened.device().is_some_and(|d| Some(d) == state_device) {
                // Not refused: many hosts have one filesystem. The operator
                // is told what is at stake. By device number, so a btrfs
                // subvolume or an overlay sharing the space is not seen.
                tracing::warn!(
                    plugin = %decl.name,
                    "files: {shown} is writable by the plugin and on the same filesystem as state_dir {}: a plugin that fills it stops the audit trail (and an embedded store) too; give the directory a filesystem of its own or a quota",
                    state_dir.display()
                );
            }
            grants.push(opened);
            Ok(())
        });
        outcomes.push(outcome.map(|()| {
            granted.extend(grants.iter().map(|g| (&decl.name, g.real.clone(), g.mode)));
            grants
        }));
    }
    outcomes
}

/// The plugin and directory of a `files` grant whose path holds `file`, if
/// any: a quick check by path before anything is loaded (loading checks
/// every grant again, as opened).
pub fn grant_holding(manifest: &Manifest, file: &Path) -> Option<(PluginName, PathBuf)> {
    let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    manifest.plugins.iter().find_map(|decl| {
        decl.files.iter().find_map(|grant| {
            let host = std::fs::canonicalize(&grant.host).ok()?;
            file.starts_with(&host).then(|| (decl.name.clone(), host))
        })
    })
}

/// All checks of one plugin; the error is the reason for refusing it. The
/// tools' `plugin` index is set by the caller.
/// `lock` is `None` when the lock is not held against (no lock, or `vet`
/// itself), `Some(None)` when the lock has no entry for the plugin.
async fn vet(
    decl: &PluginDecl,
    manifest: &Manifest,
    files: Vec<GrantedDir>,
    sandbox: &Sandbox,
    store: &Arc<dyn Store>,
    network: Option<&Network>,
    lock: Option<Option<&Vetted>>,
) -> Result<(PreparedPlugin, Origin, Vec<CatalogTool>, Vetted), Refused> {
    // A missing secret refuses the plugin before anything is compiled.
    let gate = Arc::new(match network {
        Some(network) => network.gate(decl)?,
        None => {
            let mut closed = decl.clone();
            closed.network.allow.clear();
            closed.network.credentials.clear();
            Network::closed().gate(&closed)?
        }
    });
    let shared = Arc::new(PluginShared {
        name: decl.name.clone(),
        config: decl.config.clone(),
        limits: decl.limits,
        store: store.clone(),
        gate,
        files,
        open_files: sandbox.open_files(),
        outgoing_bodies: Places::new(OUTGOING_BODIES),
    });
    // Only serving starts lazily: `vet` and `lint` read, hash and run
    // every component, since what they report is a decision.
    let context = lazy_context(decl);
    let described = match (&context, network) {
        (Some(context), Some(_)) => described_before(decl, sandbox, context),
        _ => None,
    };
    let accepted_before = described.is_some();
    let (prepared, origin, interfaces, specs, actual, signers, to_keep) = match described {
        Some((pin, path, described)) => {
            // Served from what it offered last time; its code is mapped
            // at its first call, re-read from the file only if the cache
            // lost it (and then held to the pin again).
            let source: Arc<dyn Fn() -> Result<Vec<u8>, String> + Send + Sync> =
                Arc::new(move || {
                    std::fs::read(&path)
                        .map_err(|e| format!("cannot read component {}: {e}", path.display()))
                });
            let prepared = sandbox.prepare_lazily(pin, source, shared);
            let interfaces = Interfaces {
                imports: described.imports,
                exports: described.exports,
            };
            let specs = described.tools.into_iter().map(spec_of).collect();
            (
                prepared,
                Origin::Described,
                interfaces,
                specs,
                pin,
                Vec::new(),
                None,
            )
        }
        None => {
            // Stamped before the read: a write after it changes the stamp.
            let stamp = match &decl.component {
                ComponentSource::File(path) => FileStamp::of(path).ok(),
                ComponentSource::Oci(_) => None,
            };
            let component = super::source::read(manifest, decl).await?;
            let actual = component.digest;
            let (prepared, origin, interfaces, specs) =
                prepare_and_describe(sandbox, component.bytes, actual, shared).await?;
            // Kept once its tools pass the checks below, so a next start
            // may take its schemas as accepted.
            let to_keep = stamp.zip(context).map(|(source, context)| {
                let described = Described {
                    source,
                    imports: interfaces.imports.clone(),
                    exports: interfaces.exports.clone(),
                    tools: specs.iter().map(described_tool).collect(),
                };
                (context, described)
            });
            (
                prepared,
                origin,
                interfaces,
                specs,
                actual,
                component.signers,
                to_keep,
            )
        }
    };
    let tools = match_declaration(decl, specs, accepted_before)?;
    // A description is kept only once its tools passed this check (see
    // `ComponentCache::described_name`), in a folder only the host's user
    // writes, under this build of the host: scanning it again finds nothing.
    if !accepted_before {
        refuse_hidden_text(&tools)?;
    }
    if let Some((context, described)) = to_keep {
        sandbox.keep_described(&actual, &context, &described);
    }
    let vetted = Vetted {
        sha256: actual.to_string(),
        imports: interfaces.imports,
        exports: interfaces.exports,
        grants: Grants::of(decl, &manifest.base),
        signers,
        tool: tools
            .iter()
            .map(|t| {
                let output = t.output.as_ref().map(|o| &**o.document());
                let texts = vetted_tool(&t.title, &t.description, t.input.document(), output);
                (t.name.as_str().to_string(), texts)
            })
            .collect(),
    };
    match lock {
        None => {}
        Some(None) => {
            return Err(format!(
                "it is not in {LOCK_FILE}, so nobody vetted it; review it (`toolhost plugin inspect`), then run `toolhost vet`"
            )
            .into());
        }
        Some(Some(locked)) => refuse_unvetted(&decl.name, locked, &vetted)?,
    }
    Ok((prepared, origin, tools, vetted))
}

/// What a lazily started plugin's description is kept under, beside its
/// digest: everything of its declaration that could change what
/// `describe()` returns or whether it runs at all (its name, which scopes
/// its state, the file, config, limits and directories). `None` for a
/// plugin that is never started lazily: one from a registry, without a
/// pin, or with signatures to check on its bytes.
fn lazy_context(decl: &PluginDecl) -> Option<String> {
    let (ComponentSource::File(path), Some(_)) = (&decl.component, decl.sha256) else {
        return None;
    };
    if !decl.signed_by.is_empty() || crate::signing::sig_path(path).exists() {
        return None;
    }
    Some(format!(
        "{}\n{}\n{:?}\n{:?}\n{:?}",
        decl.name,
        std::fs::canonicalize(path).ok()?.display(),
        decl.config,
        decl.limits,
        decl.files
    ))
}

/// What the plugin's component offered last time in the same `context`,
/// if the cache holds it with its compiled code and the file is unchanged
/// since (by its stamp).
fn described_before(
    decl: &PluginDecl,
    sandbox: &Sandbox,
    context: &str,
) -> Option<(Sha256Digest, PathBuf, Described)> {
    let (ComponentSource::File(path), Some(pin)) = (&decl.component, decl.sha256) else {
        return None;
    };
    if !sandbox.holds(&pin) {
        return None;
    }
    let described = sandbox.described(&pin, context)?;
    (FileStamp::of(path).ok()? == described.source).then(|| (pin, path.clone(), described))
}

fn described_tool(spec: &ToolSpec) -> DescribedTool {
    DescribedTool {
        name: spec.name.clone(),
        title: spec.title.clone(),
        description: spec.description.clone(),
        input_schema: spec.input_schema.clone(),
        output_schema: spec.output_schema.clone(),
    }
}

fn spec_of(tool: DescribedTool) -> ToolSpec {
    ToolSpec {
        name: tool.name,
        title: tool.title,
        description: tool.description,
        input_schema: tool.input_schema,
        output_schema: tool.output_schema,
    }
}

/// The lock's file name, for messages.
const LOCK_FILE: &str = "the manifest's lock (tools-manifest.lock)";

/// Refuses a plugin whose component offers something other than what was
/// vetted: imports, exports, tools or any text a tool hands the model. A
/// rebuild with the same offer, and the manifest's own grants, pass.
fn refuse_unvetted(name: &PluginName, locked: &Vetted, found: &Vetted) -> Result<(), Refused> {
    let refusing: Vec<String> = differences(locked, found)
        .into_iter()
        .filter(Difference::refuses)
        .map(|d| {
            // One line each; `toolhost plugin diff` shows the texts.
            d.to_string().lines().next().unwrap_or_default().to_string()
        })
        .collect();
    if refusing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "it differs from what was vetted in {LOCK_FILE}: {}; review the change (`toolhost plugin diff {name}`), then run `toolhost vet` to accept it",
        refusing.join("; "),
    )
    .into())
}

/// Compiles (or loads from the cache) and pre-links a component off the
/// async runtime, then asks a first instance what it offers, under the
/// call deadline. The error says what the plugin's author must fix.
async fn prepare_and_describe(
    sandbox: &Sandbox,
    bytes: Vec<u8>,
    digest: Sha256Digest,
    shared: Arc<PluginShared>,
) -> Result<(PreparedPlugin, Origin, Interfaces, Vec<ToolSpec>), String> {
    let compiler = sandbox.clone();
    let (prepared, origin, interfaces) = tokio::task::spawn_blocking(move || {
        let (prepared, origin) = compiler.prepare(&bytes, &digest, shared)?;
        // The component compiled just above: its types, not a second compile.
        let interfaces = compiler.interfaces(&bytes, &digest)?;
        Ok::<_, crate::sandbox::SandboxError>((prepared, origin, interfaces))
    })
    .await
    .map_err(|e| format!("compiling the component panicked: {e}"))?
    .map_err(|e| format!("{e}; build it for wasm32-wasip2 against wit/ (toolhost:plugin@0.2.0)"))?;
    let specs = prepared
        .instantiate()
        .await
        .map_err(|e| format!("instantiating the component failed: {e}; fix the plugin's start-up"))?
        .describe()
        .await
        .map_err(|e| {
            format!("describe() failed: {e}; describe() must return the tool list promptly")
        })?;
    Ok((prepared, origin, interfaces, specs))
}

/// Compiles one component that no manifest declares yet, instantiates it
/// and asks what it offers: for inspecting a component before it is vetted.
/// It runs with the default limits, no config, no network, no directories
/// and no secrets, and its state goes to `store` under `name`.
pub async fn describe_component(
    sandbox: &Sandbox,
    store: &Arc<dyn Store>,
    bytes: Vec<u8>,
    name: PluginName,
) -> Result<Vec<ToolSpec>, String> {
    let decl = PluginDecl {
        name: name.clone(),
        component: ComponentSource::File(PathBuf::new()),
        sha256: Some(Sha256Digest::of(&bytes)),
        signed_by: Vec::new(),
        instance: Default::default(),
        limits: Default::default(),
        config: Default::default(),
        tools: Vec::new(),
        network: Default::default(),
        files: Vec::new(),
        line: 0,
    };
    let shared = Arc::new(PluginShared {
        name,
        config: Default::default(),
        limits: decl.limits,
        store: store.clone(),
        gate: Arc::new(Network::closed().gate(&decl)?),
        files: Vec::new(),
        open_files: sandbox.open_files(),
        outgoing_bodies: Places::new(OUTGOING_BODIES),
    });
    let digest = Sha256Digest::of(&bytes);
    let (_, _, _, specs) = prepare_and_describe(sandbox, bytes, digest, shared).await?;
    Ok(specs)
}

/// Joins the plugin's `describe()` with the manifest's declaration. Both must
/// name exactly the same tools: a component cannot add a tool after it was
/// vetted, nor silently drop one.
/// `accepted_before`: the specs are what this plugin's component described
/// at an earlier start that accepted them, so their schemas compile at
/// their first use.
fn match_declaration(
    decl: &PluginDecl,
    specs: Vec<ToolSpec>,
    accepted_before: bool,
) -> Result<Vec<CatalogTool>, String> {
    let parse = if accepted_before {
        ToolSchema::parse_accepted
    } else {
        ToolSchema::parse
    };
    let mut described: HashMap<String, ToolSpec> = HashMap::with_capacity(specs.len());
    for spec in specs {
        if described.contains_key(&spec.name) {
            return Err(format!("describe() lists tool `{}` twice", spec.name));
        }
        described.insert(spec.name.clone(), spec);
    }
    let declared: BTreeSet<&str> = decl.tools.iter().map(|t| t.name.as_str()).collect();
    let undeclared: Vec<&str> = described
        .keys()
        .map(String::as_str)
        .filter(|n| !declared.contains(n))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !undeclared.is_empty() {
        return Err(format!(
            "the component offers tools the manifest does not declare: {}; vet them and add a [[plugin.tool]] for each, or use the build that was vetted",
            quoted(&undeclared)
        ));
    }
    let missing: Vec<&str> = declared
        .iter()
        .copied()
        .filter(|n| !described.contains_key(*n))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the manifest declares tools the component does not offer: {}; remove them from the manifest or use the build that has them",
            quoted(&missing)
        ));
    }

    decl.tools
        .iter()
        .map(|t| {
            let spec = described
                .remove(t.name.as_str())
                .expect("every declared tool was described");
            let input = parse(&spec.input_schema)
                .map_err(|e| format!("the input schema of tool `{}` {e}", t.name))?;
            let output = spec
                .output_schema
                .as_deref()
                .map(parse)
                .transpose()
                .map_err(|e| format!("the output schema of tool `{}` {e}", t.name))?;
            Ok(CatalogTool {
                name: t.name.clone(),
                title: spec.title,
                description: spec.description,
                risk: t.risk,
                idempotent: t.idempotent,
                approval: t.approval.clone(),
                input,
                output,
                open_world: !decl.network.allow.is_empty(),
                plugin: 0,
            })
        })
        .collect()
}

/// Refuses a plugin whose tools hand the model text with characters a
/// reviewer would not see: the pin and the risk class cannot help there,
/// since the text is in the vetted bytes.
fn refuse_hidden_text(tools: &[CatalogTool]) -> Result<(), Refused> {
    let mut found: Vec<HiddenText> = Vec::new();
    let mut total = 0;
    for tool in tools {
        let (hidden, all) = hidden_in_tool(
            tool.name.as_str(),
            &tool.title,
            &tool.description,
            tool.input.document(),
            tool.output.as_ref().map(|o| &**o.document()),
            MAX_HIDDEN_REPORTED - found.len(),
        );
        total += all;
        found.extend(hidden);
    }
    if found.is_empty() {
        return Ok(());
    }
    let mut reason = format!(
        "it hands the model text with hidden characters, which a reviewer would not see: {}",
        found
            .iter()
            .take(3)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
    if total > 3 {
        reason.push_str(&format!(" (and {} more)", total - 3));
    }
    reason.push_str("; remove them from the plugin's titles, descriptions and schemas (`toolhost plugin inspect` shows them escaped; rule text-hidden in docs/lint.md)");
    Err(Refused {
        reason,
        cause: RefusalCause::HiddenText(found),
    })
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
