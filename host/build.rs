//! Link settings for the `toolhost` binary.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TOOLHOST_PLAIN_RELOCS");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let plain = std::env::var_os("TOOLHOST_PLAIN_RELOCS").is_some_and(|v| !v.is_empty());
    if os == "linux" && env == "gnu" && !plain {
        // Packed relative relocations (DT_RELR): the position-independent
        // binary's 74 000 relocations take 19 KiB instead of 1.7 MiB, which
        // the dynamic loader reads at every start and which counted in the
        // idle RSS. The binary stays position-independent (ASLR is kept).
        // It then needs glibc 2.36 or later to start; building with
        // TOOLHOST_PLAIN_RELOCS=1 makes one for older systems.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
