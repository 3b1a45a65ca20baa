//! A session: one MCP client connection (or one stateless request), and the
//! plugin instances it owns when plugins run with `instance = "session"`.
//!
//! Instances live exactly as long as the session: dropping the session drops
//! them, so no later session can see their state. A session that was opened
//! in the audit trail is closed there when it is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

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

/// Who is on the other end of a session, as its client said at
/// `initialize` (the host cannot check it), and the task it is bound to.
#[derive(Debug, Clone, Default)]
pub struct Peer {
    pub client: Option<String>,
    pub client_version: Option<String>,
    pub protocol: Option<String>,
    pub task: Option<String>,
}

/// One session's identity and per-session plugin instances.
pub struct Session {
    id: Arc<str>,
    transport: Transport,
    slots: Mutex<HashMap<usize, InstanceSlot>>,
    calls: AtomicU64,
    started: Instant,
    /// Milliseconds from `started` to the latest call.
    last_call_ms: AtomicU64,
    /// Set once the session's opening is recorded; its closing is recorded
    /// on drop.
    opened: OnceLock<(Audit, Peer)>,
}

/// A live session as the console lists it.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub id: String,
    pub transport: Transport,
    pub peer: Peer,
    pub calls: u64,
    pub age: Duration,
    pub idle: Duration,
}

/// The opened sessions of this process, for the console. Entries are weak:
/// a session ends when its transport drops it, and the list forgets it.
#[derive(Default)]
pub struct LiveSessions {
    sessions: Mutex<HashMap<Arc<str>, Weak<Session>>>,
}

impl LiveSessions {
    pub fn add(&self, session: &Arc<Session>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.retain(|_, s| s.strong_count() > 0);
        sessions.insert(session.id.clone(), Arc::downgrade(session));
    }

    /// The live ones, oldest first.
    pub fn list(&self) -> Vec<SessionView> {
        let live: Vec<Arc<Session>> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.retain(|_, s| s.strong_count() > 0);
            sessions.values().filter_map(Weak::upgrade).collect()
        };
        let mut views: Vec<SessionView> = live.iter().map(|s| s.view()).collect();
        views.sort_by_key(|v| std::cmp::Reverse(v.age));
        views
    }

    /// How many are live, by transport name.
    pub fn count_by_transport(&self) -> HashMap<&'static str, usize> {
        let mut counts = HashMap::new();
        for view in self.list() {
            *counts.entry(view.transport.as_str()).or_default() += 1;
        }
        counts
    }
}

impl Session {
    /// A new session with a random id and no instances yet.
    pub fn new(transport: Transport) -> Session {
        Session {
            id: uuid::Uuid::new_v4().to_string().into(),
            transport,
            slots: Mutex::new(HashMap::new()),
            calls: AtomicU64::new(0),
            started: Instant::now(),
            last_call_ms: AtomicU64::new(0),
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
        let ms = self.started.elapsed().as_millis();
        self.last_call_ms
            .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Records the session's opening (once); its closing follows on drop.
    /// Who is on the other end is asked only the first time: callers may
    /// ask on every call. Returns whether this call recorded it.
    pub fn record_opened(&self, audit: &Audit, peer: impl FnOnce() -> Peer) -> bool {
        if self.opened.get().is_some() {
            return false;
        }
        let peer = peer();
        if self.opened.set((audit.clone(), peer.clone())).is_err() {
            return false;
        }
        audit.record(Event::SessionOpened {
            session: self.id.to_string(),
            transport: self.transport.as_str().to_string(),
            client: peer.client,
            client_version: peer.client_version,
            protocol: peer.protocol,
            task: peer.task,
        });
        true
    }

    /// Who asked, in words, for an approval's record: the session and the
    /// client as it names itself.
    pub fn asker(&self) -> String {
        let short: String = self.id.chars().take(8).collect();
        match self.opened.get().and_then(|(_, p)| p.client.as_deref()) {
            Some(client) => {
                let client: String = client
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(100)
                    .collect();
                format!(
                    "{} session {short}, client-reported {client:?}",
                    self.transport.as_str()
                )
            }
            None => format!("{} session {short}", self.transport.as_str()),
        }
    }

    /// What the console shows of this session.
    pub fn view(&self) -> SessionView {
        let age = self.started.elapsed();
        let last = Duration::from_millis(self.last_call_ms.load(Ordering::Relaxed));
        SessionView {
            id: self.id.to_string(),
            transport: self.transport,
            peer: self
                .opened
                .get()
                .map(|(_, p)| p.clone())
                .unwrap_or_default(),
            calls: self.calls.load(Ordering::Relaxed),
            age,
            idle: age.saturating_sub(last),
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
        if let Some((audit, _)) = self.opened.get() {
            audit.record(Event::SessionClosed {
                session: self.id.to_string(),
                transport: self.transport.as_str().to_string(),
                calls: self.calls.load(Ordering::Relaxed),
            });
        }
    }
}
