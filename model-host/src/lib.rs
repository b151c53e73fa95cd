//! # jig-model-host
//!
//! Model execution for jig: the host side of a glue function's `infer` call. This crate knows tensors,
//! models and segments (CPU core sets, MIG instances, MPS percentages); it knows nothing of apps, graphs or
//! WebAssembly.
//!
//! * [`onnx`]: ONNX Runtime, loaded from the library the project's set-up installs; [`onnx::Model`] runs a
//!   model on [`Tensor`]s after checking them against its declared inputs.
//! * [`sweep`]: latency and throughput of a model on a segment over batch sizes, for the profile table.
//! * [`segment`] and [`device`]: where instances can run, and what this machine has; [`mps`]: the MPS
//!   control daemon of each device that hosts MPS segments.
//! * [`instance`]: a model instance — a queue, a batcher with JigsawServe's batching and early dropping, and
//!   an executor; [`pool`] spreads a slot's requests over its instances by planned throughput.
//! * [`launch`]: the one way to start a model on a segment, in this process on pinned cores or in a worker
//!   bound to a GPU device and MPS share, for serving and for profiling alike.
//! * [`worker`]: a model in a child process (one per GPU segment), fed through shared memory, restarted if it dies.
//!
//! Below both [`instance`] and [`worker`], so that neither imports the other: `executor.rs`, what an instance
//! runs batches on ([`instance::Executor`], [`instance::BoxError`]), which a worker implements; `regions.rs`, the
//! shared regions a parent lends its worker ([`worker::SharedBuffer`], which the batcher stacks requests into),
//! and `shm.rs`, one such region. Each is re-exported where callers name it.
//!
//! CPU segments run in this process: a pinned thread per instance, whose ONNX Runtime threads inherit the
//! pinning. A worker process would add an IPC hop and a copy per batch and buy only crash isolation, which
//! ONNX Runtime on the CPU, with inputs checked against the model first, rarely needs. GPU segments run in
//! worker processes, because CUDA binds a process, not a thread, to a MIG instance or an MPS share.

#![deny(missing_docs)]

mod batch;
pub mod device;
mod executor;
pub mod instance;
pub mod launch;
pub mod mps;
pub mod onnx;
pub mod pool;
mod regions;
mod rows;
pub mod segment;
mod shm;
pub mod sweep;
pub mod worker;

pub use jig_wire::{DType, Tensor, TensorError};
