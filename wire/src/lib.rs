//! What crosses a process or a network in jig, in one small crate that the guest SDK, the gateway, the model
//! host and `jig node` share without depending on each other:
//!
//! * [`tensor`]: the [`Tensor`] that crosses `infer` between glue and models, and its element type [`DType`]
//!   with the Open Inference Protocol's names for it;
//! * [`envelope`]: the payload framing of JSON metadata around a binary body ([`Envelope`]);
//! * [`frame`]: the length-prefixed bincode frames of the worker socket and the node protocol, bounded before
//!   anything is decoded.

#![deny(missing_docs)]

pub use bytes::Bytes;

pub mod envelope;
pub mod frame;
mod spare;
pub mod tensor;

pub use envelope::Envelope;
pub use spare::Spare;
pub use tensor::{DType, Tensor, TensorError};
