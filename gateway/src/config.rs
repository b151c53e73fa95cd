//! The gateway's settings: [`GatewayConfig`] (the `jig up --config` file), its defaults and the checks it must
//! pass before a gateway starts, and the default directories (XDG) a gateway and `jig run` keep their files in.
//!
//! Kept apart from the server so that the settings read whole, in one place, with what each defaults to.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use jig_model_host::device::Devices;
use serde::{Deserialize, Serialize};

use crate::predictor;

/// A gateway's settings: the `jig up --config` file (TOML), every field optional.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Address to serve the Open Inference Protocol over gRPC on (port 0: a free one); none serves no gRPC.
    pub grpc_listen: Option<SocketAddr>,
    /// Where deployed bundles and apps are kept.
    pub state_dir: PathBuf,
    /// Bearer token for the control API; none leaves it open (fine on loopback only).
    pub token: Option<String>,
    /// Bearer token for invocations; none leaves them open.
    pub invoke_token: Option<String>,
    /// Largest invocation body, MiB.
    pub max_request_mib: u64,
    /// Largest bundle upload (packed, and unpacked), MiB.
    pub max_bundle_mib: u64,
    /// CPU cores model instances may use (the first this many of the machine's): the planner's budget, and
    /// the intra-op threads of an instance when a bundle has no profiles to plan from.
    pub cores: u32,
    /// GPUs model instances may use, by `nvidia-smi` index; all of them when absent, none when empty.
    pub gpus: Option<Vec<u32>>,
    /// Glue invocations running at once across all apps (each holds a WebAssembly instance of the pool).
    #[serde(alias = "max_instances")]
    pub max_invocations: u32,
    /// Length of a demand window, seconds (the controller predicts from the last five).
    pub demand_window_s: f64,
    /// Re-plan when the predicted demand moves by more than this fraction of what the deployment was
    /// planned for.
    pub replan_threshold: f64,
    /// Seconds a client has to send a request's headers, and the longest a kept-alive connection may sit idle
    /// between requests; then the gateway closes it.
    pub header_timeout_s: f64,
    /// Seconds a client has to send an invocation's body once its headers arrived (or less: its deadline); it is
    /// admitted, and counts against the app's capacity, only once the body is whole.
    pub body_timeout_s: f64,
    /// Connections open at once, over HTTP and gRPC together; further clients wait in the listen backlog until
    /// one closes.
    pub max_connections: u32,
    /// Connections one peer (IP address) may hold open at once, over both; its next is closed at once, so that no one
    /// client takes every connection. Default: half of `max_connections`.
    pub max_connections_per_peer: Option<u32>,
    /// The longest deadline a client may ask for with `jig-timeout-ms`; a longer one is cut to it.
    pub max_timeout_s: f64,
    /// IPA's load predictor (`make setup` writes `.jig/models/ipa-lstm.onnx`), for apps with `planner = "ipa"`;
    /// when absent, that file if it exists. Without one, those apps' demand is predicted as the others'.
    pub ipa_predictor: Option<PathBuf>,
    /// `jig node`s to run model instances on, `HOST:PORT` each; a name that resolves to several addresses (a
    /// Kubernetes headless Service) counts each as a node. With nodes, the gateway plans over their segments
    /// and runs no model itself; `cores` and `gpus` then do not apply.
    pub nodes: Vec<String>,
    /// A file holding the token the nodes were started with (`jig node --token-file`); needed with `nodes`, and
    /// for a replica to use the nodes registered in its cluster.
    pub node_token_file: Option<PathBuf>,
    /// The CA certificate (PEM) that signed the nodes' certificates, for nodes started with `--tls-cert`: with
    /// it, the gateway speaks TLS to every node and checks it. Default: none (in clear).
    pub node_tls_ca: Option<PathBuf>,
    /// The name every node's certificate carries (one certificate for a fleet reached by IP address, as a
    /// headless Service lists pods). Default: the host in each node's address.
    pub node_tls_server_name: Option<String>,
    /// etcd endpoints (`http://HOST:2379`, or `https://` with `JIG_ETCD_CA_FILE`) holding the cluster state, for gateway replicas ([`cluster`](crate::cluster)): apps and
    /// plans live there, and `state_dir`, which the replicas share, holds the bundles. Default: none (one
    /// gateway, its state in `state_dir`).
    pub etcd: Vec<String>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            grpc_listen: None,
            state_dir: default_state_dir(),
            token: None,
            invoke_token: None,
            max_request_mib: 64,
            max_bundle_mib: 1024,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            gpus: None,
            max_invocations: 256,
            demand_window_s: 300.0,
            replan_threshold: 0.2,
            header_timeout_s: 10.0,
            body_timeout_s: 10.0,
            max_connections: 1024,
            max_connections_per_peer: None,
            max_timeout_s: 300.0,
            ipa_predictor: None,
            nodes: Vec::new(),
            node_token_file: None,
            node_tls_ca: None,
            node_tls_server_name: None,
            etcd: Vec::new(),
        }
    }
}

impl GatewayConfig {
    /// What is wrong with these settings, before anything starts: a number out of its range.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if !(self.demand_window_s.is_finite() && self.demand_window_s > 0.0 && self.demand_window_s <= 86_400.0) {
            anyhow::bail!("`demand_window_s` must be a number of seconds in (0, 86400]");
        }
        if !(self.max_timeout_s.is_finite() && self.max_timeout_s > 0.0 && self.max_timeout_s <= 86_400.0) {
            anyhow::bail!("`max_timeout_s` must be a number of seconds in (0, 86400]");
        }
        if !(self.body_timeout_s.is_finite() && self.body_timeout_s > 0.0 && self.body_timeout_s <= 3600.0) {
            anyhow::bail!("`body_timeout_s` must be a number of seconds in (0, 3600]");
        }
        if self.max_request_mib > 1 << 20 || self.max_bundle_mib > 1 << 20 {
            anyhow::bail!("`max_request_mib` and `max_bundle_mib` must be at most 1048576 (1 TiB)");
        }
        Ok(())
    }

    /// How the gateway reaches its nodes (each batch given `timeout`), with a node token: those listed, and (a
    /// replica) those registered in the cluster. `None` without one; a setting that needs another is an error.
    pub(crate) fn node_access(&self, timeout: std::time::Duration) -> anyhow::Result<Option<jig_node::Access>> {
        let Some(path) = &self.node_token_file else {
            if !self.nodes.is_empty() {
                anyhow::bail!("`nodes` needs `node_token_file`: the token the nodes were started with");
            }
            if self.node_tls_ca.is_some() {
                anyhow::bail!(
                    "`node_tls_ca` is for nodes: give `node_token_file`, the token the nodes were started with"
                );
            }
            return Ok(None);
        };
        let token = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("`node_token_file`: cannot read {}: {e}", path.display()))?;
        let tls = match (&self.node_tls_ca, &self.node_tls_server_name) {
            (Some(ca), name) => Some(
                jig_node::tls::NodeTls::from_files(ca, name.as_deref())
                    .map_err(|e| anyhow::anyhow!("`node_tls_ca`: {e}"))?,
            ),
            (None, Some(_)) => anyhow::bail!(
                "`node_tls_server_name` needs `node_tls_ca`: the CA the nodes' certificates are checked against"
            ),
            (None, None) => None,
        };
        Ok(Some(jig_node::Access { token: token.trim().to_string(), timeout, tls }))
    }
}

/// IPA's load predictor at `configured`, or set-up's if it exists; a configured one that fails to load is an
/// error, set-up's a warning.
pub(crate) fn load_peak_predictor(configured: Option<&Path>) -> anyhow::Result<Option<predictor::PeakPredictor>> {
    let setup = Path::new(".jig/models/ipa-lstm.onnx");
    let Some(path) = configured.or(setup.exists().then_some(setup)) else {
        tracing::info!(
            "no IPA load predictor (.jig/models/ipa-lstm.onnx, from `make setup`): apps planned by IPA \
                        predict demand as the others do"
        );
        return Ok(None);
    };
    match predictor::PeakPredictor::load(path) {
        Ok(predictor) => Ok(Some(predictor)),
        Err(e) if configured.is_some() => Err(e.context(format!("`ipa_predictor` {}", path.display()))),
        Err(e) => {
            tracing::warn!("IPA's load predictor {} did not load: {e:#}", path.display());
            Ok(None)
        }
    }
}

/// `cores` is at most what this machine lets jig run on: more is a mistake to report, not a number to cap.
pub(crate) fn check_cores(cores: u32, devices: &Devices) -> anyhow::Result<()> {
    let has = devices.cpu_cores.len();
    if cores == 0 || cores as usize > has {
        anyhow::bail!(
            "`cores` is {cores}, but this machine lets jig run on {has} cores: give 1 to {has} (`jig up --cores`)"
        );
    }
    Ok(())
}

/// `gpus` names GPUs of this machine by index: one it lacks is a mistake to report, not a GPU to ignore.
pub(crate) fn check_gpus(wanted: &[u32], devices: &Devices) -> anyhow::Result<()> {
    let Some(missing) = wanted.iter().find(|&&i| !devices.gpus.iter().any(|g| g.index == i)) else {
        return Ok(());
    };
    let has = match devices.gpus.iter().map(|g| g.index.to_string()).collect::<Vec<_>>() {
        none if none.is_empty() => "no GPU (neither `nvidia-smi` nor the CUDA driver finds one)".to_string(),
        indices => format!("GPU {}", indices.join(", ")),
    };
    anyhow::bail!(
        "`gpus` names GPU {missing}, but this machine has {has}: give `jig up --gpus` the indices `nvidia-smi -L` \
         lists, or `none`"
    )
}

/// `$XDG_DATA_HOME/jig`, or `~/.local/share/jig`: where a gateway keeps its state by default.
pub fn default_state_dir() -> PathBuf {
    xdg_dir("XDG_DATA_HOME", ".local/share").join("jig")
}

/// `$XDG_CACHE_HOME/jig/components`, or `~/.cache/jig/components`: where `jig run` caches compiled glue.
pub fn default_cache_dir() -> PathBuf {
    xdg_dir("XDG_CACHE_HOME", ".cache").join("jig/components")
}

/// The XDG base directory `var`, else `$HOME/home_relative`, else the temporary directory.
pub fn xdg_dir(var: &str, home_relative: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_relative)))
        .unwrap_or_else(std::env::temp_dir)
}

#[cfg(test)]
mod tests {
    use super::GatewayConfig;

    #[test]
    fn a_config_file_may_use_the_old_name_of_max_invocations() {
        let old: GatewayConfig = toml::from_str("max_instances = 8").unwrap();
        let new: GatewayConfig = toml::from_str("max_invocations = 8").unwrap();
        assert_eq!((old.max_invocations, new.max_invocations), (8, 8));
        assert!(toml::from_str::<GatewayConfig>("max_invocation = 8").is_err(), "unknown keys are refused");
    }

    #[test]
    fn node_settings_that_need_another_say_which() {
        let timeout = std::time::Duration::from_secs(1);
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "t\n").unwrap();
        let config = |toml: &str| toml::from_str::<GatewayConfig>(toml).unwrap();
        let err = |toml: &str| config(toml).node_access(timeout).unwrap_err().to_string();
        assert!(config("").node_access(timeout).unwrap().is_none());
        assert!(err("nodes = [\"n:7070\"]").contains("needs `node_token_file`"));
        assert!(err("node_tls_ca = \"ca.pem\"").contains("give `node_token_file`"));
        let with_token = format!("node_token_file = {token:?}\n");
        assert!(err(&format!("{with_token}node_tls_server_name = \"n\"")).contains("needs `node_tls_ca`"));
        let missing = err(&format!("{with_token}node_tls_ca = \"/nonexistent/ca.pem\""));
        assert!(missing.contains("`node_tls_ca`") && missing.contains("/nonexistent/ca.pem"), "{missing}");
        let access = config(&with_token).node_access(timeout).unwrap().unwrap();
        assert_eq!((access.token.as_str(), access.tls.is_none()), ("t", true));
    }
}
