//! The Open Inference Protocol (KServe v2, as Triton and KServe serve it): the wire types of its REST API.
//!
//! jig serves each deployed app's model slots as v2 models named `APP.SLOT` (a slot is served by the
//! instances the plan placed, batched with the app's own calls). Tensors travel as JSON `data` (a flat or
//! nested array in row-major order) or, with the binary tensor data extension, as raw little-endian bytes
//! after the JSON: the request's [`BINARY_HEADER`] gives the JSON's length, and each input with a
//! `binary_data_size` parameter takes that many bytes, in the order of `inputs`. Errors are `{"error": …}`
//! (jig's [`crate::ErrorBody`] adds its `kind`). [`decode_request`] and [`encode_response`] convert between
//! the wire and jig's tensors, checking a request against the model's [`Declared`] tensors; what they refuse is a
//! [`DecodeError`] or an [`EncodeError`], whose message is the 400's. Element types travel by the protocol's
//! names, [`DType::oip_name`].

use bytes::{BufMut, Bytes, BytesMut};
use jig_wire::{DType, Tensor, TensorError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The header that gives the length of the JSON part of a body that carries binary tensors after it.
pub const BINARY_HEADER: &str = "inference-header-content-length";

/// The one version each model is served at: the app's current deployment.
pub const VERSION: &str = "1";

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
fn flag(parameters: &Option<Map<String, Value>>, name: &str) -> bool {
    parameters.as_ref().and_then(|p| p.get(name)).and_then(Value::as_bool).unwrap_or(false)
}

/// The `binary_data_size` of a tensor, when it travels as binary data.
fn binary_size(parameters: &Option<Map<String, Value>>) -> Option<Result<usize, DecodeError>> {
    let value = parameters.as_ref()?.get("binary_data_size")?;
    Some(
        value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| DecodeError::BinarySizeNotACount { value: value.to_string() }),
    )
}

/// A tensor a model declares, as requests are checked against it.
#[derive(Debug, Clone, Copy)]
pub struct Declared<'a> {
    /// Its name in the model.
    pub name: &'a str,
    /// Its element type.
    pub dtype: DType,
}

/// Why a request body is refused (a 400): each variant says what is wrong, naming the input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// [`BINARY_HEADER`] puts the end of the JSON past the end of the body.
    #[error("`{BINARY_HEADER}` is {json_length} but the body has {body_length} bytes")]
    JsonLengthPastBody {
        /// The header's value.
        json_length: usize,
        /// The body's length.
        body_length: usize,
    },
    /// The JSON part is not an inference request.
    #[error("the inference request is not valid: {source}")]
    Json {
        /// What the JSON parser found.
        source: serde_json::Error,
    },
    /// An input the model does not declare.
    #[error("model `{model}` has no input `{input}` (it has: {declared})")]
    UnknownInput {
        /// The model.
        model: String,
        /// The input named.
        input: String,
        /// The model's inputs, comma-separated.
        declared: String,
    },
    /// An input of another element type than the model declares.
    #[error("input `{input}` of model `{model}` is {declared}, not {given}")]
    WrongDatatype {
        /// The model.
        model: String,
        /// The input.
        input: String,
        /// The declared type's protocol name.
        declared: &'static str,
        /// The type the request gives.
        given: String,
    },
    /// An input's shape has more bytes than fit in memory.
    #[error("input `{input}`: shape {shape:?} is too large")]
    TooLarge {
        /// The input.
        input: String,
        /// Its shape.
        shape: Vec<u64>,
    },
    /// A `binary_data_size` that is not a byte count.
    #[error("`binary_data_size` must be a byte count, not {value}")]
    BinarySizeNotACount {
        /// The parameter's value, as JSON.
        value: String,
    },
    /// Binary data (HTTP's `binary_data_size`, gRPC's contents) of another size than the datatype and shape make.
    #[error("input `{input}`: its binary data is {size} bytes, but {datatype} of shape {shape:?} is {expected}")]
    BinarySizeMismatch {
        /// The input.
        input: String,
        /// The size of its binary data.
        size: usize,
        /// Its datatype, as given.
        datatype: String,
        /// Its shape.
        shape: Vec<u64>,
        /// The bytes that datatype and shape make.
        expected: usize,
    },
    /// A `binary_data_size` beyond the binary data left.
    #[error("input `{input}`: `binary_data_size` is {size} bytes, but only {left} bytes of binary data are left")]
    BinaryDataShort {
        /// The input.
        input: String,
        /// Its `binary_data_size`.
        size: usize,
        /// The bytes left after the inputs before it.
        left: usize,
    },
    /// An input with neither `data` nor binary data.
    #[error(
        "input `{input}` has no elements: neither `data` nor a `binary_data_size` parameter (over gRPC, neither \
             `contents` nor `raw_input_contents`)"
    )]
    NoData {
        /// The input.
        input: String,
    },
    /// A JSON element that is not one of the input's type.
    #[error("input `{input}`: {value} is not a {datatype} element")]
    BadElement {
        /// The input.
        input: String,
        /// The element, as JSON.
        value: String,
        /// The input's datatype.
        datatype: &'static str,
    },
    /// FP16 elements as JSON, which has no half floats.
    #[error("input `{input}`: send FP16 tensors as binary data (JSON has no half floats)")]
    HalfAsJson {
        /// The input.
        input: String,
    },
    /// JSON `data` with another number of elements than the shape holds.
    #[error("input `{input}`: shape {shape:?} holds {expected} elements, `data` has {given}")]
    ElementCount {
        /// The input.
        input: String,
        /// Its shape.
        shape: Vec<u64>,
        /// The elements the shape holds.
        expected: usize,
        /// The elements `data` has.
        given: usize,
    },
    /// The bytes do not form a tensor (a BOOL element other than 0 or 1).
    #[error("input `{input}`: {source}")]
    Tensor {
        /// The input.
        input: String,
        /// What the tensor's check found.
        source: TensorError,
    },
    /// An input given twice.
    #[error("input `{input}` is given twice")]
    Repeated {
        /// The input.
        input: String,
    },
    /// Binary data after the inputs' own.
    #[error("{bytes} bytes of binary data follow the request that no input claims")]
    UnclaimedBinaryData {
        /// How many.
        bytes: usize,
    },
    /// A declared input the request does not give.
    #[error("input `{input}` is missing; model `{model}` takes: {declared}")]
    Missing {
        /// The input.
        input: String,
        /// The model.
        model: String,
        /// The model's inputs, comma-separated.
        declared: String,
    },
}

/// Why a request's outputs cannot be answered (a 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The request asks for an output the model does not declare.
    #[error("model `{model}` has no output `{output}` (it has: {declared})")]
    UnknownOutput {
        /// The model.
        model: String,
        /// The output asked for.
        output: String,
        /// The model's outputs, comma-separated.
        declared: String,
    },
}

/// An inference request's body (its JSON part `json_length` bytes long, when binary tensors follow) as the
/// request and its inputs, in the order of `specs`: what `POST /v2/models/{model}/infer` reads, and what
/// `fuzz/` feeds arbitrary bytes.
pub fn decode_request(
    model: &str,
    specs: &[Declared<'_>],
    body: &Bytes,
    json_length: Option<usize>,
) -> Result<(InferRequest, Vec<Tensor>), DecodeError> {
    let (request, binary) = parse(body, json_length)?;
    let inputs = inputs(model, specs, &request, binary)?;
    Ok((request, inputs))
}

/// The JSON request and the binary part after it.
fn parse(body: &Bytes, json_length: Option<usize>) -> Result<(InferRequest, Bytes), DecodeError> {
    let split = json_length.unwrap_or(body.len());
    if split > body.len() {
        return Err(DecodeError::JsonLengthPastBody { json_length: split, body_length: body.len() });
    }
    let request = serde_json::from_slice(&body[..split]).map_err(|source| DecodeError::Json { source })?;
    Ok((request, body.slice(split..)))
}

/// The request's inputs as tensors, in the model's order; binary ones are views of the body.
fn inputs(
    model: &str,
    specs: &[Declared<'_>],
    request: &InferRequest,
    mut binary: Bytes,
) -> Result<Vec<Tensor>, DecodeError> {
    let mut given = Vec::with_capacity(request.inputs.len());
    for input in &request.inputs {
        let data = match binary_size(&input.parameters) {
            Some(size) => {
                let size = size?;
                if size > binary.len() {
                    return Err(DecodeError::BinaryDataShort { input: input.name.clone(), size, left: binary.len() });
                }
                GivenData::Raw(binary.split_to(size))
            }
            None => input.data.as_ref().map_or(GivenData::Missing, GivenData::Json),
        };
        given.push(GivenInput { name: &input.name, datatype: &input.datatype, shape: &input.shape, data });
    }
    let tensors = take_inputs(model, specs, given)?;
    if !binary.is_empty() {
        return Err(DecodeError::UnclaimedBinaryData { bytes: binary.len() });
    }
    Ok(tensors)
}

/// One input as a request carries it, before it is checked against what the model declares: over HTTP, an
/// input of the JSON request; over gRPC, one of `ModelInferRequest`'s.
#[derive(Debug)]
pub struct GivenInput<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its datatype, by the protocol's name.
    pub datatype: &'a str,
    /// Its shape.
    pub shape: &'a [u64],
    /// Its elements.
    pub data: GivenData<'a>,
}

/// An input's elements as a request carries them.
#[derive(Debug)]
pub enum GivenData<'a> {
    /// Little-endian bytes: HTTP's binary data, gRPC's raw or typed contents.
    Raw(Bytes),
    /// JSON elements, flat or nested, row-major.
    Json(&'a Value),
    /// None given.
    Missing,
}

/// `given` as tensors in the order of `specs`, each checked against its declaration: a known input, given once,
/// of the declared datatype, with as many elements as its shape holds. What both transports of the protocol
/// decode with.
pub fn take_inputs<'a>(
    model: &str,
    specs: &[Declared<'_>],
    given: impl IntoIterator<Item = GivenInput<'a>>,
) -> Result<Vec<Tensor>, DecodeError> {
    let declared = || specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", ");
    let mut taken: Vec<Option<Tensor>> = vec![None; specs.len()];
    for input in given {
        let name = || input.name.to_string();
        let Some(index) = specs.iter().position(|s| s.name == input.name) else {
            return Err(DecodeError::UnknownInput { model: model.into(), input: name(), declared: declared() });
        };
        let dtype = specs[index].dtype;
        if input.datatype != dtype.oip_name() {
            return Err(DecodeError::WrongDatatype {
                model: model.into(),
                input: name(),
                declared: dtype.oip_name(),
                given: input.datatype.to_string(),
            });
        }
        let expected = dtype
            .bytes_for(input.shape)
            .ok_or_else(|| DecodeError::TooLarge { input: name(), shape: input.shape.to_vec() })?;
        let data = match input.data {
            GivenData::Raw(bytes) if bytes.len() != expected => {
                return Err(DecodeError::BinarySizeMismatch {
                    input: name(),
                    size: bytes.len(),
                    datatype: input.datatype.to_string(),
                    shape: input.shape.to_vec(),
                    expected,
                });
            }
            GivenData::Raw(bytes) => bytes,
            GivenData::Json(data) => {
                let bytes = encode(input.name, dtype, data)?;
                if bytes.len() != expected {
                    return Err(DecodeError::ElementCount {
                        input: name(),
                        shape: input.shape.to_vec(),
                        expected: expected / dtype.size(),
                        given: bytes.len() / dtype.size(),
                    });
                }
                bytes
            }
            GivenData::Missing => return Err(DecodeError::NoData { input: name() }),
        };
        let tensor = Tensor::new(dtype, input.shape.to_vec(), data)
            .map_err(|source| DecodeError::Tensor { input: name(), source })?;
        if taken[index].replace(tensor).is_some() {
            return Err(DecodeError::Repeated { input: name() });
        }
    }
    taken
        .into_iter()
        .zip(specs)
        .map(|(tensor, spec)| {
            tensor.ok_or_else(|| DecodeError::Missing {
                input: spec.name.into(),
                model: model.into(),
                declared: declared(),
            })
        })
        .collect()
}

/// JSON elements (flat or nested arrays, row-major) as little-endian bytes of `dtype`, for input `input`.
fn encode(input: &str, dtype: DType, data: &Value) -> Result<Bytes, DecodeError> {
    let mut elements = Vec::new();
    flatten(data, &mut elements);
    let mut out = BytesMut::with_capacity(elements.len() * dtype.size());
    for value in elements {
        let bad =
            || DecodeError::BadElement { input: input.into(), value: value.to_string(), datatype: dtype.oip_name() };
        let int = |lo: i64, hi: i64| value.as_i64().filter(|v| (lo..=hi).contains(v)).ok_or_else(bad);
        match dtype {
            DType::F32 => out.put_f32_le(value.as_f64().ok_or_else(bad)? as f32),
            DType::F64 => out.put_f64_le(value.as_f64().ok_or_else(bad)?),
            DType::F16 => return Err(DecodeError::HalfAsJson { input: input.into() }),
            DType::Bool => out.put_u8(u8::from(value.as_bool().ok_or_else(bad)?)),
            DType::U8 => out.put_u8(int(0, u8::MAX.into())? as u8),
            DType::I8 => out.put_i8(int(i8::MIN.into(), i8::MAX.into())? as i8),
            DType::U16 => out.put_u16_le(int(0, u16::MAX.into())? as u16),
            DType::I16 => out.put_i16_le(int(i16::MIN.into(), i16::MAX.into())? as i16),
            DType::I32 => out.put_i32_le(int(i32::MIN.into(), i32::MAX.into())? as i32),
            DType::I64 => out.put_i64_le(value.as_i64().ok_or_else(bad)?),
        }
    }
    Ok(out.freeze())
}

fn flatten<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| flatten(v, out)),
        other => out.push(other),
    }
}

/// A tensor's elements as JSON numbers (booleans for BOOL; FP16 widened).
fn decode(tensor: &Tensor) -> Vec<Value> {
    let data = tensor.data();
    let n = tensor.dtype().size();
    data.chunks_exact(n)
        .map(|c| match tensor.dtype() {
            DType::F32 => Value::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            DType::F64 => Value::from(f64::from_le_bytes(c.try_into().unwrap_or_default())),
            DType::F16 => Value::from(f16_to_f32(u16::from_le_bytes([c[0], c[1]]))),
            DType::Bool => Value::from(c[0] != 0),
            DType::U8 => Value::from(c[0]),
            DType::I8 => Value::from(c[0] as i8),
            DType::U16 => Value::from(u16::from_le_bytes([c[0], c[1]])),
            DType::I16 => Value::from(i16::from_le_bytes([c[0], c[1]])),
            DType::I32 => Value::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            DType::I64 => Value::from(i64::from_le_bytes(c.try_into().unwrap_or_default())),
        })
        .collect()
}

/// An IEEE half as a single.
fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let fraction = f32::from(bits & 0x3ff);
    sign * match exponent {
        0 => fraction * 2f32.powi(-24),
        31 if fraction == 0.0 => f32::INFINITY,
        31 => f32::NAN,
        e => (1.0 + fraction / 1024.0) * 2f32.powi(e - 15),
    }
}

/// The answer to `request`: the outputs it asks for (all, by default) with JSON `data`, or as binary data to
/// follow the JSON: the second part, those outputs' bytes in order (shared with the tensors, not copied).
pub fn encode_response(
    model: &str,
    specs: &[Declared<'_>],
    request: &InferRequest,
    outputs: Vec<Tensor>,
) -> Result<(InferResponse, Vec<Bytes>), EncodeError> {
    let all_binary = flag(&request.parameters, "binary_data_output");
    let asked: Vec<(usize, bool)> = match &request.outputs {
        None => (0..specs.len().min(outputs.len())).map(|i| (i, all_binary)).collect(),
        Some(asked) => asked
            .iter()
            .map(|o| {
                let index = specs.iter().position(|s| s.name == o.name).ok_or_else(|| {
                    let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
                    EncodeError::UnknownOutput {
                        model: model.into(),
                        output: o.name.clone(),
                        declared: names.join(", "),
                    }
                })?;
                Ok((index, all_binary || flag(&o.parameters, "binary_data")))
            })
            .collect::<Result<_, EncodeError>>()?,
    };
    let mut binary = Vec::new();
    let mut parts = Vec::with_capacity(asked.len());
    for (index, as_binary) in asked {
        let Some(tensor) = outputs.get(index) else { continue };
        let mut part = ResponseOutput {
            name: specs[index].name.to_string(),
            shape: tensor.shape().to_vec(),
            datatype: tensor.dtype().oip_name().into(),
            parameters: None,
            data: None,
        };
        if as_binary {
            let mut parameters = Map::new();
            parameters.insert("binary_data_size".into(), Value::from(tensor.data().len()));
            part.parameters = Some(parameters);
            binary.push(tensor.bytes().clone());
        } else {
            part.data = Some(decode(tensor));
        }
        parts.push(part);
    }
    let response = InferResponse {
        model_name: model.into(),
        model_version: VERSION.into(),
        id: request.id.clone(),
        outputs: parts,
    };
    Ok((response, binary))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, dtype: DType) -> Declared<'_> {
        Declared { name, dtype }
    }

    fn input(name: &str, datatype: &str, shape: &[u64], data: Option<Value>, binary: Option<usize>) -> RequestInput {
        let parameters = binary.map(|n| {
            let mut p = Map::new();
            p.insert("binary_data_size".into(), Value::from(n));
            p
        });
        RequestInput { name: name.into(), shape: shape.to_vec(), datatype: datatype.into(), parameters, data }
    }

    fn request(inputs: Vec<RequestInput>) -> InferRequest {
        InferRequest { id: None, parameters: None, inputs, outputs: None }
    }

    #[test]
    fn json_and_binary_inputs_become_tensors_in_the_models_order() {
        let specs = [spec("a", DType::F32), spec("b", DType::I64)];
        let binary: Vec<u8> = [7i64, -8].iter().flat_map(|v| v.to_le_bytes()).collect();
        let request = request(vec![
            input("b", "INT64", &[1, 2], None, Some(16)),
            input("a", "FP32", &[1, 2], Some(serde_json::json!([[1.5, -2.0]])), None),
        ]);
        let tensors = inputs("m.s", &specs, &request, Bytes::from(binary)).unwrap();
        assert_eq!(tensors[0].data(), [1.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
        assert_eq!(tensors[1].dtype(), DType::I64);
        assert_eq!(decode(&tensors[1]), vec![Value::from(7), Value::from(-8)]);
    }

    #[test]
    fn malformed_requests_are_refused_with_what_is_wrong() {
        let specs = [spec("a", DType::F32)];
        let case = |inputs_: Vec<RequestInput>, binary: &[u8]| {
            inputs("m.s", &specs, &request(inputs_), Bytes::copy_from_slice(binary)).unwrap_err().to_string()
        };
        let data = || Some(serde_json::json!([1.0, 2.0]));
        assert!(case(vec![input("a", "INT64", &[1, 2], data(), None)], b"").contains("is FP32, not INT64"));
        assert!(case(vec![input("a", "FP32", &[2, 2], data(), None)], b"").contains("holds 4 elements, `data` has 2"));
        assert!(case(vec![input("x", "FP32", &[1, 2], data(), None)], b"").contains("no input `x`"));
        assert!(case(vec![], b"").contains("input `a` is missing"));
        assert!(case(vec![input("a", "FP32", &[1, 2], None, Some(8))], b"1234").contains("only 4 bytes"));
        assert!(case(vec![input("a", "FP32", &[1, 2], None, Some(4))], b"12345678").contains("is 8"));
        assert!(case(vec![input("a", "FP32", &[1, 2], data(), None)], b"xx").contains("no input claims"));
        assert!(
            case(vec![input("a", "FP32", &[1, 2], Some(serde_json::json!(["x", 1])), None)], b"")
                .contains("not a FP32 element")
        );
        assert!(case(vec![input("a", "FP32", &[1, 2], None, None)], b"").contains("neither `data`"));
        assert!(parse(&Bytes::from_static(b"{}"), Some(9)).unwrap_err().to_string().contains("the body has 2 bytes"));
    }

    #[test]
    fn refusals_say_what_was_wrong_by_their_variant() {
        let specs = [spec("a", DType::F16)];
        let half = input("a", "FP16", &[1], Some(serde_json::json!([1.0])), None);
        let err = inputs("m.s", &specs, &request(vec![half]), Bytes::new()).unwrap_err();
        assert!(matches!(&err, DecodeError::HalfAsJson { input } if input == "a"), "{err}");
        let body = Bytes::from_static(b"{\"inputs\": 1}");
        assert!(matches!(decode_request("m.s", &specs, &body, None), Err(DecodeError::Json { .. })));
        let mut asked = request(vec![]);
        asked.outputs = Some(vec![RequestOutput { name: "z".into(), parameters: None }]);
        let err = encode_response("m.s", &[spec("y", DType::F32)], &asked, vec![]).unwrap_err();
        assert_eq!(err.to_string(), "model `m.s` has no output `z` (it has: y)");
    }

    #[test]
    fn halves_widen_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert!(f16_to_f32(0x7c00).is_infinite());
    }
}
