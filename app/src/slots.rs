//! A function's model slots served by model instances: the `ModelHost` of the main path.
//!
//! Each slot the function's glue names in `infer` maps to a [`Pool`] of instances (variants on segments, from
//! the plan); a call goes to one of them, in proportion to their planned throughput, and is batched there
//! with other requests' calls.

use std::collections::HashMap;
use std::sync::Arc;

use jig_model_host::instance::InstanceError;
use jig_model_host::pool::Pool;

use jig_runtime::models::{BoxFuture, Bytes, InferError, InferRequest, ModelHost, Tensor};

/// Model slots by name.
#[derive(Default, Clone)]
pub struct ModelSlots {
    slots: HashMap<String, Arc<Pool>>,
}

impl ModelSlots {
    /// No slots: every `infer` fails with an unknown slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serve `slot` from `pool`, replacing what served it before.
    pub fn insert(&mut self, slot: impl Into<String>, pool: Arc<Pool>) {
        self.slots.insert(slot.into(), pool);
    }

    /// The pool serving `slot`.
    pub fn get(&self, slot: &str) -> Option<&Arc<Pool>> {
        self.slots.get(slot)
    }

    /// Every slot and its pool, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<Pool>)> {
        self.slots.iter().map(|(slot, pool)| (slot.as_str(), pool))
    }
}

impl ModelHost for ModelSlots {
    fn infer(&self, request: InferRequest) -> BoxFuture<'_, Result<Vec<Tensor>, InferError>> {
        Box::pin(async move {
            let Some(pool) = self.slots.get(&request.slot) else {
                let mut known: Vec<&str> = self.slots.keys().map(String::as_str).collect();
                known.sort_unstable();
                return Err(InferError::UnknownSlot(format!(
                    "function `{}` has no model slot `{}` (it has: {})",
                    request.function,
                    request.slot,
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                )));
            };
            match pool.infer(request.inputs, request.deadline).await {
                None => Err(InferError::Overloaded(format!("model slot `{}` has no running instance", request.slot))),
                Some(result) => result.map_err(infer_error),
            }
        })
    }

    fn place(&self, slot: &str, inputs: &[&[u8]]) -> Option<Vec<Bytes>> {
        self.slots.get(slot)?.place(inputs)
    }
}

/// What the glue is told of an instance's failure.
pub(crate) fn infer_error(e: InstanceError) -> InferError {
    match e {
        InstanceError::Dropped { .. } => InferError::Dropped(e.to_string()),
        InstanceError::Input { .. } => InferError::InvalidInput(e.to_string()),
        InstanceError::Failed { .. } | InstanceError::Start { .. } | InstanceError::Stopped { .. } => {
            InferError::Failed(e.to_string())
        }
    }
}
