//! Guest-side helpers for toolhost plugins.
//!
//! Plugins link this crate into their wasm32-wasip2 component. Everything it
//! does goes through imports the host grants per manifest, so a plugin that
//! uses a module here still needs the matching grant (for [`http`], the
//! destinations the manifest allows).

pub mod http;
