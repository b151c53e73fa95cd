//! # jig-gateway
//!
//! The gateway: HTTP/1.1 on hyper + tokio, serving invocations, the control API and metrics over the apps
//! kept in the state directory (`store`), re-planned by a controller as their demand moves.
//!
//! The routes, their answers and error kinds are `jig-api`'s: this crate writes those types and nothing else.
//! Every error answer is a `jig_api::ErrorBody` whose kind sets its status (`jig_api::ErrorKind::status`); a
//! failed invocation is classified once, in `classify`. `GET /metrics` is the Prometheus text format
//! (`metrics`).

#![deny(missing_docs)]

pub mod cluster;
mod controller;
mod metrics;
mod oip;
mod predictor;
mod store;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use jig_sdk::Envelope;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use jig_api::{
    AppList, AppStatus, Deleted, ErrorBody, ErrorKind, GpuStatus, InvokeResponse, MachineStatus, NodeStatus,
    OutputPart, ReplicaStatus, Route,
};
use jig_app::ModelHosts;
use jig_app::deployment::{Capacity, Machine};
use jig_app::{App, AppError, StartError};
use jig_model_host::device::Devices;
use jig_model_host::launch::Launcher;
use jig_node::NodeInfo;

use cluster::{Change, Cluster, ClusterApp};
use jig_runtime::{FunctionError, InferError, InvokeError, Runtime, RuntimeConfig};

use crate::metrics::{Apps, Metrics};
use crate::store::{AppRecord, PutError, Store};

pub use jig_api::{CLASS_HEADER, TIMEOUT_HEADER};

/// How long a node may take to answer: connecting, loading a model (its transfer included), each batch.
const NODE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a look at the nodes holds before a plan looks again (deploys and re-plans come in bursts).
const NODES_FRESH: Duration = Duration::from_secs(5);

/// The longest a bundle upload may take.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// A gateway's settings: the `jig up --config` file (TOML), every field optional.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
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
    /// Connections open at once; further clients wait in the listen backlog until one closes.
    pub max_connections: u32,
    /// Connections one peer (IP address) may hold open at once; its next is closed at once, so that no one
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
    /// etcd endpoints (`http://HOST:2379`) holding the cluster state, for gateway replicas ([`cluster`]): apps and
    /// plans live there, and `state_dir`, which the replicas share, holds the bundles. Default: none (one
    /// gateway, its state in `state_dir`).
    pub etcd: Vec<String>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
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
            etcd: Vec::new(),
        }
    }
}

/// IPA's load predictor at `configured`, or set-up's if it exists; a configured one that fails to load is an
/// error, set-up's a warning.
fn load_peak_predictor(configured: Option<&Path>) -> anyhow::Result<Option<predictor::PeakPredictor>> {
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

/// `gpus` names GPUs of this machine by index: one it lacks is a mistake to report, not a GPU to ignore.
fn check_gpus(wanted: &[u32], devices: &Devices) -> anyhow::Result<()> {
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

/// The status of `machine`'s GPUs (all it may use), with what `free` (the same machine less what apps hold)
/// leaves of each; `devices` is the machine's own listing.
fn gpu_status(devices: &Devices, machine: &Machine, free: &Machine) -> Vec<GpuStatus> {
    machine
        .gpus
        .iter()
        .filter_map(|g| devices.gpus.iter().find(|d| d.index == g.index))
        .map(|gpu| {
            let free = free.gpus.iter().find(|f| f.index == gpu.index);
            GpuStatus {
                index: gpu.index,
                name: gpu.name.clone(),
                uuid: gpu.uuid.clone(),
                memory_mib: gpu.memory_mib,
                mig_enabled: gpu.mig_enabled,
                mig_instances: gpu.mig_instances.iter().filter_map(|m| m.profile.clone()).collect(),
                free_mps_percent: free.map_or(0, |f| f.mps_percent),
                free_mig_instances: free
                    .map(|f| f.mig.iter().map(|(profile, uuid)| format!("{profile} ({uuid})")).collect())
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// A replica's name in the cluster: its host and port, and its process (a restarted replica is a new one).
fn replica_id(listen: SocketAddr) -> String {
    let host = jig_model_host::device::host_name().unwrap_or_else(|| "gateway".into());
    format!("{host}-{}-{}", listen.port(), std::process::id())
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

/// A running gateway's shared state.
pub struct Gateway {
    config: GatewayConfig,
    runtime: Arc<Runtime>,
    /// Starts model instances on this machine's segments and on the nodes.
    hosts: ModelHosts,
    /// The nodes as last found, and when (see [`Gateway::nodes`]).
    nodes: std::sync::Mutex<(Option<Instant>, Vec<NodeInfo>)>,
    /// The addresses of the nodes registered in the cluster, as last read.
    registered: std::sync::Mutex<Vec<String>>,
    /// The cluster state, for replicas; `None` for a gateway alone.
    cluster: Option<Cluster>,
    store: Store,
    apps: Apps,
    metrics: Metrics,
    /// Deploys, deletes and re-plans one at a time, so the store's garbage collection never races an upload.
    control: tokio::sync::Mutex<()>,
    /// Bundle uploads being received at once (each is buffered whole).
    uploads: Semaphore,
    /// Each app's demand, by name (see [`controller`]).
    demand: std::sync::Mutex<HashMap<String, controller::DemandWindows>>,
    /// IPA's load predictor, when one was found.
    peaks: Option<predictor::PeakPredictor>,
}

type Reply = Response<Full<Bytes>>;

impl Gateway {
    /// Open the state directory and start every app deployed there (with `etcd`: every app of the cluster).
    pub async fn start(config: GatewayConfig) -> anyhow::Result<Arc<Gateway>> {
        if !(config.demand_window_s.is_finite() && config.demand_window_s > 0.0 && config.demand_window_s <= 86_400.0) {
            anyhow::bail!("`demand_window_s` must be a number of seconds in (0, 86400]");
        }
        if !(config.max_timeout_s.is_finite() && config.max_timeout_s > 0.0 && config.max_timeout_s <= 86_400.0) {
            anyhow::bail!("`max_timeout_s` must be a number of seconds in (0, 86400]");
        }
        if !(config.body_timeout_s.is_finite() && config.body_timeout_s > 0.0 && config.body_timeout_s <= 3600.0) {
            anyhow::bail!("`body_timeout_s` must be a number of seconds in (0, 3600]");
        }
        if config.max_request_mib > 1 << 20 || config.max_bundle_mib > 1 << 20 {
            anyhow::bail!("`max_request_mib` and `max_bundle_mib` must be at most 1048576 (1 TiB)");
        }
        let cluster = match config.etcd.is_empty() {
            true => None,
            false => Some(Cluster::connect(&config.etcd, replica_id(config.listen)).await?),
        };
        let store = match &cluster {
            None => Store::open(&config.state_dir)?,
            Some(cluster) => Store::open_shared(&config.state_dir, cluster.id())?,
        };
        let runtime = Arc::new(Runtime::new(RuntimeConfig {
            cache_dir: Some(config.state_dir.join("cache")),
            max_invocations: config.max_invocations,
            ..RuntimeConfig::default()
        })?);
        let apps: Apps = Arc::default();
        let peaks = load_peak_predictor(config.ipa_predictor.as_deref())?;
        // With a token, the gateway may use nodes: those listed, and (a replica) those registered in the cluster.
        let node_access = match (&config.node_token_file, config.nodes.is_empty()) {
            (None, true) => None,
            (None, false) => anyhow::bail!("`nodes` needs `node_token_file`: the token the nodes were started with"),
            (Some(path), _) => {
                let token = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("`node_token_file`: cannot read {}: {e}", path.display()))?;
                Some(jig_node::Access { token: token.trim().to_string(), timeout: NODE_TIMEOUT })
            }
        };
        let gateway = Arc::new(Gateway {
            metrics: Metrics::new(apps.clone()),
            config,
            runtime,
            hosts: ModelHosts { launcher: Launcher::discover(), nodes: node_access },
            nodes: Default::default(),
            registered: Default::default(),
            cluster,
            store,
            apps,
            control: tokio::sync::Mutex::new(()),
            uploads: Semaphore::new(2),
            demand: Default::default(),
            peaks,
        });
        if !gateway.uses_nodes()
            && let Some(gpus) = &gateway.config.gpus
        {
            check_gpus(gpus, &gateway.hosts.launcher.devices())?;
        }
        if let Some(cluster) = &gateway.cluster {
            tokio::spawn(gateway.clone().track_registrations());
            let (apps, revision) = cluster.apps().await?;
            for app in apps {
                gateway.clone().apply(app).await;
            }
            tokio::spawn(gateway.clone().follow(revision));
        }
        let alone = if gateway.cluster.is_none() { gateway.store.apps_list()? } else { Vec::new() };
        for record in alone {
            let name = record.name.clone();
            let windows = controller::DemandWindows::from_rates(&record.demand_windows);
            gateway.demand.lock().unwrap_or_else(|p| p.into_inner()).insert(name.clone(), windows);
            match gateway.clone().start_app(record).await {
                Ok(app) => {
                    tracing::info!(app = %name, "restored");
                    gateway.apps.write().unwrap_or_else(|p| p.into_inner()).insert(name, app);
                }
                Err(e) => tracing::error!(app = %name, "cannot restore: {e:#}"),
            }
        }
        tokio::spawn(gateway.clone().control());
        tokio::spawn(gateway.clone().adapt());
        tokio::spawn(gateway.clone().watch_nodes());
        Ok(gateway)
    }

    /// Load a stored app, off the async executor.
    async fn start_app(self: Arc<Self>, record: AppRecord) -> Result<Arc<App>, StartError> {
        let name = record.name.clone();
        tokio::task::spawn_blocking(move || {
            let bundle = self.store.bundle(&record.bundle)?;
            let capacity = self.free_capacity(Some(&record.name));
            // A restart observes factors afresh; a new deploy plans with the manifest's. A bundle profiled only on
            // GPU segments this machine lacks is refused (400; the app's previous deployment serves on).
            let deployment =
                jig_app::deployment::plan_for_deploy(&bundle, &record.demand_windows, &capacity, &Default::default())?;
            let app = App::start(&self.runtime, &self.hosts, &bundle, &record.bundle, record.deployed_at, deployment)?;
            Ok(Arc::new(app))
        })
        .await
        .unwrap_or_else(|e| Err(StartError::Deployment { app: name, detail: format!("starting it panicked: {e}") }))
    }

    /// The gateway's cores and GPUs, or its nodes', less what every app but `except` holds: what app `except`
    /// may plan within. Lists this machine's GPUs again first (`nvidia-smi`), or finds the nodes again when the
    /// last look is older than [`NODES_FRESH`]: blocks.
    fn free_capacity(&self, except: Option<&str>) -> Capacity {
        self.less_held(self.capacity(true), except)
    }

    /// `all` less what every app but `except` holds.
    fn less_held(&self, all: Capacity, except: Option<&str>) -> Capacity {
        let apps = self.apps.read().unwrap_or_else(|p| p.into_inner());
        apps.values().filter(|a| Some(a.name.as_str()) != except).fold(all, |free, app| free.without(&app.deployment))
    }

    /// Whether model instances run on nodes: the gateway was given some, or (a replica with a node token) may find
    /// them registered in the cluster.
    fn uses_nodes(&self) -> bool {
        !self.config.nodes.is_empty() || (self.cluster.is_some() && self.hosts.nodes.is_some())
    }

    /// Read the nodes registered in the cluster twice every [`NODES_FRESH`], forever; when they change, look at
    /// the nodes again at once (`jig status` and the next plan see a node as soon as it registers).
    async fn track_registrations(self: Arc<Self>) {
        let Some(cluster) = self.cluster.clone() else { return };
        let mut ticks = tokio::time::interval(NODES_FRESH / 2);
        loop {
            ticks.tick().await;
            match cluster.registered_nodes().await {
                Ok(mut found) => {
                    found.sort();
                    let changed = {
                        let mut registered = self.registered.lock().unwrap_or_else(|p| p.into_inner());
                        std::mem::replace(&mut *registered, found.clone()) != found
                    };
                    if changed {
                        self.nodes.lock().unwrap_or_else(|p| p.into_inner()).0 = None;
                        let gateway = self.clone();
                        let _ = tokio::task::spawn_blocking(move || gateway.nodes(true)).await;
                    }
                }
                Err(e) => tracing::warn!("cannot read the registered nodes: {e:#}; using the last ones read"),
            }
        }
    }

    /// What the gateway may use in all: its own machine (as last listed, or listed again when `refresh`: MIG
    /// instances come and go), or its nodes (as last found, or found again when `refresh` and the last look is
    /// stale).
    fn capacity(&self, refresh: bool) -> Capacity {
        if !self.uses_nodes() {
            let launcher = &self.hosts.launcher;
            let devices = if refresh { launcher.relist() } else { launcher.devices() };
            return Capacity::of(&devices, self.config.cores, self.config.gpus.as_deref());
        }
        let nodes = self.nodes(refresh);
        Capacity::of_nodes(nodes.iter().map(|n| (n.addr.as_str(), &n.devices)))
    }

    /// The nodes that answered the last look; with `refresh`, looks again when that is older than
    /// [`NODES_FRESH`]. A node that does not answer is left out of plans (its instances are placed elsewhere
    /// on the next one) and logged.
    fn nodes(&self, refresh: bool) -> Vec<NodeInfo> {
        let cached = || self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        let stale = cached().0.is_none_or(|at| at.elapsed() > NODES_FRESH);
        // The look is made with the cache unlocked: `/v1/devices` and `/metrics` read it meanwhile, unblocked.
        if refresh
            && stale
            && let Some(access) = &self.hosts.nodes
        {
            let mut addresses = self.config.nodes.clone();
            for addr in self.registered.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                if !addresses.contains(addr) {
                    addresses.push(addr.clone());
                }
            }
            let mut found: Vec<NodeInfo> = Vec::new();
            for result in jig_node::discover(&addresses, &access.token, NODE_TIMEOUT) {
                match result {
                    // A node listed and registered under two names is one node.
                    Ok(node) if found.iter().any(|f| f.addr == node.addr) => {}
                    Ok(node) => found.push(node),
                    Err(e) => tracing::warn!("{e}; planning without it"),
                }
            }
            *cached() = (Some(Instant::now()), found);
        }
        cached().1.clone()
    }

    /// Run `wanted` as the cluster records it (its deployment as planned, not planned again here), unless this
    /// replica runs it already; a failure is logged and the app keeps what it ran.
    async fn apply(self: Arc<Self>, wanted: ClusterApp) {
        let _control = self.control.lock().await;
        let name = wanted.record.name.clone();
        let running = self.app(&name);
        if running.as_ref().is_some_and(|a| {
            (a.bundle.as_str(), a.deployed_at, &a.deployment)
                == (wanted.record.bundle.as_str(), wanted.record.deployed_at, &wanted.deployment)
        }) {
            return;
        }
        let gateway = self.clone();
        let record = wanted.record.clone();
        let started = tokio::task::spawn_blocking(move || -> Result<App, StartError> {
            let bundle = gateway.store.bundle(&record.bundle)?;
            App::start(&gateway.runtime, &gateway.hosts, &bundle, &record.bundle, record.deployed_at, wanted.deployment)
        })
        .await;
        match started {
            Ok(Ok(mut app)) => {
                if let Some(old) = running.filter(|old| old.deployed_at == app.deployed_at) {
                    app.replans = old.replans + 1;
                    app.continue_counts(&old);
                }
                let windows = controller::DemandWindows::from_rates(&wanted.record.demand_windows);
                self.demand.lock().unwrap_or_else(|p| p.into_inner()).entry(name.clone()).or_insert(windows);
                self.apps.write().unwrap_or_else(|p| p.into_inner()).insert(name.clone(), Arc::new(app));
                tracing::info!(app = %name, "running the cluster's deployment");
            }
            Ok(Err(e)) => tracing::error!(app = %name, "cannot run the cluster's deployment: {e}"),
            Err(e) => tracing::error!(app = %name, "cannot run the cluster's deployment: {e}"),
        }
    }

    /// Follow the cluster's apps from `revision` on, forever: run what is deployed or re-planned, stop what is
    /// deleted. When the watch breaks (etcd unreachable), keep serving what runs, and read them all again once
    /// etcd answers.
    async fn follow(self: Arc<Self>, mut revision: i64) {
        let Some(cluster) = self.cluster.clone() else { return };
        loop {
            match cluster.watch_apps(revision).await {
                Ok(mut changes) => {
                    while let Some(change) = changes.recv().await {
                        match change {
                            Change::Put(app) => self.clone().apply(*app).await,
                            Change::Deleted(name) => {
                                let _control = self.control.lock().await;
                                if self.apps.write().unwrap_or_else(|p| p.into_inner()).remove(&name).is_some() {
                                    tracing::info!(app = %name, "deleted in the cluster");
                                }
                                self.demand.lock().unwrap_or_else(|p| p.into_inner()).remove(&name);
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!("cannot watch the cluster's apps: {e:#}; serving them as last seen"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            // Catch up: whatever changed while the watch was down.
            match cluster.apps().await {
                Ok((apps, now)) => {
                    let names: std::collections::HashSet<String> = apps.iter().map(|a| a.record.name.clone()).collect();
                    for app in apps {
                        self.clone().apply(app).await;
                    }
                    self.apps.write().unwrap_or_else(|p| p.into_inner()).retain(|name, _| names.contains(name));
                    revision = now;
                }
                Err(e) => tracing::warn!("cluster state (etcd) unreachable: {e:#}; serving the apps as last seen"),
            }
        }
    }

    fn app(&self, name: &str) -> Option<Arc<App>> {
        self.apps.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Accept connections on `listener` until `shutdown` completes, then let open connections finish
    /// their requests (for up to 10 s).
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut shutdown = std::pin::pin!(shutdown);
        // A client holds one connection permit while its connection is open, so that slow or idle clients
        // cannot take every socket; the header timeout below ends the slow and the idle ones.
        let connections = Arc::new(Semaphore::new(self.config.max_connections.max(1) as usize));
        let per_peer = self.config.max_connections_per_peer.unwrap_or(self.config.max_connections / 2).max(1);
        let peers = Peers::default();
        let header_timeout = Duration::from_secs_f64(self.config.header_timeout_s.clamp(0.1, 3600.0));
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(header_timeout);
        loop {
            let permit = tokio::select! {
                permit = connections.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
                () = &mut shutdown => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let Some(held) = PeerHold::take(&peers, peer.ip(), per_peer) else {
                continue; // the peer holds its share already: this connection is closed unanswered
            };
            let _ = stream.set_nodelay(true);
            let gateway = self.clone();
            let service = hyper::service::service_fn(move |request| {
                let gateway = gateway.clone();
                async move { Ok::<_, Infallible>(gateway.handle(request).await) }
            });
            let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!("connection ended: {e}");
                }
                drop((permit, held));
            });
        }
        if tokio::time::timeout(Duration::from_secs(10), graceful.shutdown()).await.is_err() {
            tracing::warn!("connections still open after 10 s; closing them");
        }
    }

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Reply {
        let path = request.uri().path().to_owned();
        let Some(route) = Route::parse(request.method().as_str(), &path) else {
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
            Route::Metrics => {
                self.metrics.machine(&self.machine());
                let mut reply = text(StatusCode::OK, self.metrics.encode());
                reply.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
                );
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
            Route::V2Model(model) => self.v2_model(model, &request),
            Route::V2ModelReady(model) => self.v2_model_ready(model, &request),
            Route::V2Infer(model) => self.v2_infer(model, request).await,
        }
    }

    fn unknown_app(&self, name: &str) -> Reply {
        let apps = self.apps.read().unwrap_or_else(|p| p.into_inner());
        let known: Vec<&str> = apps.keys().map(String::as_str).collect();
        error(
            ErrorKind::NotFound,
            format!(
                "unknown app `{name}` (deployed: {}); deploy it with `jig deploy`",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ),
        )
    }

    async fn invoke(self: Arc<Self>, name: &str, request: Request<Incoming>) -> Reply {
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
                if kind.status() >= 500 {
                    tracing::warn!(app = %name, "{e}");
                }
                (error(kind, e.to_string()), kind == ErrorKind::Dropped)
            }
        };
        self.answered(name, arrived, reply, early_drop)
    }

    /// The longest deadline a client may ask for (`max_timeout_s`).
    fn max_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.config.max_timeout_s)
    }

    /// A request's whole body ([`read_body`]), which must arrive within `body_timeout_s` and before the
    /// request's `deadline`: a body still arriving then is a request that missed it.
    async fn whole_body(&self, request: Request<Incoming>, what: &str, deadline: Instant) -> Result<Bytes, Reply> {
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
    fn answered(&self, app: &str, arrived: Instant, mut reply: Reply, early_drop: bool) -> Reply {
        let elapsed = arrived.elapsed();
        let code = reply.status().as_u16();
        self.metrics.request_done(app, code, elapsed, early_drop);
        if matches!(code, 429 | 503 | 504) {
            self.demand.lock().unwrap_or_else(|p| p.into_inner()).entry(app.to_string()).or_default().violated();
        }
        if matches!(code, 429 | 503) {
            // Refused for load: a second is about how long the controller's next look or a queue takes.
            reply.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if let Ok(value) = HeaderValue::from_str(&format!("total;dur={:.3}", elapsed.as_secs_f64() * 1e3)) {
            reply.headers_mut().insert("server-timing", value);
        }
        reply
    }

    /// The devices model instances may use, and what no app holds: the gateway's machine's as last listed (at
    /// start, and at each deploy and re-plan), or, with nodes, the nodes' as last found (this does not look
    /// again).
    fn machine(&self) -> MachineStatus {
        let all = self.capacity(false);
        let free = self.less_held(all.clone(), None);
        let local = self.hosts.launcher.devices();
        let nodes = self.nodes(false);
        let cluster =
            self.cluster.as_ref().map(|c| ReplicaStatus { replica: c.id().to_string(), leader: c.is_leader() });
        let mut status =
            MachineStatus { cores: Vec::new(), free_cores: Vec::new(), gpus: Vec::new(), nodes: Vec::new(), cluster };
        for (machine, free) in all.machines.iter().zip(&free.machines) {
            let devices = match &machine.node {
                None => &*local,
                Some(addr) => match nodes.iter().find(|n| &n.addr == addr) {
                    Some(node) => &node.devices,
                    None => continue,
                },
            };
            let gpus = gpu_status(devices, machine, free);
            match &machine.node {
                None => {
                    (status.cores, status.free_cores, status.gpus) = (machine.cores.clone(), free.cores.clone(), gpus)
                }
                Some(addr) => status.nodes.push(NodeStatus {
                    addr: addr.clone(),
                    name: nodes.iter().find(|n| &n.addr == addr).map(|n| n.name.clone()).unwrap_or_default(),
                    cores: machine.cores.clone(),
                    free_cores: free.cores.clone(),
                    gpus,
                }),
            }
        }
        status
    }

    fn list(&self) -> Reply {
        // Lock order: `demand` is never taken while `apps` is held (the controller takes them one at a time).
        let apps: Vec<Arc<App>> = self.apps.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        json(StatusCode::OK, &AppList { apps: apps.iter().map(|a| self.status(a)).collect() })
    }

    async fn deploy(self: Arc<Self>, request: Request<Incoming>) -> Reply {
        let max = self.config.max_bundle_mib << 20;
        // Uploads are buffered whole: a few at a time, each within a time limit.
        let Ok(_upload) = self.uploads.acquire().await else {
            return error(ErrorKind::Unavailable, "the gateway is shutting down");
        };
        let archive = match tokio::time::timeout(UPLOAD_TIMEOUT, read_body(request, max, "bundle upload")).await {
            Ok(Ok(archive)) => archive,
            Ok(Err(reply)) => return reply,
            Err(_) => return error(ErrorKind::RequestTimeout, "the bundle upload took longer than 10 minutes"),
        };
        // The deploy runs to its end in a task of its own, holding the control lock, even if the client goes.
        let gateway = self.clone();
        tokio::spawn(async move { gateway.deploy_archive(archive, max).await })
            .await
            .unwrap_or_else(|e| error(ErrorKind::Internal, format!("the deploy failed: {e}")))
    }

    async fn deploy_archive(self: Arc<Self>, archive: Bytes, max: u64) -> Reply {
        let _control = self.control.lock().await;
        let gateway = self.clone();
        let stored = tokio::task::spawn_blocking(move || gateway.store.put_bundle(&archive, max)).await;
        let (hash, bundle) = match stored {
            Ok(Ok(stored)) => stored,
            Ok(Err(PutError::Invalid(e))) => return error(ErrorKind::InvalidBundle, e.to_string()),
            Ok(Err(e)) => return error(ErrorKind::Internal, e.to_string()),
            Err(e) => return error(ErrorKind::Internal, e.to_string()),
        };
        let name = bundle.manifest.name.clone();
        let record =
            AppRecord { name: name.clone(), bundle: hash, deployed_at: unix_now(), demand_windows: Vec::new() };
        // The new app starts (glue compiled, instances loaded) while the old one, if any, keeps serving.
        let app = match self.clone().start_app(record.clone()).await {
            Ok(app) => app,
            Err(e) if e.is_bundle_fault() => return error(ErrorKind::InvalidBundle, e.to_string()),
            Err(e) => return error(ErrorKind::Internal, e.to_string()),
        };
        if let Some(cluster) = &self.cluster {
            let recorded = ClusterApp { record, deployment: app.deployment.clone() };
            if let Err(e) = cluster.put_app(&recorded).await {
                let message = format!("app `{name}`: cannot record the deploy in the cluster state (etcd): {e:#}");
                return error(ErrorKind::Unavailable, message);
            }
        } else {
            let gateway = self.clone();
            let saved = tokio::task::spawn_blocking(move || gateway.store.put_app(&record)).await;
            if let Err(e) = saved.map_err(std::io::Error::other).and_then(|r| r) {
                return error(ErrorKind::Internal, format!("app `{name}`: cannot record the deploy: {e}"));
            }
        }
        // Requests already running keep their `Arc` of the old app and finish on it.
        self.apps.write().unwrap_or_else(|p| p.into_inner()).insert(name.clone(), app.clone());
        self.demand.lock().unwrap_or_else(|p| p.into_inner()).entry(name.clone()).or_default().deployed();
        self.clone().collect_garbage().await;
        tracing::info!(app = %name, bundle = %app.bundle, "deployed");
        json(StatusCode::CREATED, &self.status(&app))
    }

    async fn delete(self: Arc<Self>, name: &str) -> Reply {
        let _control = self.control.lock().await;
        let gateway = self.clone();
        let owned = name.to_string();
        // An app whose restore failed is in the store only: it can be deleted all the same.
        let deleted = match &self.cluster {
            Some(cluster) => cluster.delete_app(name).await.map_err(std::io::Error::other),
            None => tokio::task::spawn_blocking(move || gateway.store.delete_app(&owned))
                .await
                .map_err(std::io::Error::other)
                .and_then(|r| r),
        };
        match deleted {
            Ok(true) => {}
            Ok(false) => return self.unknown_app(name),
            Err(e) => return error(ErrorKind::Internal, format!("app `{name}`: cannot delete it: {e}")),
        }
        self.apps.write().unwrap_or_else(|p| p.into_inner()).remove(name);
        self.demand.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        self.clone().collect_garbage().await;
        tracing::info!(app = %name, "deleted");
        json(StatusCode::OK, &Deleted { deleted: name.to_string() })
    }

    /// Remove stored bundles that neither an app record nor a running app uses (off the executor).
    async fn collect_garbage(self: Arc<Self>) {
        let running: std::collections::HashSet<String> =
            self.apps.read().unwrap_or_else(|p| p.into_inner()).values().map(|a| a.bundle.clone()).collect();
        let gateway = self.clone();
        match tokio::task::spawn_blocking(move || gateway.store.collect_garbage(&running)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("cannot remove unused bundles: {e}"),
            Err(e) => tracing::warn!("cannot remove unused bundles: {e}"),
        }
    }
}

impl Gateway {
    fn status(&self, app: &App) -> AppStatus {
        let windows = self.demand.lock().unwrap_or_else(|p| p.into_inner()).get(&app.name).cloned().unwrap_or_default();
        AppStatus {
            demand_windows: windows.rates(),
            predicted_rps: windows.predicted(),
            replans: app.replans,
            replan_kept: windows.kept.clone(),
            name: app.name.clone(),
            bundle: app.bundle.clone(),
            deployed_at: app.deployed_at,
            tasks: app.task_names().into_iter().map(str::to_owned).collect(),
            slo_latency_ms: app.slo_latency.map(|d| d.as_millis() as u64),
            deployment: app.deployment.clone(),
            observed_factors: app.observed_factors(),
            observed_latencies: app.observed_latencies(),
            observed_glue: app.observed_glue(),
            observed_unpinned_ms: app.observed_unpinned_ms(),
            answered: app.answered(),
        }
    }
}

/// The kind, and so the HTTP status, of a failed invocation: the one place an app's errors meet the wire.
fn classify(e: &AppError, deadline: Instant) -> ErrorKind {
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
fn request_class(request: &Request<Incoming>) -> Option<String> {
    request.headers().get(CLASS_HEADER).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_owned())
}

/// The request's [`TIMEOUT_HEADER`], if it has one, cut to `max`; what is wrong (a 400) when it is not a positive
/// number of milliseconds.
fn request_timeout(request: &Request<Incoming>, max: Duration) -> Result<Option<Duration>, String> {
    match request.headers().get(TIMEOUT_HEADER).map(|v| v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok())) {
        None => Ok(None),
        // A client may not hold what it is admitted to for longer than the gateway allows.
        Some(Some(ms)) if ms > 0 => Ok(Some(Duration::from_millis(ms).min(max))),
        Some(_) => Err(format!("`{TIMEOUT_HEADER}` must be a positive number of milliseconds")),
    }
}

/// Check `Authorization: Bearer TOKEN` when a token is configured: the 401 reply when it is not given.
fn refuse_unauthorized(request: &Request<Incoming>, token: Option<&str>) -> Option<Reply> {
    let token = token?;
    let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let bearer = given.and_then(|v| v.get(..7).filter(|p| p.eq_ignore_ascii_case("bearer ")).map(|_| &v[7..]));
    match bearer {
        Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => None,
        Some(_) => {
            Some(error(ErrorKind::Unauthorized, "wrong token; pass the gateway's token with --token or JIG_TOKEN"))
        }
        None => Some(error(
            ErrorKind::Unauthorized,
            "this gateway needs a token: send `Authorization: Bearer TOKEN` (--token or JIG_TOKEN)",
        )),
    }
}

/// Connections each peer holds open.
type Peers = Arc<std::sync::Mutex<HashMap<std::net::IpAddr, u32>>>;

/// A connection a peer holds, given back when it closes.
struct PeerHold {
    peers: Peers,
    peer: std::net::IpAddr,
}

impl PeerHold {
    /// A hold for `peer`, unless it holds `max` already.
    fn take(peers: &Peers, peer: std::net::IpAddr, max: u32) -> Option<PeerHold> {
        let mut held = peers.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.entry(peer).or_default();
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(PeerHold { peers: peers.clone(), peer })
    }
}

impl Drop for PeerHold {
    fn drop(&mut self) {
        let mut held = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = held.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.peer);
            }
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The whole body, at most `max` bytes: 413 beyond, 400 when the client stops sending before its end.
async fn read_body(request: Request<Incoming>, max: u64, what: &str) -> Result<Bytes, Reply> {
    let too_large =
        || error(ErrorKind::TooLarge, format!("the {what} is larger than this gateway's limit of {max} bytes"));
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    match Limited::new(request.into_body(), max as usize).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(error(ErrorKind::InvalidRequest, format!("the {what} could not be read: {e}"))),
    }
}

fn text(code: StatusCode, body: impl Into<String>) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body.into())));
    *reply.status_mut() = code;
    reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    reply
}

fn json(code: StatusCode, value: &impl Serialize) -> Reply {
    let mut body = serde_json::to_vec_pretty(value).unwrap_or_default();
    body.push(b'\n');
    let mut reply = bytes_reply(code, Bytes::from(body));
    reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

fn bytes_reply(code: StatusCode, body: Bytes) -> Reply {
    let mut reply = Response::new(Full::new(body));
    *reply.status_mut() = code;
    reply
}

/// An error answer: its kind sets the status.
fn error(kind: ErrorKind, message: impl Into<String>) -> Reply {
    let code = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json(code, &ErrorBody { error: message.into(), kind })
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
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
    fn a_peer_holds_at_most_its_share_of_connections_and_gets_them_back_as_they_close() {
        use super::{PeerHold, Peers};
        let peers = Peers::default();
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = PeerHold::take(&peers, a, 2).unwrap();
        let _second = PeerHold::take(&peers, a, 2).unwrap();
        assert!(PeerHold::take(&peers, a, 2).is_none(), "a third from the same address");
        assert!(PeerHold::take(&peers, b, 2).is_some(), "another address has its own share");
        drop(first);
        assert!(PeerHold::take(&peers, a, 2).is_some(), "a closed connection gives its place back");
    }
}
