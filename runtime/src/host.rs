//! The host side of the `jig:function` world: per-invocation store state and the imports a guest calls.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::models::{DType, InferError, InferRequest, ModelHost, Tensor};
use super::{Emission, FunctionLimits};

wasmtime::component::bindgen!({
    path: "../sdk/wit",
    world: "function",
    imports: {
        "jig:function/inference.infer": async,
        "jig:function/runtime.emit": trappable,
    },
    exports: { default: async },
});

use jig::function::types as wire;

/// How much of a guest's stdout and stderr the host keeps per invocation.
const STDIO_CAPTURE_BYTES: usize = 64 * 1024;
/// How many bytes of log messages one invocation may write; the rest is dropped with a note.
const LOG_BUDGET_BYTES: usize = 256 * 1024;

/// Everything one invocation's store holds. Dropped with the store when the invocation ends.
pub(crate) struct InvocationState {
    pub(crate) function: Arc<str>,
    pub(crate) deadline: Instant,
    models: Arc<dyn ModelHost>,
    config: Arc<BTreeMap<String, String>>,
    limits: FunctionLimits,
    pub(crate) emitted: Vec<Emission>,
    emitted_bytes: usize,
    log_bytes: usize,
    /// Set when the guest asked for more memory than its limit: a trap that follows is reported as such.
    pub(crate) memory_refused: bool,
    stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl InvocationState {
    pub(crate) fn new(
        function: Arc<str>,
        deadline: Instant,
        models: Arc<dyn ModelHost>,
        config: Arc<BTreeMap<String, String>>,
        limits: FunctionLimits,
    ) -> Self {
        let stdout = MemoryOutputPipe::new(STDIO_CAPTURE_BYTES);
        let stderr = MemoryOutputPipe::new(STDIO_CAPTURE_BYTES);
        // The Rust standard library needs a few WASI interfaces (stdio for panic messages, clocks, random
        // seeds for `HashMap`). They are inert here: no environment, arguments, files or sockets; stdin is
        // empty; the wall clock is frozen at the Unix epoch; randomness is a fixed sequence, so a function's
        // output depends on its payload, configuration and model answers alone.
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(FrozenWallClock)
            .secure_random(wasmtime_wasi::Deterministic::new(DETERMINISTIC_BYTES.to_vec()))
            .insecure_random(wasmtime_wasi::Deterministic::new(DETERMINISTIC_BYTES.to_vec()))
            .insecure_random_seed(0x6a69_675f_7365_6564)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        InvocationState {
            function,
            deadline,
            models,
            config,
            limits,
            emitted: Vec::new(),
            emitted_bytes: 0,
            log_bytes: 0,
            memory_refused: false,
            stdout,
            stderr,
            wasi,
            table: ResourceTable::new(),
        }
    }
}

impl InvocationState {
    /// Forward what the guest printed to the host's log.
    pub(crate) fn log_stdio(&self) {
        for (stream, pipe) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let bytes = pipe.contents();
            if !bytes.is_empty() {
                let text = String::from_utf8_lossy(&bytes);
                tracing::debug!(target: "jig::guest", function = %self.function, stream, "{}", text.trim_end());
            }
        }
    }
}

const DETERMINISTIC_BYTES: [u8; 16] = *b"jig-deterministi";

struct FrozenWallClock;

impl wasmtime_wasi::HostWallClock for FrozenWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl WasiView for InvocationState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl wasmtime::ResourceLimiter for InvocationState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = desired <= self.limits.memory;
        if !allowed {
            self.memory_refused = true;
        }
        Ok(allowed)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Tables hold function references; glue never needs more than this.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The guest exceeded a host limit; raised as a trap, reported as [`super::InvokeError::HostLimit`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct HostLimitExceeded(pub(crate) String);

/// The epoch callback found the deadline passed.
#[derive(Debug, thiserror::Error)]
#[error("deadline passed")]
pub(crate) struct DeadlinePassed;

impl wire::Host for InvocationState {}

impl jig::function::inference::Host for InvocationState {
    async fn infer(&mut self, slot: String, inputs: Vec<wire::Tensor>) -> Result<Vec<wire::Tensor>, wire::InferError> {
        let mut tensors = Vec::with_capacity(inputs.len());
        for (i, t) in inputs.into_iter().enumerate() {
            let tensor = Tensor::new(t.dtype.into(), t.shape, t.data).map_err(|e| {
                wire::InferError::InvalidInput(format!("function `{}`, slot `{slot}`, input {i}: {e}", self.function))
            })?;
            tensors.push(tensor);
        }
        let request = InferRequest { function: self.function.clone(), slot, inputs: tensors, deadline: self.deadline };
        match self.models.infer(request).await {
            Ok(outputs) => Ok(outputs.into_iter().map(Into::into).collect()),
            Err(e) => Err(e.into()),
        }
    }
}

impl jig::function::runtime::Host for InvocationState {
    fn emit(&mut self, port: String, payload: Vec<u8>) -> wasmtime::Result<()> {
        let limits = &self.limits;
        if self.emitted.len() >= limits.max_emits || self.emitted_bytes + payload.len() > limits.max_emit_bytes {
            return Err(HostLimitExceeded(format!(
                "emitted more than {} payloads or {} bytes in one invocation (raise `max_emits` / \
                 `max_emit_bytes` in its limits if that is intended)",
                limits.max_emits, limits.max_emit_bytes
            ))
            .into());
        }
        self.emitted_bytes += payload.len();
        self.emitted.push(Emission { port, payload });
        Ok(())
    }

    fn remaining_time(&mut self) -> u64 {
        let left = self.deadline.saturating_duration_since(Instant::now());
        u64::try_from(left.as_nanos()).unwrap_or(u64::MAX)
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.config.get(&key).cloned()
    }

    fn log(&mut self, level: jig::function::runtime::Level, message: String) {
        use jig::function::runtime::Level;
        self.log_bytes += message.len();
        if self.log_bytes > LOG_BUDGET_BYTES {
            if self.log_bytes - message.len() <= LOG_BUDGET_BYTES {
                tracing::warn!(function = %self.function, "log budget of {LOG_BUDGET_BYTES} bytes spent; dropping the rest");
            }
            return;
        }
        let function = &*self.function;
        match level {
            Level::Trace => tracing::trace!(target: "jig::guest", function, "{message}"),
            Level::Debug => tracing::debug!(target: "jig::guest", function, "{message}"),
            Level::Info => tracing::info!(target: "jig::guest", function, "{message}"),
            Level::Warn => tracing::warn!(target: "jig::guest", function, "{message}"),
            Level::Error => tracing::error!(target: "jig::guest", function, "{message}"),
        }
    }
}

impl From<wire::Dtype> for DType {
    fn from(d: wire::Dtype) -> Self {
        match d {
            wire::Dtype::F32 => DType::F32,
            wire::Dtype::F16 => DType::F16,
            wire::Dtype::F64 => DType::F64,
            wire::Dtype::U8 => DType::U8,
            wire::Dtype::I8 => DType::I8,
            wire::Dtype::U16 => DType::U16,
            wire::Dtype::I16 => DType::I16,
            wire::Dtype::I32 => DType::I32,
            wire::Dtype::I64 => DType::I64,
            wire::Dtype::Bool => DType::Bool,
        }
    }
}

impl From<DType> for wire::Dtype {
    fn from(d: DType) -> Self {
        match d {
            DType::F32 => wire::Dtype::F32,
            DType::F16 => wire::Dtype::F16,
            DType::F64 => wire::Dtype::F64,
            DType::U8 => wire::Dtype::U8,
            DType::I8 => wire::Dtype::I8,
            DType::U16 => wire::Dtype::U16,
            DType::I16 => wire::Dtype::I16,
            DType::I32 => wire::Dtype::I32,
            DType::I64 => wire::Dtype::I64,
            DType::Bool => wire::Dtype::Bool,
        }
    }
}

impl From<Tensor> for wire::Tensor {
    fn from(t: Tensor) -> Self {
        let (dtype, shape, data) = t.into_parts();
        // Free when the bytes are a Vec nobody else holds; one copy when they are a model's output buffer.
        wire::Tensor { dtype: dtype.into(), shape, data: Vec::from(data) }
    }
}

impl From<InferError> for wire::InferError {
    fn from(e: InferError) -> Self {
        match e {
            InferError::UnknownSlot(m) => wire::InferError::UnknownSlot(m),
            InferError::InvalidInput(m) => wire::InferError::InvalidInput(m),
            InferError::DeadlineExceeded(m) => wire::InferError::DeadlineExceeded(m),
            InferError::Overloaded(m) => wire::InferError::Overloaded(m),
            InferError::Dropped(m) => wire::InferError::Dropped(m),
            InferError::Failed(m) => wire::InferError::Failed(m),
        }
    }
}

impl From<wire::InferError> for InferError {
    fn from(e: wire::InferError) -> Self {
        match e {
            wire::InferError::UnknownSlot(m) => InferError::UnknownSlot(m),
            wire::InferError::InvalidInput(m) => InferError::InvalidInput(m),
            wire::InferError::DeadlineExceeded(m) => InferError::DeadlineExceeded(m),
            wire::InferError::Overloaded(m) => InferError::Overloaded(m),
            wire::InferError::Dropped(m) => InferError::Dropped(m),
            wire::InferError::Failed(m) => InferError::Failed(m),
        }
    }
}
