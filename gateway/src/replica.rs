//! A gateway replica's side of the cluster ([`crate::cluster`]): its name there, the nodes registered in it, and
//! the apps it records, run here as the cluster planned them and followed as they change.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use jig_app::{App, StartError};

use crate::cluster::{Change, ClusterApp};
use crate::{Gateway, NODES_FRESH, controller};

impl Gateway {
    /// Read the nodes registered in the cluster twice every [`NODES_FRESH`], forever; when they change, look at
    /// the nodes again at once (`jig status` and the next plan see a node as soon as it registers).
    pub(crate) async fn track_registrations(self: Arc<Self>) {
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

    /// Run `wanted` as the cluster records it (its deployment as planned, not planned again here), unless this
    /// replica runs it already; a failure is logged and the app keeps what it ran.
    pub(crate) async fn apply(self: Arc<Self>, wanted: ClusterApp) {
        let _control = self.control.lock().await;
        let name = wanted.record.name.clone();
        let running = self.app(&name);
        if running.as_ref().is_some_and(|a| {
            (a.bundle.as_str(), a.deployed_at, &a.deployment)
                == (wanted.record.bundle.as_str(), wanted.record.deployed_at, &wanted.deployment)
        }) {
            return;
        }
        if running.is_none() {
            self.set_unready(&name, "starting");
        }
        let gateway = self.clone();
        let record = wanted.record.clone();
        let previous = running.clone();
        let started = tokio::task::spawn_blocking(move || -> Result<App, StartError> {
            let bundle = gateway.store.bundle(&record.bundle)?;
            let (runtime, hosts) = (&gateway.runtime, &gateway.hosts);
            let (hash, at, deployment) = (&record.bundle, record.deployed_at, wanted.deployment);
            App::start_from(runtime, hosts, &bundle, hash, at, deployment, previous.as_deref(), Default::default())
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
                self.clear_unready(&name);
                tracing::info!(app = %name, "running the cluster's deployment");
            }
            Ok(Err(e)) => self.cannot_run(&name, e.to_string()),
            Err(e) => self.cannot_run(&name, e.to_string()),
        }
    }

    /// A failed start of the cluster's deployment: logged, and keeping this replica unready only when it runs
    /// no version of the app (one it runs serves on).
    fn cannot_run(&self, name: &str, why: String) {
        tracing::error!(app = %name, "cannot run the cluster's deployment: {why}");
        if self.app(name).is_none() {
            self.set_unready(name, format!("cannot start: {why}"));
        }
    }

    /// Follow the cluster's apps from `revision` on, forever: run what is deployed or re-planned, stop what is
    /// deleted. When the watch breaks (etcd unreachable), keep serving what runs, and read them all again once
    /// etcd answers.
    pub(crate) async fn follow(self: Arc<Self>, mut revision: i64) {
        let Some(cluster) = self.cluster.clone() else { return };
        loop {
            match cluster.watch_apps(revision).await {
                Ok(mut changes) => {
                    while let Some(change) = changes.recv().await {
                        match change {
                            Change::Put(app) => self.clone().apply(*app).await,
                            Change::Deleted(name) => {
                                let _control = self.control.lock().await;
                                self.clear_unready(&name);
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
                    self.unready.lock().unwrap_or_else(|p| p.into_inner()).retain(|name, _| names.contains(name));
                    revision = now;
                }
                Err(e) => tracing::warn!("cluster state (etcd) unreachable: {e:#}; serving the apps as last seen"),
            }
        }
    }
}

/// A replica's name in the cluster: its host and port, and its process (a restarted replica is a new one).
pub(crate) fn replica_id(listen: SocketAddr) -> String {
    let host = jig_model_host::device::host_name().unwrap_or_else(|| "gateway".into());
    format!("{host}-{}-{}", listen.port(), std::process::id())
}
