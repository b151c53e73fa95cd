//! One way to start a model: a variant's ONNX file on a [`Segment`], for serving ([`Launcher::start_instance`])
//! or for measuring ([`Launcher::run_on`]).
//!
//! * **CPU cores** run in this process: the thread that loads the model pins itself to the placement's cores,
//!   with one intra-op thread per core; ONNX Runtime's threads, created with the session, inherit the pinning,
//!   and the thread that runs batches is the pinned one.
//! * **GPU segments** run in a worker process ([`crate::worker`]) bound to its device: `CUDA_VISIBLE_DEVICES`
//!   names the GPU's or the MIG instance's UUID, and an MPS share runs under the device's own MPS daemon
//!   ([`crate::mps`]), started if none is running and kept while the model runs.
//!
//! **Binding by UUID.** A GPU placement carries the UUID of the device it was placed on ([`Placement::device`]),
//! chosen once, when the plan is placed on the devices discovery listed; the worker is bound to exactly that
//! device for its whole life, restarts included, and never to "the first (or nth) instance of the profile",
//! which another instance, or another app, may hold once instances come and go. Before each start of the
//! worker, the first and every restart, the launcher lists the machine's devices again (`nvidia-smi`, off the
//! batch path) and refuses to start it when its device is gone, naming the instance (`APP/SLOT/VARIANT@SEGMENT`),
//! the segment and the UUID, instead of letting ONNX Runtime fail with CUDA's generic error.
//!
//! **Memory.** A GPU instance's ONNX Runtime arena is limited to what its binding grants
//! ([`crate::device::Bound::memory`]: a MIG instance's listed size split among its MPS processes, or an MPS
//! share's percentage of its GPU's memory); a model whose weights alone exceed it is refused before loading.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use crate::Tensor;
use crate::device::{Bound, DeviceError, Devices};
use crate::executor::{BoxError, Executor};
use crate::instance::{Instance, InstanceConfig, InstanceError};
use crate::mps::{MpsDaemon, MpsError};
use crate::onnx::{Model, ModelError, SessionOptions, TensorSpec};
use crate::segment::Segment;
use crate::worker::{StartCheck, Worker, WorkerError, WorkerSpec};

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
    /// For GPU segments: the UUID of the device it was placed on, `MIG-…` for a MIG instance, `GPU-…` for an
    /// MPS share of a whole GPU; its worker is bound to exactly this device (see the module documentation).
    /// `None` leaves the choice to the launcher, which takes [`Devices::first_device`] once, when the
    /// instance starts, and keeps it: for a segment measured or run alone (`jig profile`).
    pub device: Option<String>,
}

impl Placement {
    /// `segment`, unpinned and not placed on a device: the launcher picks one when it starts.
    pub fn new(segment: Segment) -> Placement {
        Placement { segment, cores: None, device: None }
    }
}

/// Why a model could not be started on a segment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The machine lacks the segment's device.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The machine lacks the device an instance was placed on (or the segment's device, for an unplaced one).
    #[error("instance `{instance}`: {source}")]
    Bind {
        /// The instance, `APP/SLOT/VARIANT@SEGMENT#N` when an app starts it.
        instance: String,
        /// What is missing.
        source: DeviceError,
    },
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
    /// What the machine has, as last listed; shared by the launcher's clones, listed again by
    /// [`Launcher::relist`].
    devices: Arc<RwLock<Arc<Devices>>>,
    /// Held while [`Launcher::relist`] lists, so that two listings at once cannot keep the older one.
    listing: Arc<Mutex<()>>,
    worker: Option<WorkerCommand>,
    list_devices: Relist,
}

/// How the launcher lists the machine's devices again, for a plan ([`Launcher::relist`]) and before a worker
/// (re)starts: `None` when it cannot tell (`nvidia-smi` did not answer); what was known then stays, and the
/// worker is started unchecked.
#[derive(Clone)]
struct Relist(Arc<dyn Fn() -> Option<Devices> + Send + Sync>);

impl std::fmt::Debug for Relist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Relist")
    }
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
    fn buffer(&self, len: usize) -> Option<crate::regions::SharedBuffer> {
        self.executor.buffer(len)
    }
    fn holds(&self, bytes: &[u8]) -> bool {
        self.executor.holds(bytes)
    }
    fn restarts(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicU64>> {
        self.executor.restarts()
    }
    fn caller_may_run(&self) -> bool {
        self.executor.caller_may_run()
    }
    fn release_memory(&self) {
        self.executor.release_memory()
    }
    fn process_cpu(&self) -> Option<std::time::Duration> {
        self.executor.process_cpu()
    }
}

impl Launcher {
    /// A launcher over `devices` that starts GPU workers with `worker` (`None`: GPU segments are refused).
    /// Workers' devices are checked against `devices` themselves; see [`Launcher::with_relist`].
    pub fn new(devices: Devices, worker: Option<WorkerCommand>) -> Launcher {
        let listed = devices.clone();
        Launcher::new_with(devices, worker, Relist(Arc::new(move || Some(listed.clone()))))
    }

    /// A launcher over this machine, starting GPU workers with the running executable's `worker` subcommand,
    /// and checking each worker's device with `nvidia-smi` ([`Devices::list_now`]) before it (re)starts.
    pub fn discover() -> Launcher {
        Launcher::new_with(Devices::discover(), WorkerCommand::current_exe().ok(), Relist(Arc::new(Devices::list_now)))
    }

    fn new_with(devices: Devices, worker: Option<WorkerCommand>, list_devices: Relist) -> Launcher {
        let (devices, listing) = (Arc::new(RwLock::new(Arc::new(devices))), Arc::default());
        Launcher { devices, listing, worker, list_devices }
    }

    /// The same launcher, listing the machine's devices with `list` for [`Launcher::relist`] and before each
    /// start of a worker (`None`: cannot tell; keep what was known, start unchecked): how a test replays a
    /// machine whose MIG instances change.
    pub fn with_relist(self, list: impl Fn() -> Option<Devices> + Send + Sync + 'static) -> Launcher {
        Launcher { list_devices: Relist(Arc::new(list)), ..self }
    }

    /// What this machine has, as last listed: at discovery, or at the last [`Launcher::relist`].
    pub fn devices(&self) -> Arc<Devices> {
        self.devices.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// List the machine's GPUs and MIG instances again (`nvidia-smi`), and keep that as what it has: how a deploy
    /// plans on the MIG instances that exist now, not those of the gateway's start (an instance may have been
    /// destroyed or created meanwhile). When the listing does not answer, what was known stays; the CPU cores
    /// and each GPU's multiprocessor count (which only the CUDA driver tells) are kept from discovery. Blocks
    /// while `nvidia-smi` runs.
    pub fn relist(&self) -> Arc<Devices> {
        let _listing = self.listing.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(listed) = (self.list_devices.0)() else { return self.devices() };
        let mut devices = self.devices.write().unwrap_or_else(PoisonError::into_inner);
        let gpus = listed
            .gpus
            .into_iter()
            .map(|mut gpu| {
                let known = devices.gpus.iter().find(|k| k.uuid == gpu.uuid);
                gpu.sms = gpu.sms.or(known.and_then(|k| k.sms));
                gpu
            })
            .collect();
        *devices = Arc::new(Devices { cpu_cores: devices.cpu_cores.clone(), gpus });
        devices.clone()
    }

    /// Check that this machine offers `placement` before anything is loaded.
    pub fn check(&self, placement: &Placement) -> Result<(), LaunchError> {
        let available = self.devices().cpu_cores.len();
        match placement.segment {
            Segment::Cpu { cores } if cores as usize > available => {
                Err(LaunchError::Cores { segment: placement.segment, available })
            }
            Segment::Cpu { .. } => Ok(()),
            _ => self.bind(placement).map(drop).map_err(LaunchError::from),
        }
    }

    /// The binding of a GPU placement on this machine's devices: the device it was placed on (or, unplaced,
    /// the segment's [first](Devices::first_device)) and the memory it grants.
    pub fn bind(&self, placement: &Placement) -> Result<Bound, DeviceError> {
        let devices = self.devices();
        let device = match &placement.device {
            Some(device) => device.clone(),
            None => devices.first_device(&placement.segment)?,
        };
        devices.bind(&placement.segment, &device)
    }

    /// The device an instance on `placement` runs on, as the profile table names it: the CPU's model name,
    /// or the GPU's name and the device's UUID.
    pub fn device_name(&self, placement: &Placement) -> String {
        let Ok(bound) = self.bind(placement) else {
            return crate::device::cpu_name();
        };
        let devices = self.devices();
        let gpu = devices.gpus.iter().find(|g| Some(g.index) == placement.segment.gpu());
        gpu.map_or_else(|| bound.device.clone(), |g| format!("{} ({})", g.name, bound.device))
    }

    /// `placement` with its device chosen, once, for a GPU segment placed on none: so that all of a
    /// segment's processes, and each restart of one, are bound to the same device.
    fn placed(&self, mut placement: Placement) -> Result<Placement, DeviceError> {
        if placement.segment.is_gpu() && placement.device.is_none() {
            placement.device = Some(self.devices().first_device(&placement.segment)?);
        }
        Ok(placement)
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
        let unbound = |source| LaunchError::Bind { instance: config.name.clone(), source };
        placement = self.placed(placement).map_err(unbound)?;
        let bound = match placement.segment {
            Segment::Cpu { .. } => {
                self.check(&placement)?;
                None
            }
            _ => Some(self.bind(&placement).map_err(unbound)?),
        };
        placement.cores = placement.cores.or(config.cores.clone());
        let budget = config.memory.or(bound.as_ref().map(|b| b.memory));
        if let (Some(budget), Ok(meta)) = (budget, std::fs::metadata(path))
            && meta.len() > budget
        {
            let on = bound.map_or_else(String::new, |b| format!(" on {}", b.device));
            return Err(LaunchError::Instance(InstanceError::Start {
                instance: config.name,
                detail: format!(
                    "model `{name}` ({}) needs at least {} MiB for its weights, but segment {}{on} grants {} MiB; \
                     place it on a larger segment",
                    path.display(),
                    meta.len() >> 20,
                    placement.segment,
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

    /// Load the model `name` at `path` on `placement` for a caller that runs the batches itself on the calling
    /// thread (a `jig node` connection), which is pinned first for a CPU segment with pinned cores:
    /// [`Launcher::start_instance`] does the same on an instance's own thread, behind its queue.
    pub fn load_here(
        &self,
        instance: &str,
        name: &str,
        path: &Path,
        placement: Placement,
    ) -> Result<Box<dyn Executor>, LaunchError> {
        let placement =
            self.placed(placement).map_err(|source| LaunchError::Bind { instance: instance.to_string(), source })?;
        self.check(&placement)?;
        Ok(Box::new(self.load(instance, name, path, &placement)?))
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
        let placement = self.placed(placement.clone())?;
        self.check(&placement)?;
        let (launcher, label, name, path) = (self.clone(), label.to_string(), name.to_string(), path.to_owned());
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
                let bound = self.bind(placement)?;
                let spec = self.worker_spec(instance, name, path, &bound)?;
                let mps = gpu.mps_percentage().map(|_| MpsDaemon::ensure(&bound.device)).transpose()?;
                Ok(Loaded { executor: Box::new(Worker::start(spec)?), _mps: mps })
            }
        }
    }

    /// How the worker of an instance bound to `bound` starts: its environment names the device, its session
    /// runs on CUDA device 0 (the only one it sees) with ONNX Runtime's arena limited to the binding's memory,
    /// and each start is checked against the devices listed at that moment ([`Launcher::start_check`]).
    fn worker_spec(&self, instance: &str, name: &str, path: &Path, bound: &Bound) -> Result<WorkerSpec, LaunchError> {
        let worker = self
            .worker
            .clone()
            .ok_or_else(|| LaunchError::Executable(std::io::Error::other("no worker command was configured")))?;
        let memory = usize::try_from(bound.memory).unwrap_or(usize::MAX);
        let options = SessionOptions { threads: 1, cuda: Some((0, Some(memory))) };
        Ok(WorkerSpec {
            args: worker.args,
            env: bound.env(),
            check: Some(self.start_check(bound)),
            // Its errors name the device too: `app/slot/variant@mps:0:50#0 on GPU-…`.
            ..WorkerSpec::new(worker.program, format!("{instance} on {}", bound.device), name, path, options)
        })
    }

    /// The check before each start of a worker bound to `bound`: its device must still be listed, where the
    /// segment needs it. It lists the devices again at that moment, so it costs an `nvidia-smi` call per
    /// (re)start, never per batch; a refusal is kept, since a UUID that left never comes back (a re-created
    /// MIG instance has a new one), so a worker that keeps failing to restart does not call it again.
    fn start_check(&self, bound: &Bound) -> StartCheck {
        let (relist, segment, device) = (self.list_devices.clone(), bound.segment, bound.device.clone());
        let refused: Arc<OnceLock<String>> = Arc::default();
        StartCheck::new(move || {
            if let Some(why) = refused.get() {
                return Err(why.clone());
            }
            let Some(devices) = (relist.0)() else { return Ok(()) };
            devices.bind(&segment, &device).map(drop).map_err(|e| refused.get_or_init(|| e.to_string()).clone())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200_QUERY: &str = "0, NVIDIA H200, GPU-h200, 143771, Enabled\n1, NVIDIA H200, GPU-h201, 143771, Disabled\n";
    const H200_LIST: &str = "GPU 0: NVIDIA H200 (UUID: GPU-h200)
  MIG 3g.71gb     Device  0: (UUID: MIG-first)
  MIG 3g.71gb     Device  1: (UUID: MIG-second)
GPU 1: NVIDIA H200 (UUID: GPU-h201)
";

    fn launcher() -> Launcher {
        let devices = Devices::from_nvidia_smi(vec![0], H200_QUERY, H200_LIST);
        Launcher::new(devices, Some(WorkerCommand { program: "/nonexistent/jig".into(), args: vec!["worker".into()] }))
    }

    fn placed(segment: &str, device: &str) -> Placement {
        Placement { device: Some(device.into()), ..Placement::new(segment.parse().unwrap()) }
    }

    /// The worker of the second 3g.71gb instance sees that instance, and its session's arena is limited to
    /// the instance's 71 GB split between its two MPS processes.
    #[test]
    fn a_worker_is_bound_to_its_placed_device_with_its_memory() {
        let launcher = launcher();
        let bound = launcher.bind(&placed("mig:0:3g.40gb:2", "MIG-second")).unwrap();
        let spec = launcher.worker_spec("demo/detect/yolo@mig:0:3g.40gb:2#0.1", "yolo", Path::new("y.onnx"), &bound);
        let spec = spec.unwrap();
        assert_eq!(spec.env[0], ("CUDA_VISIBLE_DEVICES".into(), "MIG-second".into()));
        assert!(spec.env.contains(&("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "50".into())), "{:?}", spec.env);
        assert_eq!(spec.options.cuda, Some((0, Some(35_500_000_000))));
        assert_eq!((spec.args.as_slice(), spec.check.is_some()), (&["worker".to_string()][..], true));

        let bound = launcher.bind(&placed("mps:1:40", "GPU-h201")).unwrap();
        let spec = launcher.worker_spec("demo/b@mps:1:40#0", "b", Path::new("b.onnx"), &bound).unwrap();
        assert_eq!(spec.options.cuda, Some((0, Some((143771 << 20) * 40 / 100))));
        assert_eq!(launcher.device_name(&placed("mps:1:40", "GPU-h201")), "NVIDIA H200 (GPU-h201)");
        // Unplaced: the first instance of the profile, chosen once.
        assert_eq!(
            launcher.placed(Placement::new("mig:0:3g.40gb:1".parse().unwrap())).unwrap().device.unwrap(),
            "MIG-first"
        );
    }

    /// A worker whose MIG instance is no longer listed when it starts is refused before any process starts,
    /// with an error that names the app, slot and segment (the instance's name) and the device.
    #[test]
    fn a_worker_whose_mig_instance_disappeared_is_refused_by_name() {
        let without = Devices::from_nvidia_smi(
            vec![0],
            H200_QUERY,
            "GPU 0: NVIDIA H200 (UUID: GPU-h200)\n  MIG 3g.71gb Device 0: (UUID: MIG-first)\n",
        );
        let lists = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = lists.clone();
        let launcher = launcher().with_relist(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Some(without.clone())
        });
        let config = InstanceConfig::new("demo/detect/yolo@mig:0:3g.40gb:1#1");
        let err = launcher
            .start_instance(
                config,
                "yolo",
                Path::new("/nonexistent/yolo.onnx"),
                placed("mig:0:3g.40gb:1", "MIG-second"),
            )
            .err()
            .expect("the instance is gone");
        assert!(matches!(&err, LaunchError::Worker(WorkerError::Device { .. })), "{err:?}");
        let text = err.to_string();
        for says in ["demo/detect/yolo@mig:0:3g.40gb:1#1", "segment mig:0:3g.40gb:1", "MIG-second", "redeploy the app"]
        {
            assert!(text.contains(says), "{says}: {text}");
        }
        assert_eq!(lists.load(std::sync::atomic::Ordering::SeqCst), 1);

        // The check refuses the same way at every restart, without listing the devices again.
        let bound = launcher.bind(&placed("mig:0:3g.40gb:1", "MIG-second")).unwrap();
        let check = launcher.start_check(&bound);
        let first = check.run().unwrap_err();
        assert_eq!(check.run().unwrap_err(), first);
        assert_eq!(lists.load(std::sync::atomic::Ordering::SeqCst), 2);
        // When nvidia-smi does not answer, the worker is started unchecked rather than refused.
        assert_eq!(launcher.with_relist(|| None).start_check(&bound).run(), Ok(()));
    }

    /// A placement on a device this launcher's own listing lacks is refused before the worker, by name too.
    #[test]
    fn a_placement_on_an_unlisted_device_names_the_instance() {
        let config = InstanceConfig::new("demo/detect/yolo@mig:0:3g.40gb:1#0");
        let err = launcher()
            .start_instance(config, "yolo", Path::new("/nonexistent/yolo.onnx"), placed("mig:0:3g.40gb:1", "MIG-old"))
            .err()
            .expect("no such instance");
        assert!(matches!(&err, LaunchError::Bind { source: DeviceError::Gone { .. }, .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("demo/detect/yolo@mig:0:3g.40gb:1#0") && text.contains("MIG-old"), "{text}");
    }

    /// Listing again replaces the GPUs and MIG instances every clone of the launcher sees, keeps the cores and
    /// the multiprocessor counts only discovery knows, and keeps everything when `nvidia-smi` does not answer.
    #[test]
    fn a_relisting_is_what_every_clone_binds_on_and_a_silent_one_changes_nothing() {
        let mut discovered = Devices::from_nvidia_smi(vec![0, 1], H200_QUERY, H200_LIST);
        discovered.gpus[0].sms = Some(132);
        let now = "GPU 0: NVIDIA H200 (UUID: GPU-h200)\n  MIG 3g.71gb Device 1: (UUID: MIG-second)\n  \
                   MIG 3g.71gb Device 2: (UUID: MIG-third)\nGPU 1: NVIDIA H200 (UUID: GPU-h201)\n";
        let listed = Devices::from_nvidia_smi(vec![7], H200_QUERY, now);
        let launcher = Launcher::new(discovered, None).with_relist(move || Some(listed.clone()));
        let clone = launcher.clone();
        assert!(clone.bind(&placed("mig:0:3g.40gb:1", "MIG-first")).is_ok());

        let devices = launcher.relist();
        let uuids: Vec<&str> = devices.gpus[0].mig_instances.iter().map(|m| m.uuid.as_str()).collect();
        assert_eq!(uuids, ["MIG-second", "MIG-third"]);
        assert_eq!((devices.cpu_cores.as_slice(), devices.gpus[0].sms), ([0, 1].as_slice(), Some(132)));
        assert!(matches!(clone.bind(&placed("mig:0:3g.40gb:1", "MIG-first")), Err(DeviceError::Gone { .. })));
        assert!(clone.bind(&placed("mig:0:3g.40gb:1", "MIG-third")).is_ok());

        let silent = launcher.with_relist(|| None);
        assert_eq!(silent.relist(), devices);
    }
}
