//! The manifest as written: serde types with spans, then vetted into the
//! public declarations.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{
    InstanceMode, Limits, Locator, ManifestError, PluginDecl, PluginName, RiskClass, Sha256Digest,
    ToolDecl, ToolName,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawManifest {
    #[serde(default)]
    pub host: RawHost,
    #[serde(default)]
    pub plugin: Vec<Spanned<RawPlugin>>,
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlugin {
    pub name: Spanned<PluginName>,
    component: Spanned<String>,
    sha256: Sha256Digest,
    #[serde(default)]
    instance: InstanceMode,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    config: BTreeMap<String, ConfigValue>,
    #[serde(default)]
    tool: Vec<Spanned<RawTool>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    memory_mib: Option<Spanned<u32>>,
    call_timeout_ms: Option<Spanned<u64>>,
    output_kib: Option<Spanned<u32>>,
    state_kib: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: Spanned<ToolName>,
    risk: RiskClass,
    #[serde(default)]
    idempotent: bool,
    approval: Option<Spanned<String>>,
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
        let component = base.join(self.component.get_ref());

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
            tools.push(ToolDecl {
                name: tool_name,
                risk: t.risk,
                idempotent: t.idempotent,
                approval,
                line: tool_line,
            });
        }

        Ok(PluginDecl {
            name,
            component,
            sha256: self.sha256,
            instance: self.instance,
            limits,
            config: self
                .config
                .into_iter()
                .map(|(k, v)| (k, v.into_string()))
                .collect(),
            tools,
            line,
        })
    }
}

impl RawLimits {
    fn vet(self, at: &Locator<'_>) -> Result<Limits, ManifestError> {
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
                    format!("limits.{key} = {} is out of range", v.get_ref()),
                    format!("use a value from {min} to {max} (default {default})"),
                )),
            }
        }
        let memory_mib = bounded(
            at,
            self.memory_mib,
            "memory_mib",
            1,
            MAX_MEMORY_MIB,
            Limits::DEFAULT_MEMORY_MIB,
        )?;
        let timeout_ms = bounded(
            at,
            self.call_timeout_ms,
            "call_timeout_ms",
            1,
            MAX_CALL_TIMEOUT_MS,
            Limits::DEFAULT_CALL_TIMEOUT_MS,
        )?;
        let output_kib = bounded(
            at,
            self.output_kib,
            "output_kib",
            1,
            MAX_OUTPUT_KIB,
            Limits::DEFAULT_OUTPUT_KIB,
        )?;
        let state_kib = bounded(
            at,
            self.state_kib,
            "state_kib",
            0,
            MAX_STATE_KIB,
            Limits::DEFAULT_STATE_KIB,
        )?;
        Ok(Limits {
            memory_bytes: u64::from(memory_mib) << 20,
            call_timeout: std::time::Duration::from_millis(timeout_ms),
            output_bytes: (output_kib as usize) << 10,
            state_bytes: u64::from(state_kib) << 10,
        })
    }
}

/// A hint for the parser's own messages, which say what is wrong but not
/// where to look things up.
pub(super) fn fix_for(message: &str) -> String {
    let hint = if message.contains("unknown field") {
        "remove or correct the key; the keys each table accepts are listed in the README's manifest reference"
    } else if message.contains("unknown variant") {
        "use one of the values listed above"
    } else if message.contains("not 64 hex digits") {
        "set sha256 to the digest of the component you vetted (`sha256sum FILE`)"
    } else if message.contains("is not snake_case") || message.contains("plugin name") {
        "rename it; the name must be the same in the manifest and in the plugin's describe()"
    } else if message.contains("missing field") {
        "add the missing key to that table"
    } else {
        "correct the TOML at that position (see the README's manifest reference)"
    };
    hint.to_string()
}
