//! The HTTP service: the accept loop (within the gateway's connection caps, `connections`), routing each request
//! to its handler, the bearer-token check, reading a body within its limit, and the answers (plain text, JSON,
//! and every error as a `jig_api::ErrorBody` whose kind sets the status).
//!
//! The handlers themselves live by what they serve: invocations in `invoke`, the app table in `apps`, the
//! devices in `capacity`, Open Inference Protocol v2 in `oip`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use jig_api::{ErrorBody, ErrorKind, Route};
use serde::Serialize;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;

use crate::Gateway;

/// An answer to a request.
pub(crate) type Reply = Response<Full<Bytes>>;

impl Gateway {
    /// Accept connections on `listener` until `shutdown` completes, then let open connections finish
    /// their requests (for up to 10 s).
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut shutdown = std::pin::pin!(shutdown);
        // A client holds its connection's place in the caps while it is open; the header timeout below ends the
        // slow and the idle ones.
        let header_timeout = Duration::from_secs_f64(self.config.header_timeout_s.clamp(0.1, 3600.0));
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(header_timeout);
        loop {
            let (stream, _, held) = tokio::select! {
                accepted = self.connections.accept(&listener) => accepted,
                () = &mut shutdown => break,
            };
            let gateway = self.clone();
            let limit = self.config.max_request_mib << 20;
            let drain_for = Duration::from_secs_f64(self.config.body_timeout_s);
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let gateway = gateway.clone();
                let request = request.map(|body| Body { incoming: Some(body), limit, drain_for });
                async move { Ok::<_, Infallible>(gateway.handle(request).await) }
            });
            let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!("connection ended: {e}");
                }
                drop(held);
            });
        }
        if tokio::time::timeout(Duration::from_secs(10), graceful.shutdown()).await.is_err() {
            tracing::warn!("connections still open after 10 s; closing them");
        }
    }

    /// Route one request to its handler.
    async fn handle(self: Arc<Self>, request: Request<Body>) -> Reply {
        let path = request.uri().path().to_owned();
        let Some(route) = Route::parse(request.method().as_str(), &path) else {
            // KServe's v1 protocol (`/v1/models/NAME:predict`) has no mapping onto slots' typed tensors.
            if let Some(model) = path.strip_prefix("/v1/models/").and_then(|m| m.split(':').next()) {
                return error(
                    ErrorKind::NotFound,
                    format!(
                        "KServe's v1 protocol is not served; jig speaks the Open Inference Protocol (KServe v2): \
                         POST /v2/models/{model}/infer (a model is APP.SLOT, or an app that declares `[tensors]`)"
                    ),
                );
            }
            return error(
                ErrorKind::NotFound,
                format!(
                    "no route {} {path}; see /v1/apps, /v1/apps/APP/invoke, /v1/devices, /v2/models/APP.SLOT/infer, \
                     /metrics, /ui, and /openapi.json for the whole API",
                    request.method()
                ),
            );
        };
        if route.needs_token()
            && let Some(reply) = refuse_unauthorized(&request, self.config.token.as_deref())
        {
            return reply;
        }
        match route {
            Route::Health => text(StatusCode::OK, "ok\n"),
            Route::Ready => self.readyz(),
            Route::Metrics => {
                use crate::metrics::exposition::{OPENMETRICS, TEXT, to_text_format, wants_openmetrics};
                self.metrics.machine(&self.machine());
                let accept = request.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok());
                let (body, kind) = match wants_openmetrics(accept) {
                    true => (self.metrics.encode(), OPENMETRICS),
                    false => (to_text_format(&self.metrics.encode()), TEXT),
                };
                let mut reply = text(StatusCode::OK, body);
                reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
                reply
            }
            Route::OpenApi => json(StatusCode::OK, &jig_api::openapi()),
            Route::Ui => {
                let mut reply = text(StatusCode::OK, include_str!("ui.html"));
                reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
                reply
            }
            Route::Devices => json(StatusCode::OK, &self.machine()),
            Route::ListApps => self.list(),
            Route::Deploy => self.deploy(request).await,
            Route::Status(app) => match self.app(app) {
                Some(app) => json(StatusCode::OK, &self.status(&app)),
                None => self.unknown_app(app),
            },
            Route::Delete(app) => self.clone().delete(app).await,
            Route::Invoke(app) => self.invoke(app, request).await,
            Route::V2Server => self.v2_server(),
            Route::V2Live => self.v2_health(true),
            Route::V2Ready => self.v2_health(false),
            Route::V2Model(model) => self.v2_model_metadata(model, &request),
            Route::V2ModelReady(model) => self.v2_model_ready(model, &request),
            Route::V2Infer(model) => self.v2_infer(model, request).await,
            Route::V2ModelConfig(model) => self.v2_model_config(model, &request),
            Route::V2ModelStats(model) => self.v2_stats(Some(model), &request),
            Route::V2Stats => self.v2_stats(None, &request),
            Route::V2RepositoryIndex => self.v2_repository_index(request).await,
            Route::V2Load(model) => match self.v2_load(model).await {
                Ok(()) => json(StatusCode::OK, &jig_api::triton::ModelControl {}),
                Err(refusal) => refusal.reply(),
            },
            Route::V2Unload(model) => match self.v2_unload(model).await {
                Ok(()) => json(StatusCode::OK, &jig_api::triton::ModelControl {}),
                Err(refusal) => refusal.reply(),
            },
        }
    }
}

/// Check `Authorization: Bearer TOKEN` when a token is configured: the 401 reply when it is not given.
pub(crate) fn refuse_unauthorized(request: &Request<Body>, token: Option<&str>) -> Option<Reply> {
    let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    unauthorized(given, token).map(|why| error(ErrorKind::Unauthorized, why))
}

/// Why an `Authorization` value (an HTTP header, gRPC metadata) does not carry `token`, when one is configured.
/// Whitespace around the value is no part of it (RFC 9110 §5.5): hyper strips it from HTTP headers, gRPC leaves it
/// in metadata (perf_analyzer's `-H "authorization: Bearer …"` sends " Bearer …").
pub(crate) fn unauthorized(authorization: Option<&str>, token: Option<&str>) -> Option<&'static str> {
    let token = token?;
    let bearer = authorization
        .map(str::trim)
        .and_then(|v| v.get(..7).filter(|p| p.eq_ignore_ascii_case("bearer ")).map(|_| &v[7..]));
    match bearer {
        // In constant time, so that how long a refusal takes tells nothing of the token.
        Some(given) if bool::from(given.as_bytes().ct_eq(token.as_bytes())) => None,
        Some(_) => Some("wrong token; pass the gateway's token with --token or JIG_TOKEN"),
        None => Some("this gateway needs a token: send `Authorization: Bearer TOKEN` (--token or JIG_TOKEN)"),
    }
}

/// A request's body. Dropped before its end (a refusal before it was read: 401, 404), it is read to its end in the
/// background, at most the gateway's request limit within its body timeout: a client still sending then reads
/// the answer instead of a connection reset under its last writes.
pub(crate) struct Body {
    incoming: Option<Incoming>,
    limit: u64,
    drain_for: Duration,
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut().incoming.as_mut() {
            Some(incoming) => std::pin::Pin::new(incoming).poll_frame(cx),
            None => std::task::Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.as_ref().is_none_or(hyper::body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.as_ref().map_or_else(|| SizeHint::with_exact(0), hyper::body::Body::size_hint)
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        let Some(mut incoming) = self.incoming.take().filter(|b| !hyper::body::Body::is_end_stream(b)) else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (limit, drain_for) = (self.limit, self.drain_for);
        runtime.spawn(tokio::time::timeout(drain_for, async move {
            let mut read = 0u64;
            while let Some(Ok(frame)) = incoming.frame().await {
                read += frame.data_ref().map_or(0, |d| d.len() as u64);
                if read > limit {
                    break;
                }
            }
        }));
    }
}

/// The whole body, at most `max` bytes, decompressed when it came with `Content-Encoding: gzip` or `deflate`
/// (at most `max` bytes decompressed too): 413 beyond, 400 when the client stops sending before its end or sends
/// what does not decompress.
pub(crate) async fn read_body(request: Request<Body>, max: u64, what: &str) -> Result<Bytes, Reply> {
    let too_large =
        || error(ErrorKind::TooLarge, format!("the {what} is larger than this gateway's limit of {max} bytes"));
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    let encoding = match request.headers().get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("?").trim()) {
        None | Some("identity") => None,
        Some(e) if e.eq_ignore_ascii_case("gzip") => Some(Encoding::Gzip),
        Some(e) if e.eq_ignore_ascii_case("deflate") => Some(Encoding::Deflate),
        Some(other) => {
            let message =
                format!("`Content-Encoding: {other}` is not supported: send the {what} as gzip, deflate or plain");
            return Err(error(ErrorKind::InvalidRequest, message));
        }
    };
    let body = match Limited::new(request.into_body(), max as usize).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Err(e) => return Err(error(ErrorKind::InvalidRequest, format!("the {what} could not be read: {e}"))),
    };
    let Some(encoding) = encoding else { return Ok(body) };
    // Off the async executor (up to `max` bytes to inflate), and one byte past the limit, so that a bomb is refused
    // at the limit rather than inflated whole.
    let inflated = tokio::task::spawn_blocking(move || {
        let decoder: Box<dyn std::io::Read + '_> = match encoding {
            Encoding::Gzip => Box::new(flate2::read::GzDecoder::new(&body[..])),
            Encoding::Deflate => Box::new(flate2::read::ZlibDecoder::new(&body[..])),
        };
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(decoder, max + 1), &mut plain).map(|_| plain)
    })
    .await
    .map_err(|e| error(ErrorKind::Internal, format!("decompressing the {what} failed: {e}")))?;
    match inflated {
        Ok(plain) if plain.len() as u64 > max => Err(too_large()),
        Ok(plain) => Ok(plain.into()),
        Err(e) => {
            Err(error(ErrorKind::InvalidRequest, format!("the {what} does not decompress as {}: {e}", encoding.name())))
        }
    }
}

/// A request body's `Content-Encoding`, as the Open Inference Protocol allows it.
#[derive(Debug, Clone, Copy)]
enum Encoding {
    Gzip,
    Deflate,
}

impl Encoding {
    fn name(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
        }
    }
}

pub(crate) fn text(code: StatusCode, body: impl Into<String>) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body.into())));
    *reply.status_mut() = code;
    reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    reply
}

pub(crate) fn json(code: StatusCode, value: &impl Serialize) -> Reply {
    let mut body = serde_json::to_vec_pretty(value).unwrap_or_default();
    body.push(b'\n');
    let mut reply = bytes_reply(code, Bytes::from(body));
    reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

pub(crate) fn bytes_reply(code: StatusCode, body: Bytes) -> Reply {
    let mut reply = Response::new(Full::new(body));
    *reply.status_mut() = code;
    reply
}

/// An error answer: its kind sets the status.
pub(crate) fn error(kind: ErrorKind, message: impl Into<String>) -> Reply {
    let code = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json(code, &ErrorBody { error: message.into(), kind })
}

#[cfg(test)]
mod tests {
    use super::unauthorized;

    #[test]
    fn a_bearer_token_is_read_from_its_value_without_the_whitespace_around_it() {
        let token = Some("let-me-in");
        for given in ["Bearer let-me-in", "bearer let-me-in", " Bearer let-me-in ", "\tBEARER let-me-in"] {
            assert_eq!(unauthorized(Some(given), token), None, "{given:?}");
        }
        assert!(unauthorized(Some("Bearer let-me-out"), token).unwrap().starts_with("wrong token"));
        assert!(unauthorized(Some("Basic let-me-in"), token).unwrap().contains("needs a token"));
        assert!(unauthorized(None, token).unwrap().contains("needs a token"));
        assert_eq!(unauthorized(None, None), None, "no token configured: open");
    }
}
