//! `toolhost compile-component`: the compiler process a host runs to
//! compile a component apart from itself (`sandbox/compiler.rs` says why).
//! Hidden from the help: only the host runs it, with its engine's settings.

use std::os::fd::AsFd;

use clap::Args;

use crate::sandbox::{CompileFailure, EXIT_NOT_COMPILED, EngineSettings, compile_component};

/// The host's engine settings, which the code must be compiled for.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The largest linear memory of any plugin, in bytes.
    #[arg(long)]
    pub largest_memory: u64,
    /// The native stack a plugin's wasm may use, in bytes.
    #[arg(long)]
    pub wasm_stack: usize,
    /// The engine meters fuel.
    #[arg(long)]
    pub fuel: bool,
}

impl CompileArgs {
    /// The settings the host wrote with `sandbox::compile_arguments`.
    pub fn settings(&self) -> EngineSettings {
        EngineSettings {
            largest_memory: self.largest_memory,
            wasm_stack: self.wasm_stack,
            fuel: self.fuel,
        }
    }
}

/// Reads a component on stdin and writes its native code to stdout. A
/// component that does not compile exits with [`EXIT_NOT_COMPILED`] and
/// wasmtime's message on stderr.
pub fn compile(args: CompileArgs) -> anyhow::Result<()> {
    // Should the machine run out of memory during a compile, the kernel
    // ends this process first, not the host that waits for it (raising the
    // score needs no privilege). Best effort: without /proc it stays as is.
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    // Run as `/proc/self/exe`, the process would be `exe` to `top`, `pgrep`
    // and the kernel's OOM report.
    let _ = std::fs::write("/proc/self/comm", "toolhost");
    // A panic (most likely one the component brought about in wasmtime or
    // Cranelift) is the reason the host gives for refusing the plugin: one
    // line, without the default hook's advice about backtraces.
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("no message");
        match info.location() {
            Some(at) => eprintln!("toolhost: {message} (at {at})"),
            None => eprintln!("toolhost: {message}"),
        }
    }));
    let settings = args.settings();
    // Written as a plain file (the host hands over a cache entry's staging
    // file): std's stdout would buffer it by lines and report a closed
    // descriptor as success.
    let out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    match compile_component(&settings, std::io::stdin().lock(), out) {
        Ok(()) => Ok(()),
        Err(CompileFailure::NotCompiled(e)) => {
            eprintln!("toolhost: {e:#}");
            std::process::exit(EXIT_NOT_COMPILED);
        }
        Err(e) => Err(e.into()),
    }
}
