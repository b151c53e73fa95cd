//! The invocation path (`POST /v1/apps/APP/invoke`): what the request asks (its class and deadline), its body
//! read within time, admission, the run, and the answer, counted. A failed invocation's kind, and so its status,
//! is decided once, in [`classify`]; OIP's infer (`oip`) shares all of this.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::http::Body;
use base64::Engine as _;
use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};
use jig_api::{ErrorKind, InvokeResponse, OutputPart};
use jig_app::AppError;
use jig_runtime::{FunctionError, InferError, InvokeError};
use jig_wire::Envelope;

use crate::http::{Reply, error, json, read_body, refuse_unauthorized};
use crate::{CLASS_HEADER, Gateway, TIMEOUT_HEADER};

impl Gateway {
    /// Run one invocation of app `name` and answer it.
    pub(crate) async fn invoke(self: Arc<Self>, name: &str, request: Request<Body>) -> Reply {
        let arrived = Instant::now();
        if let Some(reply) = refuse_unauthorized(&request, self.config.invoke_token.as_deref()) {
            return reply;
        }
        // The invocation path does not list the deployed apps: the control API, behind its token, does.
        let Some(app) = self.app(name) else {
            return error(ErrorKind::NotFound, format!("unknown app `{name}`; deploy it with `jig deploy`"));
        };
        let _in_flight = self.metrics.request_started(name);
        self.demand.lock().unwrap_or_else(|p| p.into_inner()).entry(name.to_string()).or_default().arrived();
        let timeout = match request_timeout(&request, self.max_timeout()) {
            Ok(timeout) => timeout,
            Err(bad) => return self.answered(name, arrived, error(ErrorKind::InvalidRequest, bad), false),
        };
        let class = request_class(&request);
        let class = class.as_deref();
        let deadline = app.deadline(arrived, timeout, class);
        let payload = match self.whole_body(request, "invocation body", deadline).await {
            Ok(payload) => payload,
            Err(reply) => return self.answered(name, arrived, reply, false),
        };
        // Admitted only once its body is here: a client that sends headers and no body holds no place.
        let admitted = match app.admit(class) {
            Ok(permit) => permit,
            Err(e) => return self.answered(name, arrived, error(classify(&e, deadline), e.to_string()), false),
        };
        let result = app.invoke(&admitted, Vec::from(payload), deadline, &self.metrics).await;
        match &result {
            Ok(_) => admitted.settle(Instant::now() <= deadline),
            Err(e) if matches!(classify(e, deadline), ErrorKind::Dropped | ErrorKind::Deadline) => {
                admitted.settle(false)
            }
            Err(_) => {} // bad input or a failing function: nothing of load
        }
        let (reply, early_drop) = match result {
            Ok(outputs) => {
                let outputs = outputs.into_iter().map(output_part).collect();
                (json(StatusCode::OK, &InvokeResponse { outputs }), false)
            }
            Err(e) => {
                let kind = classify(&e, deadline);
                match kind {
                    // Load, not a fault: at twice what a machine serves, hundreds a minute, each counted in the
                    // metrics (`jig_requests_total`, `jig_slo_violations_total`) and `jig status`.
                    ErrorKind::Dropped | ErrorKind::Deadline | ErrorKind::Overloaded => {
                        tracing::debug!(app = %name, "{e}")
                    }
                    _ if kind.status() >= 500 => tracing::warn!(app = %name, "{e}"),
                    _ => {}
                }
                (error(kind, e.to_string()), kind == ErrorKind::Dropped)
            }
        };
        self.answered(name, arrived, reply, early_drop)
    }

    /// The longest deadline a client may ask for (`max_timeout_s`).
    pub(crate) fn max_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.config.max_timeout_s)
    }

    /// A request's whole body ([`read_body`]), which must arrive within `body_timeout_s` and before the
    /// request's `deadline`: a body still arriving then is a request that missed it.
    pub(crate) async fn whole_body(
        &self,
        request: Request<Body>,
        what: &str,
        deadline: Instant,
    ) -> Result<Bytes, Reply> {
        let limit = Duration::from_secs_f64(self.config.body_timeout_s);
        let by = deadline.min(Instant::now() + limit);
        match tokio::time::timeout_at(by.into(), read_body(request, self.config.max_request_mib << 20, what)).await {
            Ok(body) => body,
            Err(_) if by < deadline => Err(error(
                ErrorKind::InvalidRequest,
                format!("the {what} did not arrive within {} s (the gateway's `body_timeout_s`)", limit.as_secs_f64()),
            )),
            Err(_) => {
                Err(error(ErrorKind::Deadline, format!("the {what} did not arrive before the request's deadline")))
            }
        }
    }

    /// Count an answered invocation and add the timing header.
    pub(crate) fn answered(&self, app: &str, arrived: Instant, reply: Reply, early_drop: bool) -> Reply {
        let elapsed = arrived.elapsed();
        self.count_answer(app, reply.status().as_u16(), elapsed, early_drop);
        timed(reply, elapsed)
    }

    /// Count an invocation of `app` answered with `code` after `elapsed`: its metrics, and a violation of its
    /// demand's SLO when it was refused for load or late.
    pub(crate) fn count_answer(&self, app: &str, code: u16, elapsed: std::time::Duration, early_drop: bool) {
        self.metrics.request_done(app, code, elapsed, early_drop);
        if matches!(code, 429 | 503 | 504) {
            self.demand.lock().unwrap_or_else(|p| p.into_inner()).entry(app.to_string()).or_default().violated();
        }
    }
}

/// `reply` with `Server-Timing` (and `Retry-After` on a refusal for load), answered after `elapsed`.
pub(crate) fn timed(mut reply: Reply, elapsed: std::time::Duration) -> Reply {
    if matches!(reply.status().as_u16(), 429 | 503) {
        // Refused for load: a second is about how long the controller's next look or a queue takes.
        reply.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if let Ok(value) = HeaderValue::from_str(&format!("total;dur={:.3}", elapsed.as_secs_f64() * 1e3)) {
        reply.headers_mut().insert("server-timing", value);
    }
    reply
}

/// The kind, and so the HTTP status, of a failed invocation: the one place an app's errors meet the wire.
pub(crate) fn classify(e: &AppError, deadline: Instant) -> ErrorKind {
    match e {
        AppError::Busy { .. } => ErrorKind::Busy,
        AppError::UnknownClass { .. } => ErrorKind::InvalidRequest,
        AppError::OverCapacity { .. } => ErrorKind::Overloaded,
        AppError::Queued { .. } if Instant::now() >= deadline => ErrorKind::Deadline,
        AppError::Queued { .. } => ErrorKind::Overloaded,
        AppError::Panicked { .. } => ErrorKind::Internal,
        AppError::Task { source, .. } => match source {
            InvokeError::DeadlineExceeded { .. } => ErrorKind::Deadline,
            InvokeError::Instantiate { .. } => ErrorKind::Overloaded,
            InvokeError::Failed { error, .. } => match error {
                FunctionError::InvalidInput(_) => ErrorKind::InvalidInput,
                FunctionError::Model(InferError::Dropped(_)) => ErrorKind::Dropped,
                FunctionError::Model(InferError::Overloaded(_)) => ErrorKind::Overloaded,
                FunctionError::Model(InferError::DeadlineExceeded(_)) => ErrorKind::Deadline,
                _ => ErrorKind::FunctionFailed,
            },
            _ => ErrorKind::FunctionFailed,
        },
    }
}

/// One output of an invocation on the wire: JSON as JSON, an envelope as its metadata and base64 body, else
/// base64.
fn output_part(output: jig_app::Output) -> OutputPart {
    let base64 = |bytes: &[u8]| Some(base64::engine::general_purpose::STANDARD.encode(bytes));
    let mut part = OutputPart { task: output.task, port: output.port, json: None, base64: None };
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&output.bytes) {
        part.json = Some(value);
    } else if let Ok(Envelope { meta, body }) = Envelope::<serde_json::Value>::decode(output.bytes.clone())
        && meta.is_object()
    {
        part.json = Some(meta);
        part.base64 = base64(&body);
    } else {
        part.base64 = base64(&output.bytes);
    }
    part
}

/// The query class the request names (`jig-class`), if any: owned, as the request's body is read after it.
pub(crate) fn request_class(request: &Request<Body>) -> Option<String> {
    request.headers().get(CLASS_HEADER).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_owned())
}

/// The request's [`TIMEOUT_HEADER`], if it has one, cut to `max`; what is wrong (a 400) when it is not a positive
/// number of milliseconds.
pub(crate) fn request_timeout(request: &Request<Body>, max: Duration) -> Result<Option<Duration>, String> {
    match request.headers().get(TIMEOUT_HEADER).map(|v| v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok())) {
        None => Ok(None),
        // A client may not hold what it is admitted to for longer than the gateway allows.
        Some(Some(ms)) if ms > 0 => Ok(Some(Duration::from_millis(ms).min(max))),
        Some(_) => Err(format!("`{TIMEOUT_HEADER}` must be a positive number of milliseconds")),
    }
}
