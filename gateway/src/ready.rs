//! Readiness that means it: the gateway is ready (`GET /readyz`, `GET /v2/health/ready`) when every app it
//! should run runs with an instance in each of its model slots, as Triton's strict readiness has every model
//! ready; a model (`GET /v2/models/{model}/ready`) when it, or each slot of the app it names, has one. An app
//! being started from the cluster's state, or whose start failed, keeps the gateway unready until it runs or is
//! deleted, so a load balancer sends a replica no traffic it would fail. Liveness (`/healthz`,
//! `/v2/health/live`) is only that the gateway answers.

use hyper::StatusCode;
use jig_app::App;

use crate::Gateway;
use crate::http::{Reply, text};

impl Gateway {
    /// Note that the app `name` should run and does not, and why.
    pub(crate) fn set_unready(&self, name: &str, why: impl Into<String>) {
        self.unready.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), why.into());
    }

    /// The app `name` runs, or was deleted: it no longer keeps the gateway unready.
    pub(crate) fn clear_unready(&self, name: &str) {
        self.unready.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }

    /// Why the gateway is not ready, one line for each app that should run and does not and each model slot
    /// without an instance; empty when it is ready.
    pub(crate) fn unready(&self) -> Vec<String> {
        let mut why: Vec<String> = self
            .unready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(app, reason)| format!("app `{app}`: {reason}"))
            .collect();
        let apps = self.apps.read().unwrap_or_else(|p| p.into_inner());
        for app in apps.values() {
            why.extend(idle_slots(app));
        }
        why.sort();
        why
    }

    /// `GET /readyz`: 200 `ready`, or 503 with what is not.
    pub(crate) fn readyz(&self) -> Reply {
        match self.unready() {
            why if why.is_empty() => text(StatusCode::OK, "ready\n"),
            why => text(StatusCode::SERVICE_UNAVAILABLE, format!("not ready:\n{}\n", why.join("\n"))),
        }
    }

    /// Why a model is not ready, or `None` when the app `app` (all its slots, or only `slot`) is.
    pub(crate) fn model_unready(&self, app: &str, slot: Option<&str>) -> Option<String> {
        let reason = self.unready.lock().unwrap_or_else(|p| p.into_inner()).get(app).cloned();
        let why = match (reason, self.app(app)) {
            (Some(reason), None) => vec![format!("app `{app}`: {reason}")],
            (_, Some(running)) => idle_slots(&running)
                .into_iter()
                .chain(running.unloaded.iter().map(|s| {
                    format!("model `{app}.{s}` is unloaded (POST /v2/repository/models/{app}.{s}/load loads it)")
                }))
                .filter(|line| slot.is_none_or(|s| line.starts_with(&format!("model `{app}.{s}`"))))
                .collect(),
            (None, None) => return None,
        };
        (!why.is_empty()).then(|| format!("not ready: {}", why.join("; ")))
    }
}

/// A line for each of the app's model slots that has no running instance (those model control unloaded aside:
/// the gateway is ready without them, as Triton's is without its unloaded models).
fn idle_slots(app: &App) -> Vec<String> {
    app.models()
        .iter()
        .filter(|(slot, pool)| pool.instances().next().is_none() && !app.unloaded.contains(*slot))
        .map(|(slot, _)| format!("model `{}.{slot}` has no running instance", app.name))
        .collect()
}
