//! A session: one MCP client connection (or one stateless request), and the
//! plugin instances it owns when plugins run with `instance = "session"`.
//!
//! Instances live exactly as long as the session: dropping the session drops
//! them, so no later session can see their state. A session that was opened
//! in the audit trail is closed there when it is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::audit::{Audit, Event};
use crate::queue::Tenant;
use crate::sandbox::PluginInstance;

/// The instance slot of one plugin in one session. Calls into the same
/// instance are serialised by its lock; `None` means "create on next call".
pub type InstanceSlot = Arc<tokio::sync::Mutex<Option<PluginInstance>>>;

/// How a session reaches the host, as the audit trail names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    /// A Streamable HTTP session (`Mcp-Session-Id`).
    Http,
    /// Streamable HTTP requests outside any session (2026-07-28).
    HttpStateless,
    /// One call from `toolhost call`.
    Cli,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
            Transport::HttpStateless => "http-stateless",
            Transport::Cli => "cli",
        }
    }
}

/// One session's identity and per-session plugin instances.
pub struct Session {
    id: Arc<str>,
    transport: Transport,
    slots: Mutex<HashMap<usize, InstanceSlot>>,
    calls: AtomicU64,
    /// Set once the session's opening is recorded; its closing is recorded
    /// on drop.
    opened: OnceLock<Audit>,
}

impl Session {
    /// A new session with a random id and no instances yet.
    pub fn new(transport: Transport) -> Session {
        Session {
            id: uuid::Uuid::new_v4().to_string().into(),
            transport,
            slots: Mutex::new(HashMap::new()),
            calls: AtomicU64::new(0),
            opened: OnceLock::new(),
        }
    }

    /// The opaque id plugins see in their call context.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Whom the session's calls count against in a plugin's fair share
    /// (`queue`): the session itself, and its task. Stateless HTTP requests
    /// each make a session of their own, so they are counted together:
    /// those of one task as one session, anonymous ones as another.
    pub fn tenant(&self, task: Option<&str>) -> Tenant {
        let session = match (self.transport, task) {
            (Transport::HttpStateless, Some(task)) => format!("stateless:{task}").into(),
            (Transport::HttpStateless, None) => "stateless".into(),
            _ => self.id.clone(),
        };
        Tenant {
            session,
            task: task.map(Into::into),
        }
    }

    /// Counts a call for the session's closing record.
    pub fn count_call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Records the session's opening (once); its closing follows on drop.
    /// The record is built only the first time: callers may ask on every
    /// call.
    pub fn record_opened(&self, audit: &Audit, event: impl FnOnce() -> Event) {
        if self.opened.set(audit.clone()).is_ok() {
            audit.record(event());
        }
    }

    /// The slot for the plugin at catalog index `plugin`.
    pub fn slot(&self, plugin: usize) -> InstanceSlot {
        let mut slots = self
            .slots
            .lock()
            .expect("session slot map is never poisoned");
        slots.entry(plugin).or_default().clone()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(audit) = self.opened.get() {
            audit.record(Event::SessionClosed {
                session: self.id.to_string(),
                transport: self.transport.as_str().to_string(),
                calls: self.calls.load(Ordering::Relaxed),
            });
        }
    }
}
