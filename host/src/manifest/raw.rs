//! The manifest as written: serde types with spans, then vetted into the
//! public declarations.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::network::{
    AllowEntry, CredentialDecl, Destination, HostPattern, NetworkDecl, NetworkLimits, SecretName,
};
use super::source::{ComponentSource, OCI_SCHEME, OciReference};
use super::{
    FileGrant, FileMode, InstanceMode, Limits, Locator, ManifestError, PluginDecl, PluginName,
    RiskClass, Sha256Digest, ToolDecl, ToolName,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawManifest {
    #[serde(default)]
    pub host: RawHost,
    #[serde(default)]
    pub lint: RawLint,
    #[serde(default)]
    pub plugin: Vec<Spanned<RawPlugin>>,
    /// `[[trust]]`: keys whose signatures plugins may require.
    #[serde(default)]
    pub trust: Vec<Spanned<RawTrust>>,
    /// `[[registry]]`: how to reach each OCI registry.
    #[serde(default)]
    pub registry: Vec<Spanned<RawRegistry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrust {
    pub name: Spanned<String>,
    /// A public key PEM file, relative to the manifest's folder.
    pub key: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRegistry {
    pub host: Spanned<String>,
    pub credential: Option<super::network::SecretName>,
    #[serde(default)]
    pub plain_http: bool,
}

/// `[lint]`: settings of the catalog lint that hold for every plugin.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLint {
    /// The most characters of model-facing text one tool may carry.
    pub max_tool_text_chars: Option<Spanned<u32>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    /// Where the host keeps what outlives a process (the compiled-component
    /// cache); relative to the manifest's folder.
    pub state_dir: Option<String>,
    /// Size at which an audit segment is closed and signed.
    pub audit_segment_kib: Option<Spanned<u32>>,
    /// How often a serving host signs a checkpoint of the audit trail.
    pub audit_checkpoint_secs: Option<Spanned<u32>>,
    /// A TOML file of secret values (mode 0600), relative to the manifest.
    pub secrets_file: Option<String>,
    /// Native stack a plugin's wasm may use, host-wide.
    pub wasm_stack_kib: Option<Spanned<u32>>,
    /// `sqlite` (default) or `postgres`.
    pub store: Option<Spanned<String>>,
    /// A file holding the PostgreSQL URL (mode 0600), relative to the manifest.
    pub database_url_file: Option<String>,
    /// Never accepted: a URL may hold a password, and manifests are
    /// committed and shared. Read only to say so.
    pub database_url: Option<Spanned<toml::Value>>,
    /// This replica's name in the audit trail (default: the hostname).
    pub replica: Option<Spanned<String>>,
    /// The console's public base URL, put in approval links.
    pub console_url: Option<Spanned<String>>,
    /// Where the host posts each new pending approval.
    pub approval_webhook: Option<RawWebhook>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWebhook {
    pub url: Spanned<String>,
    /// A secret store name; its value signs each post (HMAC-SHA256).
    pub secret: Option<super::network::SecretName>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlugin {
    pub name: Spanned<PluginName>,
    component: Spanned<String>,
    sha256: Option<Spanned<Sha256Digest>>,
    #[serde(default)]
    signed_by: Vec<Spanned<String>>,
    #[serde(default)]
    instance: InstanceMode,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    config: BTreeMap<String, ConfigValue>,
    #[serde(default)]
    tool: Vec<Spanned<RawTool>>,
    network: Option<Spanned<RawNetwork>>,
    #[serde(default)]
    credentials: Vec<Spanned<RawCredential>>,
    #[serde(default)]
    files: Vec<Spanned<RawFileGrant>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFileGrant {
    host: String,
    guest: String,
    mode: FileMode,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    #[serde(default)]
    allow: Vec<Spanned<RawAllow>>,
    timeout_ms: Option<Spanned<u64>>,
    response_kib: Option<Spanned<u32>>,
    requests_per_call: Option<Spanned<u32>>,
    concurrent: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawAllow {
    Origin(String),
    WithAddresses(RawAllowTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAllowTable {
    destination: String,
    #[serde(default)]
    addresses: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCredential {
    destination: Spanned<String>,
    secret: SecretName,
    header: Spanned<String>,
    format: Spanned<String>,
    tools: Option<Vec<Spanned<ToolName>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    memory_mib: Option<Spanned<u32>>,
    call_timeout_ms: Option<Spanned<u64>>,
    output_kib: Option<Spanned<u32>>,
    state_kib: Option<Spanned<u32>>,
    concurrent: Option<Spanned<u32>>,
    queue: Option<Spanned<u32>>,
    session_share: Option<Spanned<u32>>,
    task_share: Option<Spanned<u32>>,
    log_lines: Option<Spanned<u32>>,
    fuel: Option<Spanned<u64>>,
    table_elements: Option<Spanned<u32>>,
    instances: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: Spanned<ToolName>,
    risk: RiskClass,
    #[serde(default)]
    idempotent: bool,
    approval: Option<Spanned<String>>,
    http_methods: Option<Spanned<Vec<String>>>,
    /// Lint findings the platform team accepted for this tool, by rule id,
    /// each with the reason.
    lint_allow: Option<Spanned<BTreeMap<String, String>>>,
}

/// Config values are strings to the plugin; numbers and booleans are
/// accepted for convenience and passed on in their TOML spelling.
#[derive(Deserialize)]
#[serde(untagged)]
enum ConfigValue {
    String(String),
    Integer(i64),
    Float(f64),
    Bool(bool),
}

impl ConfigValue {
    fn into_string(self) -> String {
        match self {
            ConfigValue::String(s) => s,
            ConfigValue::Integer(i) => i.to_string(),
            ConfigValue::Float(f) => f.to_string(),
            ConfigValue::Bool(b) => b.to_string(),
        }
    }
}

/// Upper bounds that catch typos (a timeout in seconds written as
/// milliseconds, a memory size in bytes written as MiB) before they matter.
const MAX_MEMORY_MIB: u32 = 4_096;
const MAX_CALL_TIMEOUT_MS: u64 = 10 * 60 * 1_000;
const MAX_OUTPUT_KIB: u32 = 64 * 1_024;
const MAX_STATE_KIB: u32 = 1_024 * 1_024;
const MAX_REQUEST_TIMEOUT_MS: u64 = 10 * 60 * 1_000;
const MAX_RESPONSE_KIB: u32 = 256 * 1_024;
const MAX_REQUESTS_PER_CALL: u32 = 10_000;
const MAX_CONCURRENT: u32 = 1_024;
const MAX_QUEUE: u32 = 100_000;
const MAX_LOG_LINES: u32 = 1_000_000;
const MAX_FUEL: u64 = 1 << 50;
/// Methods a tool may be allowed; anything else is not a plain API call.
const HTTP_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
/// Headers the host sets itself or that frame the message: a credential in
/// one of them would be ignored or break the request.
const RESERVED_HEADERS: [&str; 8] = [
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "te",
    "upgrade",
    "keep-alive",
    "trailer",
];

impl RawPlugin {
    pub(super) fn vet(
        self,
        at: &Locator<'_>,
        base: &Path,
        line: usize,
    ) -> Result<PluginDecl, ManifestError> {
        let name_span = self.name.span();
        let name = self.name.into_inner();
        if self.component.get_ref().is_empty() {
            return Err(at.error(
                Some(self.component.span()),
                format!("plugin `{name}` has an empty component path"),
                "set component to the .wasm file, relative to the manifest's folder".into(),
            ));
        }
        let component = if self.component.get_ref().starts_with(OCI_SCHEME) {
            let reference = OciReference::parse(self.component.get_ref()).map_err(|e| {
                at.error(
                    Some(self.component.span()),
                    format!("plugin `{name}`: {e}"),
                    "write oci://REGISTRY/REPOSITORY@sha256:DIGEST (`toolhost pin` turns a tag into its digest)".into(),
                )
            })?;
            ComponentSource::Oci(reference)
        } else {
            ComponentSource::File(base.join(self.component.get_ref()))
        };
        // A file is pinned by `sha256`; a registry artifact by the digest in
        // its reference, and by `sha256` too if given.
        let sha256 = self.sha256.map(Spanned::into_inner);
        if sha256.is_none() && matches!(component, ComponentSource::File(_)) {
            return Err(at.error(
                Some(self.component.span()),
                format!("plugin `{name}` has no sha256 pin"),
                "set sha256 to the digest of the component you vetted (`toolhost pin` writes it)"
                    .into(),
            ));
        }
        let mut signed_by: Vec<String> = Vec::with_capacity(self.signed_by.len());
        for signer in self.signed_by {
            if signer.get_ref().trim().is_empty() || signed_by.contains(signer.get_ref()) {
                return Err(at.error(
                    Some(signer.span()),
                    format!("plugin `{name}`: signed_by has an empty or repeated name"),
                    "list each [[trust]] name once, e.g. signed_by = [\"vendor-x\"]".into(),
                ));
            }
            signed_by.push(signer.into_inner());
        }

        let limits = self.limits.vet(at)?;

        if self.tool.is_empty() {
            return Err(at.error(
                Some(name_span),
                format!("plugin `{name}` declares no tools"),
                "add a [[plugin.tool]] table with name and risk for each tool it offers".into(),
            ));
        }
        let mut seen: HashMap<ToolName, usize> = HashMap::new();
        let mut tools = Vec::with_capacity(self.tool.len());
        for spanned in self.tool {
            let tool_line = at.line(spanned.span());
            let t = spanned.into_inner();
            let tool_name = t.name.get_ref().clone();
            if let Some(first) = seen.insert(tool_name.clone(), tool_line) {
                return Err(at.error(
                    Some(t.name.span()),
                    format!("tool `{tool_name}` is declared twice in plugin `{name}` (first on line {first})"),
                    "remove one of the two [[plugin.tool]] tables".into(),
                ));
            }
            let approval = match t.approval {
                Some(text) if t.risk != RiskClass::Destructive => {
                    return Err(at.error(
                        Some(text.span()),
                        format!("tool `{tool_name}` has an approval text but is not destructive"),
                        "remove `approval`; only destructive calls are put to a human".into(),
                    ));
                }
                Some(text) if text.get_ref().trim().is_empty() || text.get_ref().len() > 500 => {
                    return Err(at.error(
                        Some(text.span()),
                        format!("the approval text of `{tool_name}` is empty or longer than 500 bytes"),
                        "say in one sentence what the call does, e.g. \"deletes the note `{slug}`\"".into(),
                    ));
                }
                other => other.map(Spanned::into_inner),
            };
            let http_methods = match t.http_methods {
                None => None,
                Some(methods) => {
                    let span = methods.span();
                    let mut vetted = Vec::new();
                    for m in methods.into_inner() {
                        let upper = m.to_ascii_uppercase();
                        if !HTTP_METHODS.contains(&upper.as_str()) {
                            return Err(at.error(
                                Some(span),
                                format!("tool `{tool_name}`: http_methods has {m:?}, which is not an HTTP method the host sends"),
                                format!("use some of {}", HTTP_METHODS.join(", ")),
                            ));
                        }
                        if !vetted.contains(&upper) {
                            vetted.push(upper);
                        }
                    }
                    Some(vetted)
                }
            };
            let allow_span = t.lint_allow.as_ref().map(Spanned::span);
            let lint_allow = t.lint_allow.map(Spanned::into_inner).unwrap_or_default();
            if let Some((rule, _)) = lint_allow.iter().find(|(_, why)| why.trim().is_empty()) {
                return Err(at.error(
                    allow_span,
                    format!("tool `{tool_name}`: lint_allow for `{rule}` gives no reason"),
                    "say why the finding is acceptable, e.g. lint_allow = { name-vague-verb = \"runs the named report, which only reads\" }".into(),
                ));
            }
            tools.push(ToolDecl {
                name: tool_name,
                risk: t.risk,
                idempotent: t.idempotent,
                approval,
                http_methods,
                lint_allow,
                line: tool_line,
            });
        }
        let network = vet_network(at, &name, self.network, self.credentials, &tools)?;
        let files = vet_files(at, &name, base, self.files)?;

        Ok(PluginDecl {
            name,
            component,
            sha256,
            signed_by,
            instance: self.instance,
            limits,
            config: self
                .config
                .into_iter()
                .map(|(k, v)| (k, v.into_string()))
                .collect(),
            tools,
            network,
            files,
            line,
        })
    }
}

/// Directories given to a plugin. Only the shape is checked here; the
/// directory itself is opened when the plugin is loaded.
fn vet_files(
    at: &Locator<'_>,
    plugin: &PluginName,
    base: &Path,
    files: Vec<Spanned<RawFileGrant>>,
) -> Result<Vec<FileGrant>, ManifestError> {
    let mut grants: Vec<FileGrant> = Vec::with_capacity(files.len());
    for spanned in files {
        let span = spanned.span();
        let raw = spanned.into_inner();
        let bad_guest = !raw.guest.starts_with('/')
            || raw.guest.len() > 256
            || raw.guest.contains('\\')
            || raw.guest.contains('\0')
            || raw.guest[1..]
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..");
        if bad_guest {
            return Err(at.error(
                Some(span),
                format!(
                    "plugin `{plugin}`: files: guest path {:?} is not a plain absolute path",
                    raw.guest
                ),
                "write it as \"/name\" or \"/name/sub\", without `.`, `..` or empty parts".into(),
            ));
        }
        if raw.host.trim().is_empty() {
            return Err(at.error(
                Some(span),
                format!("plugin `{plugin}`: files: the host path is empty"),
                "set host to a directory, relative to the manifest's folder".into(),
            ));
        }
        let overlaps = grants.iter().find(|g| {
            let (a, b) = (g.guest.as_str(), raw.guest.as_str());
            a == b || a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"))
        });
        if let Some(other) = overlaps {
            return Err(at.error(
                Some(span),
                format!(
                    "plugin `{plugin}`: files: guest path {:?} overlaps {:?}",
                    raw.guest, other.guest
                ),
                "give each directory its own guest path, none inside another".into(),
            ));
        }
        grants.push(FileGrant {
            host: base.join(&raw.host),
            guest: raw.guest,
            mode: raw.mode,
        });
    }
    Ok(grants)
}

/// The allow-list, the credentials and the network limits of one plugin.
fn vet_network(
    at: &Locator<'_>,
    plugin: &PluginName,
    network: Option<Spanned<RawNetwork>>,
    credentials: Vec<Spanned<RawCredential>>,
    tools: &[ToolDecl],
) -> Result<NetworkDecl, ManifestError> {
    let mut decl = NetworkDecl::default();
    if let Some(network) = network {
        let network = network.into_inner();
        for entry in network.allow {
            let span = entry.span();
            let (text, addresses) = match entry.into_inner() {
                RawAllow::Origin(text) => (text, Vec::new()),
                RawAllow::WithAddresses(t) => (t.destination, t.addresses),
            };
            let destination = Destination::parse(&text).map_err(|why| {
                at.error(
                    Some(span.clone()),
                    format!("plugin `{plugin}`: network.allow: {why}"),
                    "write each entry as \"https://host[:port]\" or \"https://*.example.com\""
                        .into(),
                )
            })?;
            let addresses = addresses
                .iter()
                .map(|a| {
                    a.parse::<ipnet::IpNet>()
                        .or_else(|_| a.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                        .map_err(|_| {
                            at.error(
                                Some(span.clone()),
                                format!("plugin `{plugin}`: network.allow: {a:?} is not an address or range"),
                                "write ranges in CIDR form, e.g. \"127.0.0.0/8\" or \"10.1.2.3/32\"".into(),
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            decl.allow.push(AllowEntry {
                destination,
                addresses,
            });
        }
        decl.limits = NetworkLimits {
            timeout: std::time::Duration::from_millis(bounded(
                at,
                network.timeout_ms,
                "network.timeout_ms",
                1,
                MAX_REQUEST_TIMEOUT_MS,
                NetworkLimits::DEFAULT_TIMEOUT_MS,
            )?),
            response_bytes: u64::from(bounded(
                at,
                network.response_kib,
                "network.response_kib",
                1,
                MAX_RESPONSE_KIB,
                NetworkLimits::DEFAULT_RESPONSE_KIB,
            )?) << 10,
            requests_per_call: bounded(
                at,
                network.requests_per_call,
                "network.requests_per_call",
                1,
                MAX_REQUESTS_PER_CALL,
                NetworkLimits::DEFAULT_REQUESTS_PER_CALL,
            )?,
            concurrent: bounded(
                at,
                network.concurrent,
                "network.concurrent",
                1,
                MAX_CONCURRENT,
                NetworkLimits::DEFAULT_CONCURRENT,
            )?,
        };
    }

    for spanned in credentials {
        let span = spanned.span();
        let c = spanned.into_inner();
        let destination = Destination::parse(c.destination.get_ref()).map_err(|why| {
            at.error(
                Some(c.destination.span()),
                format!("plugin `{plugin}`: credentials: {why}"),
                "write the destination as \"https://host[:port]\"".into(),
            )
        })?;
        if matches!(destination.host, HostPattern::Subdomains(_)) {
            return Err(at.error(
                Some(c.destination.span()),
                format!("plugin `{plugin}`: a credential's destination cannot be a wildcard"),
                "bind the secret to one exact host; a wildcard would send it to every subdomain"
                    .into(),
            ));
        }
        let allowed = decl.allow.iter().any(|a| {
            let HostPattern::Exact(host) = &destination.host else {
                return false;
            };
            a.destination
                .matches(destination.scheme, host, destination.port)
        });
        if !allowed {
            return Err(at.error(
                Some(c.destination.span()),
                format!("plugin `{plugin}`: credential destination {destination} is not in network.allow"),
                "allow the destination too, or remove the credential".into(),
            ));
        }
        let header = c.header.get_ref().to_ascii_lowercase();
        if http::HeaderName::from_bytes(header.as_bytes()).is_err()
            || RESERVED_HEADERS.contains(&header.as_str())
        {
            return Err(at.error(
                Some(c.header.span()),
                format!(
                    "plugin `{plugin}`: {:?} cannot carry a credential",
                    c.header.get_ref()
                ),
                "use a request header such as Authorization or X-Api-Key".into(),
            ));
        }
        let format = c.format.into_inner();
        if format.matches("{secret}").count() != 1 || http::HeaderValue::from_str(&format).is_err()
        {
            return Err(at.error(
                Some(span),
                format!("plugin `{plugin}`: credential format {format:?} must contain `{{secret}}` exactly once and be a valid header value"),
                "e.g. format = \"Bearer {secret}\"".into(),
            ));
        }
        let tools = match c.tools {
            None => None,
            Some(list) => {
                let mut names = Vec::new();
                for t in list {
                    if !tools.iter().any(|d| &d.name == t.get_ref()) {
                        return Err(at.error(
                            Some(t.span()),
                            format!("plugin `{plugin}`: credential for {destination} names tool `{}`, which the plugin does not declare", t.get_ref()),
                            "list tools of this plugin only, or drop `tools` to bind it to all of them".into(),
                        ));
                    }
                    names.push(t.into_inner());
                }
                Some(names)
            }
        };
        if decl
            .credentials
            .iter()
            .any(|o: &CredentialDecl| o.destination == destination && o.header == header)
        {
            return Err(at.error(
                Some(span),
                format!("plugin `{plugin}`: two credentials set header {header} for {destination}"),
                "keep one".into(),
            ));
        }
        decl.credentials.push(CredentialDecl {
            destination,
            secret: c.secret,
            header,
            format,
            tools,
        });
    }
    Ok(decl)
}

impl RawLimits {
    fn vet(self, at: &Locator<'_>) -> Result<Limits, ManifestError> {
        let memory_mib = bounded(
            at,
            self.memory_mib,
            "limits.memory_mib",
            1,
            MAX_MEMORY_MIB,
            Limits::DEFAULT_MEMORY_MIB,
        )?;
        let timeout_ms = bounded(
            at,
            self.call_timeout_ms,
            "limits.call_timeout_ms",
            1,
            MAX_CALL_TIMEOUT_MS,
            Limits::DEFAULT_CALL_TIMEOUT_MS,
        )?;
        let output_kib = bounded(
            at,
            self.output_kib,
            "limits.output_kib",
            1,
            MAX_OUTPUT_KIB,
            Limits::DEFAULT_OUTPUT_KIB,
        )?;
        let state_kib = bounded(
            at,
            self.state_kib,
            "limits.state_kib",
            0,
            MAX_STATE_KIB,
            Limits::DEFAULT_STATE_KIB,
        )?;
        let concurrent = bounded(
            at,
            self.concurrent,
            "limits.concurrent",
            1,
            MAX_CONCURRENT,
            Limits::DEFAULT_CONCURRENT,
        )?;
        let queue = bounded(
            at,
            self.queue,
            "limits.queue",
            0,
            MAX_QUEUE,
            Limits::DEFAULT_QUEUE,
        )?;
        // A share above the plugin's places would bound nothing.
        let places = concurrent.saturating_add(queue);
        let session_share = bounded(
            at,
            self.session_share,
            "limits.session_share",
            1,
            places,
            Limits::default_session_share(concurrent, queue),
        )?;
        let task_share = bounded(
            at,
            self.task_share,
            "limits.task_share",
            1,
            places,
            Limits::default_task_share(concurrent, queue).max(session_share),
        )?;
        let log_lines = bounded(
            at,
            self.log_lines,
            "limits.log_lines",
            0,
            MAX_LOG_LINES,
            Limits::DEFAULT_LOG_LINES,
        )?;
        let fuel = match self.fuel {
            None => None,
            Some(v) if (1_000..=MAX_FUEL).contains(v.get_ref()) => Some(*v.get_ref()),
            Some(v) => {
                return Err(at.error(
                    Some(v.span()),
                    format!("limits.fuel = {} is out of range", v.get_ref()),
                    format!("use a value from 1000 to {MAX_FUEL}, or leave it unset to meter by time only"),
                ));
            }
        };
        let table_elements = bounded(
            at,
            self.table_elements,
            "limits.table_elements",
            1,
            Limits::MAX_TABLE_ELEMENTS,
            Limits::DEFAULT_TABLE_ELEMENTS,
        )?;
        let instances = bounded(
            at,
            self.instances,
            "limits.instances",
            1,
            Limits::MAX_INSTANCES,
            Limits::DEFAULT_INSTANCES,
        )?;
        Ok(Limits {
            memory_bytes: u64::from(memory_mib) << 20,
            call_timeout: std::time::Duration::from_millis(timeout_ms),
            output_bytes: (output_kib as usize) << 10,
            state_bytes: u64::from(state_kib) << 10,
            concurrent,
            queue,
            session_share,
            task_share,
            log_lines,
            fuel,
            table_elements,
            instances,
        })
    }
}

/// `value` if it is within `min..=max`, `default` if unset; `key` is the
/// setting's full name for the message, e.g. `limits.memory_mib`.
fn bounded<T: PartialOrd + Copy + std::fmt::Display>(
    at: &Locator<'_>,
    value: Option<Spanned<T>>,
    key: &str,
    min: T,
    max: T,
    default: T,
) -> Result<T, ManifestError> {
    match value {
        None => Ok(default),
        Some(v) if *v.get_ref() >= min && *v.get_ref() <= max => Ok(*v.get_ref()),
        Some(v) => Err(at.error(
            Some(v.span()),
            format!("{key} = {} is out of range", v.get_ref()),
            format!("use a value from {min} to {max} (default {default})"),
        )),
    }
}

/// A hint for the parser's own messages, which say what is wrong but not
/// where to look things up.
pub(super) fn fix_for(message: &str) -> String {
    let hint = if message.contains("unknown field") {
        "remove or correct the key; the keys each table accepts are listed in docs/manifest.md"
    } else if message.contains("unknown variant") {
        "use one of the values listed above"
    } else if message.contains("not 64 hex digits") {
        "set sha256 to the digest of the component you vetted (`sha256sum FILE`)"
    } else if message.contains("is not snake_case") || message.contains("plugin name") {
        "rename it; the name must be the same in the manifest and in the plugin's describe()"
    } else if message.contains("missing field") {
        "add the missing key to that table"
    } else {
        "correct the TOML at that position (see docs/manifest.md)"
    };
    hint.to_string()
}
