//! The app table and the control API over it: list, status, deploy (an upload stored, started, recorded, then
//! swapped in) and delete, one at a time under the control lock, and the garbage collection of unused bundles.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::http::Body;
use bytes::Bytes;
use hyper::{Request, StatusCode};
use jig_api::{AppList, AppStatus, Deleted, ErrorKind};
use jig_app::App;

use crate::Gateway;
use crate::cluster::ClusterApp;
use crate::http::{Reply, error, json, read_body};
use crate::store::{AppRecord, PutError};

/// The longest a bundle upload may take.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);

impl Gateway {
    /// The running app `name`, if there is one.
    pub(crate) fn app(&self, name: &str) -> Option<Arc<App>> {
        self.apps.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// The 404 for app `name`, listing the apps deployed.
    pub(crate) fn unknown_app(&self, name: &str) -> Reply {
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

    pub(crate) fn status(&self, app: &App) -> AppStatus {
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

    pub(crate) fn list(&self) -> Reply {
        // Lock order: `demand` is never taken while `apps` is held (the controller takes them one at a time).
        let apps: Vec<Arc<App>> = self.apps.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        json(StatusCode::OK, &AppList { apps: apps.iter().map(|a| self.status(a)).collect() })
    }

    pub(crate) async fn deploy(self: Arc<Self>, request: Request<Body>) -> Reply {
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
        let gateway = self.clone();
        if let Ok(Some(why)) = tokio::task::spawn_blocking(move || gateway.no_node_answers()).await {
            return error(ErrorKind::Unavailable, format!("app `{name}`: {why}"));
        }
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
        self.clear_unready(&name);
        self.demand.lock().unwrap_or_else(|p| p.into_inner()).entry(name.clone()).or_default().deployed();
        self.clone().collect_garbage().await;
        tracing::info!(app = %name, bundle = %app.bundle, "deployed");
        json(StatusCode::CREATED, &self.status(&app))
    }

    pub(crate) async fn delete(self: Arc<Self>, name: &str) -> Reply {
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
        self.clear_unready(name);
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

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
