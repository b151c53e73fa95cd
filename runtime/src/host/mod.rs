//! The host side of the `jig:function` world: the bindings, and what one invocation's store holds (its
//! state, limits and WASI context). The imports a guest calls are in [`imports`]; the conversions between
//! the wire types and the runtime's in [`convert`].

mod convert;
mod imports;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jig_wire::Spare;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::models::ModelHost;
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

/// Link the `jig:function` imports: `inference` by hand (see [`imports::link_inference`]), the rest through the
/// bindings.
pub(crate) fn link(linker: &mut wasmtime::component::Linker<InvocationState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    jig::function::types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    jig::function::runtime::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    imports::link_inference(linker)
}

/// How much of a guest's stdout and stderr the host keeps per invocation.
const STDIO_CAPTURE_BYTES: usize = 64 * 1024;

/// Everything one invocation's store holds. Dropped with the store when the invocation ends.
pub(crate) struct InvocationState {
    pub(crate) function: Arc<str>,
    pub(crate) deadline: Instant,
    models: Arc<dyn ModelHost>,
    /// Buffers for the large tensors `infer` lifts, shared by the runtime's invocations.
    spare: Arc<Spare>,
    config: Arc<BTreeMap<String, String>>,
    limits: FunctionLimits,
    pub(crate) emitted: Vec<Emission>,
    emitted_bytes: usize,
    log_bytes: usize,
    /// Set when the guest asked for more memory than its limit: a trap that follows is reported as such.
    pub(crate) memory_refused: bool,
    /// Time spent in `infer` calls, waiting for models.
    pub(crate) in_models: std::time::Duration,
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
        spare: Arc<Spare>,
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
            spare,
            config,
            limits,
            emitted: Vec::new(),
            emitted_bytes: 0,
            log_bytes: 0,
            memory_refused: false,
            in_models: std::time::Duration::ZERO,
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
