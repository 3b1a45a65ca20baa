//! Policy: whether a call of a known tool may run in this session.
//!
//! Read tools always may. Write and destructive tools need a grant from the
//! task the process serves; destructive ones also need a human's approval,
//! which this version of the host cannot ask for yet, so they are refused.
//! This module decides; it does not run anything.

use std::collections::BTreeSet;

use crate::manifest::{Manifest, RiskClass, ToolName};

/// The task the serving process was started for, and what it may do.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    task: Option<String>,
    tools: BTreeSet<ToolName>,
}

/// Why a call may not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// The tool changes things and the task has no grant for it.
    NotGranted,
    /// The tool is destructive and no human approved this call.
    ApprovalRequired,
}

/// A grant the operator asked for that cannot be given.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    #[error("--grant needs --task: a grant belongs to a task (e.g. --task TICKET-42 --grant {0})")]
    NoTask(String),
    #[error("--task must be 1 to 128 visible characters without spaces, got {0:?}")]
    BadTaskId(String),
    #[error("cannot grant `{0}`: the manifest declares no such tool")]
    UnknownTool(String),
    #[error("cannot grant `{0}`: it is a read tool, which every session may use without a grant")]
    ReadTool(String),
}

impl Grants {
    /// Builds the grants of `--task ID --grant TOOL …`, checking each tool
    /// against the manifest.
    pub fn new(
        manifest: &Manifest,
        task: Option<String>,
        tools: &[String],
    ) -> Result<Grants, GrantError> {
        if let Some(id) = &task {
            let visible = id.chars().all(|c| c.is_ascii_graphic());
            if id.is_empty() || id.len() > 128 || !visible {
                return Err(GrantError::BadTaskId(id.clone()));
            }
        } else if let Some(first) = tools.first() {
            return Err(GrantError::NoTask(first.clone()));
        }
        let mut granted = BTreeSet::new();
        for name in tools {
            let Some((_, decl)) = manifest.tool(name) else {
                return Err(GrantError::UnknownTool(name.clone()));
            };
            if decl.risk == RiskClass::Read {
                return Err(GrantError::ReadTool(name.clone()));
            }
            granted.insert(decl.name.clone());
        }
        Ok(Grants {
            task,
            tools: granted,
        })
    }

    /// The task id, if the process serves one.
    pub fn task(&self) -> Option<&str> {
        self.task.as_deref()
    }

    /// Decides whether `tool` of class `risk` may run now.
    pub fn admit(&self, tool: &ToolName, risk: RiskClass) -> Result<(), Denial> {
        match risk {
            RiskClass::Read => Ok(()),
            RiskClass::Write if self.tools.contains(tool) => Ok(()),
            RiskClass::Destructive if self.tools.contains(tool) => Err(Denial::ApprovalRequired),
            RiskClass::Write | RiskClass::Destructive => Err(Denial::NotGranted),
        }
    }
}
