//! The compiled-component cache: native code of each component, kept across
//! restarts in `state_dir/cache/components` (mode 0700).
//!
//! Loading precompiled code is unsafe in wasmtime: the bytes are trusted to
//! be what wasmtime itself produced. So the cache only loads an entry whose
//! bytes match the SHA-256 the host recorded when it wrote them, in a folder
//! only the host's user can write; anything else is compiled afresh and the
//! entry rewritten. Entries are keyed by the component's digest and the
//! engine's configuration, so a changed component or engine never hits.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::manifest::Sha256Digest;

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
        "the component cache {0} is writable by other users; fix its mode (chmod 700) or remove it"
    )]
    Unsafe(PathBuf),
    #[error(
        "the component cache {0} belongs to another user; use a folder the host's own user owns"
    )]
    NotOwned(PathBuf),
}

/// A folder of compiled components, written and read by this host only.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
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
    /// Opens (creating if needed) the cache under `state_dir`.
    pub fn open(state_dir: &Path) -> Result<ComponentCache, CacheError> {
        Self::open_at(&state_dir.join("cache").join("components"))
    }

    /// Opens (creating if needed) the cache in `dir` itself. It must be
    /// owned by the host's user, who alone may write there: native code is
    /// loaded from it, and its seals sit beside it.
    pub fn open_at(dir: &Path) -> Result<ComponentCache, CacheError> {
        use std::os::unix::fs::MetadataExt;
        let dir = dir.to_path_buf();
        let create = |source| CacheError::Create {
            path: dir.clone(),
            source,
        };
        fs::create_dir_all(&dir).map_err(create)?;
        // `/proc/self` belongs to the process's effective user. Root could
        // chmod another user's folder; it must not load code from one.
        let me = fs::metadata("/proc/self").map_err(create)?.uid();
        if fs::metadata(&dir).map_err(create)?.uid() != me {
            return Err(CacheError::NotOwned(dir));
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(create)?;
        let mode = fs::metadata(&dir).map_err(create)?.permissions().mode();
        if mode & 0o022 != 0 {
            return Err(CacheError::Unsafe(dir));
        }
        Ok(ComponentCache { dir })
    }

    /// The component for `bytes` (whose digest is `digest`): from the cache
    /// when a verified entry exists, else compiled and stored.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        key: &EngineKey,
        bytes: &[u8],
        digest: &Sha256Digest,
    ) -> wasmtime::Result<(Component, Origin)> {
        let key = entry_key(key, digest);
        let code_path = self.dir.join(format!("{key}.cwasm"));
        let seal_path = self.dir.join(format!("{key}.sha256"));
        if let Some(component) = self.load(engine, &code_path, &seal_path) {
            return Ok((component, Origin::Cache));
        }
        let code = engine.precompile_component(bytes)?;
        if let Err(e) = write_entry(&code_path, &seal_path, &code) {
            tracing::warn!(
                "cannot store a compiled component in {}: {e}",
                self.dir.display()
            );
        }
        // SAFETY: `code` was produced just now by this engine's
        // `precompile_component`, which is what `deserialize` requires.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize(engine, &code)? };
        Ok((component, Origin::Compiled))
    }

    /// The cached component for `digest`, if a verified entry exists: no
    /// compiling, and no need of the component's bytes.
    pub fn load_cached(
        &self,
        engine: &Engine,
        key: &EngineKey,
        digest: &Sha256Digest,
    ) -> Option<Component> {
        let key = entry_key(key, digest);
        let code_path = self.dir.join(format!("{key}.cwasm"));
        let seal_path = self.dir.join(format!("{key}.sha256"));
        self.load(engine, &code_path, &seal_path)
    }

    /// Whether an entry for `digest` is there (it is verified when loaded).
    pub fn holds(&self, key: &EngineKey, digest: &Sha256Digest) -> bool {
        let key = entry_key(key, digest);
        self.dir.join(format!("{key}.cwasm")).is_file()
            && self.dir.join(format!("{key}.sha256")).is_file()
    }

    /// What the component `digest` offered in `context`, if kept.
    pub fn described(
        &self,
        key: &EngineKey,
        digest: &Sha256Digest,
        context: &str,
    ) -> Option<Described> {
        let path = self.described_path(key, digest, context);
        let text = fs::read(path).ok()?;
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
        let path = self.described_path(key, digest, context);
        let json = serde_json::to_vec(described).expect("a description serialises");
        if let Err(e) = write_private(&path, &json) {
            tracing::warn!(
                "cannot keep what a component described in {}: {e}",
                self.dir.display()
            );
        }
    }

    /// A small record another part of the host keeps here under `key`
    /// (the lint's reports, `kind` "lint"), if this build of the host kept
    /// it.
    pub fn kept(&self, kind: &str, key: &str) -> Option<Vec<u8>> {
        fs::read(self.record_path(kind, key)).ok()
    }

    /// Keeps a record for [`ComponentCache::kept`]; a failure is logged,
    /// since it only makes a later start slower.
    pub fn keep(&self, kind: &str, key: &str, bytes: &[u8]) {
        if let Err(e) = write_private(&self.record_path(kind, key), bytes) {
            tracing::warn!("cannot keep a {kind} record in {}: {e}", self.dir.display());
        }
    }

    fn record_path(&self, kind: &str, key: &str) -> PathBuf {
        let mut hasher = ShaHasher(Sha256::new());
        (build(), kind, key).hash(&mut hasher);
        let name = hex::encode(hasher.0.finalize());
        self.dir.join(format!("{name}.{kind}.json"))
    }

    /// Keyed by the code's entry and `context`: everything of the plugin's
    /// declaration that could change what `describe()` returns or whether
    /// it runs (the caller's to assemble: name, file, config, limits, files).
    fn described_path(&self, key: &EngineKey, digest: &Sha256Digest, context: &str) -> PathBuf {
        let mut hasher = ShaHasher(Sha256::new());
        entry_key(key, digest).hash(&mut hasher);
        context.hash(&mut hasher);
        // v2: a record is kept only once its plugin passed the declaration,
        // schema and hidden-text checks, and a later start takes them as
        // passed; v1 records were kept before those checks. The build, so
        // that a host whose checks changed makes them again.
        ("described-v2", build()).hash(&mut hasher);
        self.dir.join(format!(
            "{}.described.json",
            hex::encode(hasher.0.finalize())
        ))
    }

    fn load(&self, engine: &Engine, code_path: &Path, seal_path: &Path) -> Option<Component> {
        let seal = fs::read_to_string(seal_path).ok()?;
        let mut file = fs::File::open(code_path).ok()?;
        let mut hasher = Sha256::new();
        std::io::copy(&mut file, &mut hasher).ok()?;
        if hex::encode(hasher.finalize()) != seal.trim() {
            tracing::warn!(
                "compiled component {} does not match its recorded digest; recompiling",
                code_path.display()
            );
            return None;
        }
        // The file is mapped, not copied: only the code a call runs becomes
        // resident (an interpreter's tens of MB mostly stay on disk), and
        // hosts of one machine share its pages. Between the check and the
        // mapping only the host's own user could change it: the folder is
        // its own and 0700 (`open_at`), and entries are replaced by rename,
        // which leaves a mapping on the file it checked.
        // SAFETY: the file's bytes are those this host wrote after
        // `precompile_component` (their digest matches the seal it wrote
        // beside them, in a folder only its user can write), and wasmtime
        // itself rejects code from another version or configuration.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize_file(engine, code_path) };
        match loaded {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(
                    "compiled component {} is unusable ({e}); recompiling",
                    code_path.display()
                );
                None
            }
        }
    }
}

/// What of an engine's configuration decides whether code it compiled
/// loads in another (wasmtime's compatibility hash: version, compiler
/// settings, CPU features, tunables), as the cache keys entries by it.
#[derive(Debug, Clone)]
pub struct EngineKey(String);

impl EngineKey {
    pub fn of(engine: &Engine) -> EngineKey {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        EngineKey(hex::encode(hasher.0.finalize()))
    }
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

/// Writes code and seal through temporary files and renames, so a crash
/// never leaves a half-written entry under the real name.
fn write_entry(code_path: &Path, seal_path: &Path, code: &[u8]) -> std::io::Result<()> {
    write_private(code_path, code)?;
    write_private(seal_path, hex::encode(Sha256::digest(code)).as_bytes())
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // Unique per write, so two writers (two hosts, or two threads of one)
    // never rename each other's file away.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&tmp, path)
}
