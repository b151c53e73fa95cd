//! One way to start a model: a variant's ONNX file on a [`Segment`], for serving ([`Launcher::start_instance`])
//! or for measuring ([`Launcher::run_on`]).
//!
//! * **CPU cores** run in this process: the thread that loads the model pins itself to the placement's cores,
//!   with one intra-op thread per core; ONNX Runtime's threads, created with the session, inherit the pinning,
//!   and the thread that runs batches is the pinned one.
//! * **GPU segments** run in a worker process ([`crate::worker`]) bound to its device: `CUDA_VISIBLE_DEVICES`
//!   names the GPU's or the MIG instance's UUID, and an MPS share runs under the device's own MPS daemon
//!   ([`crate::mps`]), started if none is running and kept while the model runs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::Tensor;
use crate::device::{DeviceError, Devices};
use crate::instance::{BoxError, Executor, Instance, InstanceConfig, InstanceError};
use crate::mps::{MpsDaemon, MpsError};
use crate::onnx::{Model, ModelError, SessionOptions, TensorSpec};
use crate::segment::Segment;
use crate::worker::{Worker, WorkerError, WorkerSpec};

/// The command that starts a worker process: a program and the arguments before `--socket PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before `--socket PATH`.
    pub args: Vec<String>,
}

impl WorkerCommand {
    /// The running executable's `worker` subcommand, as the `jig` binary has it.
    pub fn current_exe() -> std::io::Result<WorkerCommand> {
        Ok(WorkerCommand { program: std::env::current_exe()?, args: vec!["worker".into()] })
    }
}

/// Where one instance runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The segment type.
    pub segment: Segment,
    /// For CPU segments: the machine's cores to pin to (as many as the segment has); `None` leaves the
    /// instance unpinned.
    pub cores: Option<Vec<usize>>,
    /// For MIG segments: which existing MIG instance of the segment's profile on its GPU.
    pub nth: usize,
}

impl Placement {
    /// `segment`, unpinned, on the first MIG instance of its profile.
    pub fn new(segment: Segment) -> Placement {
        Placement { segment, cores: None, nth: 0 }
    }
}

/// Why a model could not be started on a segment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The machine lacks the segment's device.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The segment needs more CPU cores than this process may use.
    #[error("segment {segment}: this machine offers {available} cores")]
    Cores {
        /// The segment asked for.
        segment: Segment,
        /// Cores in this process's affinity mask.
        available: usize,
    },
    /// Pinning to the placement's cores failed.
    #[error("cannot pin to cores {cores:?}: {source}")]
    Pin {
        /// The cores asked for.
        cores: Vec<usize>,
        /// The system's answer.
        source: std::io::Error,
    },
    /// The device's MPS daemon could not be started.
    #[error(transparent)]
    Mps(#[from] MpsError),
    /// The worker process could not be started.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The model could not be loaded in this process.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The instance could not start (its weights exceed the segment's memory, its thread died).
    #[error(transparent)]
    Instance(#[from] InstanceError),
    /// The thread that ran the model panicked.
    #[error("running {0} panicked")]
    Panicked(String),
    /// The executable of worker processes is unknown.
    #[error("cannot find this program's executable to start a worker: {0}")]
    Executable(std::io::Error),
}

/// Starts models on this machine's segments.
#[derive(Debug, Clone)]
pub struct Launcher {
    devices: Devices,
    worker: Option<WorkerCommand>,
}

/// A model loaded on its segment, with what must live as long as it runs.
struct Loaded {
    executor: Box<dyn Executor>,
    /// The device's MPS daemon, for MPS shares: stopped, if this process started it, when the last user goes.
    _mps: Option<MpsDaemon>,
}

impl Executor for Loaded {
    fn inputs(&self) -> &[TensorSpec] {
        self.executor.inputs()
    }
    fn outputs(&self) -> &[TensorSpec] {
        self.executor.outputs()
    }
    fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError> {
        self.executor.execute(inputs)
    }
    fn buffer(&self, len: usize) -> Option<crate::worker::SharedBuffer> {
        self.executor.buffer(len)
    }
}

impl Launcher {
    /// A launcher over `devices` that starts GPU workers with `worker` (`None`: GPU segments are refused).
    pub fn new(devices: Devices, worker: Option<WorkerCommand>) -> Launcher {
        Launcher { devices, worker }
    }

    /// A launcher over this machine, starting GPU workers with the running executable's `worker` subcommand.
    pub fn discover() -> Launcher {
        Launcher::new(Devices::discover(), WorkerCommand::current_exe().ok())
    }

    /// What this machine has.
    pub fn devices(&self) -> &Devices {
        &self.devices
    }

    /// Check that this machine offers `placement` before anything is loaded.
    pub fn check(&self, placement: &Placement) -> Result<(), LaunchError> {
        match placement.segment {
            Segment::Cpu { cores } if cores as usize > self.devices.cpu_cores.len() => {
                Err(LaunchError::Cores { segment: placement.segment, available: self.devices.cpu_cores.len() })
            }
            Segment::Cpu { .. } => Ok(()),
            gpu => self.devices.device_uuid(&gpu, placement.nth).map(drop).map_err(LaunchError::from),
        }
    }

    /// The device an instance on `placement` runs on, as the profile table names it: the CPU's model name,
    /// or the GPU's name and the device's UUID.
    pub fn device_name(&self, placement: &Placement) -> String {
        let Ok(uuid) = self.devices.device_uuid(&placement.segment, placement.nth) else {
            return crate::device::cpu_name();
        };
        let gpu = self.devices.gpus.iter().find(|g| Some(g.index) == placement.segment.gpu());
        gpu.map_or_else(|| uuid.clone(), |g| format!("{} ({uuid})", g.name))
    }

    /// Start a serving instance of the model `name` at `path` on `placement`, behind its queue. Returns once
    /// the model is loaded.
    pub fn start_instance(
        &self,
        config: InstanceConfig,
        name: &str,
        path: &Path,
        mut placement: Placement,
    ) -> Result<Instance, LaunchError> {
        self.check(&placement)?;
        placement.cores = placement.cores.or(config.cores.clone());
        let budget = config.memory.or(placement.segment.memory());
        if let (Some(budget), Ok(meta)) = (budget, std::fs::metadata(path))
            && meta.len() > budget
        {
            return Err(LaunchError::Instance(InstanceError::Start {
                instance: config.name,
                detail: format!(
                    "model `{name}` ({}) needs at least {} MiB for its weights, but the segment grants {} MiB; \
                     place it on a larger segment",
                    path.display(),
                    meta.len() >> 20,
                    budget >> 20
                ),
            }));
        }
        let (launcher, instance, name, path) = (self.clone(), config.name.clone(), name.to_string(), path.to_owned());
        // The instance's own thread, pinned, loads the model, so that a CPU session's threads inherit the
        // pinning; the typed error of a failed load comes back beside the instance's message.
        let failed: Arc<Mutex<Option<LaunchError>>> = Arc::default();
        // `Instance::start` pins its thread to `config.cores`, so the load need not pin it again.
        let config = InstanceConfig { cores: placement.cores.take(), ..config };
        let load_failed = failed.clone();
        Instance::start(config, move || {
            launcher.load(&instance, &name, &path, &placement).map_err(|e| {
                let message: BoxError = e.to_string().into();
                *load_failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                message
            })
        })
        .map_err(|e| failed.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or(LaunchError::Instance(e)))
    }

    /// Load the model `name` at `path` on `placement`, once for each of the segment's
    /// [processes](Segment::processes) (K workers on one MIG instance for `mig:…:K`), and call `f` with them,
    /// on a thread of its own (pinned, for CPU cores): how `jig profile` measures a model as it will serve.
    pub fn run_on<R: Send + 'static>(
        &self,
        label: &str,
        name: &str,
        path: &Path,
        placement: &Placement,
        f: impl FnOnce(&[&dyn Executor]) -> R + Send + 'static,
    ) -> Result<R, LaunchError> {
        self.check(placement)?;
        let (launcher, label, name, path, placement) =
            (self.clone(), label.to_string(), name.to_string(), path.to_owned(), placement.clone());
        let panicked = LaunchError::Panicked(label.clone());
        std::thread::spawn(move || -> Result<R, LaunchError> {
            let loaded = (0..placement.segment.processes())
                .map(|k| launcher.load(&format!("{label}#{k}"), &name, &path, &placement))
                .collect::<Result<Vec<Loaded>, _>>()?;
            let executors: Vec<&dyn Executor> = loaded.iter().map(|l| l as &dyn Executor).collect();
            Ok(f(&executors))
        })
        .join()
        .map_err(|_| panicked)?
    }

    /// Load the model on `placement`, on the calling thread: pinned to the placement's cores in this process,
    /// or in a worker bound to the GPU segment.
    fn load(&self, instance: &str, name: &str, path: &Path, placement: &Placement) -> Result<Loaded, LaunchError> {
        match placement.segment {
            Segment::Cpu { cores } => {
                if let Some(pinned) = &placement.cores {
                    crate::device::pin_current_thread(pinned)
                        .map_err(|source| LaunchError::Pin { cores: pinned.clone(), source })?;
                }
                let options = SessionOptions { threads: cores as usize, ..SessionOptions::default() };
                Ok(Loaded { executor: Box::new(Model::load(name, path, &options)?), _mps: None })
            }
            gpu => {
                let worker = self.worker.clone().ok_or_else(|| {
                    LaunchError::Executable(std::io::Error::other("no worker command was configured"))
                })?;
                let device = self.devices.device_uuid(&gpu, placement.nth)?;
                let mps = gpu.mps_percentage().map(|_| MpsDaemon::ensure(&device)).transpose()?;
                let options = SessionOptions { threads: 1, cuda: Some((0, gpu.memory().map(|bytes| bytes as usize))) };
                let spec = WorkerSpec {
                    args: worker.args,
                    env: self.devices.binding(&gpu, placement.nth)?,
                    ..WorkerSpec::new(worker.program, instance, name, path, options)
                };
                Ok(Loaded { executor: Box::new(Worker::start(spec)?), _mps: mps })
            }
        }
    }
}
