//! How a worker is started and what it runs: [`WorkerSpec`], with the [`StartCheck`] run before each start of
//! its process. The parent keeps the spec for every restart, so a restarted process is started exactly as the
//! first was.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::onnx::SessionOptions;

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
    /// [`WorkerError::Device`](super::WorkerError::Device) and spawns nothing. The launcher checks here that the
    /// device the worker is bound to is still on the machine, so that a worker is not restarted into CUDA's
    /// generic "no CUDA-capable device" error when its MIG instance is gone.
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
