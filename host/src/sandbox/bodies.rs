//! Outgoing HTTP bodies a plugin holds, counted across all its instances.
//!
//! With wasi:http a guest makes a request (or a response), takes its body
//! and writes into it before sending. What it wrote waits in the host, in a
//! channel of at most two chunks, until the request is sent or dropped. A
//! guest that made requests, filled their bodies and never sent them would
//! hold host memory one chunk pair per handle: up to 4 096 handles per
//! instance, on up to a thousand instances, with wasmtime-wasi-http's 1 MiB
//! chunks. Every plugin has wasi:http (its allow-list decides only where a
//! request may go), so this was open to all of them.
//!
//! So chunks are 64 KiB (`gate::BODY_CHUNK_BYTES`, in the gate's hooks),
//! and the host takes over `outgoing-request.body` and
//! `outgoing-response.body`: each body takes one of the plugin's
//! [`OUTGOING_BODIES`] places first, and when none is left the import
//! returns its error (the guest sees a body it cannot have, not a trap).
//! The place goes with the end of the channel that holds the waiting
//! chunks: given back when the request or response is dropped, or once
//! the gate has sent or discarded its body.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::p2::bindings::http::types;
use wasmtime_wasi_http::p2::body::{HostOutgoingBody, HyperOutgoingBody};
use wasmtime_wasi_http::p2::types::{HostOutgoingRequest, HostOutgoingResponse};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

use super::HTTP_TYPES;
use super::state::{PluginShared, PluginState};

/// Outgoing bodies one plugin may hold at once, over all its instances:
/// requests (or responses) it took a body of and has not sent or dropped,
/// and those the gate is still sending.
pub const OUTGOING_BODIES: u32 = 64;

const REQUEST_BODY: &str = "[method]outgoing-request.body";
const RESPONSE_BODY: &str = "[method]outgoing-response.body";

/// One place, given back when dropped.
struct Place(Arc<PluginShared>);

impl Place {
    fn take(shared: &Arc<PluginShared>) -> Option<Place> {
        shared.outgoing_bodies.take().then(|| Place(shared.clone()))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.outgoing_bodies.give_back(1);
    }
}

/// The receiving end of a body's channel, holding its place for as long as
/// it lives: inside the request (or response) until it is sent, then with
/// whatever sends or discards it.
struct Counted {
    body: HyperOutgoingBody,
    _place: Place,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request or response, whose body waits in `body` until it is sent.
trait HoldsBody: Send + 'static {
    fn body_slot(&mut self) -> &mut Option<HyperOutgoingBody>;
}

impl HoldsBody for HostOutgoingRequest {
    fn body_slot(&mut self) -> &mut Option<HyperOutgoingBody> {
        &mut self.body
    }
}

impl HoldsBody for HostOutgoingResponse {
    fn body_slot(&mut self) -> &mut Option<HyperOutgoingBody> {
        &mut self.body
    }
}

type BodyResult = Result<Resource<HostOutgoingBody>, ()>;

/// `owner`'s body, made by wasmtime-wasi-http's `make` once a place is
/// taken; the place then goes with the body's receiving end.
fn counted_body<T: HoldsBody>(
    state: &mut PluginState,
    owner: Resource<T>,
    make: impl FnOnce(&mut WasiHttpCtxView<'_>, Resource<T>) -> wasmtime::Result<BodyResult>,
) -> wasmtime::Result<(BodyResult,)> {
    let Some(place) = Place::take(&state.shared) else {
        return Ok((Err(()),));
    };
    let rep = owner.rep();
    let mut view = state.http();
    let body = make(&mut view, owner)?;
    if body.is_ok() {
        let slot = view
            .table
            .get_mut(&Resource::<T>::new_borrow(rep))?
            .body_slot();
        if let Some(receiver) = slot.take() {
            *slot = Some(
                Counted {
                    body: receiver,
                    _place: place,
                }
                .boxed_unsync(),
            );
        }
    }
    Ok((body,))
}

/// Replaces wasmtime-wasi-http's `outgoing-request.body` and
/// `outgoing-response.body` in `linker` (which must already hold them) with
/// the counting ones.
pub(super) fn count_in(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    let imports = [REQUEST_BODY, RESPONSE_BODY];
    super::take_over(linker, HTTP_TYPES, &imports, "outgoing bodies", |http| {
        http.func_wrap(
            REQUEST_BODY,
            |mut store, (request,): (Resource<HostOutgoingRequest>,)| {
                counted_body(store.data_mut(), request, |view, request| {
                    types::HostOutgoingRequest::body(view, request)
                })
            },
        )?;
        http.func_wrap(
            RESPONSE_BODY,
            |mut store, (response,): (Resource<HostOutgoingResponse>,)| {
                counted_body(store.data_mut(), response, |view, response| {
                    types::HostOutgoingResponse::body(view, response)
                })
            },
        )?;
        Ok(())
    })
}
