//! Triton's extensions to the Open Inference Protocol, as jig maps them onto apps and slots: the model
//! repository (`POST /v2/repository/index`: every v2 model and its state; `…/models/{model}/load` and
//! `…/unload`: model control of a slot's instances), the model configuration (`GET /v2/models/{model}/config`, the subset of Triton's
//! `ModelConfig` a plan fills) and statistics (`GET /v2/models/{model}/stats`, `GET /v2/models/stats`). The
//! field names are Triton's, so that its clients (`tritonclient`, perf_analyzer) read them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `POST /v2/repository/index`: the request body (optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RepositoryIndexRequest {
    /// Only the models that are ready.
    #[serde(default)]
    pub ready: bool,
}

/// One model of the repository index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RepositoryModel {
    /// `APP.SLOT`, or `APP` for an app that declares `[tensors]`.
    pub name: String,
    /// Always `1`: the app's deployment.
    pub version: String,
    /// `READY`, or `UNAVAILABLE` (unloaded, its app is starting or cannot start, or the slot has no instance).
    pub state: String,
    /// Why it is unavailable; empty when ready.
    pub reason: String,
}

/// `GET /v2/models/{model}/config`: what the plan serves the model with, in Triton's terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelConfig {
    /// The model's v2 name.
    pub name: String,
    /// `onnxruntime_onnx` for a slot, `jig_app` for an app.
    pub platform: String,
    /// `onnxruntime` or `jig`.
    pub backend: String,
    /// The largest batch the plan runs (0: the model has no batch dimension, so `dims` are whole shapes).
    pub max_batch_size: u32,
    /// The inputs, without the batch dimension when `max_batch_size` is above 0.
    pub input: Vec<ConfigTensor>,
    /// The outputs, likewise.
    pub output: Vec<ConfigTensor>,
    /// The planned instances, by segment: `KIND_CPU` or `KIND_GPU`, and how many.
    pub instance_group: Vec<InstanceGroup>,
    /// The planned wait for a fuller batch, when the plan waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_batching: Option<DynamicBatching>,
}

/// An input or output of [`ModelConfig`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigTensor {
    /// Its name.
    pub name: String,
    /// Triton's name of its type: `TYPE_FP32`, `TYPE_INT64`, …
    pub data_type: String,
    /// Its dimensions, -1 where any size goes.
    pub dims: Vec<i64>,
}

/// Instances of a model on one kind of segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstanceGroup {
    /// The variant and segment, `VARIANT@SEGMENT`.
    pub name: String,
    /// `KIND_CPU` or `KIND_GPU`.
    pub kind: String,
    /// How many instances.
    pub count: u32,
}

/// The plan's batching of a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DynamicBatching {
    /// How long a batch waits for company, µs.
    pub max_queue_delay_microseconds: u64,
}

/// `GET /v2/models/{model}/stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelStatistics {
    /// One entry per model asked for.
    pub model_stats: Vec<ModelStats>,
}

/// What a model's instances have done since they started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelStats {
    /// The model's v2 name.
    pub name: String,
    /// Always `1`.
    pub version: String,
    /// Rows inferred (a batch of 8 is 8).
    pub inference_count: u64,
    /// Batches run.
    pub execution_count: u64,
    /// When the model last answered a request, ms since the Unix epoch; 0 before it has (and for an app).
    pub last_inference: u64,
    /// Requests by outcome, and where their time went.
    pub inference_stats: InferStats,
    /// Per batch size, the batches that succeeded and their phases' time (none for an app).
    pub batch_stats: Vec<BatchStats>,
}

/// The batches of one size that succeeded (`count` of each phase), and the time of each phase, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BatchStats {
    /// Rows per batch.
    pub batch_size: u64,
    /// Stacking the requests' inputs into the batch.
    pub compute_input: StatDuration,
    /// Executing the model.
    pub compute_infer: StatDuration,
    /// Splitting the outputs back into requests.
    pub compute_output: StatDuration,
}

/// Requests by outcome, and where the time of those answered went, counted per request as Triton counts: a
/// request answered from a batch of four adds its whole batch's time to `compute_*`, as do the other three. For
/// an app (a graph of tasks, not one queue and batch) only the counts are kept: its `ns` are 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InferStats {
    /// Requests answered, and their time from arrival at the model's instance to their answer.
    pub success: StatDuration,
    /// Requests dropped for their deadline (on arrival or in the queue) or as stale, or whose batch failed (no
    /// time kept).
    pub fail: StatDuration,
    /// Requests answered, and their time in the instance's queue before their batch started.
    pub queue: StatDuration,
    /// Requests answered, and their batches' time stacking the requests' inputs into one batch.
    pub compute_input: StatDuration,
    /// Requests answered, and their batches' time executing the model (in a worker process or on a node:
    /// moving the tensors there and back included).
    pub compute_infer: StatDuration,
    /// Requests answered, and their batches' time splitting the outputs back into requests.
    pub compute_output: StatDuration,
}

/// A count and the nanoseconds it took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatDuration {
    /// How many.
    pub count: u64,
    /// Nanoseconds, in all.
    pub ns: u64,
}

/// `POST /v2/repository/models/{model}/load` and `…/unload`: an empty JSON object on success.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelControl {}
