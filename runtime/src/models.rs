//! The seam between glue and model execution: the host side of the `infer` import.
//!
//! The runtime hands every `infer` call of a function to that function's [`ModelHost`]. Calls are async, so
//! a model host can hold many concurrent requests' calls and run them as one batch; the runtime bounds each
//! call by the request's deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

pub use jig_wire::{Bytes, DType, Tensor, TensorError};

/// One `infer` call of a glue function.
#[derive(Debug)]
pub struct InferRequest {
    /// The function that made the call.
    pub function: Arc<str>,
    /// The model slot named in the call.
    pub slot: String,
    /// Input tensors, already checked to be well-formed.
    pub inputs: Vec<Tensor>,
    /// The request's deadline: an answer after it is useless.
    pub deadline: Instant,
}

/// Why an `infer` call failed; mirrors `infer-error` in `sdk/wit/function.wit`, which the guest receives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InferError {
    /// The function has no model slot of this name.
    #[error("unknown model slot: {0}")]
    UnknownSlot(String),
    /// The tensors do not fit the model: wrong count, dtype, shape or data length.
    #[error("invalid model input: {0}")]
    InvalidInput(String),
    /// The request's deadline passed before the model answered.
    #[error("deadline exceeded: {0}")]
    DeadlineExceeded(String),
    /// The model is overloaded and shed the call (no instance could take it); retrying later may succeed.
    #[error("overloaded: {0}")]
    Overloaded(String),
    /// An instance dropped the call early: it could no longer meet the request's deadline, or it waited too
    /// long for a batch. Retrying is useless.
    #[error("dropped: {0}")]
    Dropped(String),
    /// The model failed while running (or its instance failed to start or has stopped).
    #[error("model failed: {0}")]
    Failed(String),
}

/// A boxed future, as [`ModelHost::infer`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs models for glue functions.
pub trait ModelHost: Send + Sync + 'static {
    /// Run `request.slot` on `request.inputs`; returns the model's outputs in order.
    fn infer(&self, request: InferRequest) -> BoxFuture<'_, Result<Vec<Tensor>, InferError>>;

    /// Copies of the bytes of an `infer` call's inputs to `slot`, in memory that the call's model reads where
    /// it lies (a worker's shared region, on a GPU segment; where its batch will lie), made before the call: the
    /// runtime copies the inputs out of the sandbox into them, their one copy, instead of into memory of its own.
    /// `None` (the default): any memory will do.
    fn place(&self, _slot: &str, _inputs: &[&[u8]]) -> Option<Vec<Bytes>> {
        None
    }
}

/// A model host with no models: every call fails with [`InferError::UnknownSlot`]. For functions that run no
/// model (crop, select).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoModels;

impl ModelHost for NoModels {
    fn infer(&self, request: InferRequest) -> BoxFuture<'_, Result<Vec<Tensor>, InferError>> {
        Box::pin(async move {
            Err(InferError::UnknownSlot(format!(
                "function `{}` has no model slot `{}`: declare the slot and its variants in the bundle manifest",
                request.function, request.slot
            )))
        })
    }
}
