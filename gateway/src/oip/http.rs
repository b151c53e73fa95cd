//! The Open Inference Protocol over HTTP: `GET /v2`, health, model metadata and readiness, and `POST
//! /v2/models/{model}/infer` with JSON tensors or binary ones after the JSON (`Inference-Header-Content-Length`).

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};

use jig_api::ErrorKind;
use jig_api::oip::{
    BINARY_HEADER, Declared, EncodeError, Health, InferRequest, ServerMetadata, decode_request, encode_response,
};
use jig_model_host::Tensor;

use super::{Refusal, declared};
use crate::http::Body;
use crate::{Gateway, Reply, error, json, refuse_unauthorized, request_class, request_timeout};

impl Refusal {
    /// The error reply of this refusal.
    pub(crate) fn reply(self) -> Reply {
        error(self.kind, self.message)
    }
}

impl Gateway {
    /// `GET /v2`.
    pub(crate) fn v2_server(&self) -> Reply {
        json(StatusCode::OK, &server_metadata())
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
    pub(crate) fn v2_model_metadata(&self, model: &str, request: &Request<Body>) -> Reply {
        if let Some(reply) = refuse_unauthorized(request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        match self.v2_metadata(model) {
            Ok(metadata) => json(StatusCode::OK, &metadata),
            Err(refusal) => refusal.reply(),
        }
    }

    /// `GET /v2/models/{model}/ready`: 200 while the slot (each slot of an app that is a model) has a running
    /// instance; 503 while its app is starting or could not start ([`crate::ready`]).
    pub(crate) fn v2_model_ready(&self, model: &str, request: &Request<Body>) -> Reply {
        if let Some(reply) = refuse_unauthorized(request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        match self.v2_ready(model) {
            Ok(()) => json(StatusCode::OK, &Health { name: Some(model.into()), ready: Some(true), live: None }),
            Err(refusal) => refusal.reply(),
        }
    }

    /// `GET /v2/models/{model}/config`.
    pub(crate) fn v2_model_config(&self, model: &str, request: &Request<Body>) -> Reply {
        if let Some(reply) = refuse_unauthorized(request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        match self.v2_config(model) {
            Ok(config) => json(StatusCode::OK, &config),
            Err(refusal) => refusal.reply(),
        }
    }

    /// `GET /v2/models/{model}/stats`, or `GET /v2/models/stats` (`model` `None`).
    pub(crate) fn v2_stats(&self, model: Option<&str>, request: &Request<Body>) -> Reply {
        if let Some(reply) = refuse_unauthorized(request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        match self.v2_statistics(model) {
            Ok(stats) => json(StatusCode::OK, &stats),
            Err(refusal) => refusal.reply(),
        }
    }

    /// `POST /v2/repository/index`, its body `{"ready": true}` for only the ready models (or none).
    pub(crate) async fn v2_repository_index(&self, request: Request<Body>) -> Reply {
        if let Some(reply) = refuse_unauthorized(&request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        let deadline = Instant::now() + self.max_timeout();
        let body = match self.whole_body(request, "repository index request", deadline).await {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let asked: jig_api::triton::RepositoryIndexRequest = match body.is_empty() {
            true => Default::default(),
            false => match serde_json::from_slice(&body) {
                Ok(asked) => asked,
                Err(e) => return error(ErrorKind::InvalidRequest, format!("the repository index request: {e}")),
            },
        };
        json(StatusCode::OK, &self.v2_repository(asked.ready))
    }

    /// `POST /v2/models/{model}/infer`.
    pub(crate) async fn v2_infer(self: Arc<Self>, name: &str, request: Request<Body>) -> Reply {
        let arrived = Instant::now();
        if let Some(reply) = refuse_unauthorized(&request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        let model = match self.v2_model(name) {
            Ok(model) => model,
            Err(refusal) => return refusal.reply(),
        };
        let _in_flight = self.v2_started(&model);
        let reply = self.v2_infer_http(&model, name, arrived, request).await;
        self.v2_counted(&model, reply.status().as_u16(), arrived.elapsed());
        crate::invoke::timed(reply, arrived.elapsed())
    }

    async fn v2_infer_http(&self, model: &super::Model, name: &str, arrived: Instant, request: Request<Body>) -> Reply {
        let timeout = match request_timeout(&request, self.max_timeout()) {
            Ok(timeout) => timeout,
            Err(bad) => return error(ErrorKind::InvalidRequest, bad),
        };
        let class = request_class(&request);
        let class = class.as_deref();
        let deadline = model.app().deadline(arrived, timeout, class);
        let json_length = match json_length(&request) {
            Ok(length) => length,
            Err(bad) => return error(ErrorKind::InvalidRequest, bad),
        };
        // Read whole before anything is admitted: a client that sends headers and no body holds no place.
        let body = match self.whole_body(request, "inference request", deadline).await {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let signature = match self.v2_signature(model, name) {
            Ok(signature) => signature,
            Err(refusal) => return refusal.reply(),
        };
        let (request, inputs) = match decode_request(name, &declared(&signature.inputs), &body, json_length) {
            Ok(parsed) => parsed,
            Err(refused) => return error(ErrorKind::InvalidRequest, refused.to_string()),
        };
        let outputs = match self.v2_execute(model, name, inputs, deadline, class).await {
            Ok(outputs) => outputs,
            Err(refusal) => return refusal.reply(),
        };
        match respond(name, &declared(&signature.outputs), &request, outputs) {
            Ok(reply) => reply,
            Err(refused) => error(ErrorKind::InvalidRequest, refused.to_string()),
        }
    }
}

/// What `GET /v2` and gRPC's `ServerMetadata` say of the server.
pub(crate) fn server_metadata() -> ServerMetadata {
    ServerMetadata {
        name: "jig".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        // Triton's names for what is served, over HTTP and gRPC alike.
        extensions: ["binary_tensor_data", "model_repository", "model_configuration", "statistics"]
            .map(String::from)
            .to_vec(),
    }
}

/// The length of the JSON part of a body with binary tensors after it (`Inference-Header-Content-Length`).
fn json_length(request: &Request<Body>) -> Result<Option<usize>, String> {
    match request.headers().get(BINARY_HEADER).map(|v| v.to_str().ok()?.trim().parse::<usize>().ok()) {
        None => Ok(None),
        Some(Some(n)) => Ok(Some(n)),
        Some(None) => Err(format!("`{BINARY_HEADER}` must be the byte length of the JSON part of the body")),
    }
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
