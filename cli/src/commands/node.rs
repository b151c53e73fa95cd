//! `jig node`: serve this machine's segments to gateways over TCP, one connection per model instance (the
//! cluster's node role; see `jig_node`).

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use jig_model_host::device::Devices;
use jig_model_host::launch::{Launcher, WorkerCommand};
use jig_node::{Node, NodeConfig};

/// Serve this machine's segments (CPU cores, GPU shares) to gateways over TCP.
#[derive(clap::Args, Debug)]
pub struct NodeCommand {
    /// Address to listen on (port 0 picks a free port; the first line printed says which).
    #[arg(long, default_value = "0.0.0.0:7070")]
    listen: SocketAddr,
    /// A file holding the cluster's shared token, which gateways must present (one line; make one with
    /// `head -c 32 /dev/urandom | base64 > token`).
    #[arg(long, env = "JIG_NODE_TOKEN_FILE")]
    token_file: PathBuf,
    /// Names the node in errors and logs. Default: the host name.
    #[arg(long)]
    name: Option<String>,
    /// Where models received from gateways are kept, by SHA-256. Default: $XDG_CACHE_HOME/jig/node-models or
    /// ~/.cache/jig/node-models.
    #[arg(long, env = "JIG_NODE_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// CPU cores model instances may use (default: all this process may run on).
    #[arg(long)]
    cores: Option<usize>,
    /// Connections (model instances) served at once; more are refused with a message.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// etcd endpoints (`http://HOST:2379`, or `https://` with `JIG_ETCD_CA_FILE`; comma-separated) to register in, so that gateway replicas of that
    /// cluster find this node without listing it; the registration lapses within seconds of the node's end.
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// A certificate chain (PEM) for this node: with it (and --tls-key), the node speaks only TLS, and gateways
    /// need the CA that signed it (`node_tls_ca`). The certificate names the host gateways reach the node at,
    /// or the one name the gateways' `node_tls_server_name` gives.
    #[arg(long, env = "JIG_NODE_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "JIG_NODE_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The address gateways reach this node at, for the registration (default: --listen's, unless that is
    /// 0.0.0.0 or [::]).
    #[arg(long)]
    advertise: Option<String>,
}

impl NodeCommand {
    /// Serve until killed.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let token = std::fs::read_to_string(&self.token_file)
            .with_context(|| format!("cannot read the token file {}", self.token_file.display()))?
            .trim()
            .to_string();
        if token.is_empty() {
            bail!(
                "the token file {} is empty: write the cluster's token into it (`head -c 32 /dev/urandom | base64`)",
                self.token_file.display()
            );
        }
        let name = self.name.or_else(jig_model_host::device::host_name).unwrap_or_else(|| "node".into());
        let cache_dir =
            self.cache_dir.unwrap_or_else(|| jig_gateway::xdg_dir("XDG_CACHE_HOME", ".cache").join("jig/node-models"));
        let mut devices = Devices::discover();
        if let Some(cores) = self.cores {
            if cores == 0 || cores > devices.cpu_cores.len() {
                bail!("--cores {cores}: this machine lets jig run on {} cores", devices.cpu_cores.len());
            }
            devices.cpu_cores.truncate(cores);
        }
        let summary = format!("{} cores, {} GPUs", devices.cpu_cores.len(), devices.gpus.len());
        let launcher = Launcher::new(devices, WorkerCommand::current_exe().ok()).with_relist(Devices::list_now);
        let listener = TcpListener::bind(self.listen).with_context(|| format!("cannot listen on {}", self.listen))?;
        let addr = listener.local_addr()?;
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                Some(jig_node::tls::NodeIdentity::from_files(cert, key).map_err(anyhow::Error::msg)?)
            }
            _ => None,
        };
        let config = NodeConfig {
            max_connections: self.max_connections,
            tls,
            ..NodeConfig::new(name.clone(), token, cache_dir.clone())
        };
        if !self.etcd.is_empty() {
            let advertise = match (self.advertise, addr.ip().is_unspecified()) {
                (Some(advertise), _) => advertise,
                (None, false) => addr.to_string(),
                (None, true) => {
                    bail!("--etcd: this node listens on {addr}; say where gateways reach it with --advertise HOST:PORT")
                }
            };
            let registration = jig_node::registry::Registration { name: name.clone(), addr: advertise };
            let endpoints = self.etcd.clone();
            let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            std::thread::Builder::new()
                .name("jig-node registry".into())
                .spawn(move || tokio.block_on(jig_node::registry::register(endpoints, registration)))?;
        }
        let tls = if self.tls_cert.is_some() { " in TLS" } else { "" };
        println!("jig node `{name}` listening on {addr}{tls} ({summary}; models cached in {})", cache_dir.display());
        std::io::stdout().flush()?;
        Arc::new(Node::new(config, launcher)).serve(listener).with_context(|| format!("node on {addr}"))?;
        Ok(ExitCode::SUCCESS)
    }
}
