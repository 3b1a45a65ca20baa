//! The guest-side kit for toolhost plugins: write each tool as a typed Rust
//! function, and the SDK does the rest of the `toolhost:plugin` contract.
//!
//! ```ignore
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use toolhost_sdk::{CallContext, ToolError, Toolbox};
//!
//! /// Arguments of `greeter_greeting_get`.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Greet {
//!     /// Who to greet.
//!     #[schemars(length(max = 64))]
//!     name: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct Greeting {
//!     text: String,
//! }
//!
//! fn greet(_: &CallContext, args: Greet) -> Result<Greeting, ToolError> {
//!     Ok(Greeting { text: format!("Hello, {}!", args.name) })
//! }
//!
//! fn toolbox() -> Toolbox {
//!     Toolbox::new().tool("greeter_greeting_get", "Greet", "Returns a greeting for a name.", greet)
//! }
//!
//! toolhost_sdk::export_plugin!(toolbox);
//! ```
//!
//! [`export_plugin!`] implements `describe` (from the tools' names,
//! descriptions and generated schemas) and `call` (dispatch by name,
//! argument decoding, result encoding, [`ToolError`] passed through). The
//! host's imports are here too: [`config`], [`log`], [`state`] and, over
//! `wasi:http`, the [`http`] client. Everything goes through what the
//! manifest grants: nothing here reaches past it.

#![deny(missing_docs)]

pub mod http;
mod tools;

pub use tools::Toolbox;

/// The bindings to `wit/` (`toolhost:plugin`), generated once for every
/// plugin. Plugins use them through the re-exports below and
/// [`export_plugin!`].
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "plugin",
        path: "../../wit",
        // The plugin crate, not this one, exports the component: the macro
        // is public and finds these bindings by this path.
        pub_export_macro: true,
        export_macro_name: "export_component",
        default_bindings_module: "toolhost_sdk::bindings",
    });
}

pub use bindings::toolhost::plugin::types::{CallContext, ToolError, ToolSpec};
pub use bindings::toolhost::plugin::{config, log, state};

/// Exports the component: `export_plugin!(toolbox)`, where `toolbox` is a
/// `fn() -> Toolbox`. Put it once in the plugin's `lib.rs`.
#[macro_export]
macro_rules! export_plugin {
    ($toolbox:path) => {
        struct ToolhostPlugin;

        impl $crate::bindings::exports::toolhost::plugin::tools::Guest for ToolhostPlugin {
            fn describe() -> ::std::vec::Vec<$crate::ToolSpec> {
                $crate::__private::with_toolbox($toolbox, |t| t.specs())
            }

            fn call(
                tool: ::std::string::String,
                arguments: ::std::string::String,
                context: $crate::CallContext,
            ) -> ::std::result::Result<::std::string::String, $crate::ToolError> {
                $crate::__private::with_toolbox($toolbox, |t| t.call(&tool, &arguments, &context))
            }
        }

        $crate::bindings::export_component!(ToolhostPlugin with_types_in $crate::bindings);
    };
}

/// Used by [`export_plugin!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    use std::cell::OnceCell;

    use crate::Toolbox;

    thread_local! {
        /// Built at the first `describe` or `call` of the instance, and
        /// kept for the instance's later calls.
        static TOOLBOX: OnceCell<Toolbox> = const { OnceCell::new() };
    }

    pub fn with_toolbox<T>(build: fn() -> Toolbox, f: impl FnOnce(&Toolbox) -> T) -> T {
        TOOLBOX.with(|cell| f(cell.get_or_init(build)))
    }
}
