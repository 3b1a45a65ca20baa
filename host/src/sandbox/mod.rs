//! The sandbox: one wasmtime engine, plugins compiled once and pre-linked,
//! and instances that run one call at a time under the plugin's limits.
//!
//! This module knows wasmtime; nothing above it does. It does not decide
//! whether a call may run (that is policy) and does not know about MCP.

mod bindings;
mod bodies;
mod cache;
mod compiler;
mod files;
mod places;
mod requests;
mod state;

pub use bindings::{CallContext, ToolError, ToolSpec};
pub use bodies::OUTGOING_BODIES;
pub use cache::{CacheError, ComponentCache, Described, DescribedTool, FileStamp, Origin};
pub use compiler::{
    COMMAND as COMPILE_COMMAND, CompileFailure, CompilerProcess, EXIT_NOT_COMPILED,
    arguments as compile_arguments, compile_component,
};
pub use files::{LISTINGS, OPEN_FILES, OpenFiles};
pub use places::Places;
pub use state::{GrantedDir, PluginShared};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::manifest::{Limits, Manifest, Sha256Digest};
use bindings::{Plugin, PluginPre};
use cache::EngineKey;
use state::PluginState;
use wasmtime::component::{Component, Linker, LinkerInstance};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolConcurrencyLimitError, PoolingAllocationConfig,
    Store, Trap, UpdateDeadline,
};

/// How often the deadline of running calls is checked; also the longest a
/// busy guest runs before it yields to other tasks.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The epoch check only runs while guest code runs. A guest waiting inside
/// the host (a WASI sleep or poll) is stopped by a plain timer instead, a
/// little later so that busy guests are stopped by the cleaner epoch trap.
const WAIT_GRACE: Duration = Duration::from_millis(2 * EPOCH_TICK.as_millis() as u64);

/// Why a plugin call did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the plugin did not finish within {0:?}")]
    Timeout(Duration),
    #[error("the plugin needed more than its memory limit of {} MiB", .0 >> 20)]
    OutOfMemory(u64),
    #[error("the plugin used up its fuel of {0} units for one call")]
    OutOfFuel(u64),
    #[error("the plugin crashed: {0}")]
    Trap(String),
    #[error("the component could not be compiled or linked: {0}")]
    Load(String),
    #[error("the host runs its most instances at once ({0})")]
    Busy(String),
}

/// Live plugin instances the host keeps at most, across all plugins and
/// sessions; a call that would need one more gets `busy`.
pub const MAX_INSTANCES: u32 = 1_000;
/// Per instance, room in the pool for a component's parts: a Rust plugin
/// has a few core instances, one or two memories and a few tables.
const CORE_INSTANCES_PER_INSTANCE: u32 = 8;
const MEMORIES_PER_INSTANCE: u32 = 2;
const TABLES_PER_INSTANCE: u32 = 4;

/// What the one engine must be built for, taken from the whole manifest:
/// the pool's slots fit the largest memory limit, and fuel metering (which
/// slows every call a little) is compiled in only when a plugin asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineSettings {
    pub largest_memory: u64,
    pub wasm_stack: usize,
    pub fuel: bool,
}

impl Default for EngineSettings {
    /// What a manifest without plugins or `[host]` settings gives.
    fn default() -> EngineSettings {
        EngineSettings {
            largest_memory: Limits::default().memory_bytes,
            wasm_stack: (crate::manifest::DEFAULT_WASM_STACK_KIB as usize) << 10,
            fuel: false,
        }
    }
}

impl EngineSettings {
    pub fn of(manifest: &Manifest) -> EngineSettings {
        EngineSettings {
            largest_memory: manifest
                .plugins
                .iter()
                .map(|p| p.limits.memory_bytes)
                .max()
                .unwrap_or(Limits::default().memory_bytes),
            wasm_stack: manifest.wasm_stack_bytes,
            fuel: manifest.plugins.iter().any(|p| p.limits.fuel.is_some()),
        }
    }
}

/// Takes over `imports` of `interface` in `linker` (`files.rs`, `bodies.rs`,
/// `requests.rs`): `define` defines them again, shadowing wasmtime-wasi's.
/// Each must already be defined, which defining it without shadowing tells
/// (that fails only if it is there): a wasmtime-wasi that named the
/// interface's version otherwise would leave `what` unchecked, so then the
/// engine is not made and no plugin loads.
fn take_over(
    linker: &mut Linker<PluginState>,
    interface: &str,
    imports: &[&str],
    what: &str,
    define: impl FnOnce(&mut LinkerInstance<'_, PluginState>) -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    for import in imports {
        let probe = linker
            .instance(interface)?
            .func_wrap(import, |_, (): ()| Ok(()));
        if probe.is_ok() {
            wasmtime::bail!(
                "WASI's {interface}#{import} is not defined, so {what} cannot be checked"
            );
        }
    }
    linker.allow_shadowing(true);
    let defined = define(&mut linker.instance(interface)?);
    linker.allow_shadowing(false);
    defined
}

/// The wasi:http interface whose imports `bodies.rs` and `requests.rs` take
/// over, as wasmtime-wasi-http names it; taking over fails if the linker has
/// no such interface.
const HTTP_TYPES: &str = "wasi:http/types@0.2.12";

/// The engine and linker every plugin shares.
#[derive(Clone)]
pub struct Sandbox {
    settings: EngineSettings,
    /// The engine with its instance pool, and the linker: made at the first
    /// compile or instance, not at start. Reserving the pool (a fiber stack
    /// with its guard page for every instance the host may run) was the
    /// largest part of a warm start, and a `tools/list` answered from what
    /// the cache kept needs none of it.
    runtime: Arc<Mutex<Option<Runtime>>>,
    /// The engine configuration's part of the cache's keys, known without
    /// the pool.
    key: EngineKey,
    cache: Option<ComponentCache>,
    /// Compiles components for the cache in a process of its own (see
    /// `compiler.rs`); without it, or without a cache, they are compiled
    /// in this one.
    compiler: Option<CompilerProcess>,
    /// Where the cache was asked to be when it could not be used: no plugin
    /// may be granted it all the same (a plugin could plant native code
    /// there for a later start whose cache works).
    unusable_cache: Option<PathBuf>,
    /// The engine meters fuel (some plugin sets `limits.fuel`).
    fuel: bool,
    /// Files each plugin may hold open at once (see `files.rs`).
    open_files: u32,
    /// Components by digest: several plugins built from one component are
    /// compiled (or loaded) once, the others waiting for the first.
    compiled: Arc<Mutex<HashMap<Sha256Digest, Arc<Compiled>>>>,
}

#[derive(Clone)]
struct Runtime {
    engine: Engine,
    linker: Arc<Linker<PluginState>>,
}

type Compiled = OnceLock<Result<(Component, Origin), String>>;

/// Where an engine's instances come from: the pool the host runs with, or
/// plain allocations for the probe engine that only answers what the
/// configuration is.
#[derive(Clone, Copy, PartialEq)]
enum Allocation {
    Pool,
    OnDemand,
}

fn engine_config(settings: &EngineSettings, allocation: Allocation) -> Config {
    let mut config = Config::new();
    if allocation == Allocation::Pool {
        // Instances come from a pool reserved once, so a fresh instance
        // costs a few microseconds instead of fresh mappings; a slot keeps
        // a little memory resident so the next instance does not fault it
        // in again.
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(MAX_INSTANCES)
            .total_core_instances(MAX_INSTANCES * CORE_INSTANCES_PER_INSTANCE)
            .total_memories(MAX_INSTANCES * MEMORIES_PER_INSTANCE)
            .total_tables(MAX_INSTANCES * TABLES_PER_INSTANCE)
            // A store keeps the async stack of its last call for the next,
            // so every live instance holds one.
            .total_stacks(MAX_INSTANCES)
            .max_memories_per_module(MEMORIES_PER_INSTANCE)
            .max_tables_per_module(TABLES_PER_INSTANCE)
            .table_elements(Limits::MAX_TABLE_ELEMENTS as usize)
            .max_memory_size(usize::try_from(settings.largest_memory).unwrap_or(usize::MAX))
            .linear_memory_keep_resident(64 << 10)
            .table_keep_resident(16 << 10)
            // Not wasmtime's `pagemap_scan`, though it made stateless calls
            // 0.5-0.7x the CPU (docs/performance.md): up to 48.0.10 it
            // restores only the written pages that are present, so one
            // swapped out or being migrated when the slot is freed reaches
            // the next tenant (shown with swap, docs/performance.md).
            // 48.0.11 also restores those; turn it on with that release.
            .pagemap_scan(wasmtime::Enabled::No);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    // Not wasmtime's default, which reads WASMTIME_BACKTRACE_DETAILS: the
    // configuration, and with it the cache's key, depends on nothing but
    // the manifest and the binary (plugins carry no debug info anyway).
    config.wasm_backtrace_details(wasmtime::WasmBacktraceDetails::Disable);
    config.epoch_interruption(true);
    config.max_wasm_stack(settings.wasm_stack);
    config.consume_fuel(settings.fuel);
    // The component-model async machinery costs on every call and we use
    // no WASIp3 or async-lifted exports.
    config.concurrency_support(false);
    config
}

impl Runtime {
    /// The engine with its pool, the linker with WASI and the plugin world,
    /// and the epoch ticker that enforces deadlines.
    fn new(settings: &EngineSettings) -> Result<Runtime, String> {
        let started = Instant::now();
        let load_error = |e: wasmtime::Error| format!("{e:#}");
        let engine = Engine::new(&engine_config(settings, Allocation::Pool)).map_err(load_error)?;
        let mut linker = Linker::<PluginState>::new(&engine);
        // A std guest imports the WASI p2 interfaces even when it uses none of
        // them; the context behind them grants nothing (see state.rs).
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(load_error)?;
        // Open files are counted per plugin, not only per instance.
        files::count_in(&mut linker).map_err(load_error)?;
        // Outbound HTTP, every request through the network gate's hooks.
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(load_error)?;
        // So are the outgoing bodies waiting to be sent.
        bodies::count_in(&mut linker).map_err(load_error)?;
        // And what a request it builds may hold before it is sent.
        requests::bound_in(&mut linker).map_err(load_error)?;
        Plugin::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |s| s)
            .map_err(load_error)?;

        let ticker = engine.weak();
        std::thread::Builder::new()
            .name("epoch-ticker".into())
            .spawn(move || {
                while let Some(engine) = ticker.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(|e| format!("cannot start the epoch ticker: {e}"))?;
        tracing::info!(
            "engine and instance pool ready ({} ms)",
            started.elapsed().as_millis()
        );
        Ok(Runtime {
            engine,
            linker: Arc::new(linker),
        })
    }
}

impl Sandbox {
    /// Checks the engine configuration, unless this build of the host kept
    /// the engine's key for these settings at an earlier start (a warm start
    /// makes no engine at all); the engine itself is made when first needed.
    /// With a cache, compiled components are reused across restarts.
    pub fn new(
        cache: Option<ComponentCache>,
        settings: EngineSettings,
    ) -> Result<Sandbox, SandboxError> {
        let key = match cache.as_ref().and_then(|c| EngineKey::kept(c, &settings)) {
            Some(key) => key,
            None => {
                // An engine without the pool costs a fraction of a
                // millisecond and answers what the configuration is; the
                // pool's own settings are checked when the real engine is
                // made.
                let probe = Engine::new(&engine_config(&settings, Allocation::OnDemand))
                    .map_err(|e| SandboxError::Load(format!("{e:#}")))?;
                let key = EngineKey::of(&probe);
                if let Some(cache) = &cache {
                    key.keep(cache, &settings);
                }
                key
            }
        };
        Ok(Sandbox {
            settings,
            runtime: Arc::default(),
            key,
            unusable_cache: None,
            cache,
            compiler: None,
            fuel: settings.fuel,
            open_files: OPEN_FILES,
            compiled: Arc::default(),
        })
    }

    /// Lets each plugin hold at most `per_plugin` files open (never more
    /// than [`OPEN_FILES`]): what the process's limit on open files leaves
    /// beside the host's own needs, shared among the plugins with `files`
    /// grants, so that no plugin's opens can take the descriptors its
    /// connections, trail and store need.
    pub fn hold_open_files_to(&mut self, per_plugin: u32) {
        self.open_files = per_plugin.min(OPEN_FILES);
    }

    /// A fresh count of one plugin's open files, with its places.
    pub fn open_files(&self) -> OpenFiles {
        OpenFiles::new(self.open_files)
    }

    /// The engine and linker, made by the first caller; a failure is not
    /// kept, so a later call tries again.
    fn runtime(&self) -> Result<Runtime, String> {
        let mut runtime = self.runtime.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ready) = &*runtime {
            return Ok(ready.clone());
        }
        let made = Runtime::new(&self.settings)?;
        // A key kept by an earlier start on a CPU with other features names
        // code this engine refuses (and compiles afresh) or runs without
        // the features it could use; the next start takes this one.
        let key = EngineKey::of(&made.engine);
        if key != self.key {
            tracing::warn!(
                "the engine's key kept in the component cache does not fit this machine; kept the new one for the next start"
            );
            if let Some(cache) = &self.cache {
                key.keep(cache, &self.settings);
            }
        }
        *runtime = Some(made.clone());
        Ok(made)
    }

    /// Compiles a component (or loads its cached native code) and pre-links
    /// it, so that each later instance costs microseconds instead of a
    /// compile. CPU-heavy: run it off the async runtime.
    pub fn prepare(
        &self,
        bytes: &[u8],
        digest: &Sha256Digest,
        shared: Arc<PluginShared>,
    ) -> Result<(PreparedPlugin, Origin), SandboxError> {
        let load_error = |e: wasmtime::Error| SandboxError::Load(format!("{e:#}"));
        let (component, origin) = self.compile(bytes, digest)?;
        let pre = self
            .runtime()
            .map_err(SandboxError::Load)?
            .linker
            .instantiate_pre(&component)
            .and_then(PluginPre::new)
            .map_err(load_error)?;
        let prepared = PreparedPlugin {
            pre: tokio::sync::OnceCell::new_with(Some(pre)),
            loader: None,
            shared,
            fuel: self.fuel,
        };
        Ok((prepared, origin))
    }

    /// A plugin whose code is mapped (and pre-linked) at its first
    /// instance: from the cache by `digest`, or, if the entry is gone or
    /// damaged by then, compiled from what `source` reads, which must still
    /// have that digest.
    pub fn prepare_lazily(
        &self,
        digest: Sha256Digest,
        source: Arc<dyn Fn() -> Result<Vec<u8>, String> + Send + Sync>,
        shared: Arc<PluginShared>,
    ) -> PreparedPlugin {
        let sandbox = self.clone();
        let loader: Loader = Arc::new(move || {
            let load_error = |e: wasmtime::Error| SandboxError::Load(format!("{e:#}"));
            let (component, _) = sandbox.compile_lazily(&digest, &*source)?;
            sandbox
                .runtime()
                .map_err(SandboxError::Load)?
                .linker
                .instantiate_pre(&component)
                .and_then(PluginPre::new)
                .map_err(load_error)
        });
        PreparedPlugin {
            pre: tokio::sync::OnceCell::new(),
            loader: Some(loader),
            shared,
            fuel: self.fuel,
        }
    }

    /// Compiles what the cache lacks in `process` instead of this process.
    pub fn compile_in(&mut self, process: CompilerProcess) {
        self.compiler = Some(process);
    }

    /// The compiled-component cache, if the host has a usable one.
    pub fn cache(&self) -> Option<&ComponentCache> {
        self.cache.as_ref()
    }

    /// Records where the cache was asked to be when it could not be used,
    /// so that plugins' grants are kept out of it all the same.
    pub fn keep_grants_out_of(&mut self, folder: PathBuf) {
        self.unusable_cache = self.cache.is_none().then_some(folder);
    }

    /// The cache's folder (where it is, or where it was asked to be if it
    /// could not be used), which no plugin may be granted.
    pub fn cache_folder(&self) -> Option<&Path> {
        self.cache
            .as_ref()
            .map(ComponentCache::path)
            .or(self.unusable_cache.as_deref())
    }

    /// Whether the cache holds compiled code for `digest`.
    pub fn holds(&self, digest: &Sha256Digest) -> bool {
        self.cache
            .as_ref()
            .is_some_and(|c| c.holds(&self.key, digest))
    }

    /// What the component `digest` offered in `context`, if the cache kept it.
    pub fn described(&self, digest: &Sha256Digest, context: &str) -> Option<Described> {
        self.cache.as_ref()?.described(&self.key, digest, context)
    }

    /// Keeps what the component `digest` offered in `context` (if there is
    /// a cache).
    pub fn keep_described(&self, digest: &Sha256Digest, context: &str, described: &Described) {
        if let Some(cache) = &self.cache {
            cache.keep_described(&self.key, digest, context, described);
        }
    }
}

/// Maps and pre-links a lazily prepared plugin's code.
type Loader = Arc<dyn Fn() -> Result<PluginPre<PluginState>, SandboxError> + Send + Sync>;

/// The interfaces a component imports and exports, by name
/// (`wasi:cli/environment@0.2.6`, `toolhost:plugin/tools@0.2.0`, …).
pub struct Interfaces {
    pub imports: Vec<String>,
    pub exports: Vec<String>,
}

impl Sandbox {
    /// The one place the component `digest` is compiled or loaded into.
    fn cell(&self, digest: &Sha256Digest) -> Arc<Compiled> {
        self.compiled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(*digest)
            .or_default()
            .clone()
    }

    /// The component for `bytes`, compiled (or loaded from the cache) once
    /// per digest however many plugins or callers ask.
    fn compile(
        &self,
        bytes: &[u8],
        digest: &Sha256Digest,
    ) -> Result<(Component, Origin), SandboxError> {
        let cell = self.cell(digest);
        cell.get_or_init(|| {
            let engine = self.runtime()?.engine;
            self.build(&engine, bytes, digest)
        })
        .clone()
        .map_err(SandboxError::Load)
    }

    /// The component for `bytes`, from the cache or compiled (in the
    /// compiler process, if there is one and a cache). Compiling a large
    /// component in this process takes hundreds of MiB for a few seconds,
    /// which the allocator would otherwise keep (see `crate::heap`), so
    /// such a compile is followed by giving the free memory back.
    fn build(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &Sha256Digest,
    ) -> Result<(Component, Origin), String> {
        match &self.cache {
            // It gives back what a compile in this process leaves.
            Some(cache) => {
                cache.load_or_compile(engine, &self.key, bytes, digest, self.compiler.as_ref())
            }
            None => {
                let compiled = Component::new(engine, bytes);
                crate::heap::give_back_free_memory();
                compiled.map(|c| (c, Origin::Compiled))
            }
        }
        .map_err(|e| format!("{e:#}"))
    }

    /// As [`Sandbox::compile`], reading the component's bytes only when the
    /// cache cannot supply its code.
    fn compile_lazily(
        &self,
        digest: &Sha256Digest,
        source: &(dyn Fn() -> Result<Vec<u8>, String> + Send + Sync),
    ) -> Result<(Component, Origin), SandboxError> {
        let cell = self.cell(digest);
        let outcome = self.load_lazily(&cell, digest, source);
        if outcome.is_err() {
            // A failure at a call (a file being rebuilt, say) is not kept:
            // the next call tries again.
            let mut compiled = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
            if compiled.get(digest).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                compiled.remove(digest);
            }
        }
        outcome
    }

    fn load_lazily(
        &self,
        cell: &Compiled,
        digest: &Sha256Digest,
        source: &(dyn Fn() -> Result<Vec<u8>, String> + Send + Sync),
    ) -> Result<(Component, Origin), SandboxError> {
        cell.get_or_init(|| {
            let engine = self.runtime()?.engine;
            if let Some(component) = self
                .cache
                .as_ref()
                .and_then(|c| c.load_cached(&engine, &self.key, digest))
            {
                return Ok((component, Origin::Cache));
            }
            let bytes = source()?;
            let actual = Sha256Digest::of(&bytes);
            if actual != *digest {
                return Err(format!(
                    "the component file now has sha256 {actual}, not the pinned {digest} it had at start; restart the host to load what is there (and vet it)"
                ));
            }
            self.build(&engine, &bytes, digest)
        })
        .clone()
        .map_err(SandboxError::Load)
    }

    /// Compiles `bytes` (once: a later [`Sandbox::prepare`] of the same
    /// digest reuses it) and lists what the component imports and exports,
    /// without linking or running it. CPU-heavy: run it off the async
    /// runtime.
    pub fn interfaces(
        &self,
        bytes: &[u8],
        digest: &Sha256Digest,
    ) -> Result<Interfaces, SandboxError> {
        let (component, _) = self.compile(bytes, digest)?;
        let ty = component.component_type();
        let engine = component.engine();
        Ok(Interfaces {
            imports: ty
                .imports(engine)
                .map(|(name, _)| name.to_string())
                .collect(),
            exports: ty
                .exports(engine)
                .map(|(name, _)| name.to_string())
                .collect(),
        })
    }
}

/// A compiled, pre-linked plugin, ready to instantiate; or one whose code
/// is mapped and pre-linked when its first instance is asked for.
pub struct PreparedPlugin {
    pre: tokio::sync::OnceCell<PluginPre<PluginState>>,
    /// Set when `pre` is filled on first use.
    loader: Option<Loader>,
    shared: Arc<PluginShared>,
    fuel: bool,
}

impl PreparedPlugin {
    /// The plugin's manifest-derived settings.
    pub fn shared(&self) -> &PluginShared {
        &self.shared
    }

    /// The pre-linked component, mapped on first use off the async runtime
    /// (callers of a plugin whose code is not mapped yet wait for one load).
    async fn pre(&self) -> Result<&PluginPre<PluginState>, SandboxError> {
        self.pre
            .get_or_try_init(|| async {
                let loader = self
                    .loader
                    .clone()
                    .expect("a plugin prepared without its code has a loader");
                tokio::task::spawn_blocking(move || loader())
                    .await
                    .map_err(|e| {
                        SandboxError::Load(format!("loading the component panicked: {e}"))
                    })?
            })
            .await
    }

    /// Makes a fresh instance with its own memory and state.
    pub async fn instantiate(&self) -> Result<PluginInstance, SandboxError> {
        let pre = self.pre().await?;
        let mut state = PluginState::new(self.shared.clone()).map_err(SandboxError::Load)?;
        state.fuel_metered = self.fuel;
        let mut store = Store::new(pre.engine(), state);
        store.limiter(|s| s);
        store.epoch_deadline_callback(|ctx| {
            if Instant::now() >= ctx.data().deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                // tokio's yield_now puts the task behind the others and
                // behind a poll for I/O; a plain wake would rerun it at once
                // from the worker's LIFO slot, and a spinning guest on a
                // one-worker runtime would see no request arrive.
                Ok(UpdateDeadline::YieldCustom(
                    1,
                    Box::pin(tokio::task::yield_now()),
                ))
            }
        });
        let limits = self.shared.limits;
        store
            .data_mut()
            .begin_call(Instant::now() + limits.call_timeout);
        store.set_epoch_deadline(1);
        refuel(&mut store)?;
        // A component's start code may wait inside the host (a WASI sleep
        // or poll), where no epoch check runs, so the timer bounds it as it
        // bounds a call.
        let instantiating = pre.instantiate_async(&mut store);
        let bindings = tokio::time::timeout(limits.call_timeout + WAIT_GRACE, instantiating)
            .await
            .map_err(|_| SandboxError::Timeout(limits.call_timeout))?
            .map_err(|e| classify(e, store.data(), limits.call_timeout))?;
        CREATED.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(1, Ordering::Relaxed);
        Ok(PluginInstance { store, bindings })
    }
}

/// One live plugin instance. Calls on it are serialised by its owner.
pub struct PluginInstance {
    store: Store<PluginState>,
    bindings: Plugin,
}

/// Instances made since start, and alive now, in this process (for the
/// metrics).
static CREATED: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicU64 = AtomicU64::new(0);

/// How many plugin instances this process has made, and how many are alive.
pub fn instance_counts() -> (u64, u64) {
    (
        CREATED.load(Ordering::Relaxed),
        LIVE.load(Ordering::Relaxed),
    )
}

impl Drop for PluginInstance {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

impl PluginInstance {
    /// Asks the plugin which tools it offers, under the call deadline.
    pub async fn describe(&mut self) -> Result<Vec<ToolSpec>, SandboxError> {
        let timeout = self.begin()?;
        let running = self
            .bindings
            .toolhost_plugin_tools()
            .call_describe(&mut self.store);
        let result = tokio::time::timeout(timeout + WAIT_GRACE, running)
            .await
            .map_err(|_| SandboxError::Timeout(timeout))?;
        self.finish(result)
    }

    /// Runs one tool call. The outer error is the sandbox's (the instance is
    /// unusable afterwards); the inner one is the plugin's own.
    pub async fn call(
        &mut self,
        tool: &str,
        arguments: &str,
        context: &CallContext,
    ) -> Result<Result<String, ToolError>, SandboxError> {
        let timeout = self.begin()?;
        self.store
            .data_mut()
            .egress
            .begin_call(tool, &context.call_id);
        let running = self.bindings.toolhost_plugin_tools().call_call(
            &mut self.store,
            tool,
            arguments,
            context,
        );
        // A call dropped by the timer leaves the store unusable; the caller
        // discards the instance on any error.
        let result = tokio::time::timeout(timeout + WAIT_GRACE, running)
            .await
            .map_err(|_| SandboxError::Timeout(timeout))?;
        self.store.data_mut().egress.end_call();
        self.finish(result)
    }

    /// The first outbound request the host refused during the last call.
    pub fn network_refusal(&self) -> Option<crate::gate::Refusal> {
        self.store.data().egress.refusal()
    }

    /// Arms the deadline (and fuel) of one call and returns its length.
    fn begin(&mut self) -> Result<Duration, SandboxError> {
        let timeout = self.store.data().shared_limits().call_timeout;
        self.store.data_mut().begin_call(Instant::now() + timeout);
        self.store.set_epoch_deadline(1);
        refuel(&mut self.store)?;
        Ok(timeout)
    }

    fn finish<T>(&mut self, result: wasmtime::Result<T>) -> Result<T, SandboxError> {
        let timeout = self.store.data().shared_limits().call_timeout;
        result.map_err(|e| classify(e, self.store.data(), timeout))
    }
}

/// Gives the store a full tank for one call, when the engine meters fuel.
/// Plugins without a fuel limit get as much as wasmtime allows, which only
/// their deadline ends.
fn refuel(store: &mut Store<PluginState>) -> Result<(), SandboxError> {
    // Asked of the settings, not of `get_fuel`: its error for an engine
    // without fuel captures a backtrace, on every call when RUST_BACKTRACE
    // is set.
    if !store.data().fuel_metered {
        return Ok(());
    }
    let fuel = store.data().shared_limits().fuel.unwrap_or(u64::MAX);
    store
        .set_fuel(fuel)
        .map_err(|e| SandboxError::Load(format!("{e:#}")))
}

/// Names the cause of a failed guest call for the model and the log.
fn classify(error: wasmtime::Error, state: &PluginState, timeout: Duration) -> SandboxError {
    if let Some(full) = error.downcast_ref::<PoolConcurrencyLimitError>() {
        return SandboxError::Busy(full.to_string());
    }
    if state.memory_exceeded {
        return SandboxError::OutOfMemory(state.shared_limits().memory_bytes);
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => SandboxError::Timeout(timeout),
        Some(Trap::OutOfFuel) => {
            SandboxError::OutOfFuel(state.shared_limits().fuel.unwrap_or_default())
        }
        Some(Trap::StackOverflow) => SandboxError::Trap(
            "wasm stack overflow (too deep a recursion for the host's wasm stack)".into(),
        ),
        Some(trap) => SandboxError::Trap(trap.to_string()),
        None => SandboxError::Trap(format!("{:#}", error.root_cause())),
    }
}
