//! A deployed app, running: its tasks' functions loaded, its model slots served by instances, and the graph
//! executor that carries one request from the entry task through `emit`s to the leaves.
//!
//! **Graph execution.** The entry task runs on the request's payload. Every payload a task emits on a port
//! with edges becomes one invocation of each task the edges lead to; all invocations run concurrently, each
//! bounded by the request's deadline. The response gathers, in a fixed order, the return values of leaf tasks
//! (tasks with no outgoing edges) and the payloads emitted on ports without edges. The first invocation that
//! fails fails the request, and the rest are cancelled — as they are when the client goes away, since the
//! request's future owns them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use jig_manifest::{Bundle, InvalidBundle};
use jig_model_host::instance::{BatchPolicy, Instance, InstanceConfig};
use jig_model_host::launch::{LaunchError, Launcher, Placement};
use jig_model_host::onnx::ModelError;
use jig_model_host::pool::Pool;
use jig_model_host::segment::Segment;
use jig_runtime::{Function, FunctionLimits, FunctionOptions, InvokeError, LoadError, Outcome, Runtime};

use crate::admission::{Admission, Ticket};
use crate::deployment::{Deployment, Observations, latest_latencies, model_edges};
use crate::pipelines::{Pipelines, StageSpec};
use crate::slots::ModelSlots;
use jig_api::{InstancePlace, ObservedFactor, ObservedGlue, ObservedLatency};

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

/// A query class of an app planned by Compass: its routes, each the app's tasks calling only the instances
/// planned for the route, picked for the class's requests in proportion to the route's rate.
struct ClassRouter {
    /// The class's latency SLO: the deadline of its requests that name none.
    latency: Duration,
    routes: Vec<Arc<[Arc<TaskRuntime>]>>,
    pick: std::sync::Mutex<jig_policy::WeightedRoundRobin>,
}

/// The instances of one variant on one segment type, and what the profile table says of them.
#[derive(Clone)]
struct Group {
    slot: String,
    variant: String,
    segment: String,
    max_batch: u32,
    instances: Vec<Arc<Instance>>,
    /// The profile's p50 and p95 latency (ms) by batch size.
    profiled_ms: HashMap<u32, (f64, f64)>,
}

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

/// One part of an app's response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The task that produced it.
    pub task: String,
    /// The port, for a payload emitted on a port without edges; `None` for a leaf's return value.
    pub port: Option<String>,
    /// What the task returned or emitted.
    pub bytes: Vec<u8>,
}

/// Told of every task invocation that ends: the gateway counts them in its metrics.
pub trait TaskObserver: Clone + Send + Sync + 'static {
    /// Task `task` of app `app` ended with `outcome` (`ok`, `error`, `deadline` or `queued`) after `elapsed`.
    fn task_done(&self, app: &str, task: &str, outcome: &str, elapsed: Duration);
}

/// Why an app could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The bundle is unusable; the message names the file and field.
    #[error(transparent)]
    Bundle(#[from] InvalidBundle),
    /// A task's glue did not load (not a component, or it imports what the host lacks); the message names
    /// the function as `APP/TASK`.
    #[error("{source}")]
    Glue {
        /// The app.
        app: String,
        /// The task whose glue failed.
        task: String,
        /// Why.
        source: LoadError,
    },
    /// The deployment names a variant or segment the bundle or jig does not know (a bug in the planner).
    #[error("app `{app}`: {detail}")]
    Deployment {
        /// The app.
        app: String,
        /// What the deployment names.
        detail: String,
    },
    /// A model instance did not start; the message names the model's file as the bundle does.
    #[error("app `{app}`: {}", within(&source.to_string(), bundle))]
    Model {
        /// The app.
        app: String,
        /// Why.
        source: Box<LaunchError>,
        /// Where the gateway keeps the bundle, which the message leaves out of paths.
        bundle: PathBuf,
    },
}

/// `message` with the paths under `bundle` made relative to it: a client knows its bundle, not the gateway's store.
fn within(message: &str, bundle: &Path) -> String {
    message.replace(&format!("{}/", bundle.display()), "")
}

impl StartError {
    /// Whether the bundle is at fault (its glue, its models, its manifest), not this machine or jig: a deploy
    /// refuses such a bundle (400) and keeps serving the app's previous version.
    pub fn is_bundle_fault(&self) -> bool {
        match self {
            StartError::Bundle(_) | StartError::Glue { .. } => true,
            StartError::Deployment { .. } => false,
            StartError::Model { source, .. } => match source.as_ref() {
                LaunchError::Model(ModelError::Library { .. }) => false,
                LaunchError::Model(_) | LaunchError::Instance(_) => true,
                _ => false,
            },
        }
    }
}

/// Why an app invocation failed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The app already has `limits.max_inflight` requests in progress.
    #[error("app `{app}` is at its limit of {limit} requests in progress; retry later")]
    Busy {
        /// The app.
        app: String,
        /// Its `limits.max_inflight`.
        limit: u32,
    },
    /// The app holds as many requests as its deployment completes within the SLO ([`crate::admission`]).
    #[error(
        "app `{app}` is at its planned capacity ({capacity_rps:.1} req/s, {limit} requests in progress); retry \
         later: the controller re-plans for the demand"
    )]
    OverCapacity {
        /// The app.
        app: String,
        /// The deployment's capacity, req/s.
        capacity_rps: f64,
        /// Requests it admits at once.
        limit: u32,
    },
    /// A task's invocation failed.
    #[error("app `{app}`: {source}")]
    Task {
        /// The app.
        app: String,
        /// How the task failed; it names the function as `APP/TASK`.
        #[source]
        source: InvokeError,
    },
    /// The deadline passed while a task waited for one of its `concurrency` permits.
    #[error("app `{app}`: task `{task}` could not start before the deadline (all {limit} of its slots were busy)")]
    Queued {
        /// The app.
        app: String,
        /// The task that could not start.
        task: String,
        /// Its `concurrency` limit.
        limit: u32,
    },
    /// A task's invocation ended without an outcome (a bug in jig: the runtime catches guest failures).
    #[error("app `{app}`: a task's invocation ended unexpectedly: {detail}")]
    Panicked {
        /// The app.
        app: String,
        /// What the executor reported.
        detail: String,
    },
    /// The request names a query class the app lacks, or names none where the app has classes.
    #[error(
        "app `{app}`: {}",
        match (class, known.is_empty()) {
            (Some(c), true) => format!("has no query classes, yet the request names `{c}`; leave out `jig-class`"),
            (Some(c), false) => format!("has no query class `{c}`; its classes are {known} (`jig-class` header)"),
            (None, _) => format!("serves query classes ({known}): name one in the `jig-class` header"),
        }
    )]
    UnknownClass {
        /// The app.
        app: String,
        /// The class the request named, if any.
        class: Option<String>,
        /// The app's classes, comma-separated.
        known: String,
    },
}

/// Where an app's model instances start: this machine's segments, and the cluster's `jig node`s.
#[derive(Debug, Clone)]
pub struct ModelHosts {
    /// This machine's segments.
    pub launcher: Launcher,
    /// How to reach the nodes instances are placed on; `None`: the gateway has none.
    pub nodes: Option<jig_node::Access>,
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
        let m = &bundle.manifest;
        let app = m.name.clone();
        let (models, groups) = start_models(hosts, bundle, &deployment)?;
        let models = Arc::new(models);
        let index: HashMap<&str, usize> = m.tasks.iter().enumerate().map(|(i, t)| (t.name.as_str(), i)).collect();
        let mut tasks = Vec::with_capacity(m.tasks.len());
        for task in &m.tasks {
            // The manifest's limits are in its units (MiB, ms); what it leaves out is the runtime's default.
            let default = FunctionLimits::default();
            let limits = FunctionLimits {
                memory: task.limits.memory_mib.map_or(default.memory, |mib| (mib as usize) << 20),
                timeout: task.limits.timeout_ms.map_or(default.timeout, Duration::from_millis),
                ..default
            };
            let options = FunctionOptions { limits, config: bundle.task_config(task)?, models: models.clone() };
            let function = runtime
                .load_file(&format!("{app}/{}", task.name), &bundle.glue_path(task), options)
                .map_err(|source| StartError::Glue { app: app.clone(), task: task.name.clone(), source })?;
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
        let admission = deployment.capacity_rps.zip(slo).map(|(rps, slo)| Admission::new(admission_ceiling(rps, slo)));
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
            tasks,
            entry,
            max_inflight: m.limits.max_inflight,
            inflight: Arc::new(Semaphore::new(m.limits.max_inflight as usize)),
            admission,
            models,
            invocations: Arc::new(m.tasks.iter().map(|_| AtomicU64::new(0)).collect()),
            glue: Arc::new(m.tasks.iter().map(|_| (AtomicU64::new(0), AtomicU64::new(0))).collect()),
            unpinned_before_ms: 0.0,
            answered: Arc::default(),
            model_edges,
            groups,
            classes,
            pipelines,
        })
    }

    /// This app under `plan`, a re-plan with the [same instances](Deployment::same_instances): the same
    /// instances, tasks and counts, and the plan's demand, capacity (and so admission) and costs. `None` where the
    /// plan's rates route requests (Compass's classes, PPipe's pipelines): those start anew.
    pub fn with_plan(&self, plan: Deployment) -> Option<App> {
        if !self.classes.is_empty() || self.pipelines.is_some() || !plan.same_instances(&self.deployment) {
            return None;
        }
        let ceiling = plan.capacity_rps.zip(self.slo_latency).map(|(rps, slo)| admission_ceiling(rps, slo));
        let admission = match (&self.admission, ceiling) {
            (Some(before), Some(ceiling)) => Some(Admission::after(before, ceiling)),
            (None, Some(ceiling)) => Some(Admission::new(ceiling)),
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
            tasks: self.tasks.clone(),
            entry: self.entry,
            max_inflight: self.max_inflight,
            inflight: self.inflight.clone(),
            admission,
            models: self.models.clone(),
            invocations: self.invocations.clone(),
            glue: self.glue.clone(),
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
            self.unpinned_before_ms = previous.observed_unpinned_ms();
            self.answered = previous.answered.clone();
        }
        if let (Some(now), Some(before)) = (&self.admission, &previous.admission) {
            self.admission = Some(Admission::after(before, now.ceiling()));
        }
    }

    /// The factor observed on each edge between model tasks: invocations of the downstream task per completed
    /// invocation of the upstream one (a task reached from two model tasks counts for both). Completed, not
    /// started: under a backlog the upstream task's queued invocations have sent nothing downstream yet.
    pub fn observed_factors(&self) -> Vec<ObservedFactor> {
        let started = |t: usize| self.invocations[t].load(Ordering::Relaxed);
        let completed = |t: usize| self.glue[t].0.load(Ordering::Relaxed);
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
                let mut by_rows: HashMap<u64, (u64, Vec<f64>)> = HashMap::new();
                for instance in &g.instances {
                    for b in instance.stats().batch_latencies() {
                        let entry = by_rows.entry(b.rows).or_default();
                        entry.0 += b.batches;
                        entry.1.extend(b.recent_ms);
                    }
                }
                let (rows, (batches, mut ms)) = by_rows.into_iter().max_by_key(|(rows, (n, _))| (*n, *rows))?;
                ms.sort_by(f64::total_cmp);
                let quantile = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
                let batch = u32::try_from(rows).unwrap_or(u32::MAX);
                let profiled = g.profiled_ms.get(&batch).copied();
                Some(ObservedLatency {
                    slot: g.slot.clone(),
                    variant: g.variant.clone(),
                    segment: g.segment.clone(),
                    batch,
                    batches,
                    p95_ms: quantile(0.95),
                    profiled_ms: profiled.map(|(_, p95)| p95),
                    p50_ms: quantile(0.5),
                    profiled_p50_ms: profiled.map(|(p50, _)| p50),
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

    /// The CPU time of the instances that run unpinned on the cores the planned ones hold (default instances
    /// of slots no task names, where no core was spare), ms since the app was deployed (or the gateway started).
    pub fn observed_unpinned_ms(&self) -> f64 {
        // An unpinned `cpu:N` instance runs on N threads: its own, whose CPU time it counts, and N − 1 of ONNX
        // Runtime's, as busy (they spin while it runs).
        let unpinned_cores = |planned: &jig_api::PlannedInstances| {
            let cores = planned.segment.strip_prefix("cpu:")?.parse::<u32>().ok()?;
            planned.places.iter().all(|p| p.cores.is_empty() && p.node.is_none()).then_some(f64::from(cores))
        };
        (self.groups.iter().zip(&self.deployment.instances))
            .filter_map(|(g, planned)| Some((g, unpinned_cores(planned)?)))
            .flat_map(|(g, cores)| g.instances.iter().map(move |i| (i, cores)))
            .map(|(i, cores)| cores * i.stats().cpu_ns.load(Ordering::Relaxed) as f64 / 1e6)
            .sum::<f64>()
            + self.unpinned_before_ms
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

    /// Run the graph on `payload` by `deadline`, for a request [admitted](App::admit).
    pub async fn invoke(
        &self,
        admitted: &Admitted,
        payload: Vec<u8>,
        deadline: Instant,
        observer: &impl TaskObserver,
    ) -> Result<Vec<Output>, AppError> {
        let tasks: &[Arc<TaskRuntime>] = admitted.route.as_deref().unwrap_or(&self.tasks);
        // A request of pooled pipelines carries its seat in a booked batch from task to task.
        let models = self.pipelines.as_ref().map(|p| p.host(self.models.clone()));
        // Each invocation carries its position in the fan-out tree (emission indexes from the entry), so the
        // response lists outputs in an order that does not depend on which finished first.
        let mut running: JoinSet<(usize, Vec<u32>, Result<Outcome, AppError>)> = JoinSet::new();
        let mut outputs: Vec<(Vec<u32>, Output)> = Vec::new();
        let run = Run { tasks, models: models.as_ref(), deadline };
        self.spawn(&run, &mut running, self.entry, Vec::new(), payload, observer);
        while let Some(joined) = running.join_next().await {
            let (task, key, result) =
                joined.map_err(|e| AppError::Panicked { app: self.name.clone(), detail: e.to_string() })?;
            let outcome = result?;
            let t = &tasks[task];
            let mut n = 0u32;
            let mut child = || {
                let mut child = key.clone();
                child.push(n);
                n += 1;
                child
            };
            for emission in outcome.emitted {
                match t.routes.get(&emission.port) {
                    Some(targets) => {
                        for &target in targets {
                            let payload = emission.payload.clone();
                            self.spawn(&run, &mut running, target, child(), payload, observer);
                        }
                    }
                    None => {
                        let output =
                            Output { task: t.name.to_string(), port: Some(emission.port), bytes: emission.payload };
                        outputs.push((child(), output));
                    }
                }
            }
            if t.leaf {
                outputs.push((key, Output { task: t.name.to_string(), port: None, bytes: outcome.output }));
            }
        }
        outputs.sort_by(|a, b| a.0.cmp(&b.0));
        self.answered.fetch_add(1, Ordering::Relaxed);
        Ok(outputs.into_iter().map(|(_, o)| o).collect())
    }

    /// Run one task's invocation, at `key` in the request's fan-out tree, on `payload`.
    fn spawn(
        &self,
        run: &Run<'_>,
        running: &mut JoinSet<(usize, Vec<u32>, Result<Outcome, AppError>)>,
        task: usize,
        key: Vec<u32>,
        payload: Vec<u8>,
        observer: &impl TaskObserver,
    ) {
        self.invocations[task].fetch_add(1, Ordering::Relaxed);
        let (t, app, observer, deadline) = (run.tasks[task].clone(), self.name.clone(), observer.clone(), run.deadline);
        let function = match run.models {
            Some(models) => t.function.with_models(models.clone()),
            None => t.function.clone(),
        };
        let glue = self.glue.clone();
        running.spawn(async move {
            let started = Instant::now();
            let permit = match tokio::time::timeout_at(deadline.into(), t.permits.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                _ => {
                    let error = AppError::Queued { app: app.clone(), task: t.name.to_string(), limit: t.concurrency };
                    observer.task_done(&app, &t.name, "queued", started.elapsed());
                    return (task, key, Err(error));
                }
            };
            let result = function.invoke(&payload, Some(deadline)).await;
            drop(permit);
            if let Ok(outcome) = &result {
                let (runs, ns) = &glue[task];
                runs.fetch_add(1, Ordering::Relaxed);
                ns.fetch_add(outcome.glue.as_nanos() as u64, Ordering::Relaxed);
            }
            let outcome = match &result {
                Ok(_) => "ok",
                Err(InvokeError::DeadlineExceeded { .. }) => "deadline",
                Err(_) => "error",
            };
            observer.task_done(&app, &t.name, outcome, started.elapsed());
            (task, key, result.map_err(|source| AppError::Task { app, source }))
        });
    }
}

/// One request's run through the graph: the tasks it runs, the model host they call when it is the request's
/// own (pooled pipelines'), and its deadline.
struct Run<'a> {
    tasks: &'a [Arc<TaskRuntime>],
    models: Option<&'a Arc<dyn jig_runtime::ModelHost>>,
    deadline: Instant,
}

/// PPipe's pooled pipelines of the deployment, over the instances it started: each pool takes its members from
/// its instance type's group, pipelines sharing a type taking theirs in turn; latencies are the profile's p95.
fn pooled_pipelines(
    bundle: &Bundle,
    deployment: &Deployment,
    groups: &[Group],
) -> Result<Option<Arc<Pipelines>>, StartError> {
    if deployment.pipelines.is_empty() {
        return Ok(None);
    }
    let app = &bundle.manifest.name;
    let refused = |detail: String| StartError::Deployment { app: app.clone(), detail };
    let ms = |ms: f64| Duration::from_secs_f64(ms.max(0.0) / 1000.0);
    let glue: HashMap<&str, f64> = deployment.glue.iter().map(|g| (g.task.as_str(), g.mean_ms)).collect();
    let glue_of = |slot: &str| {
        let task = bundle.manifest.tasks.iter().find(|t| t.slot.as_deref() == Some(slot));
        task.and_then(|t| glue.get(t.name.as_str())).map_or(Duration::ZERO, |&g| ms(g))
    };
    let mut handed_out: HashMap<usize, usize> = HashMap::new();
    let mut specs = Vec::with_capacity(deployment.pipelines.len());
    for (k, pipeline) in deployment.pipelines.iter().enumerate() {
        let mut stages = Vec::with_capacity(pipeline.pools.len());
        for pool in &pipeline.pools {
            let key = (pool.slot.as_str(), pool.variant.as_str(), pool.segment.as_str(), pool.max_batch);
            let g = groups
                .iter()
                .position(|g| (g.slot.as_str(), g.variant.as_str(), g.segment.as_str(), g.max_batch) == key)
                .ok_or_else(|| {
                    refused(format!(
                        "pipeline {k} pools slot `{}` on {} on {} batch {}, which the deployment lacks",
                        pool.slot, pool.variant, pool.segment, pool.max_batch
                    ))
                })?;
            let from = handed_out.entry(g).or_default();
            let to = *from + pool.members as usize;
            let instances = groups[g].instances.get(*from..to).ok_or_else(|| {
                refused(format!(
                    "pipelines 0 to {k} pool {} instances of {} on {} at slot `{}`, but the deployment has {}; \
                     re-plan the app",
                    to,
                    pool.variant,
                    pool.segment,
                    pool.slot,
                    groups[g].instances.len()
                ))
            })?;
            *from = to;
            let latency = groups[g]
                .profiled_ms
                .iter()
                .filter(|&(&b, _)| b <= pipeline.batch)
                .map(|(&b, &(_, p95))| (b as usize, ms(p95)))
                .collect();
            stages.push(StageSpec {
                slot: pool.slot.clone(),
                instances: instances.to_vec(),
                latency,
                glue: glue_of(&pool.slot),
            });
        }
        specs.push((format!("pipeline {k}"), pipeline.batch as usize, stages));
    }
    Pipelines::new(app, specs).map(Some).map_err(refused)
}

/// The routers of a Compass deployment's query classes: for each route, the app's tasks with their functions
/// calling, for each slot the route names, only the instances of its step (and every instance of the others).
fn class_routers(
    app: &str,
    deployment: &Deployment,
    models: &ModelSlots,
    groups: &[Group],
    tasks: &[Arc<TaskRuntime>],
) -> Result<HashMap<String, ClassRouter>, StartError> {
    let mut routers = HashMap::new();
    for class in &deployment.classes {
        let mut routes = Vec::with_capacity(class.routes.len());
        for route in &class.routes {
            let mut slots = models.clone();
            for step in &route.steps {
                let group = groups
                    .iter()
                    .find(|g| {
                        (g.slot.as_str(), g.variant.as_str(), g.segment.as_str(), g.max_batch)
                            == (step.slot.as_str(), step.variant.as_str(), step.segment.as_str(), step.max_batch)
                    })
                    .ok_or_else(|| StartError::Deployment {
                        app: app.to_string(),
                        detail: format!(
                            "class `{}` routes slot `{}` to {} on {} batch {}, which the deployment lacks",
                            class.class, step.slot, step.variant, step.segment, step.max_batch
                        ),
                    })?;
                let instances = group.instances.iter().map(|i| (i.clone(), 1.0)).collect();
                slots.insert(step.slot.clone(), Arc::new(Pool::new(instances)));
            }
            let slots: Arc<dyn jig_runtime::ModelHost> = Arc::new(slots);
            let on_route: Vec<Arc<TaskRuntime>> = tasks
                .iter()
                .map(|t| Arc::new(TaskRuntime { function: t.function.with_models(slots.clone()), ..(**t).clone() }))
                .collect();
            routes.push(on_route.into());
        }
        let pick = jig_policy::WeightedRoundRobin::new(class.routes.iter().map(|r| r.rate_rps));
        let latency = Duration::from_secs_f64(class.latency_ms.max(0.0) / 1000.0);
        routers.insert(class.class.clone(), ClassRouter { latency, routes, pick: std::sync::Mutex::new(pick) });
    }
    Ok(routers)
}

/// Start the deployment's instances, each in its planned place: pinned to its cores, or in a worker bound, by
/// UUID, to the GPU or MIG instance its place names (one worker for each of a `mig:…:K` instance's K processes),
/// on this machine or on the `jig node` the place names (the instance's queue and batcher stay here).
fn start_models(
    hosts: &ModelHosts,
    bundle: &Bundle,
    deployment: &Deployment,
) -> Result<(ModelSlots, Vec<Group>), StartError> {
    let app = &bundle.manifest.name;
    let refused = |detail: String| StartError::Deployment { app: app.clone(), detail };
    // The profile table, for what observed latencies are compared with; a bundle without one compares none.
    let profiles = bundle.profiles_path().and_then(|p| crate::deployment::read_profiles(&p).ok()).unwrap_or_default();
    let mut by_slot: HashMap<&str, Vec<(Arc<Instance>, f64)>> = HashMap::new();
    let mut groups = Vec::new();
    // Pooled pipelines' instances run the batches their head books, each alone and at once.
    let pipelined: Vec<&str> =
        deployment.pipelines.iter().flat_map(|p| p.pools.iter().map(|q| q.slot.as_str())).collect();
    for planned in &deployment.instances {
        let mut group = Group {
            slot: planned.slot.clone(),
            variant: planned.variant.clone(),
            segment: planned.segment.clone(),
            max_batch: planned.max_batch,
            instances: Vec::new(),
            profiled_ms: profiles
                .iter()
                .filter(|r| r.slot == planned.slot && r.variant == planned.variant && r.segment == planned.segment)
                .map(|r| (r.batch, (r.p50_ms, r.p95_ms)))
                .collect(),
        };
        let variant = bundle.manifest.variants.iter().find(|v| v.slot == planned.slot && v.name == planned.variant);
        let variant = variant.ok_or_else(|| {
            refused(format!(
                "the plan names variant `{}` of slot `{}`, which the bundle lacks",
                planned.variant, planned.slot
            ))
        })?;
        for i in 0..planned.count {
            let place = planned.places.get(i as usize).cloned().unwrap_or_default();
            let name = place.segment(&planned.segment);
            let segment: Segment =
                name.parse().map_err(|e| refused(format!("the plan places an instance on `{name}`: {e}")))?;
            let processes = match segment {
                Segment::Mig { mps, .. } => u32::from(mps),
                _ => 1,
            };
            for process in 0..processes {
                let label = if processes > 1 { format!("{i}.{process}") } else { i.to_string() };
                let mut config =
                    InstanceConfig::new(format!("{app}/{}/{}@{name}#{label}", planned.slot, planned.variant));
                // As planned (§3.3): wait up to L̂ for a fuller batch, drop what can no longer make its deadline.
                // Unplanned instances start batches at once and drop only what is past its deadline.
                let ms = |ms: f64| Duration::from_secs_f64(ms.max(0.0) / 1000.0);
                config.policy = if pipelined.contains(&planned.slot.as_str()) {
                    BatchPolicy::serving(1, DEFAULT_DEADLINE)
                } else if planned.wait_ms > 0.0 {
                    let stale = if planned.stale_ms > 0.0 { planned.stale_ms } else { 2.0 * planned.wait_ms };
                    BatchPolicy::planned(
                        planned.max_batch.into(),
                        ms(planned.wait_ms),
                        ms(planned.drop_budget_ms),
                        ms(stale),
                    )
                } else {
                    BatchPolicy::serving(planned.max_batch.into(), DEFAULT_DEADLINE)
                };
                let model_error = |source| StartError::Model {
                    app: app.clone(),
                    source: Box::new(source),
                    bundle: bundle.dir.clone(),
                };
                let instance = match &place.node {
                    None => hosts
                        .launcher
                        .start_instance(config, &variant.name, &bundle.model_path(variant), placement(segment, &place))
                        .map_err(model_error)?,
                    Some(node) => {
                        let access = hosts.nodes.as_ref().ok_or_else(|| {
                            refused(format!(
                                "the plan places an instance on node {node}, but the gateway has no node token \
                                 (`node_token_file`)"
                            ))
                        })?;
                        let spec = jig_node::RemoteSpec {
                            node: node.clone(),
                            token: access.token.clone(),
                            instance: config.name.clone(),
                            model_name: variant.name.clone(),
                            model_path: bundle.model_path(variant),
                            segment,
                            device: place.device.clone(),
                            cores: place.cores.iter().map(|&c| c as usize).collect(),
                            timeout: access.timeout,
                        };
                        Instance::start(config, move || Ok(jig_node::Remote::connect(spec)?))
                            .map_err(|e| model_error(LaunchError::Instance(e)))?
                    }
                };
                // A `mig:…:K` instance's rate is that of its K processes together.
                let rate = planned.rate_rps / f64::from(processes);
                let instance = Arc::new(instance);
                group.instances.push(instance.clone());
                by_slot.entry(planned.slot.as_str()).or_default().push((instance, rate));
            }
        }
        groups.push(group);
    }
    let mut slots = ModelSlots::new();
    for (slot, instances) in by_slot {
        slots.insert(slot, Arc::new(Pool::new(instances)));
    }
    Ok((slots, groups))
}

/// The most requests at once a deployment of `capacity_rps` completes within `slo` (Little's law).
fn admission_ceiling(capacity_rps: f64, slo: Duration) -> u32 {
    (capacity_rps * slo.as_secs_f64()).ceil().clamp(1.0, f64::from(u32::MAX)) as u32
}

/// Where the launcher starts an instance placed at `place`: pinned to its cores, or bound to the device it was
/// placed on, by UUID (a GPU instance placed on none, as the default deployment's are not, is placed by the
/// launcher when it starts).
fn placement(segment: Segment, place: &InstancePlace) -> Placement {
    let cores = place.cores.iter().map(|&c| c as usize).collect::<Vec<_>>();
    Placement { segment, cores: (!cores.is_empty()).then_some(cores), device: place.device.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_the_bundle_ships_broken_is_its_fault_a_missing_runtime_is_not() {
        let model = |error: ModelError| StartError::Model {
            app: "a".into(),
            source: Box::new(LaunchError::Model(error)),
            bundle: PathBuf::new(),
        };
        let invalid = ModelError::Invalid { model: "m".into(), path: "m.onnx".into(), detail: "garbage".into() };
        assert!(model(invalid).is_bundle_fault());
        // The message names the file as the bundle does, not where the gateway stores it.
        let stored = PathBuf::from("/var/lib/jig/bundles/ab12");
        let invalid = ModelError::Invalid { model: "m".into(), path: stored.join("models/m.onnx"), detail: "x".into() };
        let said = StartError::Model { app: "a".into(), source: Box::new(LaunchError::Model(invalid)), bundle: stored }
            .to_string();
        assert!(said.contains("(models/m.onnx)") && !said.contains("/var/lib"), "{said}");
        assert!(!model(ModelError::Library { detail: "not found".into() }).is_bundle_fault());
        let deployment = StartError::Deployment { app: "a".into(), detail: "no such variant".into() };
        assert!(!deployment.is_bundle_fault());
        assert!(StartError::Bundle(InvalidBundle("bad".into())).is_bundle_fault());
        // A device that is gone is this machine's state, not the bundle's: the deploy is not blamed on it.
        let gone = jig_model_host::device::DeviceError::Gone {
            segment: "mig:0:3g.40gb:1".parse().unwrap(),
            device: "MIG-1".into(),
        };
        let unbound = LaunchError::Bind { instance: "a/s/v@mig:0:3g.40gb:1#0".into(), source: gone };
        assert!(
            !StartError::Model { app: "a".into(), source: Box::new(unbound), bundle: PathBuf::new() }.is_bundle_fault()
        );
    }

    /// A planned place on the second 3g.40gb instance starts its worker on that instance, by UUID.
    #[test]
    fn a_place_binds_its_worker_to_the_device_it_names() {
        use jig_model_host::device::Devices;
        let devices = Devices::from_nvidia_smi(
            vec![0, 1],
            "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559, Enabled\n",
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n  MIG 3g.40gb Device 0: (UUID: MIG-0)\n  \
             MIG 3g.40gb Device 1: (UUID: MIG-1)\n",
        );
        let launcher = Launcher::new(devices, None);
        let place = InstancePlace { gpu: Some(0), device: Some("MIG-1".into()), ..InstancePlace::default() };
        let segment: Segment = place.segment("mig:3g.40gb:2").parse().unwrap();
        let bound = launcher.bind(&placement(segment, &place)).unwrap();
        assert_eq!(bound.env()[0], ("CUDA_VISIBLE_DEVICES".into(), "MIG-1".into()));
        assert_eq!(bound.memory, 20_000_000_000, "half of the instance's 40 GB for each of its two processes");
        let cores = InstancePlace { cores: vec![2, 3], ..InstancePlace::default() };
        let pinned = placement(Segment::Cpu { cores: 2 }, &cores);
        assert_eq!((pinned.cores, pinned.device), (Some(vec![2, 3]), None));
    }
}
