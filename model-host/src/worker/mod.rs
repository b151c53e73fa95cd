//! Worker processes: a model running in a child process, one per GPU segment.
//!
//! **Why processes.** CUDA binds a process, not a thread, to a MIG instance (`CUDA_VISIBLE_DEVICES=MIG-<uuid>`
//! is read once, when the process initialises CUDA), and an MPS share is a per-process setting
//! (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`). So each instance placed on a segment runs its model in its own
//! process, started with that segment's environment. A process also contains faults: a driver error, an
//! out-of-memory abort or a segfault in a kernel takes down one worker, not the host. CPU sessions go through
//! the same path, which is how it is tested on machines without a GPU.
//!
//! **Protocol.** The parent binds a Unix socket in a private directory, spawns the worker with
//! `--socket PATH`, and accepts the worker's connection (so the parent owns the rendezvous, and a worker that
//! never connects is caught by the start timeout). Control messages are bincode frames (`protocol`): on
//! the socket, `Load` (model, session options, the mailbox's region) answered by `Loaded` with the model's
//! declared inputs and outputs, or by `LoadFailed`; then, in the `mailbox` (a region both map, one frame
//! each way at a time, no system call while the waiting side polls), `Run` answered by `Done` or `Failed`, one
//! request in flight at a time, because the caller already serialises batches per instance; and `Release`, once
//! the instance went idle after a load, answered by `Done` when the worker gave back what its batches grew (its
//! arena, and the free regions, which the parent unmaps too).
//!
//! **Shared memory.** Tensor bytes never cross the socket: they lie in regions (`shm`), tmpfs files the
//! parent creates and lends, one tensor to a region, from a pool (`regions`); the worker maps each region
//! the first time a message names it, and the parent then unlinks it. A batch whose inputs already lie in
//! regions ([`Worker::buffer`]: the batcher stacks requests straight into one; a function's `infer` places a
//! request's inputs in one its instance fills in turn, `Instance::place`) is read by ONNX Runtime where it lies;
//! others are copied in once. ONNX Runtime writes the outputs into regions the parent lends for them
//! (it learns their shapes from the first batch of each input shape, which takes one more round trip), and
//! they come back as views of those regions, returned to the pool when dropped. So a warm batch costs two
//! small frames and no copy. Each side polls for the other's frame before it sleeps on the socket (the parent
//! through the time the last batch of the same shape took, up to a millisecond;
//! `Learnt::spin`; a side whose polling finds frames late, behind a thread that never
//! yields its core, sleeps at once for a while), and a worker on CUDA page-locks the regions it maps (`pin`)
//! so that ONNX Runtime's copies to and from the device go by DMA.
//!
//! **Faults.** The socket is the liveness signal: the kernel closes it when the worker dies, however it dies, so a run
//! in flight sees end-of-stream (at most a millisecond later, once its parent stops polling and sleeps on the socket)
//! and fails with [`WorkerError::Died`] carrying the exit status or signal. The failed batch is not retried (it may be
//! what killed the worker; the caller decides). The worker is respawned and reloaded in the background, and a `run`
//! that arrives first does it itself; either way the next batch is served by a fresh process. Malformed frames from
//! either side are errors, never panics; the parent treats a worker that sends one as broken and replaces it. A worker
//! that stays alive but stops answering (a stopped GPU, an MPS server that no longer serves its clients) is killed
//! and replaced alike once a batch outlasts [`WorkerSpec::batch_timeout`] ([`WorkerError::Hung`]). A model error
//! inside a healthy worker is just a `Failed` answer.
//!
//! **Files.**
//! - The parent's side: `spec.rs` ([`WorkerSpec`], [`StartCheck`]: how a worker is started and what it runs);
//!   `parent.rs` ([`Worker`]: the handle that runs batches and restarts the process); `process.rs` (one live
//!   process as the parent holds it: spawn and load, run a batch, reap); `rendezvous.rs` (the socket a new
//!   worker connects to); `learnt.rs` (what the batches of one input shape taught: output shapes, how long to
//!   poll); `error.rs` ([`WorkerError`], and the hint added to a batch that ran out of GPU memory).
//! - The worker's side: `child.rs` ([`serve`]: the process's main loop); `pin.rs` (page-locking on CUDA).
//! - Both sides: `protocol.rs` (the messages and their frames); `mailbox.rs` (the channel once the model is
//!   loaded).
//! - Outside `worker/`, so that the batcher and the [`Executor`](crate::instance::Executor) trait name a shared
//!   buffer without importing the worker that lends it: the crate's `regions.rs` ([`SharedBuffer`]: the pool of
//!   regions lent to a process, re-exported here) and `shm.rs` (one shared region).

mod child;
mod error;
mod learnt;
mod mailbox;
mod parent;
mod pin;
mod process;
mod protocol;
mod rendezvous;
mod spec;

pub use crate::regions::SharedBuffer;
pub use child::serve;
pub use error::WorkerError;
pub use parent::Worker;
pub use spec::{StartCheck, WorkerSpec};

use protocol::{Reply, Request, read_frame};

/// Read `bytes` as a stream of frames, once as a worker reads its parent's requests and once as the parent
/// reads its worker's replies, until the stream ends or a frame is refused; the frames read. For `fuzz/`,
/// which feeds it arbitrary bytes: a malformed frame must be an error, never a panic or an abort.
#[doc(hidden)]
pub fn read_frames(bytes: &[u8]) -> usize {
    let mut buf = Vec::new();
    let mut frames = 0;
    let mut requests = bytes;
    while let Ok(Some(_)) = read_frame::<Request>(&mut requests, &mut buf) {
        frames += 1;
    }
    let mut replies = bytes;
    while let Ok(Some(_)) = read_frame::<Reply>(&mut replies, &mut buf) {
        frames += 1;
    }
    frames
}
