//! Optional TLS between gateways and nodes (rustls): a node started with a certificate (`jig node --tls-cert
//! --tls-key`) speaks only TLS, and a gateway given the CA that signed it (`node_tls_ca`) checks it. The token
//! handshake runs inside, unchanged: TLS hides the frames and proves the node's name; the token proves
//! membership of the cluster.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

/// A node's side: its certificate chain and key.
#[derive(Clone)]
pub struct NodeIdentity(Arc<ServerConfig>);

impl std::fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeIdentity")
    }
}

impl NodeIdentity {
    /// The certificate chain in `cert` and its private key in `key`, both PEM.
    pub fn from_files(cert: &Path, key: &Path) -> Result<NodeIdentity, String> {
        let chain = certificates(cert)?;
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| format!("cannot read a PEM private key from {}: {e}", key.display()))?;
        let config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .map_err(|e| format!("the certificate {} and its key: {e}", cert.display()))?;
        Ok(NodeIdentity(Arc::new(config)))
    }
}

/// A gateway's side: the CA its nodes' certificates are checked against, and the name they must carry.
#[derive(Clone)]
pub struct NodeTls {
    config: Arc<ClientConfig>,
    /// The name every node's certificate carries; `None`: each node's own host (name or IP) in its address.
    server_name: Option<ServerName<'static>>,
}

impl std::fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeTls").field("server_name", &self.server_name).finish_non_exhaustive()
    }
}

impl NodeTls {
    /// Trust the CA certificates in `ca` (PEM). With `server_name`, every node's certificate must carry that
    /// name (one certificate for a fleet reached by IP, as a Kubernetes headless Service lists pods);
    /// without, the host of each node's address.
    pub fn from_files(ca: &Path, server_name: Option<&str>) -> Result<NodeTls, String> {
        let mut roots = RootCertStore::empty();
        for cert in certificates(ca)? {
            roots.add(cert).map_err(|e| format!("{}: not a CA certificate: {e}", ca.display()))?;
        }
        let config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server_name = server_name
            .map(|name| {
                ServerName::try_from(name.to_string())
                    .map_err(|_| format!("`{name}` is not a DNS name or IP address a certificate can carry"))
            })
            .transpose()?;
        Ok(NodeTls { config: Arc::new(config), server_name })
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in the PEM file `path`: at least one.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    pem_certificates(&pem, &path.display().to_string())
}

/// Every certificate in `pem`, which `source` names for errors: at least one.
pub(crate) fn pem_certificates(pem: &[u8], source: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{source} is not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{source} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)"));
    }
    Ok(certs)
}

/// One connection between a gateway and a node, in clear or in TLS, read and written through `&Link` as a
/// `&TcpStream` is; a clone is the same connection (each side reads and writes it from one thread at a time,
/// in turn).
#[derive(Clone)]
pub struct Link(Arc<Inner>);

struct Inner {
    tcp: TcpStream,
    tls: Option<Mutex<rustls::Connection>>,
}

impl Link {
    fn new(tcp: TcpStream, tls: Option<rustls::Connection>) -> Link {
        Link(Arc::new(Inner { tcp, tls: tls.map(Mutex::new) }))
    }

    /// A node's side of a connection: TLS with `identity` when it has one. The handshake runs with the first
    /// read, under that read's deadline.
    pub fn accept(tcp: TcpStream, identity: Option<&NodeIdentity>) -> io::Result<Link> {
        let Some(NodeIdentity(config)) = identity else { return Ok(Link::new(tcp, None)) };
        let tls = ServerConnection::new(config.clone()).map_err(io::Error::other)?;
        Ok(Link::new(tcp, Some(tls.into())))
    }

    /// A gateway's side of a connection to the node at `host` (its address's host): TLS when `tls` is given.
    pub fn connect(tcp: TcpStream, tls: Option<&NodeTls>, host: &str) -> io::Result<Link> {
        let Some(NodeTls { config, server_name }) = tls else { return Ok(Link::new(tcp, None)) };
        let name = match server_name {
            Some(name) => name.clone(),
            None => ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_string())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("`{host}` is not a host name")))?,
        };
        let tls = ClientConnection::new(config.clone(), name).map_err(io::Error::other)?;
        Ok(Link::new(tcp, Some(tls.into())))
    }

    /// The TCP connection underneath, for its timeouts.
    pub fn tcp(&self) -> &TcpStream {
        &self.0.tcp
    }

    /// Whether it speaks TLS.
    pub fn is_tls(&self) -> bool {
        self.0.tls.is_some()
    }

    /// Run `io` on the TLS stream, or on the TCP connection when in clear.
    fn with<T>(&self, io: impl FnOnce(&mut dyn ReadWrite) -> io::Result<T>) -> io::Result<T> {
        let mut sock = &self.0.tcp;
        let Some(tls) = &self.0.tls else { return io(&mut sock) };
        let mut tls = tls.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *tls {
            rustls::Connection::Client(conn) => io(&mut rustls::Stream::new(conn, &mut sock)),
            rustls::Connection::Server(conn) => io(&mut rustls::Stream::new(conn, &mut sock)),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

impl Read for &Link {
    /// A peer that closed without TLS's goodbye (a gateway killed) ends the stream as a TCP close does: frames
    /// carry their own lengths, so a stream cut inside one is still an error there.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.with(|s| s.read(buf)) {
            Err(e) if self.is_tls() && e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
            read => read,
        }
    }
}

impl Write for &Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.with(|s| s.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.with(|s| s.flush())
    }
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self).flush()
    }
}

impl Drop for Inner {
    /// Say goodbye in TLS (a connection past its handshake), so the peer reads a clean end rather than a cut.
    fn drop(&mut self) {
        let Some(tls) = self.tls.take() else { return };
        let mut sock = &self.tcp;
        let _ = sock.set_write_timeout(Some(std::time::Duration::from_secs(1)));
        // One small record, written at once; a peer that reads nothing does not hold this thread past a second.
        let mut conn = tls.into_inner().unwrap_or_else(|p| p.into_inner());
        if !conn.is_handshaking() {
            conn.send_close_notify();
            let _ = conn.write_tls(&mut sock);
        }
    }
}
