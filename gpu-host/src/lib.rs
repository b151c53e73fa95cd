//! # jig-gpu-host
//!
//! Model execution for jig: the host side of a glue function's `infer` call. This crate knows tensors,
//! models and segments (CPU core sets, MIG instances, MPS percentages); it knows nothing of apps, graphs or
//! WebAssembly.
//!
//! * [`onnx`]: ONNX Runtime, loaded from the library the project's set-up installs; [`onnx::Model`] runs a
//!   model on [`Tensor`]s after checking them against its declared inputs.

pub mod onnx;
mod tensor;

pub use tensor::{DType, Tensor, TensorError};
