//! What an outgoing HTTP request a plugin builds may hold before it is
//! sent.
//!
//! wasi:http checks that a method or an authority a guest sets is well
//! formed, not how long it is, and keeps it in the request until the
//! request is sent or dropped. A guest could so make each of its requests
//! hold megabytes of host memory, as many requests as it may hold handles.
//! The host takes over `outgoing-request.set-method` and
//! `set-authority`: a method longer than [`MAX_METHOD_BYTES`] (which the
//! gate would never send) or an authority longer than
//! [`MAX_AUTHORITY_BYTES`] is refused as malformed, the error the guest
//! already handles. The path is bounded by the `http` crate (64 KiB), the
//! scheme (64 bytes) too, and the headers by the host's field limit.

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::types::{self, Method};
use wasmtime_wasi_http::p2::types::HostOutgoingRequest;

use super::HTTP_TYPES;
use super::state::PluginState;
use crate::gate::{MAX_AUTHORITY_BYTES, MAX_METHOD_BYTES};

const SET_METHOD: &str = "[method]outgoing-request.set-method";
const SET_AUTHORITY: &str = "[method]outgoing-request.set-authority";

/// Replaces wasmtime-wasi-http's `outgoing-request.set-method` and
/// `set-authority` in `linker` (which must already hold them) with ones
/// that refuse what is too long.
pub(super) fn bound_in(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    let imports = [SET_METHOD, SET_AUTHORITY];
    super::take_over(linker, HTTP_TYPES, &imports, "request lengths", |http| {
        http.func_wrap(
            SET_METHOD,
            |mut store, (request, method): (Resource<HostOutgoingRequest>, Method)| {
                if matches!(&method, Method::Other(other) if other.len() > MAX_METHOD_BYTES) {
                    return Ok((Err(()),));
                }
                let mut view = store.data_mut().http();
                Ok((types::HostOutgoingRequest::set_method(
                    &mut view, request, method,
                )?,))
            },
        )?;
        http.func_wrap(
            SET_AUTHORITY,
            |mut store, (request, authority): (Resource<HostOutgoingRequest>, Option<String>)| {
                if authority
                    .as_ref()
                    .is_some_and(|a| a.len() > MAX_AUTHORITY_BYTES)
                {
                    return Ok((Err(()),));
                }
                let mut view = store.data_mut().http();
                Ok((types::HostOutgoingRequest::set_authority(
                    &mut view, request, authority,
                )?,))
            },
        )?;
        Ok(())
    })
}
