//! The gateway's side: a model instance's batches run on a node.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jig_model_host::device::Devices;
use jig_model_host::instance::{BoxError, Executor};
use jig_model_host::onnx::TensorSpec;
use jig_model_host::segment::Segment;
use jig_wire::{Spare, Tensor};
use sha2::{Digest, Sha256};

use crate::protocol::{
    Head, Reply, Request, Side, VERSION, nonce, proof, proves, read_frame, read_tensors, total_len, write_frame,
    write_tensors,
};
use crate::tls::{Link, NodeTls};

/// The largest output a node may send for one batch.
const MAX_OUTPUT_BYTES: u64 = 16 << 30;

/// What a gateway needs to reach its nodes.
#[derive(Debug, Clone)]
pub struct Access {
    /// The cluster's shared token.
    pub token: String,
    /// How long connecting, loading (the model's transfer included) and each batch may take before the
    /// connection counts as broken: a node that stops answering fails the batch instead of hanging it.
    pub timeout: Duration,
    /// TLS to nodes started with a certificate; `None`: in clear.
    pub tls: Option<NodeTls>,
}

/// One instance's model on a node.
#[derive(Debug, Clone)]
pub struct RemoteSpec {
    /// The node's address, `HOST:PORT`.
    pub node: String,
    /// The token, timeout and TLS the node is reached with.
    pub access: Access,
    /// The instance, `APP/SLOT/VARIANT@SEGMENT#N`, for errors and logs on both sides.
    pub instance: String,
    /// The model's name, for errors.
    pub model_name: String,
    /// The ONNX file, sent to the node when its cache lacks it.
    pub model_path: PathBuf,
    /// Where on the node it runs.
    pub segment: Segment,
    /// The GPU or MIG instance's UUID on the node; `None`: the node chooses.
    pub device: Option<String>,
    /// The node's cores to pin a CPU segment to, as it numbers them; empty: unpinned.
    pub cores: Vec<usize>,
}

/// Why a batch or a connection to a node failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The node could not be reached (`instance` is empty when no instance was under way: discovery).
    #[error("{}cannot reach node {node}: {source}", prefix(.instance))]
    Connect {
        /// The instance.
        instance: String,
        /// The node's address.
        node: String,
        /// The system's answer.
        source: io::Error,
    },
    /// The node refused the connection (token, version, connection cap).
    #[error("{}node {node} refused the connection: {reason}", prefix(.instance))]
    Refused {
        /// The instance.
        instance: String,
        /// The node's address.
        node: String,
        /// The node's reason.
        reason: String,
    },
    /// The node could not load the model.
    #[error("instance `{instance}`: {error}")]
    Load {
        /// The instance.
        instance: String,
        /// The node's message, naming node, instance and segment.
        error: String,
    },
    /// The model file could not be read here.
    #[error("instance `{instance}`: cannot read model {}: {source}", path.display())]
    Model {
        /// The instance.
        instance: String,
        /// The file.
        path: PathBuf,
        /// The system's answer.
        source: io::Error,
    },
    /// The connection broke or the node said something out of turn: the batch in flight failed, and the next
    /// one connects again.
    #[error("{}node {node} {what}: {source}", prefix(.instance))]
    Broken {
        /// The instance.
        instance: String,
        /// The node's address.
        node: String,
        /// What was under way.
        what: &'static str,
        /// The system's answer.
        source: io::Error,
    },
}

/// A model instance's executor whose batches run on a node.
pub struct Remote {
    spec: RemoteSpec,
    sha256: String,
    model_len: u64,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    connection: Mutex<Option<Connection>>,
    /// Buffers the outputs are read into, back once the tensors over them drop.
    spare: Arc<Spare>,
    reconnects: Arc<AtomicU64>,
}

struct Connection {
    reader: BufReader<Link>,
    writer: BufWriter<Link>,
    buf: Vec<u8>,
}

impl Connection {
    /// The node's next frame; the connection's end is an error.
    fn reply(&mut self) -> io::Result<Reply> {
        let closed = || io::Error::new(io::ErrorKind::UnexpectedEof, "the node closed the connection");
        read_frame(&mut self.reader, &mut self.buf)?.ok_or_else(closed)
    }
}

impl Remote {
    /// Connect to the node, prove the token and load the model there (sending its bytes when the node lacks
    /// them). Returns once the model is loaded.
    pub fn connect(spec: RemoteSpec) -> Result<Remote, RemoteError> {
        let model_error =
            |source| RemoteError::Model { instance: spec.instance.clone(), path: spec.model_path.clone(), source };
        let (sha256, model_len) = hash_file(&spec.model_path).map_err(model_error)?;
        let mut remote = Remote {
            spec,
            sha256,
            model_len,
            inputs: Vec::new(),
            outputs: Vec::new(),
            connection: Mutex::new(None),
            spare: Arc::default(),
            reconnects: Arc::default(),
        };
        let (connection, inputs, outputs) = remote.open()?;
        (remote.inputs, remote.outputs) = (inputs, outputs);
        *remote.connection.get_mut().unwrap_or_else(|p| p.into_inner()) = Some(connection);
        Ok(remote)
    }

    /// The spec it was connected with.
    pub fn spec(&self) -> &RemoteSpec {
        &self.spec
    }

    fn broken(&self, what: &'static str) -> impl Fn(io::Error) -> RemoteError + '_ {
        move |source| RemoteError::Broken {
            instance: self.spec.instance.clone(),
            node: self.spec.node.clone(),
            what,
            source,
        }
    }

    /// A new connection with the model loaded, and the model's declared inputs and outputs.
    fn open(&self) -> Result<(Connection, Vec<TensorSpec>, Vec<TensorSpec>), RemoteError> {
        let spec = &self.spec;
        let (mut c, _) = handshake(&spec.node, &spec.access, &spec.instance)?;
        let loading = self.broken("broke the connection while loading the model");
        let load = Request::Load {
            instance: spec.instance.clone(),
            model_name: spec.model_name.clone(),
            model_sha256: self.sha256.clone(),
            model_len: self.model_len,
            segment: spec.segment.to_string(),
            device: spec.device.clone(),
            cores: spec.cores.clone(),
        };
        write_frame(&mut c.writer, &load).and_then(|()| c.writer.flush()).map_err(&loading)?;
        let mut reply = self.read(&mut c)?;
        if let Reply::SendModel = reply {
            let mut file = File::open(&spec.model_path).map_err(|source| RemoteError::Model {
                instance: spec.instance.clone(),
                path: spec.model_path.clone(),
                source,
            })?;
            io::copy(&mut (&mut file).take(self.model_len), &mut c.writer)
                .and_then(|_| c.writer.flush())
                .map_err(&loading)?;
            reply = self.read(&mut c)?;
        }
        match reply {
            Reply::Loaded { inputs, outputs } => Ok((c, inputs, outputs)),
            Reply::LoadFailed { error } => Err(RemoteError::Load { instance: spec.instance.clone(), error }),
            other => Err(loading(unexpected(&other))),
        }
    }

    /// The node's next frame; the connection's end, or a frame that is not one, is an error.
    fn read(&self, c: &mut Connection) -> Result<Reply, RemoteError> {
        c.reply().map_err(self.broken("did not answer"))
    }

    /// Run one batch on `c`.
    fn run(&self, c: &mut Connection, inputs: &[Tensor]) -> Result<Result<Vec<Tensor>, String>, RemoteError> {
        let sending = self.broken("broke the connection while receiving a batch");
        write_frame(&mut c.writer, &Request::Run { inputs: inputs.iter().map(Head::of).collect() })
            .and_then(|()| c.writer.flush())
            .and_then(|()| write_tensors(c.writer.get_mut(), inputs))
            .map_err(&sending)?;
        match self.read(c)? {
            Reply::Done { outputs } => {
                let receiving = self.broken("broke the connection while sending a batch's outputs");
                total_len(&outputs, MAX_OUTPUT_BYTES).map_err(&receiving)?;
                Ok(Ok(read_tensors(&mut c.reader, &outputs, &self.spare).map_err(&receiving)?))
            }
            Reply::Failed { error } => Ok(Err(error)),
            other => Err(sending(unexpected(&other))),
        }
    }
}

/// A node as a gateway found it: where it listens, its name and what it offers.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// The address it answered on, `IP:PORT`.
    pub addr: String,
    /// Its name.
    pub name: String,
    /// Its cores and GPUs.
    pub devices: Devices,
}

/// Ask each node of `nodes` what it offers. An entry is `HOST:PORT`; a host name that resolves to several
/// addresses (a Kubernetes headless Service over a DaemonSet) counts each address as a node. An entry that
/// does not resolve, or an address that does not answer, is an error in the list; the others are found.
pub fn discover(nodes: &[String], access: &Access) -> Vec<Result<NodeInfo, RemoteError>> {
    let mut found = Vec::new();
    for entry in nodes {
        let addrs = match entry.to_socket_addrs() {
            Ok(addrs) => addrs.collect::<Vec<_>>(),
            Err(source) => {
                found.push(Err(RemoteError::Connect { instance: String::new(), node: entry.clone(), source }));
                continue;
            }
        };
        for addr in addrs {
            let addr = addr.to_string();
            found.push(handshake(&addr, access, "").map(|(_, (name, devices))| NodeInfo { addr, name, devices }));
        }
    }
    found
}

/// Connect to `node` (in TLS when `access` says so), prove the token and read its welcome: the connection, the
/// node's name and devices.
fn handshake(node: &str, access: &Access, instance: &str) -> Result<(Connection, (String, Devices)), RemoteError> {
    let Access { token, timeout, tls } = access;
    let timeout = *timeout;
    let connect_error =
        |source| RemoteError::Connect { instance: instance.to_string(), node: node.to_string(), source };
    let addr = node
        .to_socket_addrs()
        .map_err(connect_error)?
        .next()
        .ok_or_else(|| connect_error(io::Error::new(io::ErrorKind::NotFound, "the name has no address")))?;
    let stream = TcpStream::connect_timeout(&addr, timeout).map_err(connect_error)?;
    stream.set_nodelay(true).map_err(connect_error)?;
    stream.set_read_timeout(Some(timeout)).map_err(connect_error)?;
    stream.set_write_timeout(Some(timeout)).map_err(connect_error)?;
    let host = node.rsplit_once(':').map_or(node, |(host, _port)| host);
    let link = Link::connect(stream, tls.as_ref(), host).map_err(connect_error)?;
    let mut c = Connection {
        reader: BufReader::with_capacity(1 << 16, link.clone()),
        writer: BufWriter::with_capacity(1 << 16, link),
        buf: Vec::new(),
    };
    let broken = |source: io::Error| RemoteError::Broken {
        instance: instance.to_string(),
        node: node.to_string(),
        what: "broke the connection while saying hello",
        source: with_tls_hint(source, tls.is_some()),
    };
    let gateway = nonce().map_err(broken)?;
    write_frame(&mut c.writer, &Request::Hello { version: VERSION, nonce: gateway })
        .and_then(|()| c.writer.flush())
        .map_err(broken)?;
    let refused = |reason| RemoteError::Refused { instance: instance.to_string(), node: node.to_string(), reason };
    let (node_nonce, node_proof) = match c.reply().map_err(broken)? {
        Reply::Challenge { nonce, proof } => (nonce, proof),
        Reply::Refused { reason } => return Err(refused(reason)),
        other => return Err(broken(unexpected(&other))),
    };
    // The node proves the token first: one that cannot is told nothing, and the gateway's proof goes to no one
    // else.
    if !proves(&node_proof, token, Side::Node, &gateway, &node_nonce) {
        return Err(RemoteError::Broken {
            instance: instance.to_string(),
            node: node.to_string(),
            what: "did not prove the cluster's token",
            source: io::Error::new(
                io::ErrorKind::PermissionDenied,
                "it is not a node of this cluster, or its --token-file differs from the gateway's node_token_file",
            ),
        });
    }
    write_frame(&mut c.writer, &Request::Prove { proof: proof(token, Side::Gateway, &gateway, &node_nonce) })
        .and_then(|()| c.writer.flush())
        .map_err(broken)?;
    match c.reply().map_err(broken)? {
        Reply::Welcome { node: name, devices } => Ok((c, (name, devices))),
        Reply::Refused { reason } => Err(refused(reason)),
        other => Err(broken(unexpected(&other))),
    }
}

/// `error`, with what to check when it may come from one side speaking TLS and the other not: a node in TLS
/// answers a gateway in clear with an alert (a frame cut short), one in clear closes on a gateway's TLS hello.
fn with_tls_hint(error: io::Error, tls: bool) -> io::Error {
    if !matches!(error.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset) {
        return error;
    }
    let hint = if tls {
        "does the node serve TLS? Start it with --tls-cert and --tls-key, or leave out the gateway's node_tls_ca"
    } else {
        "a node started with --tls-cert speaks only TLS: give the gateway the CA that signed it as node_tls_ca"
    };
    io::Error::new(error.kind(), format!("{error} ({hint})"))
}

/// `instance `NAME`: ` before a message about an instance; nothing without one.
fn prefix(instance: &str) -> String {
    if instance.is_empty() { String::new() } else { format!("instance `{instance}`: ") }
}

fn unexpected(reply: &Reply) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("answered out of turn: {reply:?}"))
}

impl Executor for Remote {
    fn inputs(&self) -> &[TensorSpec] {
        &self.inputs
    }

    fn outputs(&self) -> &[TensorSpec] {
        &self.outputs
    }

    /// Run the batch on the node, connecting again first when the last connection broke.
    fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError> {
        let mut connection = self.connection.lock().unwrap_or_else(|p| p.into_inner());
        if connection.is_none() {
            let (c, ..) = self.open()?;
            self.reconnects.fetch_add(1, Ordering::Relaxed);
            *connection = Some(c);
        }
        let c = connection.as_mut().expect("connected above");
        match self.run(c, inputs) {
            Ok(Ok(outputs)) => Ok(outputs),
            Ok(Err(model_error)) => Err(model_error.into()),
            Err(broken) => {
                *connection = None;
                Err(broken.into())
            }
        }
    }

    fn restarts(&self) -> Option<Arc<AtomicU64>> {
        Some(self.reconnects.clone())
    }
}

/// A file's SHA-256, hex, and its length.
fn hash_file(path: &std::path::Path) -> io::Result<(String, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let len = io::copy(&mut file, &mut hasher)?;
    Ok((hex::encode(hasher.finalize()), len))
}
