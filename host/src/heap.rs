//! Handing the allocator's free memory back to the system after a rare
//! burst that needed much of it for a moment: a component compiled, a
//! password hashed. glibc's malloc keeps what is freed for reuse, in the
//! arena of each thread that freed it, and once it has seen a large block
//! freed it serves blocks of that size from those arenas instead of
//! mapping them afresh. Without this, a serving host would hold its
//! largest burst for the rest of its life: after compiling the example
//! catalog's Python and JavaScript plugins it held 379 MiB of anonymous
//! memory, 104 MiB with this; each sign-in kept 19 MiB. (The host now
//! compiles for its cache in a process of its own, `sandbox/compiler.rs`;
//! this follows a compile only when the host compiled itself.)

/// Gives the free pages inside every malloc arena back to the system.
/// glibc leaves the free end of a thread's heap (only the main heap's is
/// cut): that is what a compile still leaves behind, while a password
/// check's block lies below what the check allocated after it and is
/// given back (`console::signing_in_leaves_no_hash_memory_behind` holds
/// this to the glibc the tests run on). It walks every arena under its
/// lock: for after a burst, never per call.
pub fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and only gives free pages back;
    // glibc takes each arena's lock while it does.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}
