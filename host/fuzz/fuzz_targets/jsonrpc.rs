//! The stdio JSON-RPC request path, end to end in one process: framing,
//! the size cap, parsing, rmcp's message types and the host's handlers,
//! for an arbitrary byte stream from a client. The catalog is empty, so
//! no plugin runs; `tools/call` goes as far as the lookup.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use toolhost::audit::{Audit, Trail, TrailOptions};
use toolhost::catalog::Catalog;
use toolhost::dispatch::Toolhost;
use toolhost::mcp::{McpCatalog, stdio};
use toolhost::store::{SqliteStore, Store};

/// Small enough that the fuzzer reaches the cap often.
const MAX_MESSAGE_BYTES: usize = 4096;

struct Harness {
    runtime: tokio::runtime::Runtime,
    host: Arc<Toolhost>,
    catalog: Arc<McpCatalog>,
    _state: tempfile::TempDir,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let state = tempfile::tempdir().expect("a state folder");
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(state.path()).expect("a scratch store"));
        let trail =
            Trail::open(state.path(), TrailOptions::default()).expect("a scratch audit trail");
        let audit = runtime.block_on(async { Audit::start(trail, Duration::from_secs(3600)) });
        let host = Arc::new(Toolhost::new(Catalog::default(), store, audit));
        let catalog = Arc::new(McpCatalog::new(&host));
        Harness {
            runtime,
            host,
            catalog,
            _state: state,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let h = harness();
    let input = std::io::Cursor::new(data.to_vec());
    let served = stdio::serve_on(
        h.host.clone(),
        h.catalog.clone(),
        input,
        tokio::io::sink(),
        MAX_MESSAGE_BYTES,
        None,
    );
    let _ = h.runtime.block_on(served);
});
