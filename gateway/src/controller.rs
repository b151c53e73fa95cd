//! The controller (JigsawServe §3.1): measures each app's demand in windows and re-plans in the background
//! when the prediction moves or violations rise.
//!
//! Every `demand_window` the requests that arrived in the window that ended become a rate (measured over the
//! window's actual length). The predicted demand is the mean of the last five rates × (1 + 5% slack)
//! (`jig_planner::spec::DemandSpec::predict`). An app planned by IPA is decided on its own clock instead, every
//! adaptation interval (`[ipa] interval_s`, 10 s by default), as IPA adapts: its demand is the largest load of
//! the next 20 s that IPA's predictor ([`crate::predictor`]) sees coming, once 120 s of its arrivals are
//! counted per second and the gateway has the predictor, else the mean load of the last interval; both
//! × (1 + 5% slack). A re-plan runs when
//! the prediction differs from the demand the current deployment was planned for by more than
//! `replan_threshold` (relative), when more than 1% of the window's requests violated their SLO
//! (`jig_planner::spec::Replan`, which `jig simulate --replan-threshold` follows too), or when a
//! multiplicative factor observed on an edge between model tasks (over the last
//! [`FACTOR_WINDOWS`](jig_app::FACTOR_WINDOWS) windows and the open one, at least
//! [`MIN_FACTOR_SAMPLES`](jig_app::deployment::MIN_FACTOR_SAMPLES) invocations) moved by more than
//! `replan_threshold` from the one planned with, or when a planned group's observed batch latency (over at
//! least [`MIN_LATENCY_SAMPLES`](jig_app::deployment::MIN_LATENCY_SAMPLES) batches of one size) refines its
//! profile rows by more than `replan_threshold` beyond the last plan's refinement; a re-plan plans with the
//! observed factors and the refined rows (`jig_app::deployment::refine`). A surge does not wait for the window:
//! each second, an app whose load over the last [`Replan::SURGE_S`] seconds exceeds what it was planned for by
//! more than `replan_threshold` (and than chance) is re-planned for that load at once. Nor do the first costs
//! observed: a deployment planned before its app answered [`MIN_FACTOR_SAMPLES`] requests (from the bundle's
//! declared costs) is re-planned, for the same demand, as soon as it has and what it observed drifted. A new
//! deployment different from the running one is applied by starting a new copy of the app (glue loaded,
//! instances started) and swapping it in: requests running on the old copy finish there, so none is lost.
//! Apps without a profile table have nothing to re-plan.
//!
//! A gateway with `jig node`s also re-plans, at once, every app with an instance on a node that stopped
//! answering ([`Gateway::watch_nodes`]): the plan counts only the nodes that answer.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use jig_planner::spec::{DemandSpec, Replan};

use crate::predictor::HISTORY_S;

use super::Gateway;
use crate::cluster::ClusterApp;
use crate::store::AppRecord;
use jig_app::App;
use jig_app::deployment::{
    Deployment, MIN_FACTOR_SAMPLES, Observations, ObservedFactor, ObservedLatency, PlannedFactor, defaults_unobserved,
    latencies_drifted, observed_cpu_ms,
};

/// One app's demand: the open window's counts and the rates of closed ones.
#[derive(Debug, Clone, Default)]
pub struct DemandWindows {
    arrivals: u64,
    violations: u64,
    /// Rates of the last closed windows (req/s), oldest first; at most [`DemandSpec::WINDOWS`].
    rates: VecDeque<f64>,
    /// Violations / arrivals of the last closed window.
    violation_share: f64,
    /// The demand of the last plan, when it is newer than the running deployment's (a re-plan that changed
    /// nothing but the demand).
    planned_for: Option<f64>,
    /// The factors of the last plan, likewise.
    planned_factors: Option<Vec<PlannedFactor>>,
    /// The latencies the last plan refined its profile rows with, likewise.
    planned_refined: Option<Vec<ObservedLatency>>,
    /// What the last re-plan planned from; `None` since its deploy (planned before it answered any, for the
    /// windows' rates).
    last_replan: Option<LastReplan>,
    /// Why the last re-plan kept the running deployment, when it found no plan.
    pub kept: Option<String>,
    /// Arrivals in each second, the last of them the current one, for IPA's predictor: at most
    /// [`HISTORY_S`] + 1, the earliest no older than the first counted.
    seconds: VecDeque<u64>,
    /// The second (of [`now_s`]) the last entry of `seconds` counts.
    second: u64,
    /// When an app with an adaptation interval of its own was last decided on.
    adapted: Option<std::time::Instant>,
    /// The load of the last surge re-planned for, until the window closes: a surge beyond what the machine
    /// serves is re-planned for once, not every second.
    surged_to: Option<f64>,
}

/// What a re-plan planned from, for [`Gateway::observed_due`].
#[derive(Debug, Clone)]
struct LastReplan {
    /// The requests the app had answered.
    answered: u64,
    /// The rates it planned for.
    rates: Vec<f64>,
    /// Whether a default instance was sized before its rate was observed ([`defaults_unobserved`]).
    defaults_unobserved: bool,
}

/// Seconds since the gateway started counting: the clock of per-second arrivals.
fn now_s() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs()
}

impl DemandWindows {
    /// A new deploy: its deployment was planned for the demand it says.
    pub fn deployed(&mut self) {
        self.planned_for = None;
        self.planned_factors = None;
        self.planned_refined = None;
        self.last_replan = None;
        self.kept = None;
        self.surged_to = None;
    }

    /// Start from stored rates (after a restart).
    pub fn from_rates(rates: &[f64]) -> Self {
        let keep = rates.len().saturating_sub(DemandSpec::WINDOWS);
        DemandWindows { rates: rates[keep..].iter().copied().collect(), ..Self::default() }
    }

    /// Count a request that arrived.
    pub fn arrived(&mut self) {
        self.arrivals += 1;
        self.arrived_at(now_s());
    }

    /// Count an arrival in second `now` (of [`now_s`]).
    fn arrived_at(&mut self, now: u64) {
        self.advance(now);
        if self.seconds.is_empty() {
            (self.second, self.seconds) = (now, VecDeque::from([0]));
        }
        *self.seconds.back_mut().expect("the current second") += 1;
    }

    /// Move the current second to `now`, the seconds between counting none.
    fn advance(&mut self, now: u64) {
        if self.seconds.is_empty() || now <= self.second {
            return;
        }
        let gap = (now - self.second).min(HISTORY_S as u64 + 1);
        self.seconds.extend(std::iter::repeat_n(0, gap as usize));
        self.second = now;
        while self.seconds.len() > HISTORY_S + 1 {
            self.seconds.pop_front();
        }
    }

    /// Arrivals in each of the [`HISTORY_S`] whole seconds before second `now`, oldest first, once they have
    /// been counted that long.
    fn history(&mut self, now: u64) -> Option<Vec<f64>> {
        self.advance(now);
        let whole = self.seconds.len().checked_sub(1)?;
        (whole >= HISTORY_S)
            .then(|| self.seconds.iter().take(whole).skip(whole - HISTORY_S).map(|&n| n as f64).collect())
    }

    /// Mean arrivals per second over the `n` whole seconds before second `now`, once counted that long.
    fn recent(&mut self, now: u64, n: usize) -> Option<f64> {
        self.advance(now);
        let whole = self.seconds.len().checked_sub(1)?;
        (n > 0 && whole >= n).then(|| self.seconds.iter().take(whole).skip(whole - n).sum::<u64>() as f64 / n as f64)
    }

    /// The load of the last [`Replan::SURGE_S`] whole seconds before second `now`, when it is a surge
    /// ([`Replan::surge`]) over both what the deployment was planned for and the last surge re-planned for: a
    /// burst to re-plan for at once, without waiting for the window to close.
    fn surge(&mut self, now: u64, planned_for: f64, threshold: f64) -> Option<f64> {
        let load = self.recent(now, Replan::SURGE_S)?;
        let known = planned_for.max(self.surged_to.unwrap_or(0.0));
        Replan { threshold }.surge(load, known).then(|| {
            self.surged_to = Some(load);
            load
        })
    }

    /// Count a request that missed its SLO (dropped, late, refused).
    pub fn violated(&mut self) {
        self.violations += 1;
    }

    /// Close the window that lasted `length`.
    pub fn close(&mut self, length: Duration) {
        self.rates.push_back(self.arrivals as f64 / length.as_secs_f64().max(1e-9));
        while self.rates.len() > DemandSpec::WINDOWS {
            self.rates.pop_front();
        }
        self.violation_share = if self.arrivals == 0 { 0.0 } else { self.violations as f64 / self.arrivals as f64 };
        self.arrivals = 0;
        self.violations = 0;
        self.surged_to = None;
    }

    pub fn rates(&self) -> Vec<f64> {
        self.rates.iter().copied().collect()
    }

    /// The predicted demand, once a window has closed.
    pub fn predicted(&self) -> Option<f64> {
        if self.rates.is_empty() {
            return None;
        }
        DemandSpec { windows: self.rates(), slack: None }.predict().ok()
    }

    /// Whether the deployment planned for `planned_for` req/s should be re-planned: the demand predicted from
    /// `rates` (the windows', or an interval's load) moved past `threshold` (down: with the last window's load),
    /// or the last window's violations passed 1% ([`Replan::due`]).
    pub fn should_replan(&self, rates: &[f64], planned_for: f64, threshold: f64) -> bool {
        let demand = DemandSpec { windows: rates.to_vec(), slack: None };
        let (Ok(predicted), Ok(latest)) = (demand.predict(), demand.latest()) else { return false };
        Replan { threshold }.due(planned_for, predicted, latest, self.violation_share)
    }
}

/// Whether a factor `observed` over enough invocations differs from the one `planned` by more than `threshold`
/// of it.
fn factors_drifted(observed: &[ObservedFactor], planned: &[PlannedFactor], threshold: f64) -> bool {
    observed.iter().filter(|o| o.samples >= MIN_FACTOR_SAMPLES).any(|o| {
        let planned = planned.iter().find(|p| p.from == o.from && p.to == o.to);
        match (o.factor, planned) {
            (Some(seen), Some(p)) => (seen - p.factor).abs() > threshold * p.factor.max(0.1),
            _ => false,
        }
    })
}

/// Whether what `app` observed (its factors, batch latencies, and the CPU a request costs outside its instances)
/// moved by more than `threshold` from what its last plan assumed.
fn drifted(app: &App, windows: &DemandWindows, threshold: f64) -> bool {
    let planned_factors = windows.planned_factors.as_ref().unwrap_or(&app.deployment.factors);
    let refined = windows.planned_refined.as_ref().unwrap_or(&app.deployment.refined);
    factors_drifted(&app.observed_factors(), planned_factors, threshold)
        || latencies_drifted(refined, &app.observed_latencies(), threshold)
        || cpu_drifted(app, threshold)
}

/// Whether `app` is of glue alone, its capacity what the CPU its glue costs a request leaves the cores: planned for
/// no demand, but re-planned as that cost is observed.
fn sized_by_glue(app: &App) -> bool {
    app.deployment.demand_rps.is_none() && app.deployment.unplanned_cpu_ms.is_some()
}

/// Whether the CPU a request costs outside the instances, observed over enough requests, differs from what the
/// deployment was planned with by more than `threshold` of it (a millisecond at least).
fn cpu_drifted(app: &App, threshold: f64) -> bool {
    let planned = app.deployment.unplanned_cpu_ms.unwrap_or(0.0);
    observed_cpu_ms(app.answered(), &app.observed_glue(), app.observed_unpinned_ms())
        .is_some_and(|seen| (seen - planned).abs() > threshold * planned.max(1.0))
}

impl Gateway {
    /// Close demand windows and re-plan, forever.
    pub(super) async fn control(self: Arc<Self>) {
        let window = Duration::from_secs_f64(self.config.demand_window_s);
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + window, window);
        // After a slow re-plan, wait a whole window again rather than closing short ones in a burst.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut opened = std::time::Instant::now();
        loop {
            ticks.tick().await;
            let length = opened.elapsed();
            opened = std::time::Instant::now();
            // Lock order: `apps` is released before `demand` is taken (see `Gateway::list`).
            let apps: Vec<Arc<App>> = self.apps.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
            let measured: Vec<(Arc<App>, Vec<f64>)> = {
                let mut demand = self.demand.lock().unwrap_or_else(|p| p.into_inner());
                apps.iter()
                    .map(|app| {
                        let windows = demand.entry(app.name.clone()).or_default();
                        windows.close(length);
                        app.close_window();
                        (app.clone(), windows.rates())
                    })
                    .collect()
            };
            // With replicas, each publishes what it measured and the leader plans from the sum; the others do not
            // re-plan.
            let measured = match &self.cluster {
                None => measured,
                Some(cluster) => {
                    for (app, rates) in &measured {
                        if let Err(e) = cluster.publish_demand(&app.name, rates).await {
                            tracing::warn!(app = %app.name, "cannot publish its demand to the cluster: {e:#}");
                        }
                    }
                    if !cluster.is_leader() {
                        continue;
                    }
                    let mut summed = Vec::with_capacity(measured.len());
                    for (app, rates) in measured {
                        summed.push((app.clone(), cluster.demand(&app.name).await.unwrap_or(rates)));
                    }
                    summed
                }
            };
            let due: Vec<(Arc<App>, Vec<f64>)> = {
                let mut demand = self.demand.lock().unwrap_or_else(|p| p.into_inner());
                measured
                    .into_iter()
                    .filter_map(|(app, rates)| {
                        let windows = demand.entry(app.name.clone()).or_default();
                        // An app that adapts on its own clock is decided there (`adapt`).
                        app.adaptation_interval.is_none().then(|| self.replan_due(&app, windows, rates))?
                    })
                    .collect()
            };
            self.replan_all(due).await;
        }
    }

    /// Each second, decide on the apps with an adaptation interval of their own (IPA's), each every interval, and
    /// re-plan the others at once for a surge ([`Replan::surge`]), forever.
    pub(super) async fn adapt(self: Arc<Self>) {
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if !self.leads() {
                continue;
            }
            let apps: Vec<Arc<App>> = self.apps.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
            let due: Vec<(Arc<App>, Vec<f64>)> = {
                let mut demand = self.demand.lock().unwrap_or_else(|p| p.into_inner());
                apps.iter()
                    .filter_map(|app| {
                        let windows = demand.entry(app.name.clone()).or_default();
                        let Some(every) = app.adaptation_interval else {
                            return self.surge_due(app, windows).or_else(|| self.observed_due(app, windows));
                        };
                        if windows.adapted.is_some_and(|at| at.elapsed() < every) {
                            return None;
                        }
                        windows.adapted = Some(std::time::Instant::now());
                        let now = now_s();
                        // IPA plans for the peak its predictor sees coming, once it has the app's history.
                        let peak = self.peaks.as_ref().and_then(|peaks| {
                            let history = windows.history(now)?;
                            peaks.predict(&history).inspect_err(|e| tracing::warn!(app = %app.name, "{e:#}")).ok()
                        });
                        let seconds = (every.as_secs_f64().round() as usize).min(HISTORY_S);
                        let load = peak.or_else(|| windows.recent(now, seconds))?;
                        self.replan_due(app, windows, vec![load])
                    })
                    .collect()
            };
            self.replan_all(due).await;
        }
    }

    /// `app`, with the load of a surge to re-plan for now ([`DemandWindows::surge`]), when its deployment is
    /// planned (an unplanned one has nothing to re-plan with).
    fn surge_due(&self, app: &Arc<App>, windows: &mut DemandWindows) -> Option<(Arc<App>, Vec<f64>)> {
        let planned_for = windows.planned_for.or(app.deployment.demand_rps)?;
        let load = windows.surge(now_s(), planned_for, self.config.replan_threshold)?;
        tracing::info!(app = %app.name, load_rps = load, planned_rps = planned_for, "a surge: re-planning now");
        Some((app.clone(), vec![load]))
    }

    /// Re-plan at once every app with an instance on a node that stopped answering: its instances are placed
    /// on the nodes that remain (or, if none has room, the app runs its default deployment and says so).
    /// Looks every [`NODES_FRESH`](super::NODES_FRESH), forever; a gateway without nodes has nothing to watch.
    pub(super) async fn watch_nodes(self: Arc<Self>) {
        if !self.uses_nodes() {
            return;
        }
        let mut ticks = tokio::time::interval(super::NODES_FRESH);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if !self.leads() {
                continue;
            }
            let gateway = self.clone();
            let Ok(up) = tokio::task::spawn_blocking(move || gateway.nodes(true)).await else { continue };
            let apps: Vec<Arc<App>> = self.apps.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
            let lost = |app: &App| {
                let places = app.deployment.instances.iter().flat_map(|i| &i.places);
                places.filter_map(|p| p.node.clone()).find(|node| !up.iter().any(|n| &n.addr == node))
            };
            let due: Vec<(Arc<App>, Vec<f64>)> = {
                let mut demand = self.demand.lock().unwrap_or_else(|p| p.into_inner());
                apps.iter()
                    .filter_map(|app| {
                        let node = lost(app)?;
                        tracing::warn!(app = %app.name, %node, "node lost; re-planning onto the nodes that answer");
                        Some((app.clone(), demand.entry(app.name.clone()).or_default().rates()))
                    })
                    .collect()
            };
            self.replan_all(due).await;
        }
    }

    /// Whether this gateway runs the controller: always alone, the leader among replicas.
    fn leads(&self) -> bool {
        self.cluster.as_ref().is_none_or(|c| c.is_leader())
    }

    /// The rates to re-plan `app` with ([`DemandSpec::to_re_plan`] of `rates`) when a re-plan is due: the demand
    /// predicted from `rates` moved more than `replan_threshold` from what it was planned for, or the last
    /// window's violations passed 1%, or its factors or batch latencies drifted; for an app of glue alone, the CPU
    /// its glue costs a request drifted.
    fn replan_due(&self, app: &Arc<App>, windows: &DemandWindows, rates: Vec<f64>) -> Option<(Arc<App>, Vec<f64>)> {
        let threshold = self.config.replan_threshold;
        let due = match windows.planned_for.or(app.deployment.demand_rps) {
            Some(planned_for) => {
                windows.should_replan(&rates, planned_for, threshold) || drifted(app, windows, threshold)
            }
            None => sized_by_glue(app) && cpu_drifted(app, threshold),
        };
        due.then(|| (app.clone(), DemandSpec { windows: rates, slack: None }.to_re_plan().windows))
    }

    /// `app`, to re-plan at once for the demand it is planned for, when that plan was made before it had answered
    /// [`MIN_FACTOR_SAMPLES`] requests (from the bundle's declared costs and factors and unrefined profile rows),
    /// it has answered them since, and what it observed drifted from what the plan assumed; or before its default
    /// instances' rates were observed ([`defaults_unobserved`]), and now they are. An app of glue alone is sized
    /// by what its glue costs, so its declared `cpu_ms` gives way to the observed likewise. The first costs
    /// measured do not wait for a demand window (five minutes by default). The plans that follow are made from
    /// observations, so each happens once a deploy.
    fn observed_due(&self, app: &Arc<App>, windows: &DemandWindows) -> Option<(Arc<App>, Vec<f64>)> {
        if app.deployment.demand_rps.is_none() && !sized_by_glue(app) {
            return None;
        }
        let last = windows.last_replan.clone().unwrap_or_else(|| LastReplan {
            answered: 0,
            rates: windows.rates(),
            defaults_unobserved: defaults_unobserved(&app.deployment, &Observations::default()),
        });
        let first = last.answered < MIN_FACTOR_SAMPLES && app.answered() >= MIN_FACTOR_SAMPLES;
        if first && drifted(app, windows, self.config.replan_threshold) {
            tracing::info!(app = %app.name, "re-planning with the costs observed since it was planned");
            return Some((app.clone(), last.rates));
        }
        (last.defaults_unobserved && !defaults_unobserved(&app.deployment, &app.observations())).then(|| {
            tracing::info!(app = %app.name, "re-planning with the rates its default instances were observed to serve");
            (app.clone(), last.rates)
        })
    }

    /// Re-plan each of `due` in turn (one re-plan at a time: see `replan`).
    async fn replan_all(self: &Arc<Self>, due: Vec<(Arc<App>, Vec<f64>)>) {
        for (app, rates) in due {
            if let Err(e) = self.clone().replan(&app, rates).await {
                tracing::warn!(app = %app.name, "re-planning failed: {e:#}");
            }
        }
    }

    /// Plan `app` for `rates`; apply the new deployment if it differs.
    async fn replan(self: Arc<Self>, app: &Arc<App>, rates: Vec<f64>) -> anyhow::Result<()> {
        let _control = self.control.lock().await;
        let began = std::time::Instant::now();
        // A deploy or delete while this waited for the lock: the tick's plan is stale.
        let current = self.apps.read().unwrap_or_else(|p| p.into_inner()).get(&app.name).cloned();
        if !current.is_some_and(|c| Arc::ptr_eq(&c, app)) {
            return Ok(());
        }
        let gateway = self.clone();
        let (name, hash, deployed_at) = (app.name.clone(), app.bundle.clone(), app.deployed_at);
        let current = app.deployment.clone();
        let observed = app.observations();
        let observed_answered = observed.answered;
        let unloaded = app.unloaded.clone();
        let running = app.clone();
        let clustered = self.cluster.is_some();
        let started = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<Replanned>> {
            let bundle = gateway.store.bundle(&hash)?;
            let capacity = gateway.free_capacity(Some(&name));
            let mut deployment = jig_app::deployment::plan(&bundle, &rates, &capacity, &observed);
            // Slots model control unloaded stay so.
            deployment.instances.retain(|planned| !unloaded.contains(&planned.slot));
            {
                let mut demand = gateway.demand.lock().unwrap_or_else(|p| p.into_inner());
                let windows = demand.entry(name.clone()).or_default();
                let defaults_unobserved = defaults_unobserved(&deployment, &observed);
                windows.last_replan =
                    Some(LastReplan { answered: observed_answered, rates: rates.clone(), defaults_unobserved });
                windows.kept = kept(&current, &deployment);
                if let Some(why) = &windows.kept {
                    tracing::warn!(app = %name, "{why}");
                    return Ok(None);
                }
                windows.planned_for = deployment.demand_rps;
                windows.planned_factors = Some(deployment.factors.clone());
                windows.planned_refined = Some(deployment.refined.clone());
            }
            if deployment.same_instances(&current) {
                return Ok(Some(Replanned::Same(deployment)));
            }
            tracing::info!(app = %name, demand_rps = ?deployment.demand_rps, "re-planned; starting the new deployment");
            let record = AppRecord { name: name.clone(), bundle: hash.clone(), deployed_at, demand_windows: rates };
            if !clustered {
                gateway.store.put_app(&record)?;
            }
            // What both plans run alike keeps running: only what changed loads beside it.
            let (runtime, hosts) = (&gateway.runtime, &gateway.hosts);
            let app =
                App::start_from(runtime, hosts, &bundle, &hash, deployed_at, deployment, Some(&running), unloaded)?;
            Ok(Some(Replanned::New(Box::new(app), record)))
        })
        .await??;
        // With replicas, the cluster's record is what every replica runs: the new plan applies once it is there.
        if let (Some(cluster), Some(Replanned::New(new, record))) = (&self.cluster, &started) {
            cluster.put_app(&ClusterApp { record: record.clone(), deployment: new.deployment.clone() }).await?;
        }
        let new_instances = matches!(started, Some(Replanned::New(..)));
        let replaced = match started {
            Some(Replanned::New(mut new, _)) => {
                new.replans = app.replans + 1;
                new.continue_counts(app);
                Some(*new)
            }
            // The same instances: this replica serves on with the plan's demand, capacity and costs.
            Some(Replanned::Same(plan)) if self.cluster.is_none() => app.with_plan(plan),
            _ => None,
        };
        let mut apps = self.apps.write().unwrap_or_else(|p| p.into_inner());
        // Still the same deploy (no redeploy or delete meanwhile): swap.
        if let Some(new) = replaced
            && apps.get(&app.name).is_some_and(|a| Arc::ptr_eq(a, app))
        {
            apps.insert(app.name.clone(), Arc::new(new));
            // From the decision to the swap, of which `jig simulate` counts the solve alone.
            let took_ms = began.elapsed().as_secs_f64() * 1000.0;
            if new_instances {
                tracing::info!(app = %app.name, took_ms, "the new deployment serves");
            } else {
                tracing::info!(app = %app.name, took_ms, "the running instances serve the new plan");
            }
        }
        Ok(())
    }
}

/// What a re-plan found: new instances to start (and the app's record to keep), or the running instances under
/// a plan of other rates.
enum Replanned {
    New(Box<App>, AppRecord),
    Same(Deployment),
}

/// Why a re-plan keeps the `current` deployment instead of `new`: `new` is the unplanned default (the planner
/// found no plan) where `current` is planned, and serves better.
fn kept(current: &Deployment, new: &Deployment) -> Option<String> {
    (new.demand_rps.is_none() && current.demand_rps.is_some()).then(|| {
        let why = new.source.strip_prefix("default: ").unwrap_or(&new.source);
        format!("the last re-plan found no plan, so the running deployment was kept: {why}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_are_counted_per_second_for_the_peak_predictor() {
        let mut w = DemandWindows::default();
        assert_eq!(w.history(5), None, "nothing counted yet");
        // i % 7 + 1 arrivals in second 10 + i.
        let count = |w: &mut DemandWindows, seconds: std::ops::Range<u64>| {
            for i in seconds {
                (0..=i % 7).for_each(|_| w.arrived_at(10 + i));
            }
        };
        count(&mut w, 0..119);
        assert_eq!(w.history(129), None, "119 whole seconds counted");
        count(&mut w, 119..121);
        let history = w.history(130).expect("120 whole seconds");
        assert_eq!(history.len(), HISTORY_S);
        assert_eq!(history[..3], [1.0, 2.0, 3.0], "oldest first, from second 10");
        assert_eq!(history[119], 1.0, "second 129: 119 % 7 + 1 arrivals");
        // Quiet seconds count none; a long quiet keeps the history all zeros, never longer.
        let later = w.history(140).unwrap();
        assert_eq!(later[111..], [0.0; 9], "seconds 131 to 139: {later:?}");
        assert_eq!(w.history(10_000).unwrap(), vec![0.0; HISTORY_S]);
        assert!(w.seconds.len() <= HISTORY_S + 1);
    }

    #[test]
    fn an_interval_s_load_is_the_mean_of_its_whole_seconds() {
        let mut w = DemandWindows::default();
        assert_eq!(w.recent(3, 2), None, "nothing counted yet");
        (0..4).for_each(|_| w.arrived_at(20));
        assert_eq!(w.recent(20, 1), None, "second 20 is not over");
        (0..8).for_each(|_| w.arrived_at(21));
        assert_eq!(w.recent(22, 1), Some(8.0));
        assert_eq!(w.recent(22, 2), Some(6.0));
        assert_eq!(w.recent(22, 3), None, "two whole seconds counted");
        assert_eq!(w.recent(23, 3), Some(4.0), "second 22 was quiet");
    }

    #[test]
    fn a_burst_of_ten_times_the_planned_demand_is_a_surge_within_seconds_and_once_per_level() {
        let mut w = DemandWindows::default();
        // 2 req/s as planned for ten seconds: no surge.
        for second in 0..10 {
            (0..2).for_each(|_| w.arrived_at(second));
            assert_eq!(w.surge(second + 1, 2.0, 0.2), None, "second {second}");
        }
        // Then 20 req/s: a surge within the burst's first seconds, for the load the last 3 s saw.
        (0..20).for_each(|_| w.arrived_at(10));
        let first = w.surge(11, 2.0, 0.2).expect("one second of 10x is already a surge over 3 s");
        assert!((first - 8.0).abs() < 1e-9, "(2 + 2 + 20) / 3: {first}");
        (0..20).for_each(|_| w.arrived_at(11));
        // 42 arrivals where 24 are expected at 8 req/s: more than 1.2×, but within four deviations (43.6).
        assert_eq!(w.surge(12, 2.0, 0.2), None, "within chance of the last surge's load");
        (0..20).for_each(|_| w.arrived_at(12));
        let second = w.surge(13, 2.0, 0.2).expect("60 arrivals where 24 are expected");
        assert!((second - 20.0).abs() < 1e-9, "{second}");
        (0..20).for_each(|_| w.arrived_at(13));
        assert_eq!(w.surge(14, 2.0, 0.2), None, "20 req/s was re-planned for already");
        // A closed window forgets it: the next surge over the plan counts again.
        w.close(Duration::from_secs(14));
        (0..20).for_each(|_| w.arrived_at(14));
        assert!(w.surge(15, 2.0, 0.2).is_some());
    }

    #[test]
    fn arrivals_above_the_plan_by_chance_are_no_surge() {
        let mut w = DemandWindows::default();
        // Planned for 2 req/s: 4 + 3 + 2 arrivals are 1.5× the plan, as Poisson arrivals at 2 req/s are in about
        // one 3-s span in six.
        for (second, arrivals) in [(0, 2), (1, 2), (2, 4), (3, 3), (4, 2)] {
            (0..arrivals).for_each(|_| w.arrived_at(second));
        }
        assert_eq!(w.recent(5, Replan::SURGE_S), Some(3.0));
        assert_eq!(w.surge(5, 2.0, 0.2), None, "9 arrivals where 6 are expected");
        // At 100 req/s planned, chance is a small share of the load: 1.25× counts.
        let mut busy = DemandWindows::default();
        (0..3).for_each(|second| (0..125).for_each(|_| busy.arrived_at(second)));
        assert_eq!(busy.surge(3, 100.0, 0.2), Some(125.0));
    }

    #[test]
    fn a_re_plan_without_a_plan_keeps_a_planned_deployment_and_says_why() {
        let planned = Deployment { source: "planned".into(), demand_rps: Some(5.0), ..Deployment::default() };
        let default = Deployment { source: "default: the planner found no plan: x".into(), ..Deployment::default() };
        let why = kept(&planned, &default).expect("kept");
        assert!(why.ends_with("kept: the planner found no plan: x"), "{why}");
        assert_eq!(kept(&planned, &planned), None, "a plan replaces a plan");
        assert_eq!(kept(&default, &default), None, "nothing planned to keep");
    }

    #[test]
    fn a_factor_observed_often_enough_that_moved_past_the_threshold_is_a_drift() {
        let planned = [PlannedFactor { from: "det".into(), to: "rec".into(), factor: 1.0 }];
        let seen = |factor: f64, samples: u64| {
            [ObservedFactor { from: "det".into(), to: "rec".into(), factor: Some(factor), samples }]
        };
        assert!(factors_drifted(&seen(3.2, 50), &planned, 0.2));
        assert!(!factors_drifted(&seen(1.1, 50), &planned, 0.2), "within the threshold");
        assert!(!factors_drifted(&seen(3.2, 5), &planned, 0.2), "too few invocations to tell");
    }

    #[test]
    fn prediction_is_the_mean_of_the_last_five_windows_with_slack() {
        let mut d = DemandWindows::default();
        assert_eq!(d.predicted(), None);
        for n in [100u64, 10, 20, 30, 40, 50] {
            for _ in 0..n {
                d.arrived();
            }
            d.close(Duration::from_secs(10));
        }
        // 1, 2, 3, 4, 5 req/s (the first window has left): mean 3, × 1.05.
        assert_eq!(d.rates(), vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!((d.predicted().unwrap() - 3.15).abs() < 1e-9);
        assert!(!d.should_replan(&d.rates(), 3.0, 0.2));
        assert!(d.should_replan(&d.rates(), 2.0, 0.2));
    }

    #[test]
    fn a_surge_s_plan_is_kept_while_the_last_window_still_needs_it() {
        // A rising load (5 to 17 req/s) re-planned by a surge for 20: the five windows' mean (11.55 with slack)
        // is far below the plan, the last window (17.85) is not; the plan stays until the load falls.
        let d = DemandWindows::from_rates(&[5.0, 8.0, 11.0, 14.0, 17.0]);
        assert!(!d.should_replan(&d.rates(), 20.0, 0.2), "the load just seen needs the plan");
        let falling = DemandWindows::from_rates(&[17.0, 17.0, 14.0, 11.0, 8.0]);
        assert!(falling.should_replan(&falling.rates(), 20.0, 0.2), "the load has gone");
        // Up is decided by the prediction alone, as before.
        assert!(d.should_replan(&d.rates(), 9.0, 0.2));
    }

    #[test]
    fn violations_above_one_percent_trigger_a_replan() {
        let mut d = DemandWindows::from_rates(&[10.0; 4]);
        for i in 0..100 {
            d.arrived();
            if i < 2 {
                d.violated();
            }
        }
        d.close(Duration::from_secs(10));
        assert!(d.should_replan(&d.rates(), 10.5, 0.2), "2% violations");
        for _ in 0..100 {
            d.arrived();
        }
        d.close(Duration::from_secs(10));
        assert!(!d.should_replan(&d.rates(), 10.5, 0.2));
    }
}
