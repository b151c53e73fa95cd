//! The Open Inference Protocol (KServe v2, as Triton and KServe serve it): the wire types of its REST API.
//!
//! jig serves each deployed app's model slots as v2 models named `APP.SLOT` (a slot is served by the
//! instances the plan placed, batched with the app's own calls). Tensors travel as JSON `data` (a flat or
//! nested array in row-major order) or, with the binary tensor data extension, as raw little-endian bytes
//! after the JSON: the request's [`BINARY_HEADER`] gives the JSON's length, and each input with a
//! `binary_data_size` parameter takes that many bytes, in the order of `inputs`. Errors are `{"error": …}`
//! (jig's [`crate::ErrorBody`] adds its `kind`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The header that gives the length of the JSON part of a body that carries binary tensors after it.
pub const BINARY_HEADER: &str = "inference-header-content-length";

/// The separator between an app and its slot in a v2 model name.
pub const SLOT_SEPARATOR: char = '.';

/// `GET /v2`: the server's name, version and protocol extensions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerMetadata {
    /// `jig`.
    pub name: String,
    /// jig's version.
    pub version: String,
    /// The protocol extensions served: `binary_tensor_data`.
    pub extensions: Vec<String>,
}

/// `GET /v2/health/live` and `GET /v2/health/ready` (Triton's clients read the status, KServe's the body).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Health {
    /// For `live`: the server runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<bool>,
    /// For `ready`: the server, or the model, serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// For a model's `ready`: its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `GET /v2/models/{model}`: a model's inputs and outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelMetadata {
    /// `APP.SLOT`.
    pub name: String,
    /// The versions served: one, `1` (the app's current deployment).
    pub versions: Vec<String>,
    /// `onnxruntime_onnx`.
    pub platform: String,
    /// The declared inputs.
    pub inputs: Vec<TensorMetadata>,
    /// The declared outputs.
    pub outputs: Vec<TensorMetadata>,
}

/// A declared tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TensorMetadata {
    /// Its name in the model.
    pub name: String,
    /// `FP32`, `INT64`, … (the protocol's names).
    pub datatype: String,
    /// Its dimensions, -1 where any size goes (the batch dimension).
    pub shape: Vec<i64>,
}

/// `POST /v2/models/{model}/infer`: the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InferRequest {
    /// Echoed in the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `binary_data_output: true` asks for every output as binary data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Map<String, Value>>,
    /// Every input the model declares, once.
    pub inputs: Vec<RequestInput>,
    /// The outputs wanted (by default all of them, as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<RequestOutput>>,
}

/// One input tensor of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequestInput {
    /// The model's name for it.
    pub name: String,
    /// Its dimensions.
    pub shape: Vec<u64>,
    /// `FP32`, `INT64`, …
    pub datatype: String,
    /// `binary_data_size`: the tensor is that many bytes of the body after the JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Map<String, Value>>,
    /// The elements in row-major order, flat or nested; absent for a binary tensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// An output a request asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequestOutput {
    /// The model's name for it.
    pub name: String,
    /// `binary_data: true` returns it as binary data after the JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Map<String, Value>>,
}

/// `POST /v2/models/{model}/infer`: the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InferResponse {
    /// The model that answered.
    pub model_name: String,
    /// `1`.
    pub model_version: String,
    /// The request's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The outputs, in the model's order.
    pub outputs: Vec<ResponseOutput>,
}

/// One output tensor of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResponseOutput {
    /// The model's name for it.
    pub name: String,
    /// Its dimensions.
    pub shape: Vec<u64>,
    /// `FP32`, `INT64`, …
    pub datatype: String,
    /// `binary_data_size` when it travels as binary data after the JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Map<String, Value>>,
    /// The elements in row-major order (flat); absent for a binary tensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Vec<Value>>,
}

/// A parameter that asks for binary data (`binary_data`, `binary_data_output`): `true` or absent.
pub fn flag(parameters: &Option<Map<String, Value>>, name: &str) -> bool {
    parameters.as_ref().and_then(|p| p.get(name)).and_then(Value::as_bool).unwrap_or(false)
}

/// The `binary_data_size` of a tensor, when it travels as binary data.
pub fn binary_size(parameters: &Option<Map<String, Value>>) -> Option<Result<usize, String>> {
    let value = parameters.as_ref()?.get("binary_data_size")?;
    Some(
        value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("`binary_data_size` must be a byte count, not {value}")),
    )
}
