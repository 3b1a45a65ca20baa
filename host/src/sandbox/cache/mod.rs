//! The compiled-component cache: native code of each component, kept across
//! restarts in `state_dir/cache/components` (created 0700).
//!
//! Loading precompiled code is unsafe in wasmtime: the bytes are trusted to
//! be what wasmtime itself produced. What makes that safe is who can write
//! them:
//! - the folder must belong to the host's user and be writable by no one
//!   else; one that is not is refused, never repaired, since what it holds
//!   may have been written while it was open to others;
//! - it is opened once and every entry is opened relative to that handle,
//!   so renaming or replacing the path later changes nothing;
//! - every entry must itself be a file of the host's user that no one else
//!   may write;
//! - no plugin may be granted a directory that overlaps the folder
//!   (`catalog::load`), even when it could not be used: a plugin's files
//!   are written as the host's user, so the owner check alone cannot tell
//!   them from the host's own.
//!
//! Then only the host's user (or root) can change an entry: the same user
//! whose files, state and secrets the host already trusts. The SHA-256 seal
//! written beside each entry catches what that does not cover, a torn or
//! damaged file. An entry that fails any check is compiled afresh and
//! rewritten. Entries are keyed by the component's digest and the engine's
//! configuration, so a changed component or engine never hits. Every entry
//! read or written is marked as used for `toolhost cache prune` (`prune.rs`),
//! which removes what no host has used for a while.

use std::collections::BTreeSet;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cap_std::fs::{Dir, MetadataExt, OpenOptions, OpenOptionsExt};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::manifest::Sha256Digest;
use crate::sandbox::EngineSettings;
use crate::sandbox::compiler::{CompilerError, CompilerProcess};

mod prune;

/// Why the cache folder cannot be used. Compiling still works without it.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cannot create the component cache {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the component cache {0} is writable by its group or other users, so its native code cannot be trusted; remove it (or chmod 700 it if you are sure nobody else wrote there)"
    )]
    Unsafe(PathBuf),
    #[error(
        "the component cache {0} belongs to another user; use a folder the host's own user owns"
    )]
    NotOwned(PathBuf),
    #[error("cannot prune the component cache {path}: {source}")]
    Prune {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What a host does when an entry it found cannot be used.
const RECOMPILING: &str = "recompiling";
/// What it does when the entry it has just written cannot be mapped (a
/// cache on a `noexec` mount, say).
const USING_MEMORY: &str = "using the code just compiled, from memory";
/// What it does when the compiler process cannot be used, or wrote code that
/// cannot be loaded.
const COMPILING_HERE: &str = "compiling in the host";

/// A folder of compiled components, written and read by this host only.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    /// The folder as opened and checked: entries are opened relative to it.
    dir: Arc<Dir>,
    /// Where that folder really is (symbolic links resolved), for messages
    /// and for keeping plugins' `files` grants out of it.
    path: PathBuf,
    /// The host's effective user, who alone may own and write entries.
    owner: u32,
    /// The entries this host has read or written: what it uses, which a
    /// serving host marks as used again while it runs
    /// ([`ComponentCache::mark_in_use`]).
    in_use: Arc<Mutex<BTreeSet<String>>>,
}

/// Where a component came from, for the start-up log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Cache,
    Compiled,
    /// What it offers came from the cache; its code is mapped at its first
    /// call.
    Described,
}

/// What a component offered when it was last loaded with a given config,
/// kept beside its compiled code so that a later start serves `tools/list`
/// without mapping the code or running the component.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Described {
    /// The component file as it was when it was read and found to match its
    /// pin: a start that finds the file otherwise reads it again.
    pub source: FileStamp,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    pub tools: Vec<DescribedTool>,
}

/// A component file's identity short of its bytes: any write to it changes
/// its `ctime`, which no user can set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileStamp {
    pub dev: u64,
    pub ino: u64,
    pub len: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl FileStamp {
    pub fn of(path: &Path) -> std::io::Result<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let m = fs::metadata(path)?;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Ok(FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        })
    }
}

/// One tool of [`Described`] (a `tool-spec` of the contract).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DescribedTool {
    pub name: String,
    pub title: String,
    pub description: String,
    pub input_schema: String,
    pub output_schema: Option<String>,
}

impl ComponentCache {
    /// The cache's folder under `state_dir`.
    pub fn folder_in(state_dir: &Path) -> PathBuf {
        state_dir.join("cache").join("components")
    }

    /// Opens (creating if needed) the cache in `dir` itself. It must be
    /// owned by the host's user and writable by no one else: native code is
    /// loaded from it. A folder that is not is refused, not repaired (what
    /// it holds may have been written while it was open to others).
    pub fn open_at(dir: &Path) -> Result<ComponentCache, CacheError> {
        let create = |source| CacheError::Create {
            path: dir.to_path_buf(),
            source,
        };
        {
            use std::os::unix::fs::DirBuilderExt;
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(create)?;
        }
        // `/proc/self` belongs to the process's effective user. Root may
        // write anywhere, but must not load code from another user's folder.
        let owner =
            std::os::unix::fs::MetadataExt::uid(&fs::metadata("/proc/self").map_err(create)?);
        let opened = Dir::open_ambient_dir(dir, cap_std::ambient_authority()).map_err(create)?;
        // The checks are made on the folder as opened, which is the one
        // every entry is then read from, whatever its path points to later.
        let meta = opened.dir_metadata().map_err(create)?;
        let path = fs::read_link(format!("/proc/self/fd/{}", opened.as_raw_fd()))
            .unwrap_or_else(|_| dir.to_path_buf());
        if meta.uid() != owner {
            return Err(CacheError::NotOwned(path));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(CacheError::Unsafe(path));
        }
        Ok(ComponentCache {
            dir: Arc::new(opened),
            path,
            owner,
            in_use: Arc::default(),
        })
    }

    /// Where the cache is, symbolic links resolved.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The component for `bytes` (whose digest is `digest`): from the cache
    /// when a verified entry exists, else compiled and stored.
    ///
    /// With a `compiler`, the code is compiled in that process, straight
    /// into the entry; in this one if that process cannot be run or its
    /// code cannot be used. A component it fails to compile is refused.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        key: &EngineKey,
        bytes: &[u8],
        digest: &Sha256Digest,
        compiler: Option<&CompilerProcess>,
    ) -> wasmtime::Result<(Component, Origin)> {
        let key = entry_key(key, digest);
        if let Some(component) = self.load(engine, &key, RECOMPILING) {
            return Ok((component, Origin::Cache));
        }
        if let Some(process) = compiler {
            let started = std::time::Instant::now();
            match self.compile_apart(process, &key, bytes) {
                Ok((code, stored)) => {
                    tracing::info!(
                        "compiled a component in a compiler process ({} ms, with any wait for a turn)",
                        started.elapsed().as_millis()
                    );
                    if stored && let Some(component) = self.load(engine, &key, USING_MEMORY) {
                        return Ok((component, Origin::Compiled));
                    }
                    // Not stored, or not mappable from there (a `noexec`
                    // mount): read through the handle it was written by.
                    match read_compiled(engine, code) {
                        Ok(component) => return Ok((component, Origin::Compiled)),
                        Err(e) => tracing::warn!(
                            "the compiler process's code is unusable ({e:#}); {COMPILING_HERE}"
                        ),
                    }
                }
                Err(CompilerError::Failed(why)) => wasmtime::bail!("{why}"),
                Err(e @ CompilerError::Unavailable(_)) => {
                    tracing::warn!("{e}; {COMPILING_HERE}");
                }
            }
        }
        let compiled = self.compile_here(engine, &key, bytes);
        // Only a compile in this process leaves its memory here.
        crate::heap::give_back_free_memory();
        Ok((compiled?, Origin::Compiled))
    }

    /// Compiles `bytes` in this process and stores the code as the entry
    /// `key`.
    fn compile_here(
        &self,
        engine: &Engine,
        key: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<Component> {
        let code = engine.precompile_component(bytes)?;
        let written = self
            .write_entry(key, &code)
            .inspect_err(|e| self.not_stored(e));
        // Mapped from the entry just written, as a later start would map
        // it: only the code that runs becomes resident, where loading from
        // `code` would copy all of it (tens of MB for an interpreter) into
        // memory the host keeps for its life.
        if written.is_ok()
            && let Some(component) = self.load(engine, key, USING_MEMORY)
        {
            return Ok(component);
        }
        from_memory(engine, &code)
    }

    /// Logs that compiled code could not be kept: a later start compiles
    /// it again.
    fn not_stored(&self, e: &std::io::Error) {
        tracing::warn!(
            "cannot store a compiled component in {}: {e}",
            self.path.display()
        );
    }

    /// A staging file for the entry `name`, created 0600 and exclusively,
    /// and its name for the rename.
    fn stage(&self, name: &str, read: bool) -> std::io::Result<(String, fs::File)> {
        let tmp = staging_name(name);
        let file = self.dir.open_with(
            &tmp,
            OpenOptions::new()
                .read(read)
                .write(true)
                .create_new(true)
                .mode(0o600),
        )?;
        Ok((tmp, file.into_std()))
    }

    /// The cached component for `digest`, if a verified entry exists: no
    /// compiling, and no need of the component's bytes.
    pub fn load_cached(
        &self,
        engine: &Engine,
        key: &EngineKey,
        digest: &Sha256Digest,
    ) -> Option<Component> {
        self.load(engine, &entry_key(key, digest), RECOMPILING)
    }

    /// Whether an entry for `digest` is there (it is verified when loaded).
    /// A start that serves a plugin from its description asks this, and may
    /// map the code only weeks later, at the plugin's first call: the ask
    /// marks the code used, so `prune` keeps it meanwhile.
    pub fn holds(&self, key: &EngineKey, digest: &Sha256Digest) -> bool {
        let key = entry_key(key, digest);
        // Quietly: an entry that fails the checks is reported when loaded.
        let usable = |name: String| self.checked_entry(&name, false).is_some();
        usable(format!("{key}.cwasm")) && usable(format!("{key}.sha256"))
    }

    /// Marks every entry this host has read or written as used (see
    /// `crate::pruning`), as it would be at a restart. A serving host calls
    /// this periodically, so that a prune does not take its entries for
    /// unused however long it runs: code a plugin not yet called will map,
    /// a description a restart will serve.
    pub fn mark_in_use(&self) {
        let names = self
            .in_use
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for name in names {
            self.checked_entry(&name, false);
        }
    }

    /// What the component `digest` offered in `context`, if kept.
    pub fn described(
        &self,
        key: &EngineKey,
        digest: &Sha256Digest,
        context: &str,
    ) -> Option<Described> {
        let text = self.read_entry(&self.described_name(key, digest, context))?;
        serde_json::from_slice(&text).ok()
    }

    /// Keeps what the component `digest` offered in `context`.
    pub fn keep_described(
        &self,
        key: &EngineKey,
        digest: &Sha256Digest,
        context: &str,
        described: &Described,
    ) {
        let name = self.described_name(key, digest, context);
        let json = serde_json::to_vec(described).expect("a description serialises");
        if let Err(e) = self.write_private(&name, &json) {
            tracing::warn!(
                "cannot keep what a component described in {}: {e}",
                self.path.display()
            );
        }
    }

    /// A small record another part of the host keeps here under `key`
    /// (the lint's reports, `kind` "lint"), if this build of the host kept
    /// it.
    pub fn kept(&self, kind: &str, key: &str) -> Option<Vec<u8>> {
        self.read_entry(&self.record_name(kind, key))
    }

    /// Keeps a record for [`ComponentCache::kept`]; a failure is logged,
    /// since it only makes a later start slower.
    pub fn keep(&self, kind: &str, key: &str, bytes: &[u8]) {
        if let Err(e) = self.write_private(&self.record_name(kind, key), bytes) {
            tracing::warn!(
                "cannot keep the {kind} record in {}: {e}",
                self.path.display()
            );
        }
    }

    fn record_name(&self, kind: &str, key: &str) -> String {
        let mut hasher = ShaHasher(Sha256::new());
        (build(), kind, key).hash(&mut hasher);
        let name = hex::encode(hasher.0.finalize());
        format!("{name}.{kind}.json")
    }

    /// Keyed by the code's entry and `context`: everything of the plugin's
    /// declaration that could change what `describe()` returns or whether
    /// it runs (the caller's to assemble: name, file, config, limits, files).
    fn described_name(&self, key: &EngineKey, digest: &Sha256Digest, context: &str) -> String {
        let mut hasher = ShaHasher(Sha256::new());
        entry_key(key, digest).hash(&mut hasher);
        context.hash(&mut hasher);
        // v2: a record is kept only once its plugin passed the declaration,
        // schema and hidden-text checks, and a later start takes them as
        // passed; v1 records were kept before those checks. The build, so
        // that a host whose checks changed makes them again.
        ("described-v2", build()).hash(&mut hasher);
        format!("{}.described.json", hex::encode(hasher.0.finalize()))
    }

    /// Opens the entry `name` for reading if it is a file of the host's
    /// user that no one else may write; `None` if it is missing or is not
    /// (which is logged: someone else wrote in the folder).
    fn open_entry(&self, name: &str) -> Option<fs::File> {
        self.checked_entry(name, true)
    }

    /// [`ComponentCache::open_entry`], logging an entry that fails the
    /// checks only if `report`. An entry that passes is marked as used.
    fn checked_entry(&self, name: &str, report: bool) -> Option<fs::File> {
        let file = self.dir.open(name).ok()?.into_std();
        let meta = file.metadata().ok()?;
        use std::os::unix::fs::MetadataExt as _;
        // One link only: an entry is written under a fresh name and renamed,
        // so a second name means someone linked it in from elsewhere.
        if !meta.is_file()
            || meta.uid() != self.owner
            || meta.mode() & 0o022 != 0
            || meta.nlink() != 1
        {
            if report {
                tracing::warn!(
                    "{} in the component cache is not a file only the host's user may write; ignoring it",
                    self.path.join(name).display()
                );
            }
            return None;
        }
        // What `prune` reads as the entry's last use.
        crate::pruning::mark_used(&file, meta.modified().ok());
        self.used(name);
        Some(file)
    }

    fn used(&self, name: &str) {
        let mut in_use = self.in_use.lock().unwrap_or_else(|p| p.into_inner());
        if !in_use.contains(name) {
            in_use.insert(name.to_string());
        }
    }

    fn read_entry(&self, name: &str) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open_entry(name)?.read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    /// `instead` says, in a refusal's warning, what the host does instead.
    fn load(&self, engine: &Engine, key: &str, instead: &str) -> Option<Component> {
        let seal = String::from_utf8(self.read_entry(&format!("{key}.sha256"))?).ok()?;
        let code_name = format!("{key}.cwasm");
        let mut file = self.open_entry(&code_name)?;
        let mut hasher = Sha256::new();
        std::io::copy(&mut file, &mut hasher).ok()?;
        let shown = self.path.join(&code_name);
        if hex::encode(hasher.finalize()) != seal.trim() {
            tracing::warn!(
                "compiled component {} does not match its recorded digest; {instead}",
                shown.display()
            );
            return None;
        }
        // The file is mapped, not copied: only the code a call runs becomes
        // resident (an interpreter's tens of MB mostly stay on disk), and
        // hosts of one machine share its pages. It is mapped through the
        // handle it was hashed through (`/proc/self/fd` opens that very
        // file again, whatever has been renamed since), and only the host's
        // own user may write it (`open_entry`); entries are replaced by
        // rename, never rewritten in place.
        let same_file = format!("/proc/self/fd/{}", file.as_raw_fd());
        // SAFETY: the file's bytes are those this host wrote after
        // `precompile_component` (their digest matches the seal it wrote
        // beside them, in a folder and a file only its user can write), and
        // wasmtime itself rejects code from another version or
        // configuration.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize_file(engine, &same_file) };
        drop(file);
        match loaded {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(
                    "compiled component {} is unusable ({e:#}); {instead}",
                    shown.display()
                );
                None
            }
        }
    }

    /// Has `process` compile `bytes` into the entry `key`, staged and sealed
    /// as [`ComponentCache::write_entry`] writes one: the code goes from
    /// that process to the disk, never through this one's memory. Gives
    /// the handle the code was written through and whether it was stored
    /// (a failure to store it is logged, as for code compiled here).
    fn compile_apart(
        &self,
        process: &CompilerProcess,
        key: &str,
        bytes: &[u8],
    ) -> Result<(fs::File, bool), CompilerError> {
        let unavailable = |e: std::io::Error| CompilerError::Unavailable(e.to_string());
        let (tmp, mut file) = self
            .stage(&format!("{key}.cwasm"), true)
            .map_err(unavailable)?;
        let compiled = file
            .try_clone()
            .map_err(unavailable)
            .and_then(|out| process.compile(bytes, out))
            .and_then(|()| match file.metadata() {
                Ok(meta) if meta.len() > 0 => Ok(()),
                Ok(_) => Err(CompilerError::Unavailable("it wrote no code".into())),
                Err(e) => Err(unavailable(e)),
            });
        let stored = compiled.is_ok()
            && self
                .store_staged(&mut file, &tmp, key)
                .inspect_err(|e| self.not_stored(e))
                .is_ok();
        if !stored {
            // Gone already if it was renamed.
            drop(self.dir.remove_file(&tmp));
        }
        compiled.map(|()| (file, stored))
    }

    /// Seals the code staged in `file` (under the name `tmp`) and renames
    /// it into the entry `key`. The seal is of the bytes on disk, read back
    /// through the handle they were written through.
    fn store_staged(&self, file: &mut fs::File, tmp: &str, key: &str) -> std::io::Result<()> {
        let mut hasher = Sha256::new();
        file.seek(std::io::SeekFrom::Start(0))?;
        std::io::copy(file, &mut hasher)?;
        file.sync_all()?;
        let name = format!("{key}.cwasm");
        self.dir.rename(tmp, &self.dir, &name)?;
        self.used(&name);
        let seal = hex::encode(hasher.finalize());
        self.write_private(&format!("{key}.sha256"), seal.as_bytes())
    }

    /// Writes code and seal through temporary files and renames, so a crash
    /// never leaves a half-written entry under the real name.
    fn write_entry(&self, key: &str, code: &[u8]) -> std::io::Result<()> {
        self.write_private(&format!("{key}.cwasm"), code)?;
        let seal = hex::encode(Sha256::digest(code));
        self.write_private(&format!("{key}.sha256"), seal.as_bytes())
    }

    fn write_private(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let (tmp, mut file) = self.stage(name, false)?;
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| self.dir.rename(&tmp, &self.dir, name));
        match written {
            Ok(()) => self.used(name),
            // A full disk must not also leave the half-written file behind.
            Err(_) => drop(self.dir.remove_file(&tmp)),
        }
        written
    }
}

/// The component in `file`, code a compiler process wrote for `engine`,
/// read into memory.
fn read_compiled(engine: &Engine, mut file: fs::File) -> wasmtime::Result<Component> {
    let mut code = Vec::new();
    file.seek(std::io::SeekFrom::Start(0))?;
    file.read_to_end(&mut code)?;
    from_memory(engine, &code)
}

/// The component whose compiled code is `code`.
fn from_memory(engine: &Engine, code: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `code` is what `precompile_component` of this binary produced
    // for an engine of this one's configuration: just now in this process,
    // or in its compiler process and read back through the handle of the
    // file it wrote, which only the host's user can write. wasmtime itself
    // rejects code from another version or configuration.
    #[allow(unsafe_code)]
    unsafe {
        Component::deserialize(engine, code)
    }
}

/// A fresh name to write the entry `name` under before renaming it, created
/// exclusively: two writers (two hosts, even in different PID namespaces, or
/// two threads of one) never write or rename each other's file.
fn staging_name(name: &str) -> String {
    format!("{name}.tmp-{}", uuid::Uuid::new_v4().simple())
}

/// What of an engine's configuration decides whether code it compiled
/// loads in another (wasmtime's compatibility hash: version, compiler
/// settings, CPU features, tunables), as the cache keys entries by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineKey(String);

impl EngineKey {
    pub fn of(engine: &Engine) -> EngineKey {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        EngineKey(hex::encode(hasher.0.finalize()))
    }

    /// The key this build of the host found for `settings` at an earlier
    /// start, if the cache kept it.
    pub fn kept(cache: &ComponentCache, settings: &EngineSettings) -> Option<EngineKey> {
        let kept = cache.kept(ENGINE_RECORD, &settings_text(settings))?;
        let text: String = serde_json::from_slice(&kept).ok()?;
        let valid = text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then_some(EngineKey(text))
    }

    /// Keeps the key for [`EngineKey::kept`].
    pub fn keep(&self, cache: &ComponentCache, settings: &EngineSettings) {
        let json = serde_json::to_vec(&self.0).expect("a string serialises");
        cache.keep(ENGINE_RECORD, &settings_text(settings), &json);
    }
}

/// The kind of record [`EngineKey::keep`] writes.
const ENGINE_RECORD: &str = "engine";

/// What names an engine's record beside the host's build: every setting
/// the manifest gives the engine (the rest of its configuration is fixed
/// in the binary).
fn settings_text(settings: &EngineSettings) -> String {
    format!("{settings:?}")
}

/// Component digest + engine configuration + host version.
fn entry_key(key: &EngineKey, digest: &Sha256Digest) -> String {
    let mut hasher = ShaHasher(Sha256::new());
    digest.to_string().hash(&mut hasher);
    key.0.hash(&mut hasher);
    env!("CARGO_PKG_VERSION").hash(&mut hasher);
    hex::encode(hasher.0.finalize())
}

/// The running host's build, as far as its file tells builds apart (a new
/// link of the binary is a new file): records that its checks passed are
/// taken only by the same build. Empty if the binary cannot be found;
/// then the version alone is the key.
fn build() -> &'static str {
    static BUILD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BUILD.get_or_init(|| {
        use std::os::unix::fs::MetadataExt;
        let file = std::env::current_exe().and_then(fs::metadata);
        match file {
            Ok(m) => format!(
                "{} {} {} {} {}.{}",
                env!("CARGO_PKG_VERSION"),
                m.dev(),
                m.ino(),
                m.len(),
                m.mtime(),
                m.mtime_nsec()
            ),
            Err(_) => env!("CARGO_PKG_VERSION").to_string(),
        }
    })
}

/// Feeds `Hash` values into SHA-256, which unlike `DefaultHasher` is stable.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        unreachable!("only the SHA-256 state is used")
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
