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
//! never connects is caught by the start timeout). Control messages are bincode frames ([`protocol`]): on
//! the socket, `Load` (model, session options, the mailbox's region) answered by `Loaded` with the model's
//! declared inputs and outputs, or by `LoadFailed`; then, in the [`mailbox`] (a region both map, one frame
//! each way at a time, no system call while the waiting side polls), `Run` answered by `Done` or `Failed`, one
//! request in flight at a time, because the caller already serialises batches per instance.
//!
//! **Shared memory.** Tensor bytes never cross the socket: they lie in regions ([`shm`]), tmpfs files the
//! parent creates and lends, one tensor to a region, from a pool ([`regions`]); the worker maps each region
//! the first time a message names it, and the parent then unlinks it. A batch whose inputs already lie in
//! regions ([`Worker::buffer`]: the batcher stacks requests straight into one; a function's `infer` places a
//! request's inputs in free ones, [`Worker::kept_buffer`]) is read by ONNX Runtime where it lies; others are
//! copied in once. ONNX Runtime writes the outputs into regions the parent lends for them
//! (it learns their shapes from the first batch of each input shape, which takes one more round trip), and
//! they come back as views of those regions, returned to the pool when dropped. So a warm batch costs two
//! small frames and no copy. Each side polls for the other's frame before it sleeps on the socket (the parent
//! through the time the last batch of the same shape took, up to a millisecond; [`Learnt::spin`]; a side whose
//! polling finds frames late, behind a thread that never yields its core, sleeps at once for a while), and a
//! worker on CUDA page-locks the regions it maps ([`pin`]) so that ONNX Runtime's copies to and from the device
//! go by DMA.
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

mod child;
mod mailbox;
mod pin;
mod protocol;
mod regions;
mod shm;

pub use child::serve;
pub use regions::SharedBuffer;

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

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufReader};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::onnx::{self, GPU_MEMORY_EXHAUSTED, ModelError, SessionOptions, TensorSpec};
use crate::{DType, Tensor};
use mailbox::{Mailbox, SPIN};
use protocol::{Region, Reply, Request, Slot, read_frame, write_frame};
use regions::Regions;

/// Input shapes whose batches a worker remembers; past this many, it forgets them all.
const REMEMBERED_SHAPES: usize = 64;

/// The longest batch a parent polls for throughout; the answer to a longer one is slept for after [`SPIN`], and
/// waking costs it under 2%.
const LONGEST_SPIN: Duration = Duration::from_millis(1);

/// What the batches of one input shape showed: their outputs' element types and shapes, and how long the last
/// one took to be answered.
#[derive(Debug)]
struct Learnt {
    outputs: Vec<(DType, Vec<u64>)>,
    took: Duration,
}

impl Learnt {
    /// How long to poll for the next answer before sleeping: through a quarter more than the last took, if
    /// that is within [`LONGEST_SPIN`], so that an answer on time finds the parent awake (Add at b = 2, 130–150
    /// µs, lost a tenth of its ratio to the wake-up after [`SPIN`]); else [`SPIN`].
    fn spin(&self) -> Duration {
        let expected = self.took * 5 / 4;
        if expected <= LONGEST_SPIN { expected.max(SPIN) } else { SPIN }
    }
}

/// How to start a worker and what it runs.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// The executable: `jig`, with `args = ["worker"]` (see `launch::WorkerCommand`).
    pub program: PathBuf,
    /// Arguments before `--socket PATH`.
    pub args: Vec<String>,
    /// Extra environment, e.g. `CUDA_VISIBLE_DEVICES=MIG-<uuid>` or `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`.
    pub env: Vec<(String, String)>,
    /// The model's name, for errors and logs on both sides.
    pub model_name: String,
    /// The ONNX file the worker loads.
    pub model_path: PathBuf,
    /// How the worker builds its session; with `cuda` set, the worker also gets the CUDA libraries beside
    /// ONNX Runtime on its `LD_LIBRARY_PATH`.
    pub options: SessionOptions,
    /// The instance this worker serves, for errors and logs.
    pub instance: String,
    /// How long the worker may take to connect and load the model.
    pub load_timeout: Duration,
    /// How long the worker may take to answer one batch. Past it the worker is taken for hung (a GPU that
    /// stopped, an MPS server that no longer answers its clients): the batch fails, and the process is killed
    /// and restarted. Far above any batch a plan would run, so that only a worker that stopped trips it.
    pub batch_timeout: Duration,
    /// Run before every start of the process, the first and each restart: an `Err` fails that start with
    /// [`WorkerError::Device`] and spawns nothing. The launcher checks here that the device the worker is bound
    /// to is still on the machine, so that a worker is not restarted into CUDA's generic "no CUDA-capable
    /// device" error when its MIG instance is gone.
    pub check: Option<StartCheck>,
}

/// A check run before each start of a worker process ([`WorkerSpec::check`]): `Err` says why it must not start.
#[derive(Clone)]
pub struct StartCheck(Arc<dyn Fn() -> Result<(), String> + Send + Sync>);

impl StartCheck {
    /// A check that calls `check`.
    pub fn new(check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> StartCheck {
        StartCheck(Arc::new(check))
    }

    /// Run it.
    pub fn run(&self) -> Result<(), String> {
        (self.0)()
    }
}

impl std::fmt::Debug for StartCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StartCheck")
    }
}

impl WorkerSpec {
    /// A spec with no extra arguments or environment, a 60 s load timeout and a 60 s batch timeout.
    pub fn new(
        program: impl Into<PathBuf>,
        instance: impl Into<String>,
        model_name: impl Into<String>,
        model_path: impl Into<PathBuf>,
        options: SessionOptions,
    ) -> WorkerSpec {
        WorkerSpec {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            model_name: model_name.into(),
            model_path: model_path.into(),
            options,
            instance: instance.into(),
            load_timeout: Duration::from_secs(60),
            batch_timeout: Duration::from_secs(60),
            check: None,
        }
    }
}

/// Why a worker could not start or run a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    /// The worker process could not be spawned, exited before connecting, or its socket could not be set up.
    #[error(
        "instance `{instance}`: cannot start worker {program} for model `{model}`: {detail}; check that the \
         program exists and runs (`{program} --socket PATH`)"
    )]
    Spawn {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The worker's executable.
        program: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The worker answered `LoadFailed`, answered wrongly, or ended while loading; or a restarted worker found
    /// the model's inputs or outputs changed.
    #[error("instance `{instance}`: the worker could not load model `{model}`: {detail}")]
    Load {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The worker's error, or what went wrong.
        detail: String,
    },
    /// The worker did not connect, or did not load the model, within [`WorkerSpec::load_timeout`].
    #[error(
        "instance `{instance}`: the worker for model `{model}` did not {stage} within {after:?}; it was killed \
         (a slow GPU initialisation or a large model may need a longer load timeout)"
    )]
    Timeout {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// What it did not finish: `connect` or `load the model`.
        stage: &'static str,
        /// The load timeout.
        after: Duration,
    },
    /// The batch does not fit the model's declared inputs; checked before anything is sent.
    #[error("instance `{instance}`: {source}")]
    Model {
        /// The instance the worker serves.
        instance: String,
        /// What does not fit.
        source: ModelError,
    },
    /// The model failed on this batch; the worker is healthy and serves the next one.
    #[error("instance `{instance}`: {detail}")]
    Run {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The worker's error.
        detail: String,
    },
    /// The worker process died during the batch; it is being restarted in the background.
    #[error(
        "instance `{instance}`: the worker for model `{model}` died during the batch ({detail}); the batch \
         failed and the worker is being restarted, so the next batch goes to a fresh process"
    )]
    Died {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// How it ended: its exit status or signal, as far as the parent could tell.
        detail: String,
    },
    /// The worker did not answer a batch within [`WorkerSpec::batch_timeout`]; it was killed and is being
    /// restarted.
    #[error(
        "instance `{instance}`: the worker for model `{model}` did not answer the batch within {after:?}, so it \
         was taken for hung (a stopped GPU or MPS server), killed and is being restarted; the batch failed"
    )]
    Hung {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The batch timeout.
        after: Duration,
    },
    /// The worker sent a malformed or unexpected message; it was killed and is being restarted.
    #[error(
        "instance `{instance}`: the worker for model `{model}` broke the protocol ({detail}); it was killed and \
         is being restarted (are the worker and this host from the same build?)"
    )]
    Protocol {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// What was wrong with the message.
        detail: String,
    },
    /// The worker's [start check](WorkerSpec::check) refused: its device is not on the machine as placed. No
    /// process was started; each later batch checks again (cheaply: see `launch`) and fails the same way
    /// until the app is redeployed.
    #[error("instance `{instance}`: cannot start the worker for model `{model}`: {detail}")]
    Device {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// Why, from the check.
        detail: String,
    },
    /// The parent could not create or grow the shared region.
    #[error("instance `{instance}`: shared memory for model `{model}`: {detail}; check free space in /dev/shm")]
    Memory {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The system's answer.
        detail: String,
    },
}

impl WorkerError {
    fn model_name(&self) -> &str {
        match self {
            WorkerError::Model { source, .. } => match source {
                ModelError::Library { .. } => "",
                ModelError::Read { model, .. }
                | ModelError::Invalid { model, .. }
                | ModelError::UnsupportedType { model, .. }
                | ModelError::Input { model, .. }
                | ModelError::Run { model, .. } => model,
            },
            WorkerError::Spawn { model, .. }
            | WorkerError::Load { model, .. }
            | WorkerError::Timeout { model, .. }
            | WorkerError::Run { model, .. }
            | WorkerError::Died { model, .. }
            | WorkerError::Hung { model, .. }
            | WorkerError::Protocol { model, .. }
            | WorkerError::Device { model, .. }
            | WorkerError::Memory { model, .. } => model,
        }
    }
}

/// Callers that speak [`ModelError`] (the `infer` host call) get the input error as it was, and everything
/// else as a run failure whose text still names the instance.
impl From<WorkerError> for ModelError {
    fn from(err: WorkerError) -> ModelError {
        match err {
            WorkerError::Model { source, .. } => source,
            WorkerError::Run { model, detail, .. } => ModelError::Run { model, detail },
            other => ModelError::Run { model: other.model_name().to_string(), detail: other.to_string() },
        }
    }
}

/// A model served by a child process; see the module documentation. Dropping it kills the process.
#[derive(Debug)]
pub struct Worker {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    spec: WorkerSpec,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    /// Outside the lock, so a supervisor can read it while a batch is in flight. 0: no process.
    pid: AtomicU32,
    /// Shared with the instance that runs it, for its metrics ([`crate::instance::Executor::restarts`]).
    restarts: Arc<AtomicU64>,
    closed: AtomicBool,
    process: Mutex<Option<Process>>,
    /// The current process's regions, outside the lock, so that memory can be lent while a batch is in flight;
    /// `None` between a death and the restart.
    regions: Mutex<Option<Arc<Regions>>>,
}

impl Worker {
    /// Spawn the worker and wait until it has loaded the model.
    pub fn start(spec: WorkerSpec) -> Result<Worker, WorkerError> {
        let (process, inputs, outputs) = Process::spawn(&spec)?;
        tracing::info!(instance = %spec.instance, model = %spec.model_name, pid = process.pid(), "worker started");
        let inner = Inner {
            pid: AtomicU32::new(process.pid()),
            spec,
            inputs,
            outputs,
            restarts: Arc::default(),
            closed: AtomicBool::new(false),
            regions: Mutex::new(Some(process.regions.clone())),
            process: Mutex::new(Some(process)),
        };
        Ok(Worker { inner: Arc::new(inner) })
    }

    /// How it was started; restarts use the same spec.
    pub fn spec(&self) -> &WorkerSpec {
        &self.inner.spec
    }

    /// The model's declared inputs, as the worker reported them.
    pub fn inputs(&self) -> &[TensorSpec] {
        &self.inner.inputs
    }

    /// The model's declared outputs, as the worker reported them.
    pub fn outputs(&self) -> &[TensorSpec] {
        &self.inner.outputs
    }

    /// The current process, or `None` between a death and its restart.
    pub fn pid(&self) -> Option<u32> {
        Some(self.inner.pid.load(Ordering::SeqCst)).filter(|&p| p != 0)
    }

    /// How many times the process has been replaced after dying or misbehaving.
    pub fn restarts(&self) -> u64 {
        self.inner.restarts.load(Ordering::SeqCst)
    }

    /// Memory for `len` bytes of a batch's input that the worker reads where it lies, with no copy (`None`
    /// while the process is being replaced, or when no shared memory is left: any memory then does). It does
    /// not wait for a batch in flight.
    pub fn buffer(&self, len: usize) -> Option<SharedBuffer> {
        self.inner.regions()?.take(len).ok()
    }

    /// [`Worker::buffer`] from memory the worker maps already, if enough is free; it creates no region (which
    /// the worker would map, and on CUDA page-lock, anew).
    pub fn kept_buffer(&self, len: usize) -> Option<SharedBuffer> {
        self.inner.regions()?.take_kept(len)
    }

    /// Whether `bytes` lie in memory [`Worker::buffer`] lent to the current process, which reads them in place.
    pub fn holds(&self, bytes: &[u8]) -> bool {
        self.inner.regions().is_some_and(|regions| regions.locate(bytes).is_some())
    }

    /// Run one batch (inputs in declared order) and return the outputs in declared order, as views of shared
    /// regions. Blocks; batches on one worker run one at a time.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, WorkerError> {
        let inner = &self.inner;
        onnx::check_inputs(&inner.spec.model_name, &inner.inputs, inputs)
            .map_err(|source| WorkerError::Model { instance: inner.spec.instance.clone(), source })?;
        let mut slot = inner.lock();
        if slot.is_none() {
            inner.restart(&mut slot)?;
        }
        let Some(process) = slot.as_mut() else { unreachable!("restart fills the slot or fails") };
        match process.run(inputs) {
            Ok(outputs) => Ok(outputs),
            Err(Fault::Failed(detail)) => Err(WorkerError::Run {
                instance: inner.spec.instance.clone(),
                model: inner.spec.model_name.clone(),
                detail: with_memory_hint(detail, &inner.spec.options),
            }),
            Err(Fault::Memory(err)) => Err(WorkerError::Memory {
                instance: inner.spec.instance.clone(),
                model: inner.spec.model_name.clone(),
                detail: err.to_string(),
            }),
            Err(fault @ (Fault::Died(_) | Fault::Hung | Fault::Protocol(_))) => {
                let process = slot.take().expect("a process was running");
                inner.pid.store(0, Ordering::SeqCst);
                inner.set_regions(None);
                let (instance, model) = (inner.spec.instance.clone(), inner.spec.model_name.clone());
                let err = match fault {
                    Fault::Died(io) => {
                        let detail = process.reap(io);
                        tracing::warn!(%instance, %model, %detail, "worker died during a batch; restarting it");
                        WorkerError::Died { instance, model, detail }
                    }
                    Fault::Hung => {
                        drop(process);
                        let after = inner.spec.batch_timeout;
                        tracing::warn!(%instance, %model, ?after, "worker did not answer a batch; killed, restarting it");
                        WorkerError::Hung { instance, model, after }
                    }
                    Fault::Protocol(detail) => {
                        drop(process);
                        tracing::warn!(%instance, %model, %detail, "worker broke the protocol; restarting it");
                        WorkerError::Protocol { instance, model, detail }
                    }
                    Fault::Failed(_) | Fault::Memory(_) => unreachable!(),
                };
                drop(slot);
                Inner::restart_in_background(&self.inner);
                Err(err)
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // The process dies with `Inner`; a restart thread holding it sees `closed` and stops.
        self.inner.closed.store(true, Ordering::SeqCst);
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Option<Process>> {
        self.process.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn regions(&self) -> Option<Arc<Regions>> {
        self.regions.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_regions(&self, regions: Option<Arc<Regions>>) {
        *self.regions.lock().unwrap_or_else(|p| p.into_inner()) = regions;
    }

    fn restart(&self, slot: &mut Option<Process>) -> Result<(), WorkerError> {
        let (process, inputs, outputs) = Process::spawn(&self.spec)?;
        if inputs != self.inputs || outputs != self.outputs {
            return Err(WorkerError::Load {
                instance: self.spec.instance.clone(),
                model: self.spec.model_name.clone(),
                detail: format!(
                    "{} changed since the instance started (its inputs or outputs differ); redeploy the instance",
                    self.spec.model_path.display()
                ),
            });
        }
        self.pid.store(process.pid(), Ordering::SeqCst);
        self.set_regions(Some(process.regions.clone()));
        self.restarts.fetch_add(1, Ordering::SeqCst);
        tracing::info!(instance = %self.spec.instance, model = %self.spec.model_name, pid = process.pid(), "worker restarted");
        *slot = Some(process);
        Ok(())
    }

    /// Respawn now rather than at the next batch, so that batch does not pay for the model load.
    fn restart_in_background(this: &Arc<Inner>) {
        let weak = Arc::downgrade(this);
        let spawned = std::thread::Builder::new().name("jig-worker-restart".into()).spawn(move || {
            let Some(inner) = weak.upgrade() else { return };
            let mut slot = inner.lock();
            if slot.is_some() || inner.closed.load(Ordering::SeqCst) {
                return;
            }
            if let Err(err) = inner.restart(&mut slot) {
                // The next `run` tries again and reports the error to its caller.
                tracing::error!(instance = %inner.spec.instance, %err, "restarting the worker failed");
            }
        });
        if let Err(err) = spawned {
            tracing::warn!(%err, "cannot start a restart thread; the next batch restarts the worker");
        }
    }
}

/// How a batch went wrong inside [`Process::run`].
enum Fault {
    /// The model failed; the worker is fine.
    Failed(String),
    /// The parent could not make room in the shared region; the worker is fine.
    Memory(io::Error),
    /// The socket broke: the worker is gone.
    Died(io::Error),
    /// No answer within the batch timeout.
    Hung,
    /// The worker said something it should not have.
    Protocol(String),
}

/// One live worker process and its channel.
#[derive(Debug)]
struct Process {
    child: Child,
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    buf: Vec<u8>,
    /// Where requests and answers go once the model is loaded.
    mailbox: Mailbox,
    next_id: u64,
    /// The regions this process maps.
    regions: Arc<Regions>,
    /// What the batches run taught, by input shapes.
    learnt: HashMap<Vec<Vec<u64>>, Learnt>,
}

impl Process {
    fn spawn(spec: &WorkerSpec) -> Result<(Process, Vec<TensorSpec>, Vec<TensorSpec>), WorkerError> {
        let spawn_err = |detail: String| WorkerError::Spawn {
            instance: spec.instance.clone(),
            model: spec.model_name.clone(),
            program: spec.program.clone(),
            detail,
        };
        if let Some(check) = &spec.check {
            check.run().map_err(|detail| WorkerError::Device {
                instance: spec.instance.clone(),
                model: spec.model_name.clone(),
                detail,
            })?;
        }
        let deadline = Instant::now() + spec.load_timeout;
        let rendezvous = Rendezvous::new().map_err(|e| spawn_err(format!("cannot create its socket: {e}")))?;
        let mut command = Command::new(&spec.program);
        command.args(&spec.args).arg("--socket").arg(&rendezvous.path).stdin(Stdio::null());
        if spec.options.cuda.is_some()
            && let Some(path) = crate::onnx::cuda_library_path()
        {
            command.env("LD_LIBRARY_PATH", path);
        }
        let mut child = command
            .envs(spec.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))))
            .spawn()
            .map_err(|e| spawn_err(e.to_string()))?;
        let stream = match rendezvous.accept(&mut child, deadline) {
            Ok(stream) => stream,
            Err(Accept::Exited(status)) => {
                return Err(spawn_err(format!("it {} before connecting", describe(status))));
            }
            Err(Accept::TimedOut) => {
                kill(&mut child);
                return Err(WorkerError::Timeout {
                    instance: spec.instance.clone(),
                    model: spec.model_name.clone(),
                    stage: "connect",
                    after: spec.load_timeout,
                });
            }
            Err(Accept::Io(e)) => {
                kill(&mut child);
                return Err(spawn_err(format!("accepting its connection: {e}")));
            }
        };
        drop(rendezvous);

        // From here on `process` owns the child, so every early return kills it.
        let reader = match stream.try_clone() {
            Ok(r) => BufReader::new(r),
            Err(e) => {
                kill(&mut child);
                return Err(spawn_err(e.to_string()));
            }
        };
        let mailbox = match Mailbox::create() {
            Ok(mailbox) => mailbox,
            Err(e) => {
                kill(&mut child);
                return Err(spawn_err(format!("cannot create its mailbox: {e}")));
            }
        };
        let mailbox_path = mailbox.path().expect("a new mailbox has a name").to_path_buf();
        let mut process = Process {
            child,
            stream,
            reader,
            buf: Vec::new(),
            mailbox,
            next_id: 0,
            regions: Arc::default(),
            learnt: HashMap::new(),
        };
        let load_err = |detail: String| WorkerError::Load {
            instance: spec.instance.clone(),
            model: spec.model_name.clone(),
            detail,
        };
        let load = Request::Load {
            model_name: spec.model_name.clone(),
            model_path: spec.model_path.clone(),
            options: spec.options.clone(),
            mailbox: mailbox_path,
        };
        let remaining = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let reply = write_frame(&process.stream, &mut process.buf, &load)
            .and_then(|()| process.stream.set_read_timeout(Some(remaining)))
            .and_then(|()| read_frame::<Reply>(&mut process.reader, &mut process.buf));
        process.mailbox.unlink();
        match reply {
            Ok(Some(Reply::Loaded { inputs, outputs })) => {
                // From here the parent reads the socket only while it sleeps for an answer (the mailbox's doorbell).
                process.stream.set_read_timeout(Some(spec.batch_timeout)).map_err(|e| spawn_err(e.to_string()))?;
                Ok((process, inputs, outputs))
            }
            Ok(Some(Reply::LoadFailed { error })) => Err(load_err(error)),
            Ok(Some(other)) => Err(load_err(format!("it answered {} instead of Loaded", kind(&other)))),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                Err(WorkerError::Timeout {
                    instance: spec.instance.clone(),
                    model: spec.model_name.clone(),
                    stage: "load the model",
                    after: spec.load_timeout,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(load_err(format!("malformed answer: {e}"))),
            Ok(None) | Err(_) => {
                let detail = process.reap(io::ErrorKind::UnexpectedEof.into());
                Err(load_err(format!("the worker process ended while loading ({detail})")))
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Fault> {
        // Inputs already in a region are read where they lie; others are copied into one, held until answered.
        let mut copied = Vec::new();
        let mut slots = Vec::with_capacity(inputs.len());
        for tensor in inputs {
            let (region, offset) = match self.regions.locate(tensor.data()) {
                Some(found) => found,
                None => {
                    let mut buffer = self.regions.take(tensor.data().len()).map_err(Fault::Memory)?;
                    crate::batch::gather(buffer.as_mut_slice(), &[tensor.data()]);
                    let region = buffer.region();
                    copied.push(buffer);
                    (region, 0)
                }
            };
            slots.push(Slot {
                region,
                dtype: tensor.dtype(),
                shape: tensor.shape().to_vec(),
                offset: offset as u64,
                len: tensor.data().len() as u64,
            });
        }
        let key: Vec<Vec<u64>> = inputs.iter().map(|t| t.shape().to_vec()).collect();
        let (mut places, spin) = match self.learnt.get(&key) {
            Some(learnt) => (Some(self.places(&learnt.outputs)?), learnt.spin()),
            None => (None, SPIN),
        };
        self.next_id += 1;
        let id = self.next_id;
        let (open, close) = self.regions.changes();
        let outputs = places.as_ref().map(|p| p.iter().map(|(slot, _)| slot.clone()).collect());
        let asked = Instant::now();
        let mut reply = self.ask(&Request::Run { id, open, close, inputs: slots, outputs }, id, spin)?;
        let took = asked.elapsed();
        if let Reply::Sized { outputs: shapes, .. } = reply {
            if self.learnt.len() >= REMEMBERED_SHAPES {
                self.learnt.clear();
            }
            let placed = self.places(&shapes)?;
            self.learnt.insert(key, Learnt { outputs: shapes, took });
            let open = self.regions.announcements();
            let outputs = placed.iter().map(|(slot, _)| slot.clone()).collect();
            places = Some(placed);
            reply = self.ask(&Request::Place { id, open, outputs }, id, SPIN)?;
        } else if let Some(learnt) = self.learnt.get_mut(&key) {
            learnt.took = took;
        }
        drop(copied);
        match (reply, places) {
            (Reply::Done { .. }, Some(places)) => places
                .into_iter()
                .map(|(slot, buffer)| {
                    Tensor::new(slot.dtype, slot.shape, buffer.freeze())
                        .map_err(|e| Fault::Protocol(format!("malformed output: {e}")))
                })
                .collect(),
            (Reply::Failed { error, .. }, _) => Err(Fault::Failed(error)),
            (other, _) => Err(Fault::Protocol(format!("it answered {} to request {id}", kind(&other)))),
        }
    }

    /// A region for each output of these types and shapes.
    fn places(&self, shapes: &[(DType, Vec<u64>)]) -> Result<Vec<(Slot, SharedBuffer)>, Fault> {
        shapes
            .iter()
            .map(|(dtype, shape)| {
                let len = dtype
                    .bytes_for(shape)
                    .ok_or_else(|| Fault::Protocol(format!("an output of shape {shape:?} overflows memory")))?;
                let buffer = self.regions.take(len).map_err(Fault::Memory)?;
                let slot =
                    Slot { region: buffer.region(), dtype: *dtype, shape: shape.clone(), offset: 0, len: len as u64 };
                Ok((slot, buffer))
            })
            .collect()
    }

    /// Send `request` and read the answer to `id`, polling for it for up to `spin`; the regions it announced are
    /// unlinked once answered.
    fn ask(&mut self, request: &Request, id: u64, spin: Duration) -> Result<Reply, Fault> {
        let sent = self.mailbox.send(request, &self.stream);
        let answer = sent.and_then(|()| self.mailbox.receive::<Reply>(&mut self.reader, &mut self.buf, spin));
        if let Request::Run { open, .. } | Request::Place { open, .. } = request {
            unlink(open);
        }
        match answer {
            Ok(Some(
                reply @ (Reply::Done { id: got } | Reply::Sized { id: got, .. } | Reply::Failed { id: got, .. }),
            )) if got == id => Ok(reply),
            Ok(Some(other)) => Err(Fault::Protocol(format!("it answered {} to request {id}", kind(&other)))),
            Ok(None) => Err(Fault::Died(io::ErrorKind::UnexpectedEof.into())),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(Fault::Protocol(e.to_string())),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Err(Fault::Hung),
            Err(e) => Err(Fault::Died(e)),
        }
    }

    /// After the socket broke: why the process ended. Waits briefly for the exit the broken socket announces;
    /// a process that closed its socket but lives on is killed.
    fn reap(mut self, io: io::Error) -> String {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return describe(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
                Ok(None) => {
                    kill(&mut self.child);
                    return format!("its socket failed ({io}) while it kept running, so it was killed");
                }
                Err(e) => return format!("its socket failed ({io}); its status is unknown ({e})"),
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => {
            let name = match signal {
                libc::SIGKILL => " (SIGKILL: killed, possibly by the out-of-memory killer)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGTERM => " (SIGTERM)",
                _ => "",
            };
            format!("killed by signal {signal}{name}")
        }
        (None, None) => status.to_string(),
    }
}

fn kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Loaded { .. } => "Loaded",
        Reply::LoadFailed { .. } => "LoadFailed",
        Reply::Done { .. } => "Done",
        Reply::Sized { .. } => "Sized",
        Reply::Failed { .. } => "Failed",
    }
}

/// Remove the names of regions the worker has opened (or, if it died, never will): the mappings keep them.
fn unlink(regions: &[Region]) {
    for region in regions {
        let _ = std::fs::remove_file(&region.path);
    }
}

/// The socket a new worker connects to, in a directory only this user can enter; removed once accepted.
struct Rendezvous {
    dir: PathBuf,
    path: PathBuf,
    listener: UnixListener,
}

enum Accept {
    Exited(ExitStatus),
    TimedOut,
    Io(io::Error),
}

impl Rendezvous {
    fn new() -> io::Result<Rendezvous> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        // Short: a socket path must fit in 108 bytes.
        let dir = std::env::temp_dir().join(format!(
            "jig-w{}-{}-{nanos:x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let path = dir.join("s");
        let listener = match UnixListener::bind(&path).and_then(|l| l.set_nonblocking(true).map(|()| l)) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        Ok(Rendezvous { dir, path, listener })
    }

    /// Wait for the child to connect, noticing if it exits first.
    fn accept(&self, child: &mut Child, deadline: Instant) -> Result<UnixStream, Accept> {
        let mut pause = Duration::from_micros(200);
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).map_err(Accept::Io)?;
                    return Ok(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Accept::Io(e)),
            }
            if let Some(status) = child.try_wait().map_err(Accept::Io)? {
                return Err(Accept::Exited(status));
            }
            if Instant::now() >= deadline {
                return Err(Accept::TimedOut);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl crate::instance::Executor for Worker {
    fn inputs(&self) -> &[TensorSpec] {
        Worker::inputs(self)
    }
    fn outputs(&self) -> &[TensorSpec] {
        Worker::outputs(self)
    }
    fn execute(&self, inputs: &[crate::Tensor]) -> Result<Vec<crate::Tensor>, crate::instance::BoxError> {
        Ok(self.run(inputs)?)
    }
    fn buffer(&self, len: usize) -> Option<SharedBuffer> {
        Worker::buffer(self, len)
    }
    fn kept_buffer(&self, len: usize) -> Option<SharedBuffer> {
        Worker::kept_buffer(self, len)
    }
    fn holds(&self, bytes: &[u8]) -> bool {
        Worker::holds(self, bytes)
    }
    fn restarts(&self) -> Option<Arc<AtomicU64>> {
        Some(self.inner.restarts.clone())
    }
}

/// `detail`, a failed batch's error, with what to do when it says the GPU's memory ran out: ONNX Runtime's CUDA
/// arena (`Failed to allocate memory`), CUDA or cuDNN. The worker's model explains its own runs' (then this
/// adds only that the worker serves on).
fn with_memory_hint(detail: String, options: &SessionOptions) -> String {
    let Some((_, limit)) = options.cuda else { return detail };
    if !onnx::gpu_memory_exhausted(&detail) {
        return detail;
    }
    if detail.contains(GPU_MEMORY_EXHAUSTED) {
        return format!("{detail}; the worker serves the next batch");
    }
    let share = limit.map_or("the GPU's".into(), |bytes| format!("{} MiB,", bytes >> 20));
    format!(
        "{detail} ({GPU_MEMORY_EXHAUSTED}: this instance may use {share} its segment's share; give it a larger \
         segment or a smaller maximum batch; the worker serves the next batch)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_parent_polls_through_a_short_batch_and_sleeps_through_a_long_one() {
        let spin = |micros| Learnt { outputs: Vec::new(), took: Duration::from_micros(micros) }.spin();
        assert_eq!(spin(20), SPIN, "a short batch is polled for at least SPIN");
        assert_eq!(spin(400), Duration::from_micros(500), "a quarter more than the last took");
        assert_eq!(spin(800), LONGEST_SPIN);
        assert_eq!(spin(900), SPIN, "past LONGEST_SPIN the parent sleeps after SPIN");
    }

    #[test]
    fn a_batch_that_runs_out_of_gpu_memory_says_how_much_it_had_and_what_to_do() {
        let cuda = SessionOptions { threads: 1, cuda: Some((0, Some(10_000_000_000))) };
        let arena = "Failed to allocate memory for requested buffer of size 4194304000".to_string();
        let said = with_memory_hint(arena.clone(), &cuda);
        assert!(said.starts_with(&arena) && said.contains("may use 9536 MiB, its segment's share"), "{said}");
        assert!(said.contains("smaller maximum batch"), "{said}");
        let cudnn = with_memory_hint("CUDNN failure 4: CUDNN_STATUS_ALLOC_FAILED".into(), &cuda);
        assert!(cudnn.contains("GPU memory exhausted"), "{cudnn}");
        // Another failure, or a CPU session, is left as it is.
        assert_eq!(with_memory_hint("shape mismatch".into(), &cuda), "shape mismatch");
        assert_eq!(with_memory_hint(arena.clone(), &SessionOptions::default()), arena);
        // What the worker's model already explained is not explained twice.
        let explained = "GPU memory exhausted: this segment grants 815 MiB to ONNX Runtime (BFCArena …)";
        let said = with_memory_hint(explained.into(), &cuda);
        assert_eq!(said.matches("GPU memory exhausted").count(), 1, "{said}");
        assert!(said.ends_with("the worker serves the next batch"), "{said}");
    }

    /// A refused start check spawns nothing, at the first start and at every restart, and its reason reaches
    /// the batch that asked for the restart.
    #[test]
    fn a_refused_start_check_spawns_nothing_at_start_or_restart() {
        let checks = Arc::new(AtomicUsize::new(0));
        let counted = checks.clone();
        let check = StartCheck::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Err("MIG instance MIG-gone is no longer listed".into())
        });
        let instance = "demo/detect/yolo@mig:0:3g.40gb:1#0";
        // A program that does not exist: had the check not stopped the start, this would be a `Spawn` error.
        let new = WorkerSpec::new("/nonexistent/jig", instance, "yolo", "yolo.onnx", SessionOptions::default());
        let spec = WorkerSpec { check: Some(check), ..new };
        let err = Worker::start(spec.clone()).unwrap_err();
        assert!(matches!(&err, WorkerError::Device { detail, .. } if detail.contains("MIG-gone")), "{err:?}");
        assert!(err.to_string().contains(instance), "{err}");

        // A worker whose process died (none in the slot) restarts through the same check.
        let inner = Inner {
            spec,
            inputs: Vec::new(),
            outputs: Vec::new(),
            pid: AtomicU32::new(0),
            restarts: Arc::default(),
            closed: AtomicBool::new(false),
            process: Mutex::new(None),
            regions: Mutex::default(),
        };
        let worker = Worker { inner: Arc::new(inner) };
        let err = worker.run(&[]).unwrap_err();
        assert!(matches!(&err, WorkerError::Device { .. }), "{err:?}");
        let model_error = ModelError::from(err);
        assert!(model_error.to_string().contains("MIG-gone"), "{model_error}");
        assert_eq!((checks.load(Ordering::SeqCst), worker.restarts(), worker.pid()), (2, 0, None));
    }
}
