//! The Open Inference Protocol (KServe v2) on the gateway: each deployed app's model slots served as v2
//! models named `APP.SLOT`, so that Triton's and KServe's clients work with jig.
//!
//! A v2 call runs one slot on its planned instances, batched with the app's own calls to it, under the app's
//! invoke token, deadline (`jig-timeout-ms`, else the SLO), admission and metrics. It is not app demand: the
//! plan is sized for the app's requests, so v2 calls do not count towards re-plans.

use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};
use serde_json::{Map, Value};

use jig_api::ErrorKind;
use jig_api::oip::{
    BINARY_HEADER, Health, InferRequest, InferResponse, ModelMetadata, ResponseOutput, SLOT_SEPARATOR, ServerMetadata,
    TensorMetadata, binary_size, flag,
};
use jig_app::App;
use jig_model_host::instance::InstanceError;
use jig_model_host::onnx::TensorSpec;
use jig_model_host::pool::Pool;
use jig_model_host::{DType, Tensor};

use crate::{Gateway, Reply, classify, error, json, read_body, refuse_unauthorized, request_timeout};

/// The one version each model is served at: the app's current deployment.
const VERSION: &str = "1";

impl Gateway {
    /// `GET /v2`.
    pub(crate) fn v2_server(&self) -> Reply {
        json(
            StatusCode::OK,
            &ServerMetadata {
                name: "jig".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                extensions: vec!["binary_tensor_data".into()],
            },
        )
    }

    /// `GET /v2/health/live` (`live`) or `GET /v2/health/ready`: while the gateway runs, it serves.
    pub(crate) fn v2_health(&self, live: bool) -> Reply {
        let health = if live {
            Health { live: Some(true), ..Health::default() }
        } else {
            Health { ready: Some(true), ..Health::default() }
        };
        json(StatusCode::OK, &health)
    }

    /// `GET /v2/models/{model}`.
    pub(crate) fn v2_model(&self, model: &str, request: &Request<Incoming>) -> Reply {
        if let Some(reply) = refuse_unauthorized(request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        let (_, pool) = match self.v2_slot(model) {
            Ok(found) => found,
            Err(reply) => return reply,
        };
        let Some(instance) = pool.instances().next() else {
            return not_ready(model);
        };
        let metadata = |specs: &[TensorSpec]| specs.iter().map(tensor_metadata).collect();
        json(
            StatusCode::OK,
            &ModelMetadata {
                name: model.into(),
                versions: vec![VERSION.into()],
                platform: "onnxruntime_onnx".into(),
                inputs: metadata(instance.inputs()),
                outputs: metadata(instance.outputs()),
            },
        )
    }

    /// `GET /v2/models/{model}/ready`: 200 while the slot has a running instance.
    pub(crate) fn v2_model_ready(&self, model: &str, request: &Request<Incoming>) -> Reply {
        if let Some(reply) = refuse_unauthorized(request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        match self.v2_slot(model) {
            Ok((_, pool)) if pool.instances().next().is_some() => {
                json(StatusCode::OK, &Health { name: Some(model.into()), ready: Some(true), live: None })
            }
            Ok(_) => not_ready(model),
            Err(reply) => reply,
        }
    }

    /// `POST /v2/models/{model}/infer`.
    pub(crate) async fn v2_infer(self: Arc<Self>, model: &str, request: Request<Incoming>) -> Reply {
        let arrived = Instant::now();
        if let Some(reply) = refuse_unauthorized(&request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        let (app, pool) = match self.v2_slot(model) {
            Ok(found) => found,
            Err(reply) => return reply,
        };
        let _in_flight = self.metrics.request_started(&app.name);
        let (reply, early_drop) = self.v2_run(&app, &pool, model, arrived, request).await;
        self.answered(&app.name, arrived, reply, early_drop)
    }

    async fn v2_run(
        &self,
        app: &App,
        pool: &Pool,
        model: &str,
        arrived: Instant,
        request: Request<Incoming>,
    ) -> (Reply, bool) {
        let timeout = match request_timeout(&request) {
            Ok(timeout) => timeout,
            Err(reply) => return (reply, false),
        };
        let deadline = app.deadline(arrived, timeout);
        let admitted = match app.admit() {
            Ok(admitted) => admitted,
            Err(e) => return (error(classify(&e, deadline), e.to_string()), false),
        };
        let json_length =
            match request.headers().get(BINARY_HEADER).map(|v| v.to_str().ok()?.trim().parse::<usize>().ok()) {
                None => None,
                Some(Some(n)) => Some(n),
                Some(None) => {
                    let bad = format!("`{BINARY_HEADER}` must be the byte length of the JSON part of the body");
                    return (error(ErrorKind::InvalidRequest, bad), false);
                }
            };
        let body = read_body(request, self.config.max_request_mib << 20, "inference request");
        let body = match tokio::time::timeout_at(deadline.into(), body).await {
            Ok(Ok(body)) => body,
            Ok(Err(reply)) => return (reply, false),
            Err(_) => {
                return (error(ErrorKind::Deadline, "the request's body did not arrive before its deadline"), false);
            }
        };
        let Some(instance) = pool.instances().next() else { return (not_ready(model), false) };
        let parsed = parse(&body, json_length).and_then(|(request, binary)| {
            let inputs = inputs(model, instance.inputs(), &request, binary)?;
            Ok((request, inputs))
        });
        let (request, inputs) = match parsed {
            Ok(parsed) => parsed,
            Err(message) => return (error(ErrorKind::InvalidRequest, message), false),
        };
        let outputs = match tokio::time::timeout_at(deadline.into(), pool.infer(inputs, deadline)).await {
            Err(_) => {
                admitted.settle(false);
                return (error(ErrorKind::Deadline, format!("model `{model}` did not answer by the deadline")), false);
            }
            Ok(None) => return (not_ready(model), false),
            Ok(Some(Err(e))) => {
                let kind = match &e {
                    InstanceError::Dropped { .. } => ErrorKind::Dropped,
                    InstanceError::Input { .. } => ErrorKind::InvalidInput,
                    _ => ErrorKind::FunctionFailed,
                };
                if kind == ErrorKind::Dropped {
                    admitted.settle(false);
                }
                return (error(kind, format!("model `{model}`: {e}")), kind == ErrorKind::Dropped);
            }
            Ok(Some(Ok(outputs))) => outputs,
        };
        admitted.settle(Instant::now() <= deadline);
        match respond(model, instance.outputs(), &request, outputs) {
            Ok(reply) => (reply, false),
            Err(message) => (error(ErrorKind::InvalidRequest, message), false),
        }
    }

    /// The app and pool of the v2 model `APP.SLOT`, or a 404 that says what there is.
    fn v2_slot(&self, model: &str) -> Result<(Arc<App>, Arc<Pool>), Reply> {
        let unknown = |detail: String| {
            Err(error(
                ErrorKind::NotFound,
                format!("unknown model `{model}`: v2 models are a deployed app's model slots, `APP.SLOT`; {detail}"),
            ))
        };
        let Some((app_name, slot)) = model.split_once(SLOT_SEPARATOR) else {
            return unknown("this name has no slot".into());
        };
        let Some(app) = self.app(app_name) else {
            return unknown(format!("no app `{app_name}` is deployed"));
        };
        let Some(pool) = app.models().get(slot).cloned() else {
            let mut slots: Vec<&str> = app.models().iter().map(|(s, _)| s).collect();
            slots.sort_unstable();
            return unknown(format!("`{app_name}` has the slots: {}", slots.join(", ")));
        };
        Ok((app, pool))
    }
}

fn not_ready(model: &str) -> Reply {
    error(ErrorKind::Overloaded, format!("model `{model}` has no running instance"))
}

/// The protocol's name of a jig element type.
fn datatype(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "FP32",
        DType::F16 => "FP16",
        DType::F64 => "FP64",
        DType::U8 => "UINT8",
        DType::I8 => "INT8",
        DType::U16 => "UINT16",
        DType::I16 => "INT16",
        DType::I32 => "INT32",
        DType::I64 => "INT64",
        DType::Bool => "BOOL",
    }
}

fn tensor_metadata(spec: &TensorSpec) -> TensorMetadata {
    TensorMetadata {
        name: spec.name.clone(),
        datatype: datatype(spec.dtype).into(),
        shape: spec.shape.iter().map(|d| d.map_or(-1, |d| d as i64)).collect(),
    }
}

/// The JSON request and the binary part after it.
fn parse(body: &Bytes, json_length: Option<usize>) -> Result<(InferRequest, Bytes), String> {
    let split = json_length.unwrap_or(body.len());
    if split > body.len() {
        return Err(format!("`{BINARY_HEADER}` is {split} but the body has {} bytes", body.len()));
    }
    let request =
        serde_json::from_slice(&body[..split]).map_err(|e| format!("the inference request is not valid: {e}"))?;
    Ok((request, body.slice(split..)))
}

/// The request's inputs as tensors, in the model's order; binary ones are views of the body.
fn inputs(model: &str, specs: &[TensorSpec], request: &InferRequest, mut binary: Bytes) -> Result<Vec<Tensor>, String> {
    let declared = || specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ");
    let mut given: Vec<Option<Tensor>> = vec![None; specs.len()];
    for input in &request.inputs {
        let Some(index) = specs.iter().position(|s| s.name == input.name) else {
            return Err(format!("model `{model}` has no input `{}` (it has: {})", input.name, declared()));
        };
        let dtype = specs[index].dtype;
        if input.datatype != datatype(dtype) {
            return Err(format!(
                "input `{}` of model `{model}` is {}, not {}",
                input.name,
                datatype(dtype),
                input.datatype
            ));
        }
        let expected = dtype
            .bytes_for(&input.shape)
            .ok_or_else(|| format!("input `{}`: shape {:?} is too large", input.name, input.shape))?;
        let data = match binary_size(&input.parameters) {
            Some(size) => {
                let size = size?;
                if size != expected {
                    return Err(format!(
                        "input `{}`: `binary_data_size` is {size} bytes, but {} of shape {:?} is {expected}",
                        input.name, input.datatype, input.shape
                    ));
                }
                if size > binary.len() {
                    return Err(format!(
                        "input `{}`: `binary_data_size` is {size} bytes, but only {} bytes of binary data are left",
                        input.name,
                        binary.len()
                    ));
                }
                binary.split_to(size)
            }
            None => {
                let data = input.data.as_ref().ok_or_else(|| {
                    format!("input `{}` has neither `data` nor a `binary_data_size` parameter", input.name)
                })?;
                let bytes = encode(dtype, data).map_err(|e| format!("input `{}`: {e}", input.name))?;
                if bytes.len() != expected {
                    return Err(format!(
                        "input `{}`: shape {:?} holds {} elements, `data` has {}",
                        input.name,
                        input.shape,
                        expected / dtype.size(),
                        bytes.len() / dtype.size()
                    ));
                }
                bytes
            }
        };
        let tensor =
            Tensor::new(dtype, input.shape.clone(), data).map_err(|e| format!("input `{}`: {e}", input.name))?;
        if given[index].replace(tensor).is_some() {
            return Err(format!("input `{}` is given twice", input.name));
        }
    }
    if !binary.is_empty() {
        return Err(format!("{} bytes of binary data follow the request that no input claims", binary.len()));
    }
    given
        .into_iter()
        .zip(specs)
        .map(|(tensor, spec)| {
            tensor.ok_or_else(|| format!("input `{}` is missing; model `{model}` takes: {}", spec.name, declared()))
        })
        .collect()
}

/// JSON elements (flat or nested arrays, row-major) as little-endian bytes of `dtype`.
fn encode(dtype: DType, data: &Value) -> Result<Bytes, String> {
    let mut elements = Vec::new();
    flatten(data, &mut elements);
    let mut out = BytesMut::with_capacity(elements.len() * dtype.size());
    for value in elements {
        let bad = || format!("{value} is not a {} element", datatype(dtype));
        let int = |lo: i64, hi: i64| value.as_i64().filter(|v| (lo..=hi).contains(v)).ok_or_else(bad);
        match dtype {
            DType::F32 => out.put_f32_le(value.as_f64().ok_or_else(bad)? as f32),
            DType::F64 => out.put_f64_le(value.as_f64().ok_or_else(bad)?),
            DType::F16 => return Err("send FP16 tensors as binary data (JSON has no half floats)".into()),
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

/// The answer: the asked outputs (all by default), as JSON or binary data after it.
fn respond(model: &str, specs: &[TensorSpec], request: &InferRequest, outputs: Vec<Tensor>) -> Result<Reply, String> {
    let all_binary = flag(&request.parameters, "binary_data_output");
    let asked: Vec<(usize, bool)> = match &request.outputs {
        None => (0..specs.len().min(outputs.len())).map(|i| (i, all_binary)).collect(),
        Some(asked) => asked
            .iter()
            .map(|o| {
                let index = specs.iter().position(|s| s.name == o.name).ok_or_else(|| {
                    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
                    format!("model `{model}` has no output `{}` (it has: {})", o.name, names.join(", "))
                })?;
                Ok((index, all_binary || flag(&o.parameters, "binary_data")))
            })
            .collect::<Result<_, String>>()?,
    };
    let mut binary = BytesMut::new();
    let mut parts = Vec::with_capacity(asked.len());
    for (index, as_binary) in asked {
        let Some(tensor) = outputs.get(index) else { continue };
        let mut part = ResponseOutput {
            name: specs[index].name.clone(),
            shape: tensor.shape().to_vec(),
            datatype: datatype(tensor.dtype()).into(),
            parameters: None,
            data: None,
        };
        if as_binary {
            let mut parameters = Map::new();
            parameters.insert("binary_data_size".into(), Value::from(tensor.data().len()));
            part.parameters = Some(parameters);
            binary.extend_from_slice(tensor.data());
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
    if binary.is_empty() {
        return Ok(json(StatusCode::OK, &response));
    }
    let head = serde_json::to_vec(&response).map_err(|e| e.to_string())?;
    let length = head.len();
    let mut body = BytesMut::with_capacity(length + binary.len());
    body.extend_from_slice(&head);
    body.extend_from_slice(&binary);
    let mut reply = crate::bytes_reply(StatusCode::OK, body.freeze());
    let headers = reply.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    headers.insert(BINARY_HEADER, HeaderValue::from(length));
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jig_api::oip::RequestInput;

    fn spec(name: &str, dtype: DType) -> TensorSpec {
        TensorSpec { name: name.into(), dtype, shape: vec![None, Some(2)] }
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
            inputs("m.s", &specs, &request(inputs_), Bytes::copy_from_slice(binary)).unwrap_err()
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
        assert!(parse(&Bytes::from_static(b"{}"), Some(9)).unwrap_err().contains("the body has 2 bytes"));
    }

    #[test]
    fn halves_widen_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert!(f16_to_f32(0x7c00).is_infinite());
    }
}
