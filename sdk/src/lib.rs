//! # jig-sdk
//!
//! Write the glue of a jig function in Rust and build it to a WebAssembly component.
//!
//! A jig *function* is one task of an inference graph. Its glue code runs sandboxed inside the jig host
//! and talks to the host through the `jig:function` WIT contract (`sdk/wit/function.wit`):
//!
//! * the host calls [`Function::handle`] once per request with the request's payload;
//! * the glue runs models with [`infer`] (the host batches concurrent calls from many requests),
//! * fans work out to downstream tasks with [`emit`],
//! * reads its static configuration from the bundle manifest with [`config`],
//! * checks the time left before the request's deadline with [`remaining_time`],
//! * and logs with [`log`].
//!
//! Nothing else is reachable: no files, sockets, environment or wall clock.
//!
//! ## A minimal function
//!
//! ```no_run
//! use jig_sdk::{Function, Result, Tensor};
//!
//! struct Doubler;
//!
//! impl Function for Doubler {
//!     fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
//!         let values: Vec<f32> = serde_json::from_slice(&payload)
//!             .map_err(|e| jig_sdk::Error::invalid_input(format!("expected a JSON list of numbers: {e}")))?;
//!         let input = Tensor::from_f32(&[1, values.len() as u64], &values);
//!         let outputs = jig_sdk::infer("doubler", &[input])?;
//!         let doubled = outputs[0].view::<f32>()?;
//!         Ok(serde_json::to_vec(doubled.as_slice()).unwrap())
//!     }
//! }
//!
//! jig_sdk::export!(Doubler);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the component a bundle ships (crate type `cdylib`).
//!
//! ## Modules
//!
//! * [`tensor`]: [`Tensor`] construction and typed views ([`TensorView`]) over f32, u8, i64 and the other dtypes.
//! * [`image`]: decode PNG/JPEG, crop, resize and normalise to NCHW `f32` tensors, inside WebAssembly.
//! * [`audio`]: WAV framing of synthesized speech.
//! * [`envelope`]: the small framing (JSON metadata + binary body) the bundled functions use for payloads.
//! * `native` (native builds only): call a handler in-process, without a host, to unit-test glue with
//!   `cargo test`.

#![deny(missing_docs)]

pub mod audio;
pub use jig_wire::envelope;
mod error;
pub mod image;
#[cfg(not(target_family = "wasm"))]
pub mod native;
pub mod tensor;

pub use envelope::Envelope;
pub use error::{Error, InferError, Result};
pub use tensor::{DType, Element, Tensor, TensorView};

/// Generated bindings of the `jig:function` world. Use the safe wrappers of this crate instead; this module is
/// public only for the [`export!`] macro.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "function",
        pub_export_macro: true,
        export_macro_name: "__export_function",
        default_bindings_module: "jig_sdk::bindings",
    });
}

/// The host calls: the `jig:function` imports in a WebAssembly build, the in-process host of `native` elsewhere.
#[cfg(target_family = "wasm")]
mod host {
    pub use crate::bindings::jig::function::inference::infer;
    pub use crate::bindings::jig::function::runtime::{config, emit, log, remaining_time};
}
#[cfg(not(target_family = "wasm"))]
use native as host;

/// A jig function: implement it on a unit struct and register it with [`export!`].
pub trait Function {
    /// Handle one request: the payload comes from the client or an upstream task's [`emit`]; the bytes
    /// returned are this task's result for the request.
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>>;
}

/// Export a type implementing [`Function`] as the component's handler. Use once per crate.
///
/// Only WebAssembly builds export anything: a native build of the same crate (for unit tests, or to compare
/// the glue's speed with its WebAssembly build) compiles the function as a plain library, whose handler
/// [`native::Invocation::run`] calls.
#[macro_export]
macro_rules! export {
    ($function:ty) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            struct JigExport;
            impl $crate::bindings::exports::jig::function::handler::Guest for JigExport {
                fn handle(
                    payload: ::std::vec::Vec<u8>,
                ) -> ::core::result::Result<::std::vec::Vec<u8>, $crate::bindings::jig::function::types::Error>
                {
                    <$function as $crate::Function>::handle(payload).map_err(::core::convert::Into::into)
                }
            }
    $crate::bindings::__export_function!(JigExport with_types_in $crate::bindings);
        };
    };
}

/// Run the model filling `slot` (a model slot named in the function's manifest) on `inputs`, in the model's
/// input order. Returns the model's outputs in its output order.
///
/// The call blocks this request only: the host serves many requests' calls together as one batch.
pub fn infer(slot: &str, inputs: &[Tensor]) -> std::result::Result<Vec<Tensor>, InferError> {
    // The host reads the inputs where they lie: no copy on this side of the boundary.
    host::infer(slot, Tensor::as_wire(inputs)).map(|outputs| outputs.into_iter().map(Into::into).collect())
}

/// Send `payload` to the tasks connected to this function's output `port`; each emitted payload becomes
/// one request of those tasks.
pub fn emit(port: &str, payload: &[u8]) {
    host::emit(port, payload)
}

/// Time left until the request's deadline (zero once it has passed).
pub fn remaining_time() -> std::time::Duration {
    std::time::Duration::from_nanos(host::remaining_time())
}

/// This function's configuration value for `key`, from the bundle manifest.
pub fn config(key: &str) -> Option<String> {
    host::config(key)
}

/// Parse the configuration value for `key`, or use `default` when the key is absent.
///
/// A value that does not parse is the deployer's mistake, reported as [`Error::InvalidInput`] naming the key.
pub fn config_or<T: std::str::FromStr>(key: &str, default: T) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    match config(key) {
        None => Ok(default),
        Some(raw) => raw
            .trim()
            .parse()
            .map_err(|e| Error::invalid_input(format!("config key `{key}` = {raw:?} is not valid: {e}"))),
    }
}

/// Log levels for [`log`].
pub use bindings::jig::function::runtime::Level;

/// Write `message` to the host's log, tagged with this function and the request.
pub fn log(level: Level, message: &str) {
    host::log(level, message)
}
