//! What a plugin instance's `Store` holds, and the host side of the imports
//! the contract gives a plugin (`config`, `log`, `state`, WASI, wasi:http).
//!
//! Everything here is per instance. Nothing a plugin can call reaches past
//! it: WASI is built with no environment, arguments, sockets or name lookup
//! and no directories beyond the manifest's `files` (opened once, at load),
//! the plugin's stdout and stderr go to the host log, and wasi:http goes
//! through the network gate.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::{Level, toolhost::plugin};
use super::files::{InstanceFiles, OpenFiles};
use super::places::Places;
use crate::gate::{Egress, Gate};
use crate::manifest::{FileMode, Limits, PluginName};
use crate::redact::Redactor;
use crate::store::{StateError, Store};

/// Guest-controlled: one log line or output chunk is cut beyond this.
const LOG_LINE_BYTES: usize = 2_048;
/// A component made from Rust has one or two memories and a few tables;
/// these bounds leave room for composed components while stopping one from
/// multiplying its memory limit. Memory itself is limited per instance.
const MEMORIES: usize = 8;
const TABLES: usize = 64;
/// Host-side handles one instance may hold at once (open files and
/// directories, streams, pollables, outgoing requests and their headers)
/// are host memory that the plugin's memory limit does not count, and
/// wasmtime's own bound is a million. Those a plugin may make without any
/// other bound hold a few KiB, [`HANDLE_BYTES`] (a file stream's read
/// buffer; a response's head, which the gate bounds), or at most about
/// twice that (a request being built: its path, its headers,
/// [`MAX_HEADER_BYTES`] as counted, its method and authority,
/// `requests.rs`), so an instance gets one handle per `HANDLE_BYTES` of its
/// memory limit: what its handles make the host hold stays within about
/// twice what its own memory may take. A write into a file stream is not
/// bounded this way (security.md). At least
/// [`MIN_HANDLES`], so that a small plugin can still open files and make
/// requests, and at most [`MAX_HANDLES`]. Past it the import fails and the
/// call ends as a trap.
fn max_handles(limits: &Limits) -> usize {
    usize::try_from(limits.memory_bytes / HANDLE_BYTES)
        .unwrap_or(usize::MAX)
        .clamp(MIN_HANDLES, MAX_HANDLES)
}
/// wasmtime-wasi's largest read into one file stream.
const HANDLE_BYTES: u64 = 64 << 10;
const MIN_HANDLES: usize = 256;
const MAX_HANDLES: usize = 4_096;
/// Bytes of one set of HTTP headers a plugin builds (wasmtime-wasi-http's
/// default is 128 KiB). A response's headers, and copies made of them, are
/// not held to it; the gate reads at most 64 KiB of a response's head.
const MAX_HEADER_BYTES: usize = 32 << 10;

/// What every instance of one plugin shares: its name, manifest config and
/// limits, and the store behind its `state` import.
pub struct PluginShared {
    pub name: PluginName,
    pub config: BTreeMap<String, String>,
    pub limits: Limits,
    pub store: Arc<dyn Store>,
    /// Where its outbound HTTP may go.
    pub gate: Arc<Gate>,
    /// The host directories it may see.
    pub files: Vec<GrantedDir>,
    /// The files its instances hold open (see `files.rs`).
    pub open_files: OpenFiles,
    /// The outgoing HTTP bodies its instances hold (see `bodies.rs`).
    pub outgoing_bodies: Places,
}

/// A `files` grant's directory, opened once when the catalog loads. Each
/// instance's preopen opens this very directory again through
/// `/proc/self/fd` (wasmtime-wasi takes a path, not a handle), so renaming
/// the path or putting a symlink in its place after the load's checks
/// changes nothing a plugin sees.
pub struct GrantedDir {
    dir: cap_std::fs::Dir,
    /// Where the directory is, read back from the open handle: what the
    /// load's overlap checks compare.
    pub real: PathBuf,
    /// Where the plugin sees it, such as `/kb`.
    pub guest: String,
    /// Read-only, or read and write.
    pub mode: FileMode,
}

impl GrantedDir {
    /// Opens `host` (symlinks on the way are followed, as in any manifest
    /// path); fails if it is not a directory that can be opened.
    pub fn open(host: &Path, guest: &str, mode: FileMode) -> std::io::Result<GrantedDir> {
        let dir = cap_std::fs::Dir::open_ambient_dir(host, cap_std::ambient_authority())?;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
        Ok(GrantedDir {
            dir,
            real,
            guest: guest.to_string(),
            mode,
        })
    }

    /// The filesystem (device) the directory is on, if it can be read.
    pub fn device(&self) -> Option<u64> {
        use cap_std::fs::MetadataExt;
        self.dir.dir_metadata().ok().map(|m| m.dev())
    }

    /// A path that opens the directory held, wherever it is now.
    fn held(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
    }
}

/// The `Store` data of one plugin instance.
pub struct PluginState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    pub(super) egress: Egress,
    table: ResourceTable,
    pub(super) shared: Arc<PluginShared>,
    log: LogSink,
    /// The files this instance holds places for among its plugin's.
    pub(super) held_files: InstanceFiles,
    /// Whether a refused open has been logged for this instance (once is
    /// enough, and a plugin must not be able to fill the log).
    files_refusal_logged: bool,
    /// A refused `read-directory` was logged for this instance.
    listings_refusal_logged: bool,
    /// Set when the guest asked for more memory than its limit allows, so a
    /// resulting trap is reported as `out_of_memory`, not as a crash.
    pub(super) memory_exceeded: bool,
    /// Bytes of linear memory across all of the instance's memories: the
    /// limit is per instance, not per memory.
    memory_bytes: u64,
    /// When the running call must end; checked at every epoch tick.
    pub(super) deadline: Instant,
    /// Whether the engine meters fuel, so each call must be refuelled.
    pub(super) fuel_metered: bool,
}

impl PluginState {
    /// Fails only if a granted directory cannot be opened.
    pub fn new(shared: Arc<PluginShared>) -> Result<PluginState, String> {
        let log = LogSink {
            plugin: shared.name.clone(),
            budget: Arc::new(AtomicU32::new(shared.limits.log_lines)),
            limit: shared.limits.log_lines,
            redactor: shared.gate.redactor().clone(),
        };
        // Deny by default: the builder grants nothing we do not add here, and
        // we add only the two output streams and the manifest's directories.
        // Its defaults already refuse every socket address and name lookup;
        // saying so keeps it that way.
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(log.clone())
            .stderr(log.clone())
            .allow_ip_name_lookup(false)
            .allow_tcp(false)
            .allow_udp(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        // wasmtime-wasi opens each directory as a cap-std `Dir` and resolves
        // every guest path beneath it, so `..`, absolute paths and symlinks
        // cannot lead out of it.
        for grant in &shared.files {
            let perms = match grant.mode {
                FileMode::Ro => FsPerms::ReadOnly,
                FileMode::Rw => FsPerms::ReadWrite,
            };
            wasi.preopened_dir(grant.held(), &grant.guest, perms)
                .map_err(|e| format!("cannot open {}: {e:#}", grant.real.display()))?;
        }
        let wasi = wasi.build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(max_handles(&shared.limits));
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(MAX_HEADER_BYTES);
        Ok(PluginState {
            wasi,
            http,
            egress: Egress::new(shared.gate.clone()),
            table,
            shared,
            log,
            held_files: InstanceFiles::default(),
            files_refusal_logged: false,
            listings_refusal_logged: false,
            memory_exceeded: false,
            memory_bytes: 0,
            deadline: Instant::now(),
            fuel_metered: false,
        })
    }

    /// Logs, once per instance, that an open was refused because the
    /// plugin holds all its open files.
    pub(super) fn files_refused(&mut self) {
        if !std::mem::replace(&mut self.files_refusal_logged, true) {
            tracing::warn!(
                plugin = %self.shared.name,
                "the plugin holds {} open files over its instances; an open was refused with `quota`",
                self.shared.open_files.places()
            );
        }
    }

    /// Logs, once per instance, that a `read-directory` was refused because
    /// the plugin holds all its listings.
    pub(super) fn listings_refused(&mut self) {
        if !std::mem::replace(&mut self.listings_refusal_logged, true) {
            tracing::warn!(
                plugin = %self.shared.name,
                "the plugin holds {} directory listings over its instances; a read-directory was refused with `quota`",
                super::files::LISTINGS
            );
        }
    }

    pub(super) fn shared_limits(&self) -> Limits {
        self.shared.limits
    }

    /// Readies the state for one call that must end by `deadline`.
    pub(super) fn begin_call(&mut self, deadline: Instant) {
        self.deadline = deadline;
        self.memory_exceeded = false;
        self.log.budget.store(self.log.limit, Ordering::Relaxed);
    }
}

impl Drop for PluginState {
    /// The instance's table closes what it still holds; its places are
    /// given back with it.
    fn drop(&mut self) {
        let table = std::mem::take(&mut self.table);
        self.held_files.close_all(table, &self.shared);
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

impl ResourceLimiter for PluginState {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.memory_bytes.saturating_sub(current as u64) + desired as u64;
        if total > self.shared.limits.memory_bytes {
            self.memory_exceeded = true;
            return Ok(false);
        }
        self.memory_bytes = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= self.shared.limits.table_elements as usize)
    }

    fn instances(&self) -> usize {
        self.shared.limits.instances as usize
    }

    fn memories(&self) -> usize {
        MEMORIES
    }

    fn tables(&self) -> usize {
        TABLES
    }
}

impl plugin::types::Host for PluginState {}

impl plugin::config::Host for PluginState {
    fn get(&mut self, key: String) -> Option<String> {
        self.shared.config.get(&key).cloned()
    }
}

impl plugin::log::Host for PluginState {
    fn write(&mut self, level: Level, message: String) {
        self.log.emit(level, message.as_bytes());
    }
}

/// The plugin's name is the scope of every key: the guest names keys, the
/// host decides whose they are, so no plugin can reach another's.
impl plugin::state::Host for PluginState {
    async fn get(&mut self, key: String) -> Result<Option<String>, plugin::state::StateError> {
        let shared = &self.shared;
        shared
            .store
            .state_get(shared.name.as_str(), &key)
            .await
            .map_err(wit_error)
    }

    async fn set(&mut self, key: String, value: String) -> Result<(), plugin::state::StateError> {
        let shared = &self.shared;
        shared
            .store
            .state_set(
                shared.name.as_str(),
                &key,
                &value,
                shared.limits.state_bytes,
            )
            .await
            .map_err(wit_error)
    }

    async fn compare_and_set(
        &mut self,
        key: String,
        expected: Option<String>,
        value: String,
    ) -> Result<bool, plugin::state::StateError> {
        let shared = &self.shared;
        shared
            .store
            .state_compare_and_set(
                shared.name.as_str(),
                &key,
                expected.as_deref(),
                &value,
                shared.limits.state_bytes,
            )
            .await
            .map_err(wit_error)
    }

    async fn delete(&mut self, key: String) -> Result<bool, plugin::state::StateError> {
        let shared = &self.shared;
        shared
            .store
            .state_delete(shared.name.as_str(), &key)
            .await
            .map_err(wit_error)
    }

    async fn list_keys(
        &mut self,
        prefix: String,
    ) -> Result<Vec<String>, plugin::state::StateError> {
        let shared = &self.shared;
        shared
            .store
            .state_list(shared.name.as_str(), &prefix)
            .await
            .map_err(wit_error)
    }
}

fn wit_error(error: StateError) -> plugin::state::StateError {
    match error {
        StateError::InvalidKey => plugin::state::StateError::InvalidKey,
        StateError::QuotaExceeded => plugin::state::StateError::QuotaExceeded,
        StateError::Unavailable(detail) => {
            tracing::warn!("plugin state store: {detail}");
            // The guest gets no internals of the host's database.
            plugin::state::StateError::Unavailable("the host's state store failed".into())
        }
    }
}

/// Where a plugin's log lines and stdout/stderr go: the host log, tagged
/// with the plugin's name, within a per-call line budget.
#[derive(Clone)]
struct LogSink {
    plugin: PluginName,
    budget: Arc<AtomicU32>,
    limit: u32,
    /// The host's, from the plugin's gate: empty where no secret was read.
    redactor: Arc<Redactor>,
}

impl LogSink {
    fn emit(&self, level: Level, bytes: &[u8]) {
        let left = self
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        match left {
            Ok(1) => {
                tracing::warn!(plugin = %self.plugin, "log budget of {} lines for this call used up; further lines dropped", self.limit);
            }
            Ok(_) => {}
            Err(_) => return,
        }
        // Redacted before it is cut, so a cut cannot split a secret; only as
        // much is read as the cut can keep.
        let bytes = self.redactor.bytes_head(bytes, LOG_LINE_BYTES);
        let cut = &bytes[..bytes.len().min(LOG_LINE_BYTES)];
        let text = String::from_utf8_lossy(cut);
        let text = text.trim_end();
        let plugin = self.plugin.as_str();
        match level {
            Level::Debug => tracing::debug!(target: "plugin", plugin, "{text}"),
            Level::Info => tracing::info!(target: "plugin", plugin, "{text}"),
            Level::Warn => tracing::warn!(target: "plugin", plugin, "{text}"),
            Level::Error => tracing::error!(target: "plugin", plugin, "{text}"),
        }
    }
}

impl IsTerminal for LogSink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogSink {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for LogSink {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if !buf.iter().all(u8::is_ascii_whitespace) {
            self.emit(Level::Info, buf);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_gets_a_handle_per_64_kib_of_its_memory_limit() {
        let handles = |mib: u64| {
            max_handles(&Limits {
                memory_bytes: mib << 20,
                ..Limits::default()
            })
        };
        assert_eq!(handles(64), 1_024);
        assert_eq!(handles(160), 2_560);
        assert_eq!(handles(1), 256);
        assert_eq!(handles(16), 256);
        assert_eq!(handles(256), 4_096);
        assert_eq!(handles(4_096), 4_096);
    }
}
