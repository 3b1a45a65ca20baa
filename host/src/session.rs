//! A session: one MCP client connection (or one stateless request), and the
//! plugin instances it owns when plugins run with `instance = "session"`.
//!
//! Instances live exactly as long as the session: dropping the session drops
//! them, so no later session can see their state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::sandbox::PluginInstance;

/// The instance slot of one plugin in one session. Calls into the same
/// instance are serialised by its lock; `None` means "create on next call".
pub type InstanceSlot = Arc<tokio::sync::Mutex<Option<PluginInstance>>>;

/// One session's identity and per-session plugin instances.
pub struct Session {
    id: String,
    slots: Mutex<HashMap<usize, InstanceSlot>>,
}

impl Session {
    /// A new session with a random id and no instances yet.
    pub fn new() -> Session {
        Session {
            id: uuid::Uuid::new_v4().to_string(),
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The opaque id plugins see in their call context.
    pub fn id(&self) -> &str {
        &self.id
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

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}
