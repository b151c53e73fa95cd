//! What an instance runs its batches on: an [`Executor`] (a model in this process, or in a worker process), and
//! the [`BoxError`] it fails with. Both are re-exported from [`crate::instance`], where callers name them.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::Tensor;
use crate::onnx::TensorSpec;
use crate::regions::SharedBuffer;

/// Any error, boxed: what an [`Executor`] or an instance's loader fails with (a [`ModelError`](crate::onnx::ModelError), a
/// [`crate::worker::WorkerError`], a launch error), kept whole for callers that match on it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Runs batches for an instance.
pub trait Executor: Send + Sync {
    /// The model's declared inputs; requests are checked against them before they queue.
    fn inputs(&self) -> &[TensorSpec];
    /// The model's declared outputs, in the order [`Executor::execute`] returns them (none known: empty).
    fn outputs(&self) -> &[TensorSpec] {
        &[]
    }
    /// Run one batch.
    fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError>;
    /// Memory for `len` bytes of a batch's input that it reads with no copy (a worker's shared region), for
    /// the batcher to stack requests into and the instance to place their inputs in (`Instance::place`); `None`:
    /// any memory will do.
    fn buffer(&self, _len: usize) -> Option<SharedBuffer> {
        None
    }
    /// Whether `bytes` lie in memory [`Executor::buffer`] lent (and the executor would read them in place).
    fn holds(&self, _bytes: &[u8]) -> bool {
        false
    }
    /// Hand back what its batches left held for reuse (an ONNX Runtime session's arena), when the instance went
    /// idle after a load.
    fn release_memory(&self) {}
    /// How many times the executor's process was replaced after dying (a worker's); `None` in process.
    fn restarts(&self) -> Option<Arc<AtomicU64>> {
        None
    }
    /// Whether a caller may run a short batch on its own thread (see [`CALLER_RUNS_BELOW`](crate::instance::CALLER_RUNS_BELOW)): only an executor
    /// whose batches wait on nothing but their own computation, never on another process or the network.
    fn caller_may_run(&self) -> bool {
        false
    }
    /// The CPU time of the process its batches run in, where that is another process on this machine (a
    /// worker's: every thread of it, user and system, since its model loaded, its host thread's kernel launches,
    /// copies and waits among them, and what the processes it replaced spent); `None` in process, where the
    /// instance's counters measure its batches, and remote.
    fn process_cpu(&self) -> Option<std::time::Duration> {
        None
    }
}
