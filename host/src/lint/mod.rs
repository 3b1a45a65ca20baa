//! Catalog lint: the checks a platform team runs before an agent sees a
//! catalog, so that no tool can be misread. It reads what loading vetted (the
//! manifest's declarations joined with each plugin's `describe()`) and
//! reports findings; it never changes the catalog or decides who may call.
//!
//! Every rule is documented in docs/lint.md; the ids here are the ones users
//! write in `lint_allow` and scripts match on, so they never change.

mod descriptions;
mod kept;
mod names;
mod schemas;
mod texts;
mod words;

pub use kept::ReportShelf;
pub use names::risk_of_verb;

use std::fmt;

use serde::{Deserialize, Serialize};

use std::collections::BTreeSet;

use crate::catalog::{Catalog, Refusal, RefusalCause};
use crate::manifest::{Destination, LintSettings, Manifest, RiskClass};
use crate::text::escape_hidden;

/// How bad a finding is: errors stop `serve`, warnings are logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One lint rule. The id (`Rule::id`) is stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    PluginRefused,
    NameShape,
    NameUnknownVerb,
    NameVagueVerb,
    RiskVerb,
    NameClash,
    IntentCollision,
    ActionSwitch,
    DescriptionEmpty,
    DescriptionLength,
    DescriptionEffect,
    DescriptionIdKind,
    SchemaClosed,
    SchemaRequired,
    SchemaFreeObject,
    SchemaNumberBounds,
    SchemaStringBounds,
    SchemaArrayBounds,
    TextHidden,
    TextInstruction,
    TextToolReference,
    TextLink,
    TextSecretRequest,
    TextLength,
    AllowUnknown,
    AllowUnused,
}

impl Rule {
    pub const ALL: [Rule; 26] = [
        Rule::PluginRefused,
        Rule::NameShape,
        Rule::NameUnknownVerb,
        Rule::NameVagueVerb,
        Rule::RiskVerb,
        Rule::NameClash,
        Rule::IntentCollision,
        Rule::ActionSwitch,
        Rule::DescriptionEmpty,
        Rule::DescriptionLength,
        Rule::DescriptionEffect,
        Rule::DescriptionIdKind,
        Rule::SchemaClosed,
        Rule::SchemaRequired,
        Rule::SchemaFreeObject,
        Rule::SchemaNumberBounds,
        Rule::SchemaStringBounds,
        Rule::SchemaArrayBounds,
        Rule::TextHidden,
        Rule::TextInstruction,
        Rule::TextToolReference,
        Rule::TextLink,
        Rule::TextSecretRequest,
        Rule::TextLength,
        Rule::AllowUnknown,
        Rule::AllowUnused,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Rule::PluginRefused => "plugin-refused",
            Rule::NameShape => "name-shape",
            Rule::NameUnknownVerb => "name-unknown-verb",
            Rule::NameVagueVerb => "name-vague-verb",
            Rule::RiskVerb => "risk-verb",
            Rule::NameClash => "name-clash",
            Rule::IntentCollision => "intent-collision",
            Rule::ActionSwitch => "action-switch",
            Rule::DescriptionEmpty => "description-empty",
            Rule::DescriptionLength => "description-length",
            Rule::DescriptionEffect => "description-effect",
            Rule::DescriptionIdKind => "description-id-kind",
            Rule::SchemaClosed => "schema-closed",
            Rule::SchemaRequired => "schema-required",
            Rule::SchemaFreeObject => "schema-free-object",
            Rule::SchemaNumberBounds => "schema-number-bounds",
            Rule::SchemaStringBounds => "schema-string-bounds",
            Rule::SchemaArrayBounds => "schema-array-bounds",
            Rule::TextHidden => "text-hidden",
            Rule::TextInstruction => "text-instruction",
            Rule::TextToolReference => "text-tool-reference",
            Rule::TextLink => "text-link",
            Rule::TextSecretRequest => "text-secret-request",
            Rule::TextLength => "text-length",
            Rule::AllowUnknown => "allow-unknown",
            Rule::AllowUnused => "allow-unused",
        }
    }

    pub fn severity(self) -> Severity {
        match self {
            Rule::NameUnknownVerb | Rule::IntentCollision | Rule::AllowUnused => Severity::Warning,
            _ => Severity::Error,
        }
    }

    pub fn from_id(id: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.id() == id)
    }

    /// Whether `lint_allow` can accept a finding of this rule. Hidden
    /// characters cannot be accepted: the host refuses such a plugin at
    /// load whatever the lint says.
    pub fn allowable(self) -> bool {
        self != Rule::TextHidden
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let id = String::deserialize(d)?;
        Rule::from_id(&id)
            .ok_or_else(|| serde::de::Error::custom(format!("`{id}` is not a lint rule")))
    }
}

/// What is wrong, where, and how to fix it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    pub rule: Rule,
    pub severity: Severity,
    pub plugin: String,
    /// The tool it is about; `None` for a finding about a whole plugin.
    pub tool: Option<String>,
    /// Where in the tool: for schema rules a JSON pointer into its input
    /// schema; for text rules a pointer into the tool as `tools/list`
    /// sends it (`/description`, `/inputSchema/properties/key/title`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    pub message: String,
    pub fix: String,
    /// The manifest's `lint_allow` reason, when the platform team accepted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<String>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match (self.allowed.is_some(), self.severity) {
            (true, _) => "allowed",
            (false, Severity::Error) => "error",
            (false, Severity::Warning) => "warning",
        };
        // Messages quote plugin text; it reaches a terminal only escaped.
        write!(f, "{severity}[{}] ", self.rule)?;
        match &self.tool {
            Some(tool) => write!(f, "{}", escape_hidden(tool))?,
            None => write!(f, "plugin `{}`", escape_hidden(&self.plugin))?,
        }
        if let Some(at) = &self.at {
            write!(f, " at {}", escape_hidden(at))?;
        }
        write!(
            f,
            ": {}\n    fix: {}",
            escape_hidden(&self.message),
            escape_hidden(&self.fix)
        )?;
        if let Some(reason) = &self.allowed {
            write!(f, "\n    allowed: {}", escape_hidden(reason))?;
        }
        Ok(())
    }
}

/// The outcome of linting one catalog.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    /// Findings that stop `serve`: errors nobody allowed.
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error && f.allowed.is_none())
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Warning && f.allowed.is_none())
    }

    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }
}

/// One served tool as the rules see it.
pub(crate) struct Subject<'a> {
    pub plugin: &'a str,
    pub name: &'a str,
    pub risk: RiskClass,
    pub title: &'a str,
    pub description: &'a str,
    pub input: &'a serde_json::Map<String, serde_json::Value>,
    pub output: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// Its plugin's network allow-list.
    pub allowed: &'a [Destination],
}

/// Collects findings for one subject (or plugin) while the rules run.
pub(crate) struct Findings {
    list: Vec<Finding>,
}

impl Findings {
    pub fn tool(&mut self, rule: Rule, tool: &Subject<'_>, message: String, fix: String) {
        self.push(rule, tool.plugin, Some(tool.name), None, message, fix);
    }

    pub fn schema(
        &mut self,
        rule: Rule,
        tool: &Subject<'_>,
        at: &str,
        message: String,
        fix: String,
    ) {
        let at = if at.is_empty() { "/" } else { at };
        self.push(rule, tool.plugin, Some(tool.name), Some(at), message, fix);
    }

    fn push(
        &mut self,
        rule: Rule,
        plugin: &str,
        tool: Option<&str>,
        at: Option<&str>,
        message: String,
        fix: String,
    ) {
        self.list.push(Finding {
            rule,
            severity: rule.severity(),
            plugin: plugin.to_string(),
            tool: tool.map(str::to_string),
            at: at.map(str::to_string),
            message,
            fix,
            allowed: None,
        });
    }
}

/// Lints a loaded catalog against its manifest. Plugins that loading refused
/// are findings themselves; their tools cannot be read, so no other rule
/// sees them.
pub fn lint(manifest: &Manifest, catalog: &Catalog) -> Report {
    lint_with(manifest, catalog, None)
}

/// [`lint`], unless `shelf` kept the report of a catalog whose every input
/// to the rules was the same; a report made here is kept there.
pub fn lint_kept(manifest: &Manifest, catalog: &Catalog, shelf: &dyn ReportShelf) -> Report {
    lint_with(manifest, catalog, Some(shelf))
}

fn lint_with(manifest: &Manifest, catalog: &Catalog, shelf: Option<&dyn ReportShelf>) -> Report {
    let allowed: Vec<Vec<Destination>> = catalog
        .plugins
        .iter()
        .map(|p| {
            let name = &p.prepared.shared().name;
            manifest
                .plugins
                .iter()
                .find(|d| &d.name == name)
                .map(|d| {
                    d.network
                        .allow
                        .iter()
                        .map(|a| a.destination.clone())
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let subjects: Vec<Subject<'_>> = catalog
        .tools
        .iter()
        .map(|t| Subject {
            plugin: catalog.plugins[t.plugin].prepared.shared().name.as_str(),
            name: t.name.as_str(),
            risk: t.risk,
            title: &t.title,
            description: &t.description,
            input: t.input_schema(),
            output: t.output.as_ref().map(|o| &**o.document()),
            allowed: &allowed[t.plugin],
        })
        .collect();
    let plugins: BTreeSet<&str> = manifest.plugins.iter().map(|p| p.name.as_str()).collect();
    let kept = shelf.map(|shelf| {
        let key = kept::key(manifest, &catalog.refusals, &subjects, &plugins);
        (shelf, key)
    });
    if let Some((shelf, key)) = &kept
        && let Some(report) = shelf
            .get(key)
            .and_then(|bytes| serde_json::from_slice::<Report>(&bytes).ok())
    {
        tracing::info!(
            "lint: the catalog is unchanged since a start that linted it; its report is taken as it was"
        );
        return report;
    }
    let mut findings = Findings { list: Vec::new() };
    for refusal in &catalog.refusals {
        refused(&mut findings, refusal);
    }
    // Loading refused every plugin whose text holds hidden characters
    // (reported above as refusals), so a served tool has none to find.
    check_subjects(&mut findings, &subjects, plugins, manifest.lint, false);
    let mut report = Report {
        findings: findings.list,
    };
    let refused: Vec<&str> = catalog.refusals.iter().map(|r| r.plugin.as_str()).collect();
    apply_allows(&mut report, manifest, &refused);
    report.findings.sort_by(|a, b| {
        (a.allowed.is_some(), a.severity, &a.plugin, &a.tool, a.rule).cmp(&(
            b.allowed.is_some(),
            b.severity,
            &b.plugin,
            &b.tool,
            b.rule,
        ))
    });
    if let Some((shelf, key)) = kept {
        shelf.put(
            &key,
            &serde_json::to_vec(&report).expect("a report serialises"),
        );
    }
    report
}

/// Runs every rule on `subjects`; `scan_hidden` for tools no load vetted
/// (a component that is only inspected).
fn check_subjects<'a>(
    findings: &mut Findings,
    subjects: &[Subject<'a>],
    plugins: BTreeSet<&'a str>,
    settings: LintSettings,
    scan_hidden: bool,
) {
    let view = texts::CatalogView::new(subjects, plugins, settings.max_tool_text_chars);
    for subject in subjects {
        names::check(findings, subject);
        descriptions::check(findings, subject);
        schemas::check(findings, subject);
        if scan_hidden {
            hidden(findings, subject);
        }
        texts::check(findings, subject, &view);
    }
    names::collisions(findings, subjects);
}

/// Hidden characters in a tool's text. A served tool has none (loading
/// refuses its plugin, and [`refused`] reports that); this finds them in a
/// component that is only inspected.
fn hidden(findings: &mut Findings, tool: &Subject<'_>) {
    let (found, _) = crate::catalog::hidden_in_tool(
        tool.name,
        tool.title,
        tool.description,
        tool.input,
        tool.output,
        crate::catalog::MAX_HIDDEN_REPORTED,
    );
    for hidden in &found {
        findings.schema(
            Rule::TextHidden,
            tool,
            &hidden.at,
            hidden_message(&hidden.hidden),
            HIDDEN_FIX.into(),
        );
    }
}

const HIDDEN_FIX: &str = "remove the character from the plugin's text; the host refuses a plugin whose titles, descriptions or schemas hold one";

fn hidden_message(hidden: &crate::text::Hidden) -> String {
    format!("the text holds {hidden}; a reviewer may not see what the model reads")
}

/// A tool as a component describes it, before a manifest classes it.
pub struct Described<'a> {
    pub name: &'a str,
    pub title: &'a str,
    pub description: &'a str,
    pub input: &'a serde_json::Map<String, serde_json::Value>,
    pub output: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// Lints what one component describes, with no manifest: the plugin's name
/// is taken from the first tool's prefix, and each tool's risk class is the
/// one its verb says (write where the verb says nothing), so `risk-verb`
/// cannot fire. With no manifest there is no network allow-list, so every
/// address in the text is reported, and the text cap is the default.
/// `toolhost lint` on a manifest is the check that counts.
pub fn lint_described(tools: &[Described<'_>]) -> Report {
    let plugin = tools
        .first()
        .map_or("", |t| t.name.split('_').next().unwrap_or(""));
    let subjects: Vec<Subject<'_>> = tools
        .iter()
        .map(|t| Subject {
            plugin,
            name: t.name,
            risk: names::risk_of_verb(t.name),
            title: t.title,
            description: t.description,
            input: t.input,
            output: t.output,
            allowed: &[],
        })
        .collect();
    let mut findings = Findings { list: Vec::new() };
    check_subjects(
        &mut findings,
        &subjects,
        BTreeSet::from([plugin]),
        LintSettings::default(),
        true,
    );
    Report {
        findings: findings.list,
    }
}

/// A plugin loading refused. A name clash is reported as such, on the tool,
/// since renaming it is the fix.
fn refused(findings: &mut Findings, refusal: &Refusal) {
    match &refusal.cause {
        RefusalCause::NameClash(tool) => {
            findings.push(
                Rule::NameClash,
                refusal.plugin.as_str(),
                Some(tool.as_str()),
                None,
                refusal.reason.clone(),
                "rename one of the two tools, keeping each plugin's name as its prefix".into(),
            );
            return;
        }
        RefusalCause::HiddenText(found) => {
            for hidden in found {
                findings.push(
                    Rule::TextHidden,
                    refusal.plugin.as_str(),
                    Some(&hidden.tool),
                    Some(&hidden.at),
                    hidden_message(&hidden.hidden),
                    HIDDEN_FIX.into(),
                );
            }
            return;
        }
        RefusalCause::Other => {}
    }
    findings.push(
        Rule::PluginRefused,
        refusal.plugin.as_str(),
        None,
        None,
        format!(
            "the host refuses this plugin (manifest line {}): {}",
            refusal.line, refusal.reason
        ),
        "fix what the reason names; until then none of its tools is served or linted".into(),
    );
}

/// Marks findings the manifest accepts with a reason, and reports allows
/// that name no rule or match no finding (stale exceptions hide nothing, but
/// they mislead the next reader of the manifest). The tools of a `refused`
/// plugin were not linted, so their allows cannot be called unused.
fn apply_allows(report: &mut Report, manifest: &Manifest, refused: &[&str]) {
    let mut extra = Findings { list: Vec::new() };
    for plugin in &manifest.plugins {
        for tool in &plugin.tools {
            let (plugin_name, tool_name) = (plugin.name.as_str(), tool.name.as_str());
            for (id, reason) in &tool.lint_allow {
                if let Some(rule) = Rule::from_id(id).filter(|r| !r.allowable()) {
                    extra.push(
                        Rule::AllowUnknown,
                        plugin_name,
                        Some(tool_name),
                        None,
                        format!("lint_allow names `{rule}`, which cannot be accepted: the host refuses a plugin whose text holds hidden characters"),
                        format!("remove `{rule}` from the tool's lint_allow and remove the characters from the plugin"),
                    );
                    continue;
                }
                let Some(rule) = Rule::from_id(id) else {
                    extra.push(
                        Rule::AllowUnknown,
                        plugin_name,
                        Some(tool_name),
                        None,
                        format!("lint_allow names `{id}`, which is not a lint rule"),
                        format!(
                            "use one of the rule ids in docs/lint.md: {}",
                            Rule::ALL.map(Rule::id).join(", ")
                        ),
                    );
                    continue;
                };
                let mut used = false;
                for finding in report.findings.iter_mut().filter(|f| {
                    f.rule == rule
                        && f.plugin == plugin_name
                        && f.tool.as_deref() == Some(tool_name)
                }) {
                    finding.allowed = Some(reason.clone());
                    used = true;
                }
                if !used && !refused.contains(&plugin_name) {
                    extra.push(
                        Rule::AllowUnused,
                        plugin_name,
                        Some(tool_name),
                        None,
                        format!("lint_allow accepts `{id}`, but the tool has no such finding"),
                        format!("remove `{id}` from the tool's lint_allow"),
                    );
                }
            }
        }
    }
    report.findings.extend(extra.list);
}
