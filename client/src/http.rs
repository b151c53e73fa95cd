//! The HTTP client of the `jig` commands that talk to a gateway (`deploy`, `apps`, `status`, `invoke`,
//! `delete`): one HTTP/1.1 request per connection, to `http://` or to `https://` (a gateway behind an Ingress or
//! a TLS-terminating proxy), trusting the system's certificate authorities or the one given
//! ([`Client::trusting`]).

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use hyper::{Method, Request, StatusCode, Uri};
use jig_api::{ErrorBody, ErrorKind};

/// Where a gateway is and how to authenticate to it.
#[derive(Debug, Clone)]
pub struct Client {
    /// `host:port`.
    authority: String,
    /// The path prefix the gateway is mounted at, without a trailing `/`.
    prefix: String,
    token: Option<String>,
    /// TLS, for an `https://` gateway.
    tls: Option<Tls>,
}

/// TLS to the gateway: the name its certificate must carry, and the authorities trusted to sign it.
#[derive(Clone)]
struct Tls {
    server_name: rustls_pki_types::ServerName<'static>,
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("server_name", &self.server_name).finish_non_exhaustive()
    }
}

/// A connection to the gateway, plain or in TLS, as hyper drives it.
trait Connection: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Connection for T {}

/// A gateway's answer.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The headers (e.g. `server-timing`).
    pub headers: hyper::HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Answer {
    /// The body as one of `jig_api`'s types.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, BadAnswer> {
        serde_json::from_slice(&self.body).map_err(|e| BadAnswer { status: self.status, detail: e.to_string() })
    }

    /// The error body of a failed call, or the body as text (from something in front of the gateway) with
    /// the kind its status implies.
    pub fn error(&self) -> ErrorBody {
        self.parse::<ErrorBody>().unwrap_or_else(|_| ErrorBody {
            error: String::from_utf8_lossy(&self.body).trim().to_string(),
            kind: if self.status.is_server_error() { ErrorKind::Internal } else { ErrorKind::InvalidRequest },
        })
    }

    /// The message of [`Answer::error`].
    pub fn error_message(&self) -> String {
        self.error().error
    }
}

/// A gateway answered with a body that is not what the API says (a different version, or a proxy's page).
#[derive(Debug, thiserror::Error)]
#[error(
    "the gateway's answer ({status}) is not what this client expects: {detail}; is the gateway the same jig version?"
)]
pub struct BadAnswer {
    /// The answer's status.
    pub status: StatusCode,
    /// What did not parse.
    pub detail: String,
}

/// The gateway could not be reached or did not answer.
#[derive(Debug, thiserror::Error)]
#[error("cannot reach the gateway at {url}: {detail}; is it running (`jig up`), and is --gateway right?")]
pub struct Unreachable {
    /// The gateway's URL.
    pub url: String,
    /// What the connection or the request ran into.
    pub detail: String,
}

impl Client {
    /// A client for the gateway at `url` (`http://host:port[/prefix]`, or `https://…`, which trusts the
    /// system's certificate authorities until [`Client::trusting`] names one).
    pub fn new(url: &str, token: Option<String>) -> anyhow::Result<Client> {
        let uri: Uri = url.parse().map_err(|e| anyhow::anyhow!("--gateway {url:?} is not a URL: {e}"))?;
        let (secure, default_port) = match uri.scheme_str() {
            Some("http") => (false, 80),
            Some("https") => (true, 443),
            _ => anyhow::bail!("--gateway {url:?}: give an http:// or https:// URL"),
        };
        let authority = uri.authority().ok_or_else(|| anyhow::anyhow!("--gateway {url:?} names no host"))?;
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_string();
        let authority = match authority.port_u16() {
            Some(_) => authority.to_string(),
            None => format!("{}:{default_port}", authority.host()),
        };
        let tls = match secure {
            false => None,
            true => {
                let server_name = rustls_pki_types::ServerName::try_from(host.clone()).map_err(|_| {
                    anyhow::anyhow!("--gateway {url:?}: `{host}` is not a name a certificate can carry")
                })?;
                Some(Tls { server_name, config: tls_config(system_roots()?)? })
            }
        };
        Ok(Client { authority, prefix: uri.path().trim_end_matches('/').to_string(), token, tls })
    }

    /// Trust only the certificate authorities in the PEM file `ca` for an `https://` gateway (a private CA, as a
    /// cluster's own); an `http://` gateway is refused, so that a CA given is never silently unused.
    pub fn trusting(mut self, ca: &Path) -> anyhow::Result<Client> {
        let Some(tls) = &mut self.tls else {
            anyhow::bail!("--gateway-ca {}: the gateway's URL is http://; give its https:// URL", ca.display());
        };
        let mut roots = rustls::RootCertStore::empty();
        use rustls_pki_types::pem::PemObject;
        let certs = rustls_pki_types::CertificateDer::pem_file_iter(ca)
            .map_err(|e| anyhow::anyhow!("--gateway-ca {}: {e}", ca.display()))?;
        for cert in certs {
            let cert = cert.map_err(|e| anyhow::anyhow!("--gateway-ca {}: {e}", ca.display()))?;
            roots.add(cert).map_err(|e| anyhow::anyhow!("--gateway-ca {}: not a CA certificate: {e}", ca.display()))?;
        }
        if roots.is_empty() {
            anyhow::bail!("--gateway-ca {}: no PEM certificate in it", ca.display());
        }
        tls.config = tls_config(roots)?;
        Ok(self)
    }

    /// Whether the gateway is reached over TLS (`https://`).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// `host:port`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The path prefix the gateway is mounted at.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The gateway's URL, `http[s]://host:port[/prefix]`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority, self.prefix)
    }

    /// A connection to the gateway: TCP, and TLS over it for an `https://` gateway.
    async fn connect(&self) -> std::io::Result<Box<dyn Connection>> {
        let stream = tokio::net::TcpStream::connect(&self.authority).await?;
        let _ = stream.set_nodelay(true);
        match &self.tls {
            None => Ok(Box::new(stream)),
            Some(tls) => {
                let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                Ok(Box::new(connector.connect(tls.server_name.clone(), stream).await?))
            }
        }
    }

    /// Send one request; `progress(sent, total)` is called as the body goes out.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
        progress: Option<Box<dyn FnMut(u64, u64) + Send>>,
    ) -> Result<Answer, Unreachable> {
        let unreachable = |detail: String| Unreachable { url: self.url(), detail };
        let stream = self.connect().await.map_err(|e| unreachable(e.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(connection);
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.prefix))
            .header(hyper::header::HOST, &self.authority);
        if let Some(token) = &self.token {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let body = Upload { total: body.len() as u64, data: body, sent: 0, progress };
        let request = request.body(body).map_err(|e| unreachable(e.to_string()))?;
        let response = sender.send_request(request).await.map_err(|e| unreachable(e.to_string()))?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| unreachable(e.to_string()))?.to_bytes();
        Ok(Answer { status: parts.status, headers: parts.headers, body })
    }
}

/// A request body sent in 1 MiB frames, reporting progress.
struct Upload {
    data: Bytes,
    sent: u64,
    total: u64,
    progress: Option<Box<dyn FnMut(u64, u64) + Send>>,
}

impl Body for Upload {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.data.is_empty() {
            return Poll::Ready(None);
        }
        let n = self.data.len().min(1 << 20);
        let frame = self.data.split_to(n);
        self.sent += n as u64;
        let (sent, total) = (self.sent, self.total);
        if let Some(progress) = &mut self.progress {
            progress(sent, total);
        }
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.len() as u64)
    }
}

/// The system's certificate authorities (`SSL_CERT_FILE`, else the distribution's bundle).
fn system_roots() -> anyhow::Result<rustls::RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found.errors.first().map_or("none found".to_string(), ToString::to_string);
        anyhow::bail!(
            "cannot read this system's certificate authorities ({why}); name the gateway's with --gateway-ca"
        );
    }
    Ok(roots)
}

fn tls_config(roots: rustls::RootCertStore) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
