//! The node: gateways' connections, each one instance's model on this machine's segments.

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{IpAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use jig_model_host::instance::Executor;
use jig_model_host::launch::{Launcher, Placement};
use jig_model_host::segment::Segment;
use jig_wire::Spare;
use sha2::{Digest, Sha256};

use crate::protocol::{
    Head, Reply, Request, Side, VERSION, nonce, proof, proves, read_frame, read_tensors, total_len, write_frame,
    write_tensors,
};
use crate::tls::{Link, NodeIdentity};

/// What a node serves with.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Names the node in errors and logs (the host name by default).
    pub name: String,
    /// The cluster's shared token that gateways must present.
    pub token: String,
    /// Where models received from gateways are kept, by SHA-256.
    pub cache_dir: PathBuf,
    /// Connections (instances) served at once; more are refused.
    pub max_connections: usize,
    /// The largest batch, inputs' bytes, one connection may send; a larger one closes it.
    pub max_batch_bytes: u64,
    /// The largest model a gateway may send.
    pub max_model_bytes: u64,
    /// How long a new connection may take to say `Hello` (its TLS handshake included): a client that connects
    /// and says nothing is closed.
    pub hello_timeout: Duration,
    /// The node's certificate and key: with them it speaks only TLS; `None`: in clear.
    pub tls: Option<NodeIdentity>,
}

impl NodeConfig {
    /// Defaults around `token` and `cache_dir`: 256 connections, 4 GiB batches and models, 10 s to say hello.
    pub fn new(name: impl Into<String>, token: impl Into<String>, cache_dir: impl Into<PathBuf>) -> NodeConfig {
        NodeConfig {
            name: name.into(),
            token: token.into(),
            cache_dir: cache_dir.into(),
            max_connections: 256,
            max_batch_bytes: 4 << 30,
            max_model_bytes: 4 << 30,
            hello_timeout: Duration::from_secs(10),
            tls: None,
        }
    }
}

/// A node: serves gateways' instances on this machine's segments.
pub struct Node {
    config: NodeConfig,
    launcher: Launcher,
    /// Connections authenticated and served, at most `max_connections`.
    connections: AtomicUsize,
    /// Connections still saying hello, at most `max_connections` apart from those served.
    greeting: AtomicUsize,
    /// Of those, each peer address's: at most [`GREETING_PER_PEER`].
    greeting_by_peer: Mutex<HashMap<IpAddr, usize>>,
    /// The instances loaded, by what they are: every connection that names the same one (several gateways, a
    /// redeploy starting beside the deployment it replaces) shares its session, one batch at a time.
    loaded: Mutex<HashMap<Key, Weak<Loaded>>>,
    /// Held while a model loads: loads run one at a time, batches alongside.
    loading: Mutex<()>,
}

/// What makes two connections' instances one: the instance, its model and where it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    instance: String,
    sha256: String,
    segment: String,
    device: Option<String>,
    cores: Vec<usize>,
}

/// An instance's model, loaded on its segment.
struct Loaded {
    executor: Box<dyn Executor>,
    /// One batch at a time, as the plan's instance runs them.
    running: Mutex<()>,
}

impl Node {
    /// A node over `launcher`'s devices.
    pub fn new(config: NodeConfig, launcher: Launcher) -> Node {
        Node {
            config,
            launcher,
            connections: AtomicUsize::new(0),
            greeting: AtomicUsize::new(0),
            greeting_by_peer: Mutex::default(),
            loaded: Mutex::default(),
            loading: Mutex::default(),
        }
    }

    /// Instances loaded now (shared by all the connections that name each).
    pub fn instances(&self) -> usize {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner()).values().filter(|l| l.strong_count() > 0).count()
    }

    /// Serve connections from `listener` until it fails, a thread each.
    pub fn serve(self: Arc<Self>, listener: TcpListener) -> io::Result<()> {
        loop {
            let (stream, peer) = match listener.accept() {
                Ok(accepted) => accepted,
                // A peer that reset before the accept, or a momentary lack of descriptors: not the listener's end.
                Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => return Err(e),
            };
            // Peers still saying hello are bounded apart from the instances served, and each address to a share
            // of them, so unauthenticated ones (each closed at its hello deadline) never hold what a gateway's
            // instances need.
            let Some(greeting) = Greeting::take(&self, peer.ip()) else {
                continue; // dropped: closed without a word
            };
            let link = match Link::accept(stream, self.config.tls.as_ref()) {
                Ok(link) => link,
                Err(e) => {
                    tracing::warn!(%peer, "cannot start TLS: {e}");
                    continue;
                }
            };
            let node = self.clone();
            let _ = std::thread::Builder::new().name(format!("jig-node {peer}")).spawn(move || {
                if let Err(e) = node.connection(&link, greeting) {
                    tracing::warn!(%peer, "node connection ended: {e}");
                }
            });
        }
    }

    /// One connection: its hello, its model, then its batches until it closes.
    fn connection(&self, link: &Link, greeting: Greeting) -> io::Result<()> {
        let stream = link.tcp();
        stream.set_nodelay(true)?;
        // The hello's deadline is absolute: a peer that trickles a byte at a time is closed at it all the same.
        let deadline = Instant::now() + self.config.hello_timeout;
        let mut reader = BufReader::with_capacity(1 << 16, Until { link, deadline: Some(deadline) });
        let mut writer = BufWriter::with_capacity(1 << 16, link);
        let mut buf = Vec::new();
        let name = &self.config.name;
        let Some(_served) = self.hello(&mut reader, &mut writer, &mut buf)? else {
            return Ok(());
        };
        drop(greeting);
        reader.get_mut().deadline = None; // an instance's connection idles between batches
        stream.set_read_timeout(None)?;
        write_frame(&mut writer, &Reply::Welcome { node: name.clone(), devices: (*self.launcher.relist()).clone() })?;
        writer.flush()?;

        let Some(Request::Load { instance, model_name, model_sha256, model_len, segment, device, cores }) =
            read_frame(&mut reader, &mut buf)?
        else {
            return Ok(());
        };
        let key = Key { instance, sha256: model_sha256, segment, device, cores };
        let loaded = match self.shared(&mut reader, &mut writer, &key, &model_name, model_len) {
            Ok(loaded) => loaded,
            Err(error) => {
                write_frame(&mut writer, &Reply::LoadFailed { error: error.clone() })?;
                writer.flush()?;
                return Err(io::Error::other(error));
            }
        };
        let executor = &loaded.executor;
        write_frame(
            &mut writer,
            &Reply::Loaded { inputs: executor.inputs().to_vec(), outputs: executor.outputs().to_vec() },
        )?;
        writer.flush()?;
        tracing::info!(node = %name, instance = %key.instance, segment = %key.segment, "serving");

        let spare = Arc::new(Spare::default());
        while let Some(request) = read_frame(&mut reader, &mut buf)? {
            let Request::Run { inputs } = request else {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "expected Run"));
            };
            total_len(&inputs, self.config.max_batch_bytes)?;
            let inputs = read_tensors(&mut reader, &inputs, &spare)?;
            let ran = {
                let _one_at_a_time = loaded.running.lock().unwrap_or_else(|p| p.into_inner());
                executor.execute(&inputs)
            };
            match ran {
                Ok(outputs) => {
                    write_frame(&mut writer, &Reply::Done { outputs: outputs.iter().map(Head::of).collect() })?;
                    writer.flush()?;
                    // Large outputs go to the socket from ONNX Runtime's memory, past the writer's buffer.
                    write_tensors(writer.get_mut(), &outputs)?;
                }
                Err(e) => {
                    write_frame(&mut writer, &Reply::Failed { error: format!("node `{name}`: {e}") })?;
                    writer.flush()?;
                }
            }
        }
        Ok(())
    }

    /// The connection's handshake ([`crate::protocol`]): its version checked, the token proved both ways, then a
    /// place among the connections served (a guard that gives it back); `None` when the peer closed first.
    fn hello(
        &self,
        reader: &mut impl Read,
        writer: &mut impl Write,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<Counted<'_>>> {
        let name = &self.config.name;
        let (version, gateway) = match read_frame(reader, buf) {
            Ok(Some(Request::Hello { version, nonce })) => (version, nonce),
            Ok(None) => return Ok(None),
            Ok(Some(_)) => return Err(io::Error::new(io::ErrorKind::InvalidData, "the first frame was not Hello")),
            // Another version's hello, which need not decode as this one's: its version is its second byte.
            Err(e) => match buf.as_slice() {
                [0, version, ..] if *version < 251 && u32::from(*version) != VERSION => (u32::from(*version), [0; 32]),
                _ => return Err(e),
            },
        };
        if version != VERSION {
            return refuse(
                writer,
                format!(
                    "node `{name}` speaks protocol version {VERSION}, the gateway {version}: run the same jig release on \
                 gateways and nodes"
                ),
            );
        }
        let node = nonce()?;
        let token = &self.config.token;
        write_frame(writer, &Reply::Challenge { nonce: node, proof: proof(token, Side::Node, &gateway, &node) })?;
        writer.flush()?;
        let given = match read_frame(reader, buf)? {
            Some(Request::Prove { proof }) => proof,
            None => return Ok(None), // the gateway did not take this node's proof
            Some(_) => return Err(io::Error::new(io::ErrorKind::InvalidData, "expected the gateway's proof")),
        };
        if !proves(&given, token, Side::Gateway, &gateway, &node) {
            return refuse(
                writer,
                format!("node `{name}` refused the token: give gateways and nodes the same --token-file"),
            );
        }
        if self.connections.fetch_add(1, Ordering::SeqCst) >= self.config.max_connections {
            self.connections.fetch_sub(1, Ordering::SeqCst);
            return refuse(
                writer,
                format!(
                    "node `{name}` serves at most {} connections (instances) at once: add nodes, or raise its \
                 --max-connections",
                    self.config.max_connections
                ),
            );
        }
        Ok(Some(Counted(&self.connections)))
    }

    /// The instance `key` names, as loaded for another connection, or loaded now; either way this thread, which
    /// runs the connection's batches, is pinned to its cores.
    fn shared(
        &self,
        reader: &mut impl Read,
        writer: &mut impl Write,
        key: &Key,
        model_name: &str,
        len: u64,
    ) -> Result<Arc<Loaded>, String> {
        let _one_load = self.loading.lock().unwrap_or_else(|p| p.into_inner());
        let found = self.loaded.lock().unwrap_or_else(|p| p.into_inner()).get(key).and_then(Weak::upgrade);
        if let Some(loaded) = found {
            if !key.cores.is_empty() {
                jig_model_host::device::pin_current_thread(&key.cores)
                    .map_err(|e| format!("node `{}`: cannot pin to cores {:?}: {e}", self.config.name, key.cores))?;
            }
            return Ok(loaded);
        }
        let executor = self.load(reader, writer, key, model_name, len)?;
        let loaded = Arc::new(Loaded { executor, running: Mutex::new(()) });
        let mut all = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|_, l| l.strong_count() > 0);
        all.insert(key.clone(), Arc::downgrade(&loaded));
        Ok(loaded)
    }

    /// Load the model `key` names (asking for its bytes when the cache lacks them) on its segment, pinned to its
    /// cores, on this thread.
    fn load(
        &self,
        reader: &mut impl Read,
        writer: &mut impl Write,
        key: &Key,
        model_name: &str,
        len: u64,
    ) -> Result<Box<dyn Executor>, String> {
        let Key { instance, sha256, segment, device, cores } = key.clone();
        let (instance, sha256) = (instance.as_str(), sha256.as_str());
        let node = &self.config.name;
        let segment: Segment =
            segment.parse().map_err(|e| format!("node `{node}`, instance `{instance}`: segment `{segment}`: {e}"))?;
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("node `{node}`, instance `{instance}`: `{sha256}` is not a SHA-256"));
        }
        let devices = self.launcher.devices();
        let offered = &devices.cpu_cores;
        if let Some(core) = cores.iter().find(|c| !offered.contains(c)) {
            return Err(format!(
                "node `{node}` has no core {core} for instance `{instance}` (it offers cores {offered:?}): re-plan \
                 with the cores the nodes offer"
            ));
        }
        let path = self.config.cache_dir.join(format!("{sha256}.onnx"));
        if !path.is_file() {
            if len > self.config.max_model_bytes {
                return Err(format!(
                    "node `{node}`, instance `{instance}`: model `{model_name}` is {len} B, over the node's limit of \
                     {} B (--max-model-bytes)",
                    self.config.max_model_bytes
                ));
            }
            write_frame(writer, &Reply::SendModel).and_then(|()| writer.flush()).map_err(|e| e.to_string())?;
            receive_model(reader, &path, sha256, len)
                .map_err(|e| format!("node `{node}`, instance `{instance}`: receiving model `{model_name}`: {e}"))?;
        }
        let placement = Placement { segment, cores: (!cores.is_empty()).then_some(cores), device };
        self.launcher
            .load_here(instance, model_name, &path, placement)
            .map_err(|e| format!("node `{node}`, instance `{instance}` on {segment}: {e}"))
    }
}

/// Tell the peer why it is refused, and end its connection with that reason.
fn refuse<T>(writer: &mut impl Write, reason: String) -> io::Result<T> {
    write_frame(writer, &Reply::Refused { reason: reason.clone() })?;
    writer.flush()?;
    Err(io::Error::new(io::ErrorKind::PermissionDenied, reason))
}

/// Connections one peer address may hold open while they say hello: a gateway opens one per instance it
/// starts, each done in milliseconds; an address that holds this many unproven is not a gateway at work.
pub const GREETING_PER_PEER: usize = 64;

/// A connection still saying hello, counted for the node and for its peer's address until dropped.
struct Greeting {
    node: Arc<Node>,
    peer: IpAddr,
}

impl Greeting {
    /// A place among the connections saying hello, unless the node or `peer` holds all its share.
    fn take(node: &Arc<Node>, peer: IpAddr) -> Option<Greeting> {
        let mut by_peer = node.greeting_by_peer.lock().unwrap_or_else(|p| p.into_inner());
        let of_peer = by_peer.entry(peer).or_default();
        if *of_peer >= GREETING_PER_PEER || node.greeting.load(Ordering::SeqCst) >= node.config.max_connections {
            if *of_peer == 0 {
                by_peer.remove(&peer);
            }
            return None;
        }
        *of_peer += 1;
        node.greeting.fetch_add(1, Ordering::SeqCst);
        Some(Greeting { node: node.clone(), peer })
    }
}

impl Drop for Greeting {
    fn drop(&mut self) {
        let mut by_peer = self.node.greeting_by_peer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(of_peer) = by_peer.get_mut(&self.peer) {
            *of_peer -= 1;
            if *of_peer == 0 {
                by_peer.remove(&self.peer);
            }
        }
        self.node.greeting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A count taken, given back when dropped.
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection's reads, each given what is left of `deadline` (none: no limit).
struct Until<'a> {
    link: &'a Link,
    deadline: Option<Instant>,
}

impl Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the peer did not say hello in time"));
            }
            self.link.tcp().set_read_timeout(Some(left))?;
        }
        let mut link = self.link;
        link.read(buf)
    }
}

/// Read `len` bytes of a model into `path` (through a temporary file beside it, removed unless it is kept),
/// checking their SHA-256.
fn receive_model(reader: &mut impl Read, path: &Path, sha256: &str, len: u64) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let mut file = tempfile::Builder::new().prefix(".receiving-").tempfile_in(dir)?;
    let mut hasher = Sha256::new();
    let mut left = len;
    let mut chunk = vec![0u8; 1 << 20];
    while left > 0 {
        let n = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        reader.read_exact(&mut chunk[..n])?;
        hasher.update(&chunk[..n]);
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    let got = hex::encode(hasher.finalize());
    if got != sha256 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("its bytes hash to {got}, not {sha256}")));
    }
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_with_the_wrong_hash_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.onnx");
        let bytes = b"not really onnx";
        let wrong = "0".repeat(64);
        let err = receive_model(&mut bytes.as_slice(), &path, &wrong, bytes.len() as u64).unwrap_err();
        assert!(err.to_string().contains("hash to"), "{err}");
        assert!(!path.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0, "the partial file is removed");
        let right = hex::encode(Sha256::digest(bytes));
        receive_model(&mut bytes.as_slice(), &path, &right, bytes.len() as u64).unwrap();
        assert_eq!(fs::read(&path).unwrap(), bytes);
    }
}
