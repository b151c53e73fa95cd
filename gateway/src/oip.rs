//! The Open Inference Protocol (KServe v2) on the gateway: each deployed app's model slots served as v2
//! models named `APP.SLOT`, and each app that declares `[tensors]` as the v2 model `APP`, so that Triton's and
//! KServe's clients work with jig.
//!
//! A v2 call of a slot runs it on its planned instances, batched with the app's own calls to it, under the app's
//! invoke token, deadline (`jig-timeout-ms`, else the SLO), admission and metrics. It is not app demand: the
//! plan is sized for the app's requests, so v2 calls do not count towards re-plans. A v2 call of an app is an
//! invocation of it, as `/v1/apps/APP/invoke` is (and app demand): its input tensor reaches the entry task as a
//! tensor envelope, and the one tensor envelope the app outputs is the answer.

use std::sync::Arc;
use std::time::Instant;

use crate::http::Body;
use bytes::{Bytes, BytesMut};
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};

use jig_api::ErrorKind;
use jig_api::oip::{
    BINARY_HEADER, Declared, EncodeError, Health, InferRequest, ModelMetadata, SLOT_SEPARATOR, ServerMetadata,
    TensorMetadata, VERSION, decode_request, encode_response,
};
use jig_app::App;
use jig_manifest::{AppTensors, TensorDecl};
use jig_model_host::instance::InstanceError;
use jig_model_host::onnx::{ModelError, TensorSpec};
use jig_model_host::pool::Pool;
use jig_model_host::{DType, Tensor};
use jig_wire::Envelope;
use jig_wire::envelope::{TRAILER_RESERVE, TensorMeta};

use crate::{Gateway, Reply, classify, error, json, refuse_unauthorized, request_class, request_timeout};

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

    /// `GET /v2/health/live` (`live`: while the gateway runs) or `GET /v2/health/ready` (as `/readyz`, see
    /// [`crate::ready`]).
    pub(crate) fn v2_health(&self, live: bool) -> Reply {
        if live {
            return json(StatusCode::OK, &Health { live: Some(true), ..Health::default() });
        }
        match self.unready() {
            why if why.is_empty() => json(StatusCode::OK, &Health { ready: Some(true), ..Health::default() }),
            why => error(ErrorKind::Unavailable, format!("not ready: {}", why.join("; "))),
        }
    }

    /// `GET /v2/models/{model}`.
    pub(crate) fn v2_model(&self, model: &str, request: &Request<Body>) -> Reply {
        if let Some(reply) = refuse_unauthorized(request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        if !model.contains(SLOT_SEPARATOR) {
            return match self.find_app(model) {
                Ok((_, tensors)) => json(
                    StatusCode::OK,
                    &ModelMetadata {
                        name: model.into(),
                        versions: vec![VERSION.into()],
                        platform: "jig_app".into(),
                        inputs: vec![declared_metadata(&tensors.input)],
                        outputs: vec![declared_metadata(&tensors.output)],
                    },
                ),
                Err(detail) => unknown_model(model, &detail),
            };
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

    /// `GET /v2/models/{model}/ready`: 200 while the slot (each slot of an app that is a model) has a running
    /// instance; 503 while its app is starting or could not start ([`crate::ready`]).
    pub(crate) fn v2_model_ready(&self, model: &str, request: &Request<Body>) -> Reply {
        if let Some(reply) = refuse_unauthorized(request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        let (app, slot) = match model.split_once(SLOT_SEPARATOR) {
            Some((app, slot)) => (app, Some(slot)),
            None => (model, None),
        };
        if let Some(unready) = self.model_unready(app, slot) {
            return unready;
        }
        let found = match slot {
            None => self.find_app(model).map(drop),
            Some(_) => self.find_slot(model).map(drop),
        };
        match found {
            Ok(()) => json(StatusCode::OK, &Health { name: Some(model.into()), ready: Some(true), live: None }),
            Err(detail) => unknown_model(model, &detail),
        }
    }

    /// `POST /v2/models/{model}/infer`.
    pub(crate) async fn v2_infer(self: Arc<Self>, model: &str, request: Request<Body>) -> Reply {
        let arrived = Instant::now();
        if let Some(reply) = refuse_unauthorized(&request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        if !model.contains(SLOT_SEPARATOR) {
            let (app, tensors) = match self.find_app(model) {
                Ok(found) => found,
                Err(detail) => return unknown_model(model, &detail),
            };
            let _in_flight = self.metrics.request_started(&app.name);
            self.demand.lock().unwrap_or_else(|p| p.into_inner()).entry(app.name.clone()).or_default().arrived();
            let reply = self.v2_run_app(&app, &tensors, arrived, request).await;
            return self.answered(&app.name, arrived, reply, false);
        }
        let (app, pool) = match self.find_slot(model) {
            Ok(found) => found,
            Err(detail) => return unknown_model(model, &detail),
        };
        // A direct call of a slot is the model's request, not the app's: counted apart, and not demand.
        let slot = model.split_once(SLOT_SEPARATOR).map_or(model, |(_, slot)| slot);
        let _in_flight = self.metrics.model_request_started(&app.name, slot);
        let reply = self.v2_run(&app, &pool, model, arrived, request).await;
        self.model_answered(&app.name, slot, arrived, reply)
    }

    async fn v2_run(&self, app: &App, pool: &Pool, model: &str, arrived: Instant, request: Request<Body>) -> Reply {
        let timeout = match request_timeout(&request, self.max_timeout()) {
            Ok(timeout) => timeout,
            Err(bad) => return error(ErrorKind::InvalidRequest, bad),
        };
        let class = request_class(&request);
        let class = class.as_deref();
        let deadline = app.deadline(arrived, timeout, class);
        let json_length = match json_length(&request) {
            Ok(length) => length,
            Err(bad) => return error(ErrorKind::InvalidRequest, bad),
        };
        let body = match self.whole_body(request, "inference request", deadline).await {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        // Admitted only once its body is here: a client that sends headers and no body holds no place.
        let admitted = match app.admit(class) {
            Ok(admitted) => admitted,
            Err(e) => return error(classify(&e, deadline), e.to_string()),
        };
        let Some(instance) = pool.instances().next() else { return not_ready(model) };
        let (request, inputs) = match decode_request(model, &declared(instance.inputs()), &body, json_length) {
            Ok(parsed) => parsed,
            Err(refused) => return error(ErrorKind::InvalidRequest, refused.to_string()),
        };
        let outputs = match tokio::time::timeout_at(deadline.into(), pool.infer(inputs, deadline)).await {
            Err(_) => {
                admitted.settle(false);
                return error(ErrorKind::Deadline, format!("model `{model}` did not answer by the deadline"));
            }
            Ok(None) => return not_ready(model),
            // The client's fault, said in its model's terms (not the instance's or the variant's name).
            Ok(Some(Err(InstanceError::Input { source: ModelError::Input { detail, .. }, .. }))) => {
                return error(ErrorKind::InvalidInput, format!("model `{model}`: {detail}"));
            }
            Ok(Some(Err(e))) => {
                let kind = match &e {
                    InstanceError::Dropped { .. } => ErrorKind::Dropped,
                    InstanceError::Input { .. } => ErrorKind::InvalidInput,
                    _ => ErrorKind::FunctionFailed,
                };
                if kind == ErrorKind::Dropped {
                    admitted.settle(false);
                }
                return error(kind, format!("model `{model}`: {e}"));
            }
            Ok(Some(Ok(outputs))) => outputs,
        };
        admitted.settle(Instant::now() <= deadline);
        match respond(model, &declared(instance.outputs()), &request, outputs) {
            Ok(reply) => reply,
            Err(refused) => error(ErrorKind::InvalidRequest, refused.to_string()),
        }
    }

    /// A v2 call of app `app`: its input as a tensor envelope to the entry task, its tensor envelope back.
    async fn v2_run_app(&self, app: &App, tensors: &AppTensors, arrived: Instant, request: Request<Body>) -> Reply {
        let model = app.name.as_str();
        let timeout = match request_timeout(&request, self.max_timeout()) {
            Ok(timeout) => timeout,
            Err(bad) => return error(ErrorKind::InvalidRequest, bad),
        };
        let class = request_class(&request);
        let class = class.as_deref();
        let deadline = app.deadline(arrived, timeout, class);
        let json_length = match json_length(&request) {
            Ok(length) => length,
            Err(bad) => return error(ErrorKind::InvalidRequest, bad),
        };
        let body = match self.whole_body(request, "inference request", deadline).await {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        // Admitted only once its body is here: a client that sends headers and no body holds no place.
        let admitted = match app.admit(class) {
            Ok(admitted) => admitted,
            Err(e) => return error(classify(&e, deadline), e.to_string()),
        };
        let (input, output) = (declared_tensor(&tensors.input), declared_tensor(&tensors.output));
        let (request, inputs) = match decode_request(model, &[input], &body, json_length) {
            Ok(parsed) => parsed,
            Err(refused) => return error(ErrorKind::InvalidRequest, refused.to_string()),
        };
        let payload = tensor_envelope(&inputs[0]);
        let result = app.invoke(&admitted, payload, deadline, &self.metrics).await;
        let outputs = match result {
            Ok(outputs) => {
                admitted.settle(Instant::now() <= deadline);
                outputs
            }
            Err(e) => {
                let kind = classify(&e, deadline);
                if matches!(kind, ErrorKind::Dropped | ErrorKind::Deadline) {
                    admitted.settle(false);
                }
                return error(kind, e.to_string());
            }
        };
        let count = outputs.len();
        let answers: Vec<Tensor> = outputs.into_iter().filter_map(|o| from_tensor_envelope(o.bytes)).collect();
        let answer = match <[Tensor; 1]>::try_from(answers) {
            Ok([answer]) if answer.dtype() == output.dtype => answer,
            Ok([answer]) => {
                let got = answer.dtype().oip_name();
                let message = format!(
                    "app `{model}` answered {got}, not the {} its `[tensors]` output declares",
                    tensors.output.datatype
                );
                return error(ErrorKind::FunctionFailed, message);
            }
            Err(answers) => {
                let message = format!(
                    "app `{model}` answered {} tensor envelopes among its {} outputs; as a v2 model it answers one: \
                     its `[tensors]` output",
                    answers.len(),
                    count
                );
                return error(ErrorKind::FunctionFailed, message);
            }
        };
        match respond(model, &[output], &request, vec![answer]) {
            Ok(reply) => reply,
            Err(refused) => error(ErrorKind::InvalidRequest, refused.to_string()),
        }
    }

    /// The app of the v2 model `APP` and its tensors, or what there is instead (for [`unknown_model`]).
    fn find_app(&self, model: &str) -> Result<(Arc<App>, AppTensors), String> {
        let app = self.app(model).ok_or_else(|| format!("no app `{model}` is deployed"))?;
        let tensors = app.tensors.clone().ok_or_else(|| {
            format!("app `{model}` declares no `[tensors]`, so it is no v2 model itself; its slots are `{model}.SLOT`")
        })?;
        Ok((app, tensors))
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
        format!(
            "unknown model `{model}`: v2 models are a deployed app's model slots, `APP.SLOT`, and apps that declare \
             `[tensors]`, `APP`; {detail}"
        ),
    )
}

/// The length of the JSON part of a body with binary tensors after it (`Inference-Header-Content-Length`).
fn json_length(request: &Request<Body>) -> Result<Option<usize>, String> {
    match request.headers().get(BINARY_HEADER).map(|v| v.to_str().ok()?.trim().parse::<usize>().ok()) {
        None => Ok(None),
        Some(Some(n)) => Ok(Some(n)),
        Some(None) => Err(format!("`{BINARY_HEADER}` must be the byte length of the JSON part of the body")),
    }
}

/// A `[tensors]` declaration as the codec checks it (the manifest admits only datatypes jig serves).
fn declared_tensor(decl: &TensorDecl) -> Declared<'_> {
    Declared {
        name: &decl.name,
        dtype: DType::from_oip_name(&decl.datatype).expect("checked when the bundle was read"),
    }
}

fn declared_metadata(decl: &TensorDecl) -> TensorMetadata {
    TensorMetadata { name: decl.name.clone(), datatype: decl.datatype.clone(), shape: decl.shape.clone() }
}

/// `tensor` as a tensor envelope ([`TensorMeta`]), the payload an app's entry task takes.
fn tensor_envelope(tensor: &Tensor) -> Vec<u8> {
    let meta = TensorMeta { datatype: tensor.dtype().oip_name().into(), shape: tensor.shape().to_vec() };
    let mut body = Vec::with_capacity(tensor.data().len() + TRAILER_RESERVE);
    body.extend_from_slice(tensor.data());
    Envelope { meta, body }.encode()
}

/// The tensor in `bytes`, when they are a tensor envelope.
fn from_tensor_envelope(bytes: Vec<u8>) -> Option<Tensor> {
    let Envelope { meta, body } = Envelope::<TensorMeta>::decode(bytes).ok()?;
    Tensor::new(DType::from_oip_name(&meta.datatype)?, meta.shape, body).ok()
}

fn not_ready(model: &str) -> Reply {
    error(ErrorKind::Overloaded, format!("model `{model}` has no running instance"))
}

fn tensor_metadata(spec: &TensorSpec) -> TensorMetadata {
    TensorMetadata {
        name: spec.name.clone(),
        datatype: spec.dtype.oip_name().into(),
        shape: spec.shape.iter().map(|d| d.map_or(-1, |d| d as i64)).collect(),
    }
}

/// The model's declared tensors, as the codec checks them.
fn declared(specs: &[TensorSpec]) -> Vec<Declared<'_>> {
    specs.iter().map(|s| Declared { name: &s.name, dtype: s.dtype }).collect()
}

/// The answer to `request` with `outputs`: JSON, or JSON and binary data after it.
fn respond(
    model: &str,
    specs: &[Declared<'_>],
    request: &InferRequest,
    outputs: Vec<Tensor>,
) -> Result<Reply, EncodeError> {
    let (response, binary) = encode_response(model, specs, request, outputs)?;
    let binary_len: usize = binary.iter().map(Bytes::len).sum();
    if binary_len == 0 {
        return Ok(json(StatusCode::OK, &response));
    }
    let head = serde_json::to_vec(&response).expect("an inference response serialises to JSON");
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
