//! The parent's handle on a worker: [`Worker`] spawns the process, runs batches through it one at a time, and
//! replaces it (in the background, or at the next batch) when it dies, hangs or breaks the protocol. It is the
//! [`crate::instance::Executor`] an instance runs on.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::error::WorkerError;
use super::error::with_memory_hint;
use super::process::{Fault, Process};
use super::spec::WorkerSpec;
use crate::Tensor;
use crate::onnx::{self, TensorSpec};
use crate::regions::{Regions, SharedBuffer};

/// A model served by a child process; see [the module](crate::worker). Dropping it kills the process.
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
    /// The current process's [`Process::loaded_cpu`], ns; stored before `pid`, so whoever reads the new pid reads it.
    loaded_cpu_ns: AtomicU64,
    /// What the processes it replaced spent serving, ns, read from each before it was reaped: so that the CPU
    /// time counts every batch the worker's instance counts, across restarts.
    replaced_cpu_ns: AtomicU64,
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
            loaded_cpu_ns: AtomicU64::new(nanos(process.loaded_cpu)),
            replaced_cpu_ns: AtomicU64::new(0),
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

    /// The CPU time its processes have spent since each loaded the model, all their threads, replaced ones
    /// included: what serving costs, not start-up (seconds of CPU on a GPU, for CUDA's and cuDNN's). `None` when
    /// the current process's time cannot be read (not Linux).
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        let replaced = std::time::Duration::from_nanos(self.inner.replaced_cpu_ns.load(Ordering::SeqCst));
        let Some(pid) = self.pid() else { return Some(replaced) }; // between a death and its restart
        Some(replaced + self.inner.serving_cpu(pid)?)
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
            Err(fault) => Err(self.error(slot, fault)),
        }
    }

    /// Ask the worker to give back what its batches grew: its session's arena, the allocator's free pages (see
    /// [`crate::onnx::Model::release_memory`]), and the free shared regions both processes map. For an instance
    /// that went idle after a load; a worker that is not running has nothing to give back.
    pub fn release_memory(&self) -> Result<(), WorkerError> {
        let mut slot = self.inner.lock();
        let Some(process) = slot.as_mut() else { return Ok(()) };
        match process.release() {
            Ok(()) => Ok(()),
            Err(fault) => Err(self.error(slot, fault)),
        }
    }

    /// The error of a request the process in `slot` answered with `fault`. A process that died, hung or broke
    /// the protocol is taken out, and a new one starts in the background.
    fn error(&self, mut slot: MutexGuard<'_, Option<Process>>, fault: Fault) -> WorkerError {
        let inner = &self.inner;
        let (instance, model) = (inner.spec.instance.clone(), inner.spec.model_name.clone());
        let process = match fault {
            Fault::Failed(detail) => {
                return WorkerError::Run { instance, model, detail: with_memory_hint(detail, &inner.spec.options) };
            }
            Fault::Memory(err) => return WorkerError::Memory { instance, model, detail: err.to_string() },
            Fault::Died(_) | Fault::Hung | Fault::Protocol(_) => slot.take().expect("a process was running"),
        };
        // Dead or not, the process is not reaped yet: its CPU time can still be read.
        let served = inner.serving_cpu(process.pid()).unwrap_or_default();
        inner.replaced_cpu_ns.fetch_add(nanos(served), Ordering::SeqCst);
        inner.pid.store(0, Ordering::SeqCst);
        inner.set_regions(None);
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
            Fault::Failed(_) | Fault::Memory(_) => unreachable!("answered above"),
        };
        drop(slot);
        Inner::restart_in_background(&self.inner);
        err
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

    /// The CPU time process `pid` (the current one, or the one being replaced) spent since it loaded the model.
    fn serving_cpu(&self, pid: u32) -> Option<std::time::Duration> {
        let loaded = std::time::Duration::from_nanos(self.loaded_cpu_ns.load(Ordering::SeqCst));
        Some(super::process::cpu_time(pid)?.saturating_sub(loaded))
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
        self.loaded_cpu_ns.store(nanos(process.loaded_cpu), Ordering::SeqCst);
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

fn nanos(time: std::time::Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}

impl crate::executor::Executor for Worker {
    fn inputs(&self) -> &[TensorSpec] {
        Worker::inputs(self)
    }
    fn outputs(&self) -> &[TensorSpec] {
        Worker::outputs(self)
    }
    fn execute(&self, inputs: &[crate::Tensor]) -> Result<Vec<crate::Tensor>, crate::executor::BoxError> {
        Ok(self.run(inputs)?)
    }
    fn buffer(&self, len: usize) -> Option<SharedBuffer> {
        Worker::buffer(self, len)
    }
    fn holds(&self, bytes: &[u8]) -> bool {
        Worker::holds(self, bytes)
    }
    fn restarts(&self) -> Option<Arc<AtomicU64>> {
        Some(self.inner.restarts.clone())
    }
    fn release_memory(&self) {
        if let Err(err) = Worker::release_memory(self) {
            tracing::debug!(%err, "releasing a worker's memory");
        }
    }
    fn process_cpu(&self) -> Option<std::time::Duration> {
        self.cpu_time()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{ModelError, SessionOptions};
    use crate::worker::StartCheck;
    use std::sync::atomic::AtomicUsize;

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
            loaded_cpu_ns: AtomicU64::new(0),
            replaced_cpu_ns: AtomicU64::new(0),
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
