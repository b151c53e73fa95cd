//! The `jig:function` imports a guest calls: `infer`, `emit`, the remaining time, configuration and logging.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use jig_wire::Spare;
use wasmtime::component::{ComponentType, Lift, Linker, Lower, WasmList};

use super::jig::function::types as wire;
use super::{HostLimitExceeded, InvocationState, jig};
use crate::Emission;
use crate::models::{InferRequest, Tensor};

/// How many bytes of log messages one invocation may write; the rest is dropped with a note.
const LOG_BUDGET_BYTES: usize = 256 * 1024;

impl wire::Host for InvocationState {}

/// Link `jig:function/inference` by hand: the bindings would hand each output back as a `Vec<u8>`, into which
/// the host would first copy the model's buffer (or its share of a batch's); an [`Output`]'s bytes are lowered
/// into the guest's memory where they lie, the one copy out. The one copy in goes where the model host
/// places the inputs (where the instance next in turn reads them: [`crate::models::ModelHost::place`]), else
/// into memory of the runtime's own (see [`lift`]).
pub(crate) fn link_inference(linker: &mut Linker<InvocationState>) -> wasmtime::Result<()> {
    linker.instance("jig:function/inference@0.1.0")?.func_wrap_async(
        "infer",
        |mut store, (slot, inputs): (String, Vec<Input>)| {
            let state = store.data();
            let bytes: Vec<&[u8]> = inputs.iter().map(|i| i.data.as_le_slice(&store)).collect();
            let data = match state.models.place(&slot, &bytes) {
                Some(placed) if placed.len() == bytes.len() => placed,
                _ => bytes.iter().map(|b| lift(b, &state.spare)).collect(),
            };
            let inputs: Vec<Lifted> = inputs.into_iter().zip(data).map(|(i, data)| (i.dtype, i.shape, data)).collect();
            Box::new(async move { Ok((store.data_mut().infer(slot, inputs).await,)) })
        },
    )
}

/// `jig:function/types.tensor` as `infer` takes it: its bytes left in the guest's memory until [`lift`]ed.
#[derive(ComponentType, Lift)]
#[component(record)]
struct Input {
    dtype: wire::Dtype,
    shape: Vec<u64>,
    data: WasmList<u8>,
}

/// An input's element type, shape and bytes, out of the guest's memory.
type Lifted = (wire::Dtype, Vec<u64>, Bytes);

/// Inputs from this size on are lifted into memory of a [`Spare`], which they give back when the last tensor
/// over them drops: a fresh buffer beyond the allocator's largest mapping threshold (32 MiB in glibc) is mapped
/// and faulted in anew for every call (a 39 MB tensor's `infer` took 24–27 ms that way, 7.4–7.7 ms from reused
/// memory, BENCHMARKS.md). Smaller ones come from the allocator, whose freed memory serves them as well.
const LIFTED_INTO_SPARE_FROM: usize = 1 << 20;

/// A copy of `bytes`, a tensor's in the guest's memory.
fn lift(bytes: &[u8], spare: &Arc<Spare>) -> Bytes {
    if bytes.len() < LIFTED_INTO_SPARE_FROM {
        return Bytes::copy_from_slice(bytes);
    }
    let mut data = spare.take(bytes.len());
    data.copy_from_slice(bytes);
    spare.share(data)
}

/// `jig:function/types.tensor` as `infer` returns it.
#[derive(ComponentType, Lower)]
#[component(record)]
pub(super) struct Output {
    pub(super) dtype: wire::Dtype,
    pub(super) shape: Vec<u64>,
    pub(super) data: Bytes,
}

impl InvocationState {
    async fn infer(&mut self, slot: String, inputs: Vec<Lifted>) -> Result<Vec<Output>, wire::InferError> {
        let mut tensors = Vec::with_capacity(inputs.len());
        for (i, (dtype, shape, data)) in inputs.into_iter().enumerate() {
            let tensor = Tensor::new(dtype.into(), shape, data).map_err(|e| {
                wire::InferError::InvalidInput(format!("function `{}`, slot `{slot}`, input {i}: {e}", self.function))
            })?;
            tensors.push(tensor);
        }
        let request = InferRequest { function: self.function.clone(), slot, inputs: tensors, deadline: self.deadline };
        let started = std::time::Instant::now();
        let result = self.models.infer(request).await;
        self.in_models += started.elapsed();
        match result {
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
