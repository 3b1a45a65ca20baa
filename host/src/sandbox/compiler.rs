//! Compiling a component in a process of its own: the host's binary run as
//! `toolhost compile-component`, which reads the component on stdin and
//! writes wasmtime's native code to stdout, here a cache entry's staging
//! file.
//!
//! Why not in the host: compiling a large component (the Python plugin's
//! interpreter) takes a few hundred MiB for a few seconds, on Cranelift's
//! thread pool, and glibc keeps much of it in those threads' arenas for the
//! life of the process (about 100 MiB after the example catalog, against
//! 2.4 MiB of anonymous memory for a start that found the code cached;
//! docs/performance.md). A compiler process gives all of it back when it
//! exits, maps none of Cranelift's code into the host, and a compile that
//! runs out of memory or crashes takes down that process, not the host.
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

use wasmtime::Engine;

use super::{Allocation, EngineSettings, engine_config};

/// The host's command line for the compiler process.
pub const COMMAND: &str = "compile-component";

/// Why the compiler process gave no code.
#[derive(Debug, thiserror::Error)]
pub enum CompilerError {
    /// It could not be run, or said nothing usable: the host compiles in
    /// its own process instead.
    #[error("cannot run the compiler process: {0}")]
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
}

impl CompilerProcess {
    /// The binary this process runs. Only the `toolhost` binary itself may
    /// use this: it is the one that knows [`COMMAND`].
    pub fn this_binary() -> CompilerProcess {
        CompilerProcess {
            program: PathBuf::from("/proc/self/exe"),
        }
    }

    /// Compiles `component` for an engine of `settings`, writing the code
    /// into `out` (from its start; `out` must be empty).
    pub fn compile(
        &self,
        settings: &EngineSettings,
        component: &[u8],
        out: File,
    ) -> Result<(), CompilerError> {
        let mut command = Command::new(&self.program);
        command
            .arg(COMMAND)
            .arg("--largest-memory")
            .arg(settings.largest_memory.to_string())
            .arg("--wasm-stack")
            .arg(settings.wasm_stack.to_string());
        if settings.fuel {
            command.arg("--fuel");
        }
        // Nothing of the host's environment (its secrets among it) is
        // needed to compile; logging off keeps stderr for the error alone.
        command
            .env_clear()
            .env("TOOLHOST_LOG", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::from(out))
            .stderr(Stdio::piped());
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
        let mut said = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            // Bounded: an error message, not a stream.
            let _ = stderr.by_ref().take(64 << 10).read_to_string(&mut said);
        }
        let status = child
            .wait()
            .map_err(|e| CompilerError::Unavailable(e.to_string()))?;
        let said = said.trim();
        let said = said.strip_prefix("toolhost: ").unwrap_or(said);
        if status.success() {
            return match sent {
                Ok(()) => Ok(()),
                Err(e) => Err(CompilerError::Unavailable(format!(
                    "it ended before reading the component: {e}"
                ))),
            };
        }
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(EXIT_NOT_COMPILED), _) => Err(CompilerError::Failed(said.to_string())),
            (_, Some(signal)) => Err(CompilerError::Failed(format!(
                "the compiler process was killed by signal {signal}{}",
                if signal == libc::SIGKILL {
                    " (out of memory?)"
                } else {
                    ""
                }
            ))),
            // Not this binary's compiler (a usage error, say): the host's
            // own compile says whether the component is at fault.
            _ => Err(CompilerError::Unavailable(format!("{status}: {said}"))),
        }
    }
}

/// The exit code of a compiler process whose component did not compile.
pub const EXIT_NOT_COMPILED: i32 = 3;

/// Why [`compile_component`] wrote no code.
#[derive(Debug, thiserror::Error)]
pub enum CompileFailure {
    /// The component did not compile: the host refuses it (the process
    /// exits with [`EXIT_NOT_COMPILED`]).
    #[error("{0:#}")]
    NotCompiled(wasmtime::Error),
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
    let code = Engine::new(&engine_config(settings, Allocation::OnDemand))
        .and_then(|engine| engine.precompile_component(&component))
        .map_err(CompileFailure::NotCompiled)?;
    output.write_all(&code)?;
    output.flush()?;
    Ok(())
}
