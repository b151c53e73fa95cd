//! # jig-gpu-host
//!
//! Model execution for jig: the host side of a glue function's `infer` call. This crate knows tensors,
//! models and segments (CPU core sets, MIG instances, MPS percentages); it knows nothing of apps, graphs or
//! WebAssembly.
//!
//! Today it holds the [`Tensor`] that crosses the `infer` boundary. ONNX Runtime sessions on segments, the
//! worker processes that own them, dynamic batching and device discovery come with the model-execution work.

mod tensor;

pub use tensor::{DType, Tensor, TensorError};
