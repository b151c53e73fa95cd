//! The models that can fill a slot ([`Variant`], `[[variants]]`): the file, and what the planner and the
//! profiler need to know of it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A model that can fill a slot.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// The slot it fills.
    pub slot: String,
    /// The variant's name, unique within its slot.
    pub name: String,
    /// The ONNX model, relative to the bundle directory.
    pub model: PathBuf,
    /// Its accuracy, in any unit shared by the slot's variants, for the planner (the best counts as 1).
    #[serde(default)]
    pub accuracy: Option<f64>,
    /// Requests this variant's task sends each downstream model task per request it serves (1 when absent).
    #[serde(default)]
    pub factors: BTreeMap<String, f64>,
    /// One item's shape (no batch dimension) per input with dynamic dimensions, used when profiling.
    #[serde(default)]
    pub shapes: BTreeMap<String, Vec<u64>>,
    /// Values per input, repeated to fill it, used when profiling (otherwise a fixed pattern).
    #[serde(default)]
    pub values: BTreeMap<String, Vec<f64>>,
}
