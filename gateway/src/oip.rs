//! The Open Inference Protocol (KServe v2) on the gateway: each deployed app's model slots served as v2
//! models named `APP.SLOT`, so that Triton's and KServe's clients work with jig.
//!
//! A v2 call runs one slot on its planned instances, batched with the app's own calls to it, under the app's
//! invoke token, deadline (`jig-timeout-ms`, else the SLO), admission and metrics. It is not app demand: the
//! plan is sized for the app's requests, so v2 calls do not count towards re-plans.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};

use jig_api::ErrorKind;
use jig_api::oip::{
    BINARY_HEADER, Declared, Health, InferRequest, ModelMetadata, SLOT_SEPARATOR, ServerMetadata, TensorMetadata,
    VERSION, datatype, decode_request, encode_response,
};
use jig_app::App;
use jig_model_host::Tensor;
use jig_model_host::instance::InstanceError;
use jig_model_host::onnx::TensorSpec;
use jig_model_host::pool::Pool;

use crate::{Gateway, Reply, classify, error, json, read_body, refuse_unauthorized, request_class, request_timeout};

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
        let (_, pool) = match self.find_slot(model) {
            Ok(found) => found,
            Err(detail) => return unknown_model(model, &detail),
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
        match self.find_slot(model) {
            Ok((_, pool)) if pool.instances().next().is_some() => {
                json(StatusCode::OK, &Health { name: Some(model.into()), ready: Some(true), live: None })
            }
            Ok(_) => not_ready(model),
            Err(detail) => unknown_model(model, &detail),
        }
    }

    /// `POST /v2/models/{model}/infer`.
    pub(crate) async fn v2_infer(self: Arc<Self>, model: &str, request: Request<Incoming>) -> Reply {
        let arrived = Instant::now();
        if let Some(reply) = refuse_unauthorized(&request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        let (app, pool) = match self.find_slot(model) {
            Ok(found) => found,
            Err(detail) => return unknown_model(model, &detail),
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
            Err(bad) => return (error(ErrorKind::InvalidRequest, bad), false),
        };
        let class = request_class(&request);
        let deadline = app.deadline(arrived, timeout, class);
        let admitted = match app.admit(class) {
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
        let (request, inputs) = match decode_request(model, &declared(instance.inputs()), &body, json_length) {
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

    /// The app and pool of the v2 model `APP.SLOT`, or what there is instead (for [`unknown_model`]).
    fn find_slot(&self, model: &str) -> Result<(Arc<App>, Arc<Pool>), String> {
        let (app_name, slot) = model.split_once(SLOT_SEPARATOR).ok_or("this name has no slot")?;
        let app = self.app(app_name).ok_or_else(|| format!("no app `{app_name}` is deployed"))?;
        let Some(pool) = app.models().get(slot).cloned() else {
            let mut slots: Vec<&str> = app.models().iter().map(|(s, _)| s).collect();
            slots.sort_unstable();
            return Err(format!("`{app_name}` has the slots: {}", slots.join(", ")));
        };
        Ok((app, pool))
    }
}

/// The 404 for a model name that names no slot: `detail` says what there is.
fn unknown_model(model: &str, detail: &str) -> Reply {
    error(
        ErrorKind::NotFound,
        format!("unknown model `{model}`: v2 models are a deployed app's model slots, `APP.SLOT`; {detail}"),
    )
}

fn not_ready(model: &str) -> Reply {
    error(ErrorKind::Overloaded, format!("model `{model}` has no running instance"))
}

fn tensor_metadata(spec: &TensorSpec) -> TensorMetadata {
    TensorMetadata {
        name: spec.name.clone(),
        datatype: datatype(spec.dtype).into(),
        shape: spec.shape.iter().map(|d| d.map_or(-1, |d| d as i64)).collect(),
    }
}

/// The model's declared tensors, as the codec checks them.
fn declared(specs: &[TensorSpec]) -> Vec<Declared<'_>> {
    specs.iter().map(|s| Declared { name: &s.name, dtype: s.dtype }).collect()
}

/// The answer to `request` with `outputs`: JSON, or JSON and binary data after it.
fn respond(model: &str, specs: &[TensorSpec], request: &InferRequest, outputs: Vec<Tensor>) -> Result<Reply, String> {
    let (response, binary) = encode_response(model, &declared(specs), request, outputs)?;
    let binary_len: usize = binary.iter().map(Bytes::len).sum();
    if binary_len == 0 {
        return Ok(json(StatusCode::OK, &response));
    }
    let head = serde_json::to_vec(&response).map_err(|e| e.to_string())?;
    let length = head.len();
    // One copy of each output, into the body.
    let mut body = BytesMut::with_capacity(length + binary_len);
    body.extend_from_slice(&head);
    binary.iter().for_each(|part| body.extend_from_slice(part));
    let mut reply = crate::bytes_reply(StatusCode::OK, body.freeze());
    let headers = reply.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    headers.insert(BINARY_HEADER, HeaderValue::from(length));
    Ok(reply)
}
