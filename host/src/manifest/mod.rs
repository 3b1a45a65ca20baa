//! The manifest: what the platform team vetted, parsed strictly.
//!
//! This module owns `tools-manifest.toml` and nothing else: it turns the file
//! into typed, fully defaulted declarations ([`Manifest`], [`PluginDecl`],
//! [`ToolDecl`]) or into a [`ManifestError`] that names the file, the line and
//! the fix. No raw TOML value leaves it. It never touches a component: the
//! pin is checked where the component is loaded.

mod lock;
mod names;
mod network;
mod raw;
mod source;

pub use lock::{Grants, LOCK_VERSION, Lock, LockError, ToolTexts, Vetted, VettedTool};
pub use names::{PluginName, Sha256Digest, ToolName};
pub use network::{
    AllowEntry, CredentialDecl, Destination, HostPattern, NetworkDecl, NetworkLimits, Scheme,
    SecretName,
};
pub use source::{ComponentSource, OCI_SCHEME, OciReference, RegistryDecl};

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// `state_dir` when the manifest sets none, relative to its folder.
pub const DEFAULT_STATE_DIR: &str = ".toolhost";

/// `[host] wasm_stack_kib` when unset: wasmtime's own default.
pub const DEFAULT_WASM_STACK_KIB: u32 = 512;
/// Below this, ordinary Rust plugins overflow their stack.
pub const MIN_WASM_STACK_KIB: u32 = 64;
/// Every call runs on a 2 MiB fiber stack; the wasm stack must fit in it
/// with room for the host functions the guest calls.
pub const MAX_WASM_STACK_KIB: u32 = 1_024;

/// What the platform team decided a tool may do. The plugin cannot change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum RiskClass {
    /// Reads only; allowed in every session.
    Read,
    /// Changes something; needs a task grant.
    Write,
    /// Changes something irreversibly; needs a task grant and a human's approval per call.
    Destructive,
}

impl RiskClass {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RiskClass::Read => "read",
            RiskClass::Write => "write",
            RiskClass::Destructive => "destructive",
        }
    }
}

/// How long a plugin instance lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceMode {
    /// One instance per MCP session, created on its first call, dropped with it.
    #[default]
    Session,
    /// A fresh instance for every call; nothing survives a call.
    Call,
}

/// Resource limits of one plugin, with every default filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest linear memory an instance may grow to, in bytes.
    pub memory_bytes: u64,
    /// Wall-clock time one call (and `describe` at load) may take.
    pub call_timeout: std::time::Duration,
    /// Largest result a call may return, in bytes; beyond it the call fails.
    pub output_bytes: usize,
    /// Bytes of keys and values the plugin may keep through `state`.
    pub state_bytes: u64,
    /// Calls of this plugin that run at once, across all sessions.
    pub concurrent: u32,
    /// Calls that may wait for one of those slots; beyond it a call is
    /// refused with `busy` at once instead of piling up.
    pub queue: u32,
    /// A session's share of the places (running or waiting): the last this
    /// many places are kept for sessions holding fewer, so one client
    /// flooding the plugin gets `busy` while others are served.
    pub session_share: u32,
    /// A task's share: a task holding this many places (all its sessions
    /// together) cannot take the places kept back either.
    pub task_share: u32,
    /// Lines a call may write to the host log (its stdout, stderr and the
    /// `log` import together); the rest are dropped.
    pub log_lines: u32,
    /// Wasm instructions' worth of fuel per call, if the plugin is metered
    /// by fuel as well as by time; unset means time only.
    pub fuel: Option<u64>,
    /// Elements a table of the instance may grow to.
    pub table_elements: u32,
    /// Core instances a component may create.
    pub instances: u32,
}

impl Limits {
    pub const DEFAULT_MEMORY_MIB: u32 = 64;
    pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 5_000;
    pub const DEFAULT_OUTPUT_KIB: u32 = 1_024;
    pub const DEFAULT_STATE_KIB: u32 = 1_024;
    pub const DEFAULT_CONCURRENT: u32 = 16;
    pub const DEFAULT_QUEUE: u32 = 64;
    pub const DEFAULT_LOG_LINES: u32 = 200;
    pub const DEFAULT_TABLE_ELEMENTS: u32 = 20_000;
    /// A componentize-py component creates 14 core instances (its
    /// interpreter, libc and adapters); Rust and JavaScript ones fewer.
    pub const DEFAULT_INSTANCES: u32 = 16;
    /// Ceilings the host is built with (the pooling allocator reserves for
    /// them), so a manifest can lower these limits but not raise them.
    pub const MAX_TABLE_ELEMENTS: u32 = 100_000;
    pub const MAX_INSTANCES: u32 = 32;

    /// A session's share when the manifest sets none: an eighth of the
    /// plugin's places (running and waiting), at least one. It is also how
    /// many places are kept back for sessions within their share, so a
    /// client alone may use the other seven eighths (70 of the default 80).
    pub fn default_session_share(concurrent: u32, queue: u32) -> u32 {
        concurrent.saturating_add(queue).div_ceil(8).max(1)
    }

    /// A task's share when the manifest sets none: half of the places, and
    /// never less than one session's share.
    pub fn default_task_share(concurrent: u32, queue: u32) -> u32 {
        concurrent
            .saturating_add(queue)
            .div_ceil(2)
            .max(Self::default_session_share(concurrent, queue))
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: u64::from(Self::DEFAULT_MEMORY_MIB) << 20,
            call_timeout: std::time::Duration::from_millis(Self::DEFAULT_CALL_TIMEOUT_MS),
            output_bytes: (Self::DEFAULT_OUTPUT_KIB as usize) << 10,
            state_bytes: u64::from(Self::DEFAULT_STATE_KIB) << 10,
            concurrent: Self::DEFAULT_CONCURRENT,
            queue: Self::DEFAULT_QUEUE,
            session_share: Self::default_session_share(
                Self::DEFAULT_CONCURRENT,
                Self::DEFAULT_QUEUE,
            ),
            task_share: Self::default_task_share(Self::DEFAULT_CONCURRENT, Self::DEFAULT_QUEUE),
            log_lines: Self::DEFAULT_LOG_LINES,
            fuel: None,
            table_elements: Self::DEFAULT_TABLE_ELEMENTS,
            instances: Self::DEFAULT_INSTANCES,
        }
    }
}

/// A tool as the manifest declares it.
#[derive(Debug, Clone)]
pub struct ToolDecl {
    pub name: ToolName,
    pub risk: RiskClass,
    /// The manifest vouches that repeating a call has no further effect.
    pub idempotent: bool,
    /// For destructive tools: what a call does, in words a human approves,
    /// with `{argument}` placeholders, e.g. "deletes the note `{slug}`".
    pub approval: Option<String>,
    /// HTTP methods the tool's outbound requests may use (uppercase). When
    /// unset: GET and HEAD for a read tool, any for the others.
    pub http_methods: Option<Vec<String>>,
    /// `lint_allow`: lint rule id → why the platform team accepts that
    /// finding for this tool. `toolhost lint` reports it as allowed.
    pub lint_allow: BTreeMap<String, String>,
    /// 1-based line of the declaration, for messages.
    pub line: usize,
}

/// One directory of the host given to a plugin (`files = [...]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileGrant {
    /// Absolute path on the host.
    pub host: PathBuf,
    /// Where the plugin sees it: an absolute guest path such as `/kb`.
    pub guest: String,
    pub mode: FileMode,
}

/// What a plugin may do inside a granted directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileMode {
    /// List and read.
    Ro,
    /// List, read, create, write, rename and delete.
    Rw,
}

/// A plugin as the manifest declares it.
#[derive(Debug, Clone)]
pub struct PluginDecl {
    pub name: PluginName,
    /// The component file (an absolute path) or registry artifact.
    pub component: ComponentSource,
    /// The component's digest as pinned; always set for a file, optional
    /// for a registry artifact (its reference's digest pins it).
    pub sha256: Option<Sha256Digest>,
    /// `[[trust]]` names, any one of which must have signed the component;
    /// empty when no signature is required.
    pub signed_by: Vec<String>,
    pub instance: InstanceMode,
    pub limits: Limits,
    /// Non-secret settings the plugin reads through the `config` import.
    pub config: BTreeMap<String, String>,
    pub tools: Vec<ToolDecl>,
    /// Where its outbound HTTP may go, with which credentials.
    pub network: NetworkDecl,
    /// Host directories the plugin may see, and nothing else of the host's
    /// file system.
    pub files: Vec<FileGrant>,
    /// 1-based line of `[[plugin]]`, for messages.
    pub line: usize,
}

/// The whole manifest, vetted.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Where it was read from, as given (for messages).
    pub path: PathBuf,
    /// SHA-256 of the manifest file's bytes, to say which catalog was served.
    pub digest: Sha256Digest,
    /// Absolute path of `[host] state_dir` (default `.toolhost` beside the manifest).
    pub state_dir: PathBuf,
    pub audit: AuditSettings,
    /// Absolute path of `[host] secrets_file`, if set.
    pub secrets_file: Option<PathBuf>,
    /// `[host] store`, `database_url_file`: where tasks, approvals and
    /// plugin state live.
    pub store: StoreSettings,
    /// `[host] replica` (or `TOOLHOST_REPLICA`): this process's name in the
    /// audit trail; default the hostname.
    pub replica: String,
    /// `[host] console_url`: the console's base URL as people reach it
    /// (behind a proxy), without a trailing slash; approval links start
    /// with it. `None`: the admin listener's own address.
    pub console_url: Option<String>,
    /// `[host] approval_webhook`: where each new pending approval is posted.
    pub approval_webhook: Option<WebhookSettings>,
    /// `[host] wasm_stack_kib`: how deep any plugin's wasm may recurse, in
    /// bytes of native stack. One engine runs every plugin, so this one
    /// setting is host-wide.
    pub wasm_stack_bytes: usize,
    pub lint: LintSettings,
    pub plugins: Vec<PluginDecl>,
    /// `[[trust]]`: the keys whose signatures plugins may require.
    pub trust: Vec<crate::signing::TrustedKey>,
    /// `[[registry]]`: how to reach OCI registries.
    pub registries: Vec<RegistryDecl>,
    /// The manifest's folder: relative paths in it start there.
    pub base: PathBuf,
    /// `tools-manifest.lock` beside it, if there is one (see `lock`).
    pub lock: Option<Lock>,
    /// Files the host reads that the manifest does not name (`serve`'s
    /// admin and metrics token files), set before loading: like the
    /// manifest and the secrets file, no `files` grant may hold them.
    pub host_files: Vec<PathBuf>,
}

/// `[host] approval_webhook`.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    pub url: String,
    /// Signs each post (`X-Toolhost-Signature: sha256=<HMAC>`), if set.
    pub secret: Option<network::SecretName>,
}

/// Which backend keeps the host's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// One SQLite file in `state_dir`: one machine.
    Sqlite,
    /// A PostgreSQL database shared by replicas.
    Postgres,
}

impl StoreKind {
    fn parse(value: &str) -> Option<StoreKind> {
        match value {
            "sqlite" => Some(StoreKind::Sqlite),
            "postgres" => Some(StoreKind::Postgres),
            _ => None,
        }
    }
}

/// `[host] store` and where its connection comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    pub kind: StoreKind,
    /// Absolute path of `[host] database_url_file`, if set. The URL itself
    /// never appears in the manifest.
    pub database_url_file: Option<PathBuf>,
}

/// Overrides `[host] store` for this process.
pub const STORE_ENV: &str = "TOOLHOST_STORE";
/// Overrides `[host] state_dir`: replicas sharing one manifest each keep
/// their own trail and cache.
pub const STATE_DIR_ENV: &str = "TOOLHOST_STATE_DIR";
/// Overrides `[host] replica`.
pub const REPLICA_ENV: &str = "TOOLHOST_REPLICA";

/// `[lint]`: what the catalog lint holds every tool to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LintSettings {
    /// `max_tool_text_chars`: the most characters of text one tool hands
    /// the model, title, description and schema texts together.
    pub max_tool_text_chars: usize,
}

impl LintSettings {
    /// Room for a full description and a dozen well-described arguments;
    /// the largest tool of the example catalog uses about a third of it.
    pub const DEFAULT_MAX_TOOL_TEXT_CHARS: u32 = 4_000;
    pub const MIN_MAX_TOOL_TEXT_CHARS: u32 = 100;
    pub const MAX_MAX_TOOL_TEXT_CHARS: u32 = 100_000;
}

impl Default for LintSettings {
    fn default() -> LintSettings {
        LintSettings {
            max_tool_text_chars: LintSettings::DEFAULT_MAX_TOOL_TEXT_CHARS as usize,
        }
    }
}

/// `[host] audit_*`: how the audit trail rotates and how often it is signed.
#[derive(Debug, Clone)]
pub struct AuditSettings {
    pub segment_bytes: u64,
    pub checkpoint_every: Duration,
}

impl AuditSettings {
    pub const DEFAULT_SEGMENT_KIB: u32 = 16 * 1024;
    pub const DEFAULT_CHECKPOINT_SECS: u32 = 60;
}

/// A manifest that cannot be used. Each message names the file, the line and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error(
        "cannot read manifest {path}: {source}\n  fix: pass --manifest PATH to an existing tools-manifest.toml"
    )]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}\n  fix: {fix}")]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
        fix: String,
    },
    #[error(transparent)]
    Lock(#[from] LockError),
}

impl Manifest {
    /// Reads and vets the manifest at `path`. Component paths are resolved
    /// against the manifest's folder.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let base = std::path::absolute(base).map_err(|source| ManifestError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut manifest = Manifest::parse(path, &base, &text)?;
        manifest.lock = Lock::read(&Lock::path_for(path))?;
        Ok(manifest)
    }

    /// Where this manifest's lock is (whether or not it exists).
    pub fn lock_path(&self) -> PathBuf {
        Lock::path_for(&self.path)
    }

    /// Vets manifest `text`; `path` is only used in messages.
    pub fn parse(path: &Path, base: &Path, text: &str) -> Result<Manifest, ManifestError> {
        let at = Locator { path, text };
        let raw: raw::RawManifest = toml::from_str(text).map_err(|e| {
            let fix = raw::fix_for(e.message());
            at.error(e.span(), e.message().trim().to_string(), fix)
        })?;
        let mut plugins = Vec::with_capacity(raw.plugin.len());
        let mut plugin_lines: HashMap<String, usize> = HashMap::new();
        for spanned in raw.plugin {
            let plugin_line = at.line(spanned.span());
            let p = spanned.into_inner();
            if let Some(first) = plugin_lines.insert(p.name.get_ref().to_string(), plugin_line) {
                return Err(at.error(
                    Some(p.name.span()),
                    format!(
                        "plugin `{}` is declared twice (first on line {first})",
                        p.name.get_ref()
                    ),
                    "give each [[plugin]] a unique name".into(),
                ));
            }
            plugins.push(p.vet(&at, base, plugin_line)?);
        }
        let mut trust: Vec<crate::signing::TrustedKey> = Vec::with_capacity(raw.trust.len());
        for entry in raw.trust {
            let entry = entry.into_inner();
            let name = entry.name.get_ref();
            let valid = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !valid || trust.iter().any(|t| &t.name == name) {
                return Err(at.error(
                    Some(entry.name.span()),
                    format!("[[trust]] name {name:?} is empty, repeated or has characters other than a-z, A-Z, 0-9, '-', '_', '.'"),
                    "give each trusted key a unique short name, such as \"vendor-x\"".into(),
                ));
            }
            let key_path = base.join(entry.key.get_ref());
            let key = crate::signing::PublicKey::read(&key_path).map_err(|e| {
                at.error(
                    Some(entry.key.span()),
                    format!("[[trust]] `{name}`: {e}"),
                    "point key at a PEM public key file (Ed25519 or ECDSA P-256), relative to the manifest".into(),
                )
            })?;
            trust.push(crate::signing::TrustedKey {
                name: name.clone(),
                key,
            });
        }
        let mut registries: Vec<RegistryDecl> = Vec::with_capacity(raw.registry.len());
        for entry in raw.registry {
            let entry = entry.into_inner();
            let host = entry.host.get_ref();
            let probe = format!("{OCI_SCHEME}{host}/x:x");
            if OciReference::parse(&probe).is_err()
                || registries.iter().any(|r| r.host.eq_ignore_ascii_case(host))
            {
                return Err(at.error(
                    Some(entry.host.span()),
                    format!("[[registry]] host {host:?} is repeated or not a host[:port]"),
                    "name each registry once, as references name it (e.g. \"registry.example.com:5000\")".into(),
                ));
            }
            registries.push(RegistryDecl {
                host: host.clone(),
                credential: entry.credential,
                plain_http: entry.plain_http,
            });
        }
        let state_dir = match std::env::var_os(STATE_DIR_ENV).filter(|v| !v.is_empty()) {
            Some(dir) => base.join(dir),
            None => base.join(raw.host.state_dir.as_deref().unwrap_or(DEFAULT_STATE_DIR)),
        };
        if let Some(url) = &raw.host.database_url {
            return Err(at.error(
                Some(url.span()),
                "host.database_url is not accepted: a database URL may hold a password, and the manifest is shared".into(),
                "put the URL in TOOLHOST_DATABASE_URL, or in a file (mode 0600) named by host.database_url_file".into(),
            ));
        }
        let store_kind = match std::env::var(STORE_ENV).ok().filter(|v| !v.is_empty()) {
            Some(value) => StoreKind::parse(&value).ok_or_else(|| {
                at.error(
                    None,
                    format!("{STORE_ENV}={value:?} names no store"),
                    "use sqlite or postgres".into(),
                )
            })?,
            None => match &raw.host.store {
                None => StoreKind::Sqlite,
                Some(value) => StoreKind::parse(value.get_ref()).ok_or_else(|| {
                    at.error(
                        Some(value.span()),
                        format!("host.store = {:?} names no store", value.get_ref()),
                        "use \"sqlite\" (the default, one machine) or \"postgres\" (replicas)"
                            .into(),
                    )
                })?,
            },
        };
        let replica = match std::env::var(REPLICA_ENV).ok().filter(|v| !v.is_empty()) {
            Some(name) => toml::Spanned::new(0..0, name),
            None => match raw.host.replica {
                Some(name) => name,
                None => toml::Spanned::new(0..0, hostname()),
            },
        };
        if !valid_replica(replica.get_ref()) {
            return Err(at.error(
                (replica.span() != (0..0)).then(|| replica.span()),
                format!("replica name {:?} is not usable", replica.get_ref()),
                "use 1 to 64 letters, digits, `.`, `_` or `-` (host.replica or TOOLHOST_REPLICA)"
                    .into(),
            ));
        }
        let console_url = match raw.host.console_url {
            None => None,
            Some(url) => Some(console_base(url.get_ref()).ok_or_else(|| {
                at.error(
                    Some(url.span()),
                    format!("console_url {:?} is not a usable base URL", url.get_ref()),
                    "use http:// or https:// and a host, e.g. \"https://toolhost.example.com\"; the console is served at the root, so no path, user, query or fragment".into(),
                )
            })?),
        };
        let approval_webhook = match raw.host.approval_webhook {
            None => None,
            Some(hook) => {
                let url = hook.url.get_ref();
                if !webhook_url_ok(url) {
                    return Err(at.error(
                        Some(hook.url.span()),
                        format!("approval_webhook url {url:?} is not usable"),
                        "use an https:// URL (plain http:// only to a loopback address), with no user or fragment; a secret goes in `secret`, a secret store name, never in the URL".into(),
                    ));
                }
                Some(WebhookSettings {
                    url: url.clone(),
                    secret: hook.secret,
                })
            }
        };
        let bounded_setting =
            |value: Option<toml::Spanned<u32>>, key: &str, min: u32, max: u32, default: u32| {
                match value {
                    None => Ok(default),
                    Some(v) if (min..=max).contains(v.get_ref()) => Ok(*v.get_ref()),
                    Some(v) => Err(at.error(
                        Some(v.span()),
                        format!("{key} = {} is out of range", v.get_ref()),
                        format!("use a value from {min} to {max} (default {default})"),
                    )),
                }
            };
        let host_setting = |value, key: &str, max, default| {
            bounded_setting(value, &format!("host.{key}"), 1, max, default)
        };
        let audit = AuditSettings {
            segment_bytes: u64::from(host_setting(
                raw.host.audit_segment_kib,
                "audit_segment_kib",
                1 << 20,
                AuditSettings::DEFAULT_SEGMENT_KIB,
            )?) << 10,
            checkpoint_every: Duration::from_secs(
                host_setting(
                    raw.host.audit_checkpoint_secs,
                    "audit_checkpoint_secs",
                    86_400,
                    AuditSettings::DEFAULT_CHECKPOINT_SECS,
                )?
                .into(),
            ),
        };
        Ok(Manifest {
            path: path.to_path_buf(),
            digest: Sha256Digest::of(text.as_bytes()),
            state_dir,
            audit,
            secrets_file: raw.host.secrets_file.as_deref().map(|f| base.join(f)),
            store: StoreSettings {
                kind: store_kind,
                database_url_file: raw.host.database_url_file.as_deref().map(|f| base.join(f)),
            },
            replica: replica.into_inner(),
            console_url,
            approval_webhook,
            wasm_stack_bytes: (bounded_setting(
                raw.host.wasm_stack_kib,
                "host.wasm_stack_kib",
                MIN_WASM_STACK_KIB,
                MAX_WASM_STACK_KIB,
                DEFAULT_WASM_STACK_KIB,
            )? as usize)
                << 10,
            lint: LintSettings {
                max_tool_text_chars: bounded_setting(
                    raw.lint.max_tool_text_chars,
                    "lint.max_tool_text_chars",
                    LintSettings::MIN_MAX_TOOL_TEXT_CHARS,
                    LintSettings::MAX_MAX_TOOL_TEXT_CHARS,
                    LintSettings::DEFAULT_MAX_TOOL_TEXT_CHARS,
                )? as usize,
            },
            plugins,
            trust,
            registries,
            base: base.to_path_buf(),
            lock: None,
            host_files: Vec::new(),
        })
    }

    /// How to reach the registry `host`, as `[[registry]]` says (defaults
    /// when it says nothing).
    pub fn registry(&self, host: &str) -> RegistryDecl {
        self.registries
            .iter()
            .find(|r| r.host.eq_ignore_ascii_case(host))
            .cloned()
            .unwrap_or(RegistryDecl {
                host: host.to_string(),
                credential: None,
                plain_http: false,
            })
    }

    /// Finds a declared tool by name, across plugins (first declaration wins).
    pub fn tool(&self, name: &str) -> Option<(&PluginDecl, &ToolDecl)> {
        self.plugins.iter().find_map(|p| {
            p.tools
                .iter()
                .find(|t| t.name.as_str() == name)
                .map(|t| (p, t))
        })
    }
}

/// Turns byte spans into `file:line:column` messages.
struct Locator<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Locator<'_> {
    fn line(&self, span: Range<usize>) -> usize {
        self.position(span.start).0
    }

    fn position(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }

    fn error(&self, span: Option<Range<usize>>, message: String, fix: String) -> ManifestError {
        let (line, column) = span.map_or((1, 1), |s| self.position(s.start));
        ManifestError::Invalid {
            path: self.path.to_path_buf(),
            line,
            column,
            message,
            fix,
        }
    }
}

#[cfg(test)]
mod tests;

/// The machine's name, for the default replica name.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| valid_replica(name))
        .unwrap_or_else(|| "toolhost".into())
}

/// Replica names go into every audit record and the checkpoint table.
fn valid_replica(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A console base URL: http or https and a host (and port); no path, user
/// info, query or fragment: the console's pages live at the root, and links
/// are made by appending to it. Returned without a trailing slash.
fn console_base(text: &str) -> Option<String> {
    let uri: http::Uri = text.parse().ok()?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let authority = uri.authority()?;
    if !scheme_ok
        || authority.as_str().contains('@')
        || authority.host().is_empty()
        || uri.query().is_some()
        || !matches!(uri.path(), "" | "/")
        || text.contains('#')
    {
        return None;
    }
    Some(text.trim_end_matches('/').to_string())
}

/// A webhook URL: https, or http to a loopback address (a local relay);
/// no user info or fragment.
fn webhook_url_ok(text: &str) -> bool {
    let Ok(uri) = text.parse::<http::Uri>() else {
        return false;
    };
    let Some(authority) = uri.authority() else {
        return false;
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let scheme_ok = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => loopback,
        _ => false,
    };
    scheme_ok && !authority.as_str().contains('@') && !text.contains('#')
}
