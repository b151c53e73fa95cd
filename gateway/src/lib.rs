//! # jig-gateway
//!
//! The gateway: HTTP/1.1 on hyper + tokio, serving invocations, the control API and metrics over the apps
//! kept in the state directory (`store`), re-planned by a controller as their demand moves.
//!
//! The routes, their answers and error kinds are `jig-api`'s: this crate writes those types and nothing else.
//! Every error answer is a `jig_api::ErrorBody` whose kind sets its status (`jig_api::ErrorKind::status`); a
//! failed invocation is classified once, in `invoke::classify`. `GET /metrics` is OpenMetrics or the Prometheus text format
//! (`metrics`).
//!
//! This file holds the [`Gateway`] itself (its state, and how it starts); the rest, one concept a file:
//!
//! | File | Holds |
//! |---|---|
//! | `config.rs` | [`GatewayConfig`], its defaults and checks; the default (XDG) directories |
//! | `http.rs` | the accept loop and its connection caps, routing, the token check, body reading, answers and errors |
//! | `invoke.rs` | the invocation path: deadline, class, admission, the answer; `classify` (error → status) |
//! | `apps.rs` | the app table: list, status, deploy, delete, unused bundles collected |
//! | `capacity.rs` | what apps may plan within (this machine or its nodes), and `GET /v1/devices` |
//! | `replica.rs` | a replica following the cluster's apps and registered nodes |
//! | `cluster.rs` | the cluster state in etcd, shared by replicas |
//! | `controller.rs` | demand windows and re-planning |
//! | `predictor.rs` | IPA's load predictor |
//! | `store.rs` | the state directory: bundles and app records |
//! | `metrics/` | the Prometheus metrics, and the two formats a scraper may ask for |
//! | `ready.rs` | readiness: what the gateway and each model still lack before they are ready |
//! | `oip/` | the Open Inference Protocol (v2): models, metadata and runs shared by `http.rs` and `grpc.rs` |

#![deny(missing_docs)]

mod apps;
mod capacity;
pub mod cluster;
mod config;
mod connections;
mod controller;
mod http;
mod invoke;
mod metrics;
mod oip;
mod predictor;
mod ready;
mod replica;
mod store;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jig_app::ModelHosts;
use jig_app::{App, StartError};
use jig_model_host::launch::Launcher;
use jig_node::NodeInfo;
use tokio::sync::Semaphore;

use cluster::Cluster;
use jig_runtime::{Runtime, RuntimeConfig};

use crate::metrics::{Apps, Metrics};
use crate::store::{AppRecord, Store};
// What `oip` takes from the crate's root, where these lived before they had files of their own.
use crate::http::{Reply, bytes_reply, error, json, refuse_unauthorized};
use crate::invoke::{classify, request_class, request_timeout};

pub use config::{GatewayConfig, default_cache_dir, default_state_dir, xdg_dir};
pub use jig_api::{CLASS_HEADER, TIMEOUT_HEADER};

/// How long a node may take to answer: connecting, loading a model (its transfer included), each batch.
const NODE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a look at the nodes holds before a plan looks again (deploys and re-plans come in bursts).
const NODES_FRESH: Duration = Duration::from_secs(5);

/// A running gateway's shared state.
pub struct Gateway {
    config: GatewayConfig,
    runtime: Arc<Runtime>,
    /// Starts model instances on this machine's segments and on the nodes.
    hosts: ModelHosts,
    /// The nodes as last found, and when (see [`Gateway::nodes`]), and why each one not found was not.
    nodes: std::sync::Mutex<(Option<Instant>, Vec<NodeInfo>, Vec<String>)>,
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
    /// Connections open at once, over HTTP and gRPC together, and per peer.
    connections: connections::ConnectionCaps,
    /// Each app's demand, by name (see [`controller`]).
    demand: std::sync::Mutex<HashMap<String, controller::DemandWindows>>,
    /// IPA's load predictor, when one was found.
    peaks: Option<predictor::PeakPredictor>,
    /// Apps the gateway should run and does not, and why: being started from the cluster's state, or their
    /// start failed ([`ready`]).
    unready: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

impl Gateway {
    /// Open the state directory and start every app deployed there (with `etcd`: every app of the cluster).
    pub async fn start(config: GatewayConfig) -> anyhow::Result<Arc<Gateway>> {
        config.check()?;
        let cluster = match config.etcd.is_empty() {
            true => None,
            false => Some(Cluster::connect(&config.etcd, replica::replica_id(config.listen)).await?),
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
        let peaks = config::load_peak_predictor(config.ipa_predictor.as_deref())?;
        let node_access = config.node_access(NODE_TIMEOUT)?;
        let gateway = Arc::new(Gateway {
            metrics: Metrics::new(apps.clone()),
            connections: connections::ConnectionCaps::new(config.max_connections, config.max_connections_per_peer),
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
            unready: Default::default(),
        });
        if !gateway.uses_nodes() {
            let devices = gateway.hosts.launcher.devices();
            config::check_cores(gateway.config.cores, &devices)?;
            if let Some(gpus) = &gateway.config.gpus {
                config::check_gpus(gpus, &devices)?;
            }
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
                    // The version kept, for a client whose deploy was cut when the gateway went down.
                    tracing::info!(app = %name, bundle = %app.bundle, deployed_at = app.deployed_at, "restored");
                    gateway.apps.write().unwrap_or_else(|p| p.into_inner()).insert(name, app);
                }
                Err(e) => {
                    tracing::error!(app = %name, "cannot restore: {e:#}");
                    gateway.set_unready(&name, format!("cannot start: {e:#}"));
                }
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
}
