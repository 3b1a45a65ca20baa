//! The host's one set of bindings to the plugin contract in `wit/`.

wasmtime::component::bindgen!({
    world: "plugin",
    path: "../wit",
    // Exports run with `call_async`, so a busy guest yields to tokio at every
    // epoch tick instead of holding a worker thread until its deadline.
    exports: { default: async },
    // `state` awaits the store (a database round trip with PostgreSQL), so
    // a plugin waiting on it does not hold a worker thread. `config` and
    // `log` stay synchronous: they never wait on I/O.
    imports: { "toolhost:plugin/state": async },
});

pub use self::toolhost::plugin::log::Level;
pub use exports::toolhost::plugin::tools::{CallContext, ToolError, ToolSpec};
