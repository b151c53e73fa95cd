//! A deployed app, running: its tasks' functions loaded, its model slots served by instances, and what it
//! has observed since it was deployed. [`App::start`] loads the glue and starts the models; [`App::admit`]
//! counts a request against the app's limits and picks its query class's route.
//!
//! * [`instances`]: starting the deployment's model instances, each in its planned place.
//! * [`routing`]: Compass's class routers and PPipe's pooled pipelines, wired over those instances.
//! * [`executor`]: the graph executor that carries one request from the entry task through `emit`s to the leaves.

mod executor;
mod instances;
mod routing;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use jig_manifest::{Bundle, InvalidBundle};
use jig_model_host::instance::{BatchLatency, Instance};
use jig_runtime::{Function, FunctionLimits, FunctionOptions, Runtime};

use crate::admission::{Admission, Ticket};
use crate::deployment::{Deployment, Observations, latest_latencies, model_edges};
use crate::error::{AppError, StartError};
use crate::pipelines::Pipelines;
use crate::slots::ModelSlots;
use jig_api::{ObservedFactor, ObservedGlue, ObservedLatency};
use jig_policy::stats::quantile;

pub use executor::{Output, TaskObserver};
pub use instances::ModelHosts;
use instances::{Group, policy, start_models};
use routing::{ClassRouter, class_routers, pooled_pipelines};

/// The deadline of an invocation that names none, for an app without a latency SLO.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

/// A task of a running app.
#[derive(Clone)]
struct TaskRuntime {
    name: Arc<str>,
    function: Function,
    /// The task's `concurrency` limit, and its permits.
    concurrency: u32,
    permits: Arc<Semaphore>,
    /// Tasks each port's payloads go to.
    routes: HashMap<String, Vec<usize>>,
    /// No outgoing edges: its return value is part of the response.
    leaf: bool,
}

/// A deployed app, ready to invoke. Dropping it stops its model instances once their queues drain.
pub struct App {
    /// The app's name, from its manifest.
    pub name: String,
    /// The hash of the bundle it runs.
    pub bundle: String,
    /// When it was deployed, seconds since the Unix epoch.
    pub deployed_at: u64,
    /// The latency SLO: the deadline of an invocation that names none.
    pub slo_latency: Option<Duration>,
    /// The model instances serving it, as planned.
    pub deployment: Deployment,
    /// Times the controller re-planned this app (carried from copy to copy).
    pub replans: u32,
    /// The planner strategy its manifest names (`planner`).
    pub planner: jig_planner::Strategy,
    /// The tensor its entry takes and the one it answers, when it is also the v2 model `APP` (`[tensors]`).
    pub tensors: Option<jig_manifest::AppTensors>,
    /// How often the controller predicts its demand and re-plans it, where that is not at each demand window:
    /// IPA's adaptation interval (`[ipa] interval_s`) for an app planned by IPA.
    pub adaptation_interval: Option<Duration>,
    /// Model slots whose instances model control stopped (Triton's `unload`): they run none, whatever the plan
    /// says, until loaded again; a call of one is told it has no running instance.
    pub unloaded: BTreeSet<String>,
    tasks: Vec<Arc<TaskRuntime>>,
    entry: usize,
    max_inflight: u32,
    inflight: Arc<Semaphore>,
    /// For a planned deployment: how many requests it holds at once, at most what its capacity completes
    /// within the SLO (Little's law), less as requests miss it; more at once are refused rather than served late.
    admission: Option<Arc<Admission>>,
    models: Arc<ModelSlots>,
    /// Invocations of each task, in manifest order, since the app was deployed (carried across re-plans).
    invocations: Arc<Vec<AtomicU64>>,
    /// Each task's completed invocations and their glue's CPU time (`Outcome::glue`), nanoseconds, likewise.
    glue: Arc<Vec<(AtomicU64, AtomicU64)>>,
    /// Each task's (started, completed) invocations at the deploy and at the close of each demand window since,
    /// oldest first, the last [`FACTOR_WINDOWS`] + 1 of them: factors are observed from the oldest, over the
    /// last windows and the open one, as JigsawServe averages a factor over its past five (§3.2). Likewise.
    window_marks: Arc<Mutex<WindowMarks>>,
    /// The CPU time unpinned instances of the deployments this one replaced spent, ms ([`App::continue_counts`]).
    unpinned_before_ms: f64,
    /// Requests whose graph ran to its end, likewise.
    answered: Arc<AtomicU64>,
    /// Edges between model tasks (`from` → `to`, as task indices): where factors are observed.
    model_edges: Vec<(usize, usize)>,
    /// Each planned group of instances, with its profile rows' p95 latency by batch size.
    groups: Vec<Group>,
    /// Compass's query classes by name (empty for other planners): where each class's requests go.
    classes: HashMap<String, ClassRouter>,
    /// PPipe's pooled pipelines, for an app planned by PPipe: the head every request's batch is booked at.
    pipelines: Option<Arc<Pipelines>>,
}

/// Each task's (started, completed) invocations at the deploy and at the close of each demand window since.
type WindowMarks = VecDeque<Vec<(u64, u64)>>;

/// How many demand windows (and the open one) a factor is observed over: JigsawServe's five.
pub const FACTOR_WINDOWS: usize = jig_planner::spec::DemandSpec::WINDOWS;

/// A request admitted by [`App::admit`], counted against the app's limits while it lives.
pub struct Admitted {
    _inflight: tokio::sync::OwnedSemaphorePermit,
    planned: Option<Ticket>,
    /// The tasks of its query class's route, for a class of a Compass app; else the app's own.
    route: Option<Arc<[Arc<TaskRuntime>]>>,
}

impl Admitted {
    /// Report whether the request was answered by its deadline (`true`) or missed it, late or dropped early
    /// (`false`): the app's admission limit [learns from it](crate::admission). Leave out requests that
    /// failed for other reasons.
    pub fn settle(&self, in_time: bool) {
        if let Some(ticket) = &self.planned {
            ticket.settle(in_time);
        }
    }
}

impl App {
    /// Load every task's glue and start the deployment's model instances. Slow (compilation, model loading):
    /// call it off the async executor.
    pub fn start(
        runtime: &Runtime,
        hosts: &ModelHosts,
        bundle: &Bundle,
        hash: &str,
        deployed_at: u64,
        deployment: Deployment,
    ) -> Result<App, StartError> {
        Self::start_from(runtime, hosts, bundle, hash, deployed_at, deployment, None, BTreeSet::new())
    }

    /// [`App::start`] of a new deployment of a running app, `previous` (a re-plan, or model control), with the
    /// model slots `unloaded` stopped (the deployment's instances of them left out). Where `previous` runs the same
    /// bundle, the groups of instances both deployments plan alike keep running in the new copy.
    #[allow(clippy::too_many_arguments)]
    pub fn start_from(
        runtime: &Runtime,
        hosts: &ModelHosts,
        bundle: &Bundle,
        hash: &str,
        deployed_at: u64,
        mut deployment: Deployment,
        previous: Option<&App>,
        unloaded: BTreeSet<String>,
    ) -> Result<App, StartError> {
        let m = &bundle.manifest;
        let app = m.name.clone();
        deployment.instances.retain(|planned| !unloaded.contains(&planned.slot));
        let same_bundle = previous.filter(|p| p.bundle == hash);
        let kept: Vec<_> =
            same_bundle.map(|p| p.deployment.instances.iter().zip(&p.groups).collect()).unwrap_or_default();
        let answered = same_bundle.map_or(0, App::answered);
        // The glue compiles while the models load: neither waits for the other (on a fresh gateway the sign
        // reader's glue takes 2 s of Cranelift, its voice 3.4 s of ONNX Runtime).
        let (started, glue) = std::thread::scope(|scope| {
            let glue = scope.spawn(|| load_glue(runtime, bundle));
            let started = start_models(hosts, bundle, &deployment, &kept, answered);
            (started, glue.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        });
        let (mut models, groups) = started?;
        let glue = glue?;
        for slot in &unloaded {
            models.insert(slot, Arc::new(jig_model_host::pool::Pool::new(Vec::new())));
        }
        let models = Arc::new(models);
        let index: HashMap<&str, usize> = m.tasks.iter().enumerate().map(|(i, t)| (t.name.as_str(), i)).collect();
        let mut tasks = Vec::with_capacity(m.tasks.len());
        for (task, function) in m.tasks.iter().zip(glue) {
            let function = function.with_models(models.clone());
            let mut routes: HashMap<String, Vec<usize>> = HashMap::new();
            for edge in &m.edges {
                if let Some((from, port)) = edge.source()
                    && from == task.name
                {
                    routes.entry(port.to_string()).or_default().push(index[edge.to.as_str()]);
                }
            }
            tasks.push(Arc::new(TaskRuntime {
                name: task.name.as_str().into(),
                function,
                concurrency: task.limits.concurrency,
                permits: Arc::new(Semaphore::new(task.limits.concurrency as usize)),
                leaf: routes.is_empty(),
                routes,
            }));
        }
        let entry = bundle.entry().map(|t| index[t.name.as_str()]).ok_or_else(|| {
            InvalidBundle(format!("app `{app}` declares no tasks; add a [[tasks]] entry with its glue"))
        })?;
        let slo = m.slo.map(|s| Duration::from_millis(s.latency_ms));
        let admission =
            deployment.capacity_rps.zip(slo).map(|(rps, slo)| Admission::new(admission_ceiling(rps, slo), slo));
        let model_edges = model_edges(bundle).iter().map(|e| (index[e.from.as_str()], index[e.to.as_str()])).collect();
        let classes = class_routers(&app, &deployment, &models, &groups, &tasks)?;
        let pipelines = pooled_pipelines(bundle, &deployment, &groups)?;
        let planner = m.planner.as_deref().and_then(|p| p.parse().ok()).unwrap_or_default();
        Ok(App {
            name: app,
            bundle: hash.to_string(),
            deployed_at,
            slo_latency: slo,
            deployment,
            replans: 0,
            planner,
            tensors: m.tensors.clone(),
            adaptation_interval: (planner == jig_planner::Strategy::Ipa)
                .then(|| m.ipa.clone().unwrap_or_default().interval()),
            unloaded,
            tasks,
            entry,
            max_inflight: m.limits.max_inflight,
            inflight: Arc::new(Semaphore::new(m.limits.max_inflight as usize)),
            admission,
            models,
            invocations: Arc::new(m.tasks.iter().map(|_| AtomicU64::new(0)).collect()),
            glue: Arc::new(m.tasks.iter().map(|_| (AtomicU64::new(0), AtomicU64::new(0))).collect()),
            window_marks: Arc::new(Mutex::new(VecDeque::from([vec![(0, 0); m.tasks.len()]]))),
            unpinned_before_ms: 0.0,
            answered: Arc::default(),
            model_edges,
            groups,
            classes,
            pipelines,
        })
    }

    /// This app under `plan`, a re-plan with the [same instances](Deployment::same_instances): the same
    /// instances (in their order and places: [`Deployment::keeping_places_of`]), tasks and counts, and the plan's
    /// demand, capacity (and so admission) and costs, and its batch policies, which the running instances follow
    /// from their next batch on. `None` where the plan's rates route requests (Compass's classes, PPipe's
    /// pipelines): those start anew.
    pub fn with_plan(&self, plan: Deployment) -> Option<App> {
        if !self.classes.is_empty() || self.pipelines.is_some() {
            return None;
        }
        let plan = plan.keeping_places_of(&self.deployment)?;
        // The running instances batch and drop as the new plan says from their next batch on (its costs, refined
        // from what they were observed to take, move the wait bounds and drop budgets).
        for (group, planned) in self.groups.iter().zip(&plan.instances) {
            group.instances.iter().for_each(|instance| instance.set_policy(policy(planned, false)));
        }
        let admission = match (&self.admission, plan.capacity_rps.zip(self.slo_latency)) {
            (Some(before), Some((rps, slo))) => Some(Admission::after(before, admission_ceiling(rps, slo))),
            (None, Some((rps, slo))) => Some(Admission::new(admission_ceiling(rps, slo), slo)),
            (_, None) => None,
        };
        Some(App {
            name: self.name.clone(),
            bundle: self.bundle.clone(),
            deployed_at: self.deployed_at,
            slo_latency: self.slo_latency,
            deployment: plan,
            replans: self.replans + 1,
            planner: self.planner,
            tensors: self.tensors.clone(),
            adaptation_interval: self.adaptation_interval,
            unloaded: self.unloaded.clone(),
            tasks: self.tasks.clone(),
            entry: self.entry,
            max_inflight: self.max_inflight,
            inflight: self.inflight.clone(),
            admission,
            models: self.models.clone(),
            invocations: self.invocations.clone(),
            glue: self.glue.clone(),
            window_marks: self.window_marks.clone(),
            unpinned_before_ms: self.unpinned_before_ms,
            answered: self.answered.clone(),
            model_edges: self.model_edges.clone(),
            groups: self.groups.clone(),
            classes: HashMap::new(),
            pipelines: None,
        })
    }

    /// The task names, entry first.
    pub fn task_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = vec![&self.tasks[self.entry].name];
        names.extend(self.tasks.iter().enumerate().filter(|(i, _)| *i != self.entry).map(|(_, t)| &*t.name));
        names
    }

    /// What the head of an app served by PPipe's pooled pipelines has done (`None` for other apps).
    pub fn pipeline_stats(&self) -> Option<crate::HeadStats> {
        self.pipelines.as_ref().map(|p| p.stats())
    }

    /// How many requests a planned deployment admits at once now ([`crate::admission`]); `None` when unplanned.
    pub fn admission_limit(&self) -> Option<u32> {
        self.admission.as_ref().map(|a| a.limit())
    }

    /// Go on counting where `previous`, a copy of the same bundle (before a re-plan), left off.
    pub fn continue_counts(&mut self, previous: &App) {
        if previous.bundle == self.bundle {
            self.invocations = previous.invocations.clone();
            self.glue = previous.glue.clone();
            self.window_marks = previous.window_marks.clone();
            // What `previous`'s unpinned instances spent, but for those this copy keeps running: they go on
            // counting here, and counted twice they made the plan's CPU a request grow at each re-plan.
            let kept: Vec<&Arc<Instance>> = self.groups.iter().flat_map(|g| &g.instances).collect();
            self.unpinned_before_ms = previous.unpinned_before_ms
                + previous.unpinned_ms(|instance| !kept.iter().any(|k| Arc::ptr_eq(k, instance)));
            self.answered = previous.answered.clone();
        }
        if let (Some(now), Some(before)) = (&self.admission, &previous.admission) {
            self.admission = Some(Admission::after(before, now.ceiling()));
        }
    }

    /// Close a demand window: factors are observed over the last [`FACTOR_WINDOWS`] and the open one.
    pub fn close_window(&self) {
        let mut marks = self.window_marks.lock().unwrap_or_else(|p| p.into_inner());
        marks.push_back(self.counts());
        while marks.len() > FACTOR_WINDOWS + 1 {
            marks.pop_front();
        }
    }

    /// Each task's (started, completed) invocations since the deploy.
    fn counts(&self) -> Vec<(u64, u64)> {
        (self.invocations.iter().zip(self.glue.iter()))
            .map(|(started, (completed, _))| (started.load(Ordering::Relaxed), completed.load(Ordering::Relaxed)))
            .collect()
    }

    /// The factor observed on each edge between model tasks over the last [`FACTOR_WINDOWS`] demand windows and
    /// the open one: invocations of the downstream task per completed invocation of the upstream one (a task
    /// reached from two model tasks counts for both). Completed, not started: under a backlog the upstream
    /// task's queued invocations have sent nothing downstream yet.
    pub fn observed_factors(&self) -> Vec<ObservedFactor> {
        let now = self.counts();
        let since = self.window_marks.lock().unwrap_or_else(|p| p.into_inner()).front().cloned();
        let since = |t: usize| since.as_ref().and_then(|marks| marks.get(t)).copied().unwrap_or((0, 0));
        let started = |t: usize| now[t].0.saturating_sub(since(t).0);
        let completed = |t: usize| now[t].1.saturating_sub(since(t).1);
        self.model_edges
            .iter()
            .map(|&(from, to)| ObservedFactor {
                from: self.tasks[from].name.to_string(),
                to: self.tasks[to].name.to_string(),
                factor: (completed(from) > 0).then(|| started(to) as f64 / completed(from) as f64),
                samples: completed(from),
            })
            .collect()
    }

    /// Each planned group of instances with the batch latency it observed, at the batch size it ran most
    /// (none before its first batch): p95 of the last (up to) 100 batches of that size over all its instances.
    pub fn observed_latencies(&self) -> Vec<ObservedLatency> {
        self.groups
            .iter()
            .filter_map(|g| {
                // The group's instances' batches, by size.
                let mut by_rows: HashMap<u64, BatchLatency> = HashMap::new();
                for b in g.instances.iter().flat_map(|i| i.stats().batch_latencies()) {
                    match by_rows.get_mut(&b.rows) {
                        Some(seen) => {
                            seen.batches += b.batches;
                            seen.recent_ms.extend(b.recent_ms);
                            seen.recent_cpu_ms.extend(b.recent_cpu_ms);
                            for (sum, ns) in seen.phases_ns.iter_mut().zip(b.phases_ns) {
                                *sum += ns;
                            }
                        }
                        None => {
                            by_rows.insert(b.rows, b);
                        }
                    }
                }
                let BatchLatency { rows, batches, recent_ms: mut ms, recent_cpu_ms, .. } =
                    by_rows.into_values().max_by_key(|b| (b.batches, b.rows))?;
                let cpu_ms: Option<Vec<f64>> = if g.on_cores { recent_cpu_ms.into_iter().collect() } else { None };
                let cpu_mean_ms = cpu_ms.filter(|c| !c.is_empty()).map(|c| c.iter().sum::<f64>() / c.len() as f64);
                let busy_ms = g.busy_ms();
                let answered = self.answered().saturating_sub(g.answered_from);
                ms.sort_by(f64::total_cmp);
                // The rule `jig profile` measured the profiled latencies by, so that the two compare.
                let (p50_ms, p95_ms) = (quantile(&ms, 0.5)?, quantile(&ms, 0.95)?);
                let mean_ms = ms.iter().sum::<f64>() / ms.len() as f64;
                let batch = u32::try_from(rows).unwrap_or(u32::MAX);
                let profiled = g.profiled_ms.get(&batch).copied();
                Some(ObservedLatency {
                    slot: g.slot.clone(),
                    variant: g.variant.clone(),
                    segment: g.segment.clone(),
                    batch,
                    batches,
                    p95_ms,
                    profiled_ms: profiled.map(|p| p.p95),
                    p50_ms,
                    profiled_p50_ms: profiled.map(|p| p.p50),
                    mean_ms,
                    profiled_mean_ms: profiled.map(|p| p.mean).filter(|m| m.is_finite()),
                    cpu_mean_ms,
                    busy_ms_per_request: (answered > 0).then(|| busy_ms / answered as f64),
                    requests: answered,
                    host_cpu_ms: g.host_cpu_ms(),
                })
            })
            .collect()
    }

    /// Each task's mean glue time per completed invocation (none before its first).
    pub fn observed_glue(&self) -> Vec<ObservedGlue> {
        self.tasks
            .iter()
            .zip(self.glue.iter())
            .filter_map(|(task, (runs, ns))| {
                let runs = runs.load(Ordering::Relaxed);
                (runs > 0).then(|| ObservedGlue {
                    task: task.name.to_string(),
                    invocations: runs,
                    mean_ms: ns.load(Ordering::Relaxed) as f64 / runs as f64 / 1e6,
                })
            })
            .collect()
    }

    /// The CPU time of the instances that run unpinned on this machine's cores, ms since the app was deployed
    /// (or the gateway started): default instances of slots no task names, where no core was spare. (A GPU
    /// instance's worker process is planned by its type instead: its profile's `cpu_ms`, refined by
    /// [`ObservedLatency::host_cpu_ms`].)
    pub fn observed_unpinned_ms(&self) -> f64 {
        self.unpinned_ms(|_| true) + self.unpinned_before_ms
    }

    /// The CPU time this copy's unpinned instances that are `counted` spent since they started, ms. An unpinned
    /// `cpu:N` instance runs on N threads: its own, whose CPU time it counts, and N − 1 of ONNX Runtime's, as
    /// busy (they spin while it runs).
    fn unpinned_ms(&self, counted: impl Fn(&Arc<Instance>) -> bool) -> f64 {
        (self.groups.iter().zip(&self.deployment.instances))
            .filter_map(|(g, planned)| Some((g, f64::from(planned.unpinned_threads()?))))
            .flat_map(|(g, cores)| g.instances.iter().map(move |i| (i, cores)))
            .filter(|(i, _)| counted(i))
            .map(|(i, cores)| cores * i.stats().cpu_ns.load(Ordering::Relaxed) as f64 / 1e6)
            .sum()
    }

    /// Requests whose graph ran to its end since the app was deployed (or the gateway started).
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// What the next plan should take into account: the factors observed, the latencies observed where they
    /// rest on enough batches (else those this deployment was refined with), and this deployment, if planned,
    /// for the solver to start from.
    pub fn observations(&self) -> Observations {
        Observations {
            factors: self.observed_factors(),
            latencies: latest_latencies(&self.deployment.refined, &self.observed_latencies()),
            glue: self.observed_glue(),
            unpinned_ms: self.observed_unpinned_ms(),
            answered: self.answered(),
            current: self.deployment.demand_rps.is_some().then(|| self.deployment.clone()),
        }
    }

    /// The model slots and their instances.
    pub fn models(&self) -> &ModelSlots {
        &self.models
    }

    /// The deadline of a request of `class` (if it names one) that arrived at `arrived` with an optional
    /// timeout: the timeout, else the class's latency SLO, else the app's, else [`DEFAULT_DEADLINE`].
    pub fn deadline(&self, arrived: Instant, timeout: Option<Duration>, class: Option<&str>) -> Instant {
        let slo = class.and_then(|c| self.classes.get(c)).map(|c| c.latency).or(self.slo_latency);
        arrived + timeout.or(slo).unwrap_or(DEFAULT_DEADLINE)
    }

    /// The query classes of an app planned by Compass, sorted; empty for other apps.
    pub fn classes(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.classes.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// The tasks a request of `class` runs: a route of the class, for an app planned by Compass (which
    /// requires one of its classes); `None` (the app's own tasks) for other apps, which take none.
    fn route(&self, class: Option<&str>) -> Result<Option<Arc<[Arc<TaskRuntime>]>>, AppError> {
        let unknown = || AppError::UnknownClass {
            app: self.name.clone(),
            class: class.map(str::to_string),
            known: self.classes().join(", "),
        };
        match (class, self.classes.is_empty()) {
            (None, true) => Ok(None),
            (Some(_), true) | (None, false) => Err(unknown()),
            (Some(name), false) => {
                let router = self.classes.get(name).ok_or_else(unknown)?;
                let index = router.pick.lock().unwrap_or_else(|p| p.into_inner()).pick();
                // A class the plan serves none of has no route: it runs on all the app's instances.
                Ok(index.map(|i| router.routes[i].clone()))
            }
        }
    }

    /// Admit one more request, or refuse it when `limits.max_inflight` are in progress, or when a planned
    /// deployment already holds as many as it completes within the SLO ([`crate::admission`]). Hold the permit for the
    /// request's life: take it before reading the request's body, so the limits bound memory too.
    pub fn admit(&self, class: Option<&str>) -> Result<Admitted, AppError> {
        let route = self.route(class)?;
        let inflight = self
            .inflight
            .clone()
            .try_acquire_owned()
            .map_err(|_| AppError::Busy { app: self.name.clone(), limit: self.max_inflight })?;
        let planned = match &self.admission {
            None => None,
            Some(admission) => Some(admission.try_admit().ok_or_else(|| AppError::OverCapacity {
                app: self.name.clone(),
                capacity_rps: self.deployment.capacity_rps.unwrap_or(0.0),
                limit: admission.limit(),
            })?),
        };
        Ok(Admitted { _inflight: inflight, planned, route })
    }
}

/// The most requests at once a deployment of `capacity_rps` completes within `slo` (Little's law).
fn admission_ceiling(capacity_rps: f64, slo: Duration) -> u32 {
    (capacity_rps * slo.as_secs_f64()).ceil().clamp(1.0, f64::from(u32::MAX)) as u32
}

/// Compile (or fetch from the runtime's cache) and link each task's glue, in the manifest's order, with the
/// task's limits and configuration; its models are given once they are loaded ([`Function::with_models`]).
fn load_glue(runtime: &Runtime, bundle: &Bundle) -> Result<Vec<Function>, StartError> {
    let app = &bundle.manifest.name;
    (bundle.manifest.tasks.iter())
        .map(|task| {
            // The manifest's limits are in its units (MiB, ms); what it leaves out is the runtime's default.
            let default = FunctionLimits::default();
            let limits = FunctionLimits {
                memory: task.limits.memory_mib.map_or(default.memory, |mib| (mib as usize) << 20),
                timeout: task.limits.timeout_ms.map_or(default.timeout, Duration::from_millis),
                ..default
            };
            let options = FunctionOptions { limits, config: bundle.task_config(task)?, ..FunctionOptions::default() };
            (runtime.load_file(&format!("{app}/{}", task.name), &bundle.glue_path(task), options))
                .map_err(|source| StartError::Glue { app: app.clone(), task: task.name.clone(), source })
        })
        .collect()
}
