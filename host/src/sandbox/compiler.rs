//! Compiling a component in a process of its own: the host's binary run as
//! `toolhost compile-component`, which reads the component on stdin and
//! writes wasmtime's native code to stdout, here a cache entry's staging
//! file.
//!
//! Why not in the host: compiling a large component (the Python plugin's
//! interpreter) takes a few hundred MiB for a few seconds, on Cranelift's
//! thread pool, and glibc keeps much of it in those threads' arenas for the
//! life of the process (about 100 MiB after the example catalog, against a
//! few MiB of anonymous memory for a start that found the code cached;
//! docs/performance.md). A compiler process gives all of it back when it
//! exits, pages none of Cranelift's code into the host, and a compile that
//! runs out of memory, panics or crashes ends that process, not the host.
//! At most one compiler process per core runs at once: each compiles on
//! every core already, and more would only add their memory.
//!
//! It is not a trust boundary: the code it writes is mapped into the host
//! and run there, as code compiled in the host would be. It runs the very
//! binary the host runs (`/proc/self/exe`, whatever has replaced the file
//! since), with the same engine settings, so the code fits the host's
//! engine; wasmtime checks that again when the host loads it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use wasmtime::Engine;

use super::{Allocation, EngineSettings, engine_config};

/// The host's command line for the compiler process.
pub const COMMAND: &str = "compile-component";

/// The compiler process's arguments after [`COMMAND`]: the engine settings
/// the code must be compiled for. The command reads them back, and a test
/// of the command line holds the two sides to each other: a flag spelled
/// differently on one side would leave every compile to the host.
pub fn arguments(settings: &EngineSettings) -> Vec<String> {
    let mut args = vec![
        "--largest-memory".to_string(),
        settings.largest_memory.to_string(),
        "--wasm-stack".to_string(),
        settings.wasm_stack.to_string(),
    ];
    if settings.fuel {
        args.push("--fuel".to_string());
    }
    args
}

/// Why the compiler process gave no code.
#[derive(Debug, thiserror::Error)]
pub enum CompilerError {
    /// It could not be run, or said nothing usable, or its code could not
    /// be staged: the host compiles in its own process instead.
    #[error("cannot compile in a compiler process: {0}")]
    Unavailable(String),
    /// It ran and the component did not compile (or the process died, say
    /// for want of memory): the component is refused, as it would be in
    /// the host.
    #[error("{0}")]
    Failed(String),
}

/// Runs the host's own binary to compile components.
#[derive(Debug, Clone)]
pub struct CompilerProcess {
    program: PathBuf,
    /// The host's engine settings, which the code is compiled for.
    settings: EngineSettings,
    /// Compiler processes running, shared by every clone.
    running: Arc<Running>,
}

/// A count of compiler processes running, bounded by the cores.
#[derive(Debug)]
struct Running {
    count: Mutex<usize>,
    freed: Condvar,
    /// The bound; the cores, counted at the first compile rather than at
    /// every start (most start with everything in the cache).
    most: OnceLock<usize>,
}

impl CompilerProcess {
    /// The binary this process runs, compiling for an engine of
    /// `settings`. Only the `toolhost` binary itself may use this: it is
    /// the one that knows [`COMMAND`].
    pub fn this_binary(settings: EngineSettings) -> CompilerProcess {
        CompilerProcess::of(PathBuf::from("/proc/self/exe"), settings, OnceLock::new())
    }

    /// `program` run as the compiler, at most `most` at once (once set).
    fn of(program: PathBuf, settings: EngineSettings, most: OnceLock<usize>) -> CompilerProcess {
        CompilerProcess {
            program,
            settings,
            running: Arc::new(Running::new(most)),
        }
    }

    /// Compiles `component`, writing the code into `out` (from its start;
    /// `out` must be empty). Blocks while as many compiler processes run as
    /// there are cores.
    pub fn compile(&self, component: &[u8], out: File) -> Result<(), CompilerError> {
        let _turn = self.running.wait_turn();
        let mut command = Command::new(&self.program);
        // Its command line reads `toolhost compile-component …` in `ps`.
        command
            .arg0("toolhost")
            .arg(COMMAND)
            .args(arguments(&self.settings));
        // Nothing of the host's environment (its secrets among it) is
        // needed to compile, except how many threads the operator allows
        // Cranelift; logging off keeps stderr for the error alone.
        command.env_clear().env("TOOLHOST_LOG", "off");
        if let Some(threads) = std::env::var_os("RAYON_NUM_THREADS") {
            command.env("RAYON_NUM_THREADS", threads);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::from(out))
            .stderr(Stdio::piped())
            // A terminal's Ctrl-C is the host's to handle; the process
            // ends with it through the death signal below.
            .process_group(0);
        // SAFETY: the closure runs in the forked child before exec and only
        // makes one async-signal-safe system call.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(|| {
                // A host that ends (or is killed) while a compile runs does
                // not leave the compiler running: the thread that spawned
                // it waits for it, so it ends only with the host.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| CompilerError::Unavailable(e.to_string()))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // A process that ends before reading it all says why on stderr.
        let sent = stdin.write_all(component);
        drop(stdin);
        let mut said = Vec::new();
        if let Some(stderr) = child.stderr.take() {
            // Bounded: an error message, not a stream.
            let _ = stderr.take(64 << 10).read_to_end(&mut said);
        }
        let status = child
            .wait()
            .map_err(|e| CompilerError::Unavailable(e.to_string()))?;
        let said = String::from_utf8_lossy(&said);
        let said = said.trim();
        let said = said.strip_prefix("toolhost: ").unwrap_or(said);
        if status.success() {
            return sent.map_err(|e| {
                CompilerError::Unavailable(format!("it ended before reading the component: {e}"))
            });
        }
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(EXIT_NOT_COMPILED), _) if said.is_empty() => Err(CompilerError::Failed(
                "the compiler process gave no reason".to_string(),
            )),
            (Some(EXIT_NOT_COMPILED), _) => Err(CompilerError::Failed(said.to_string())),
            // Most likely the component made wasmtime or Cranelift panic,
            // which it would do here as well. (A panic of the process's own,
            // say no thread to be had, refuses the plugin too: the host
            // would be short of the same.)
            (Some(EXIT_PANICKED), _) => Err(CompilerError::Failed(format!(
                "the compiler process panicked: {said}"
            ))),
            (_, Some(signal)) => Err(CompilerError::Failed(format!(
                "the compiler process was killed by signal {signal}{}",
                if signal == libc::SIGKILL {
                    " (out of memory?)"
                } else {
                    ""
                }
            ))),
            // Not this binary's compiler, or it could not read or write:
            // the host's own compile says whether the component is at fault.
            _ => Err(CompilerError::Unavailable(format!("{status}: {said}"))),
        }
    }
}

impl Running {
    /// None running yet, at most `most` at once (once set).
    fn new(most: OnceLock<usize>) -> Running {
        Running {
            count: Mutex::new(0),
            freed: Condvar::new(),
            most,
        }
    }

    /// Waits until fewer than `most` run, and counts one more until the
    /// returned guard is dropped.
    fn wait_turn(&self) -> Turn<'_> {
        let most = *self
            .most
            .get_or_init(|| std::thread::available_parallelism().map_or(2, std::num::NonZero::get));
        let mut count = self.count.lock().unwrap_or_else(|p| p.into_inner());
        while *count >= most {
            count = self.freed.wait(count).unwrap_or_else(|p| p.into_inner());
        }
        *count += 1;
        Turn(self)
    }
}

/// One compiler process's place among those [`Running`] allows.
struct Turn<'a>(&'a Running);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.0.count.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.0.freed.notify_one();
    }
}

/// How a Rust process that panicked exits.
const EXIT_PANICKED: i32 = 101;

/// The exit code of a compiler process whose component did not compile.
pub const EXIT_NOT_COMPILED: i32 = 3;

/// Why [`compile_component`] wrote no code.
#[derive(Debug, thiserror::Error)]
pub enum CompileFailure {
    /// The component did not compile: the host refuses it (the process
    /// exits with [`EXIT_NOT_COMPILED`]).
    #[error("{0:#}")]
    NotCompiled(wasmtime::Error),
    /// The engine could not be made: not the component's fault, so the
    /// host compiles it in its own process (which will say the same).
    #[error("cannot make the engine: {0:#}")]
    Engine(wasmtime::Error),
    /// Reading the component or writing the code failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The compiler process's side: reads a component from `input`, compiles it
/// with an engine of `settings` (the host's, without its instance pool,
/// which compiled code does not depend on) and writes the code to `output`.
pub fn compile_component(
    settings: &EngineSettings,
    mut input: impl Read,
    mut output: impl Write,
) -> Result<(), CompileFailure> {
    let mut component = Vec::new();
    input.read_to_end(&mut component)?;
    let engine = Engine::new(&engine_config(settings, Allocation::OnDemand))
        .map_err(CompileFailure::Engine)?;
    let code = engine
        .precompile_component(&component)
        .map_err(CompileFailure::NotCompiled)?;
    output.write_all(&code)?;
    output.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use wasmtime::component::Component;

    use super::*;
    use crate::manifest::Sha256Digest;
    use crate::sandbox::cache::{ComponentCache, EngineKey, Origin};

    /// The smallest component there is: the preamble alone.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";
    /// A component's preamble, then a section that ends too soon.
    const BROKEN_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00\x01\x7f";

    /// A compiler process that runs `script` (a POSIX shell script), with
    /// the test's PATH, since the process gets none.
    fn fake(dir: &Path, name: &str, script: &str) -> CompilerProcess {
        let path = dir.join(name);
        let search = std::env::var("PATH").unwrap_or_default();
        std::fs::write(&path, format!("#!/bin/sh\nPATH='{search}'\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        // A process another test thread forks while the script is being
        // written holds it open for writing until it execs, and running
        // the script meanwhile fails (ETXTBSY); that takes microseconds.
        std::thread::sleep(std::time::Duration::from_millis(50));
        CompilerProcess::of(path, EngineSettings::default(), OnceLock::from(2))
    }

    struct Setup {
        _dir: tempfile::TempDir,
        scripts: PathBuf,
        cache: ComponentCache,
        engine: Engine,
        key: EngineKey,
    }

    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let scripts = dir.path().join("scripts");
        std::fs::create_dir(&scripts).unwrap();
        let cache = ComponentCache::open_at(&dir.path().join("cache")).unwrap();
        let engine = Engine::new(&engine_config(
            &EngineSettings::default(),
            Allocation::OnDemand,
        ))
        .unwrap();
        let key = EngineKey::of(&engine);
        Setup {
            _dir: dir,
            scripts,
            cache,
            engine,
            key,
        }
    }

    impl Setup {
        fn compile_with(
            &self,
            process: &CompilerProcess,
            component: &[u8],
        ) -> wasmtime::Result<Origin> {
            self.cache
                .load_or_compile(
                    &self.engine,
                    &self.key,
                    component,
                    &Sha256Digest::of(component),
                    Some(process),
                )
                .map(|(_, origin)| origin)
        }

        /// The cache folder's file names, but for the engine's record.
        fn entries(&self) -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(self.cache.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| !n.ends_with(".engine.json"))
                .collect();
            names.sort();
            names
        }

        fn has_sealed_code(&self) -> bool {
            let names = self.entries();
            names.iter().any(|n| n.ends_with(".cwasm"))
                && names.iter().any(|n| n.ends_with(".sha256"))
                && !names.iter().any(|n| n.contains(".tmp-"))
        }
    }

    #[test]
    fn the_code_the_process_writes_is_sealed_into_the_cache_and_loaded_from_it() {
        let s = setup();
        // Code for the empty component, handed out for a component this
        // process cannot compile: only the compiler process's code loads.
        let code = s.engine.precompile_component(EMPTY_COMPONENT).unwrap();
        let file = s.scripts.join("code.cwasm");
        std::fs::write(&file, &code).unwrap();
        let script = format!("cat > /dev/null; cat '{}'", file.display());
        let process = fake(&s.scripts, "cat", &script);
        assert_eq!(
            s.compile_with(&process, BROKEN_COMPONENT).unwrap(),
            Origin::Compiled
        );
        assert!(s.has_sealed_code(), "{:?}", s.entries());
        // Loaded from the cache the next time, so sealed as it was written.
        let fails = fake(&s.scripts, "fails", "exit 1");
        assert_eq!(
            s.compile_with(&fails, BROKEN_COMPONENT).unwrap(),
            Origin::Cache
        );
    }

    #[test]
    fn a_process_that_cannot_compile_leaves_it_to_the_host() {
        for (name, script) in [
            ("usage", "echo 'error: unexpected argument' >&2; exit 2"),
            ("silent", "cat > /dev/null; exit 0"),
            ("junk", "cat > /dev/null; echo junk"),
            ("missing", "exec /nonexistent/toolhost"),
        ] {
            let s = setup();
            let process = fake(&s.scripts, name, script);
            let origin = s.compile_with(&process, EMPTY_COMPONENT);
            assert_eq!(origin.unwrap(), Origin::Compiled, "{name}");
            assert!(s.has_sealed_code(), "{name}: {:?}", s.entries());
        }
        // Nor does a process that cannot be started at all.
        let s = setup();
        let process = CompilerProcess::of(
            s.scripts.join("no-such-program"),
            EngineSettings::default(),
            OnceLock::from(2),
        );
        let origin = s.compile_with(&process, EMPTY_COMPONENT);
        assert_eq!(origin.unwrap(), Origin::Compiled);
    }

    #[test]
    fn a_compile_that_fails_crashes_or_is_killed_refuses_the_component_without_a_retry() {
        for (name, script, reason) in [
            (
                "refuses",
                "echo 'toolhost: failed to parse WebAssembly module' >&2; exit 3",
                "failed to parse WebAssembly module",
            ),
            ("quiet", "exit 3", "the compiler process gave no reason"),
            (
                "panics",
                "echo 'toolhost: index out of bounds (at src/x.rs:1:1)' >&2; exit 101",
                "the compiler process panicked: index out of bounds (at src/x.rs:1:1)",
            ),
            (
                "killed",
                "kill -9 $$",
                "the compiler process was killed by signal 9 (out of memory?)",
            ),
        ] {
            let s = setup();
            let process = fake(&s.scripts, name, script);
            // A component this process would compile: a retry here would
            // succeed, so an error means there was none.
            let error = s.compile_with(&process, EMPTY_COMPONENT).unwrap_err();
            assert_eq!(format!("{error:#}"), reason, "{name}");
            assert_eq!(s.entries(), Vec::<String>::new(), "{name}");
        }
    }

    #[test]
    fn no_more_compiler_processes_run_at_once_than_the_bound() {
        let running = Running::new(OnceLock::from(2));
        let now = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..6 {
                scope.spawn(|| {
                    let _turn = running.wait_turn();
                    let here = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(here, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(30));
                    now.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        let peak = peak.into_inner();
        assert!((1..=2).contains(&peak), "{peak}");
        assert_eq!(*running.count.lock().unwrap(), 0);
    }

    #[test]
    fn the_compiler_side_writes_code_the_host_can_load() {
        let settings = EngineSettings::default();
        let mut code = Vec::new();
        compile_component(&settings, EMPTY_COMPONENT, &mut code).unwrap();
        let engine = Engine::new(&engine_config(&settings, Allocation::Pool)).unwrap();
        // SAFETY: `code` was just produced by `precompile_component` for
        // this configuration.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize(&engine, &code) };
        assert!(loaded.is_ok(), "{:?}", loaded.err());
        let broken = compile_component(&settings, BROKEN_COMPONENT, &mut Vec::new());
        assert!(
            matches!(broken, Err(CompileFailure::NotCompiled(_))),
            "{broken:?}"
        );
    }
}
