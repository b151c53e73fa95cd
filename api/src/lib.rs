//! # jig-api
//!
//! The wire types of jig's HTTP API, shared by the gateway that writes them, the client that reads them and
//! the tests that check them, with the routes they travel on ([`Route`]) and the API's OpenAPI description
//! ([`openapi()`], served at `/openapi.json`). Serde, schemars, thiserror and jig's
//! tensor type only (the Open Inference Protocol's tensors decode to it): no HTTP, no runtime.
//!
//! | method and path | answer | token |
//! |---|---|---|
//! | `POST /v1/apps/{app}/invoke` | [`InvokeResponse`]: run the app on the request body | `invoke_token`, if set |
//! | `POST /v1/apps` | 201, [`AppStatus`]: deploy a packed bundle (`jig deploy` packs it) | `token` |
//! | `GET /v1/apps` | [`AppList`]: the deployed apps | `token` |
//! | `GET /v1/apps/{app}` | [`AppStatus`]: one app's tasks, deployment, bundle, demand | `token` |
//! | `DELETE /v1/apps/{app}` | [`Deleted`]: remove an app | `token` |
//! | `GET /v1/devices` | [`MachineStatus`]: the cores and GPUs (or each node's), what no app holds, the replica | `token` |
//! | `GET /metrics` | Prometheus text format | none |
//! | `GET /openapi.json` | [`openapi()`]: this API's OpenAPI 3.1 description | none |
//! | `GET /healthz` | `ok` | none |
//! | `GET /v2`, `/v2/health/live`, `/v2/health/ready` | the Open Inference Protocol's server metadata and health ([`oip`]) | none |
//! | `GET /v2/models/{model}`, `…/ready` | a model slot's metadata ([`oip::ModelMetadata`]), readiness | `invoke_token`, if set |
//! | `POST /v2/models/{model}/infer` | [`oip::InferResponse`]: run a model slot, `APP.SLOT` | `invoke_token`, if set |
//!
//! Tokens go in `Authorization: Bearer TOKEN`. Every error answer is an [`ErrorBody`]: a message that names
//! the app, task or file and says what to do, and a machine-readable [`ErrorKind`] that sets the HTTP status
//! ([`ErrorKind::status`]).
//!
//! **Invocation.** The body is the entry task's payload. The deadline is [`TIMEOUT_HEADER`] (milliseconds)
//! from arrival, or else the app's latency SLO, or else 30 s. The `server-timing` header of the answer gives
//! the time spent in the gateway (`total;dur=MS`).

#![deny(missing_docs)]

pub mod oip;
mod openapi;
mod routes;
pub mod triton;

pub use openapi::openapi;
pub use routes::Route;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The request header that carries an invocation's timeout, in milliseconds.
pub const TIMEOUT_HEADER: &str = "jig-timeout-ms";

/// The request header that names an invocation's query class, for an app planned by Compass.
pub const CLASS_HEADER: &str = "jig-class";

/// A successful invocation: one part per leaf task's return value or payload emitted on a port without
/// edges, in the graph's order (fan-out order, not completion order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InvokeResponse {
    /// The parts of the answer.
    pub outputs: Vec<OutputPart>,
}

/// One part of an invocation's answer.
///
/// The bytes a task produced travel as `json` when they are JSON; as `json` (the metadata) and `base64` (the
/// body) when they are an envelope (`jig_sdk::envelope`: metadata around a binary body, such as a recognised
/// line and its audio); else as `base64` alone (binary such as WAV audio).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutputPart {
    /// The task that produced it.
    pub task: String,
    /// The port, for a payload emitted on a port without edges; absent for a leaf's return value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// The bytes as JSON, or an envelope's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    /// The bytes (or an envelope's body), base64 with padding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
}

/// `GET /v1/apps`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppList {
    /// Every app deployed and running, by name.
    pub apps: Vec<AppStatus>,
}

/// `DELETE /v1/apps/{app}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Deleted {
    /// The app removed.
    pub deleted: String,
}

/// A deployed app: what `GET /v1/apps/{app}` answers, and a deploy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppStatus {
    /// The app's name, from its manifest.
    pub name: String,
    /// The SHA-256 of the bundle archive it runs.
    pub bundle: String,
    /// When it was deployed, seconds since the Unix epoch.
    pub deployed_at: u64,
    /// Task names, the entry first.
    pub tasks: Vec<String>,
    /// The latency SLO, the default deadline of its invocations.
    pub slo_latency_ms: Option<u64>,
    /// The model instances serving it.
    pub deployment: Deployment,
    /// Rates of the last closed demand windows (req/s), oldest first.
    pub demand_windows: Vec<f64>,
    /// The controller's prediction from them.
    pub predicted_rps: Option<f64>,
    /// Times the controller re-planned since the app was deployed or the gateway started.
    pub replans: u32,
    /// Why the controller's last re-plan kept the running deployment (it found no plan); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replan_kept: Option<String>,
    /// Each edge between model tasks with its factor as observed since the app was deployed (or the gateway
    /// started).
    #[serde(default)]
    pub observed_factors: Vec<ObservedFactor>,
    /// Each planned group of instances with the batch latencies it observed since it started.
    #[serde(default)]
    pub observed_latencies: Vec<ObservedLatency>,
    /// Each task's glue time since the app was deployed (or the gateway started).
    #[serde(default)]
    pub observed_glue: Vec<ObservedGlue>,
    /// The CPU time of model instances that run unpinned on this machine's cores since they started, ms in all:
    /// default instances on the cores the planned ones hold (busy time × their threads), and GPU instances'
    /// worker processes (every thread's time since their model loaded).
    #[serde(default)]
    pub observed_unpinned_ms: f64,
    /// Requests whose graph ran to its end since the app was deployed (or the gateway started).
    #[serde(default)]
    pub answered: u64,
}

/// The CPU time a task's glue takes per invocation: instantiating it and running its handler, on whichever
/// threads ran it (waits for models and for a core excluded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedGlue {
    /// The task.
    pub task: String,
    /// Invocations that completed, which the mean rests on.
    pub invocations: u64,
    /// Mean glue time per invocation, ms.
    pub mean_ms: f64,
}

/// The batch latency the instances of one variant on one segment type observed, at the batch size they ran
/// most often, beside the profile table's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedLatency {
    /// The model slot.
    pub slot: String,
    /// The variant.
    pub variant: String,
    /// The segment type, as the profile table names it (`cpu:2`).
    pub segment: String,
    /// Rows per batch.
    pub batch: u32,
    /// Batches of that size it rests on.
    pub batches: u64,
    /// p95 of the last (up to) 100 of them, ms.
    pub p95_ms: f64,
    /// The profile table's p95 for that variant, segment and batch, ms, where it has the row.
    pub profiled_ms: Option<f64>,
    /// p50 of the same batches, ms (0 from a gateway that did not record it).
    #[serde(default)]
    pub p50_ms: f64,
    /// The profile table's p50 for that row, ms.
    #[serde(default)]
    pub profiled_p50_ms: Option<f64>,
    /// The mean of the same batches, ms (0 from a gateway that did not record it): what a batch occupies its
    /// segment for on average, so what the instance's throughput follows.
    #[serde(default)]
    pub mean_ms: f64,
    /// The profile table's mean for that row, ms: its rows over its throughput (batches back to back).
    #[serde(default)]
    pub profiled_mean_ms: Option<f64>,
    /// The mean CPU time the same batches took, ms, for instances that run batches on this gateway's cores: what
    /// a batch costs them, without the time it waited for a core that other work held. `None` on GPUs, on
    /// nodes, and where the platform does not measure a thread's CPU time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mean_ms: Option<f64>,
    /// The time the group's instances spent running batches (of every size), ms, per request the app answered
    /// since they started: what one request costs the group, whatever its batches held. `None` before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ms_per_request: Option<f64>,
    /// The requests the app answered since the group's instances started (what `busy_ms_per_request` rests on).
    #[serde(default)]
    pub requests: u64,
    /// The mean host CPU a batch (of any size) cost the group's worker processes on this machine, ms: every
    /// thread of them, since their models loaded, over every batch they ran. A GPU instance's host side (kernel
    /// launches, copies, operators ONNX Runtime keeps on the CPU) runs on the machine's cores, and the next plan
    /// counts it there. `None` for instances in process or on nodes, and before the first batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu_ms: Option<f64>,
}

/// A multiplicative factor the app observed: invocations of task `to` per invocation of task `from`, where a
/// path of glue-only tasks leads from model task `from` to model task `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedFactor {
    /// The upstream model task.
    pub from: String,
    /// The downstream model task.
    pub to: String,
    /// Invocations of `to` per invocation of `from`; `None` before `from` ran.
    pub factor: Option<f64>,
    /// Invocations of `from` it rests on.
    pub samples: u64,
}

/// The multiplicative factor a deployment was planned with on one edge between model tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedFactor {
    /// The upstream model task.
    pub from: String,
    /// The downstream model task.
    pub to: String,
    /// Requests `to` gets per request of `from`, as planned (the largest among `from`'s variants).
    pub factor: f64,
}

/// `GET /v1/devices`: what the gateway's model instances may use, and what no app holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MachineStatus {
    /// CPU cores model instances may use, as the machine numbers them.
    pub cores: Vec<u32>,
    /// Those no app's instances are pinned to.
    pub free_cores: Vec<u32>,
    /// GPUs model instances may use.
    pub gpus: Vec<GpuStatus>,
    /// The `jig node`s model instances run on (the gateway's `nodes`, as last found); then the gateway runs
    /// none itself, and the fields above are empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeStatus>,
    /// This gateway as a replica of a cluster (`etcd` set); absent for a gateway alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ReplicaStatus>,
}

/// A gateway replica's place in its cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReplicaStatus {
    /// Its name in the cluster: host, port and process.
    pub replica: String,
    /// Whether it leads: runs the controller that re-plans every app.
    pub leader: bool,
}

/// One `jig node` the gateway may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeStatus {
    /// Its address, `IP:PORT`, as instances' places name it.
    pub addr: String,
    /// Its name (`jig node --name`, by default its host name).
    pub name: String,
    /// Its CPU cores, as it numbers them.
    pub cores: Vec<u32>,
    /// Those no app's instances are pinned to.
    pub free_cores: Vec<u32>,
    /// Its GPUs.
    pub gpus: Vec<GpuStatus>,
}

/// One GPU the gateway may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuStatus {
    /// Its index, as `nvidia-smi` numbers it (`mps:INDEX:…`, `mig:INDEX:…`).
    pub index: u32,
    /// The product name.
    pub name: String,
    /// `GPU-…`.
    pub uuid: String,
    /// Total memory, MiB.
    pub memory_mib: u64,
    /// Whether MIG mode is on: its MIG instances serve `mig:` segments, and it offers no `mps:` shares.
    pub mig_enabled: bool,
    /// Its MIG instances' profiles, in `nvidia-smi -L`'s order.
    pub mig_instances: Vec<String>,
    /// Percent of its SMs no app's `mps:` share holds (0 in MIG mode).
    pub free_mps_percent: u32,
    /// Its MIG instances no app holds, as `PROFILE (UUID)`, e.g. `3g.40gb (MIG-…)`.
    pub free_mig_instances: Vec<String>,
}

/// The model instances serving an app, and how they were chosen.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Deployment {
    /// `planned` (by the planner from the profile table), or why the default was used.
    pub source: String,
    /// The demand the deployment was planned for (req/s at the entry), if planned.
    pub demand_rps: Option<f64>,
    /// End-to-end accuracy as a fraction of the best, if planned.
    pub accuracy: Option<f64>,
    /// The most requests per second at the entry its instances serve, by their profiles, if planned: the
    /// gateway admits about as many requests at once as this rate completes within the latency SLO.
    #[serde(default)]
    pub capacity_rps: Option<f64>,
    /// The factors it was planned with, on every edge between model tasks; empty when not planned.
    #[serde(default)]
    pub factors: Vec<PlannedFactor>,
    /// The observed latencies it refined its profile rows with (see `jig_app::deployment::refine`).
    #[serde(default)]
    pub refined: Vec<ObservedLatency>,
    /// The observed glue times it was planned with (a pooled pipeline's stages count them).
    #[serde(default)]
    pub glue: Vec<ObservedGlue>,
    /// The CPU time a request costs outside the instances (glue, models no task plans) that the plan kept within
    /// the cores, ms (see `jig_app::deployment::unplanned_cpu_ms`); absent when it counted none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unplanned_cpu_ms: Option<f64>,
    /// Instances by variant and segment.
    pub instances: Vec<PlannedInstances>,
    /// For an app planned by Compass: each query class's routes, over which its requests are spread; empty
    /// otherwise (a slot's requests are spread over all its instances).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassRoutes>,
    /// For an app planned by PPipe: its pooled pipelines, along which the gateway books every batch
    /// (`jig_policy::reserve`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipelines: Vec<PooledPipeline>,
}

/// A pooled pipeline (PPipe): per slot of a chain, a pool of instances; every batch the gateway books along it
/// runs at each slot on one member of its pool, as one batch of at most `batch` requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PooledPipeline {
    /// The requests per second it was planned to take.
    pub rate_rps: f64,
    /// The largest batch it runs.
    pub batch: u32,
    /// Per slot, in chain order, its pool.
    pub pools: Vec<PipelinePool>,
}

/// A pipeline's pool at one slot: `members` of the instances of a variant on a segment type with a largest
/// batch (pipelines sharing a type share its instances out in order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PipelinePool {
    /// The model slot.
    pub slot: String,
    /// The variant.
    pub variant: String,
    /// The segment type.
    pub segment: String,
    /// The instances' largest batch.
    pub max_batch: u32,
    /// How many of them.
    pub members: u32,
}

/// How one query class's requests are served: spread over its routes in proportion to their rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClassRoutes {
    /// The class, as requests name it (`jig-class`).
    pub class: String,
    /// Its latency SLO, milliseconds: the deadline of its requests that name none.
    pub latency_ms: f64,
    /// Its demand the plan was made for, req/s.
    pub demand_rps: f64,
    /// What the plan serves of it within its SLOs, req/s.
    pub served_rps: f64,
    /// Its routes, most used first.
    pub routes: Vec<ClassRoute>,
}

/// One route of a class: an instance type for each planned slot, and the class's requests it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClassRoute {
    /// The class's requests on it, req/s.
    pub rate_rps: f64,
    /// Per planned slot, the instances its requests go to.
    pub steps: Vec<RouteStep>,
}

/// The instances of one slot a route takes: those of a variant on a segment type with a largest batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RouteStep {
    /// The model slot.
    pub slot: String,
    /// The variant.
    pub variant: String,
    /// The segment type.
    pub segment: String,
    /// The instances' largest batch.
    pub max_batch: u32,
}

/// `count` instances of one variant on one kind of segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedInstances {
    /// The model slot they serve.
    pub slot: String,
    /// The slot's variant they run.
    pub variant: String,
    /// The segment type, e.g. `cpu:2` (two cores, two intra-op threads).
    pub segment: String,
    /// The largest batch an instance runs.
    pub max_batch: u32,
    /// How many instances.
    pub count: u32,
    /// Requests per second the planner routes to each of these instances; spreads a slot's requests.
    pub rate_rps: f64,
    /// The profiled p95 latency of a full batch, milliseconds; 0 when not planned.
    pub latency_ms: f64,
    /// L̂ of the slot's task: how long an idle instance waits for a fuller batch, milliseconds (§3.3); 0 when
    /// not planned (a batch starts at once).
    #[serde(default)]
    pub wait_ms: f64,
    /// The least time a request still needs here (this batch and the fastest later tasks), milliseconds: a
    /// request with less left before its deadline is dropped at once. A default instance's (not planned) is its
    /// median batch once observed; 0 before.
    #[serde(default)]
    pub drop_budget_ms: f64,
    /// How long a request may wait here before it is dropped as stale, milliseconds: the task's share of the
    /// latency SLO; 0 when not planned.
    #[serde(default)]
    pub stale_ms: f64,
    /// Where each instance runs; empty when they are not placed (the default deployment's CPU instances on the
    /// gateway's machine, unpinned).
    #[serde(default)]
    pub places: Vec<InstancePlace>,
}

/// Where one model instance runs: on the gateway's machine or a `jig node`, pinned to cores, or on a GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstancePlace {
    /// The `jig node` it runs on, by address (`IP:PORT`); absent: the gateway's own machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The CPU cores it is pinned to (the machine's core numbers), for `cpu:` segments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<u32>,
    /// Its GPU, as `nvidia-smi` numbers it, for `mps:` and `mig:` segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// The device it was placed on, for `mps:` and `mig:` segments: the UUID `nvidia-smi -L` lists for the
    /// MIG instance (`MIG-…`) or, for an MPS share, the GPU (`GPU-…`). Chosen once, when the plan is placed;
    /// the instance's worker is bound to exactly this device (`CUDA_VISIBLE_DEVICES`), and fails to start,
    /// naming it, once the machine no longer lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

impl InstancePlace {
    /// The segment as this place pins it, from the planner's segment type: `mps:50` on GPU 1 is `mps:1:50`,
    /// `mig:3g.40gb:2` on GPU 0 is `mig:0:3g.40gb:2`; CPU segments are unchanged.
    pub fn segment(&self, segment_type: &str) -> String {
        match (self.gpu, segment_type.split_once(':')) {
            (Some(gpu), Some((kind, rest))) => format!("{kind}:{gpu}:{rest}"),
            _ => segment_type.to_string(),
        }
    }
}

impl PlannedInstances {
    /// Cores one instance holds: N of `cpu:N`; `None` for other segments.
    pub fn cpu_cores(&self) -> Option<u32> {
        self.segment.strip_prefix("cpu:").and_then(|n| n.parse().ok())
    }

    /// Cores one instance holds on the gateway's own machine: [`cpu_cores`](Self::cpu_cores) where its places
    /// name no node; `None` on a node or for another segment.
    pub fn local_cores(&self) -> Option<u32> {
        self.cpu_cores().filter(|_| self.places.iter().all(|p| p.node.is_none()))
    }

    /// The threads of an instance that runs unpinned, on cores the pinned ones hold: N of `cpu:N` where its
    /// places name no cores (and no node); `None` for a pinned instance or another segment.
    pub fn unpinned_threads(&self) -> Option<u32> {
        self.local_cores().filter(|_| self.places.iter().all(|p| p.cores.is_empty()))
    }
}

impl Deployment {
    /// The same instances (variants, segments, batch sizes, counts, and the nodes they run on) as `other`, in the
    /// same pooled pipelines, whatever the rates.
    pub fn same_instances(&self, other: &Deployment) -> bool {
        fn sorted(d: &Deployment) -> Vec<Identity<'_>> {
            let mut k: Vec<_> = d.instances.iter().map(PlannedInstances::identity).collect();
            k.sort();
            k
        }
        self.pipelines(other) && sorted(self) == sorted(other)
    }

    /// This plan as `running`, the deployment of the app it re-plans, runs it when both have the [same
    /// instances](Self::same_instances): its rates and costs, with `running`'s instances in their order and
    /// places (the app's running groups follow its deployment's order, and keep their cores and GPUs). `None`
    /// when the instances differ.
    pub fn keeping_places_of(mut self, running: &Deployment) -> Option<Deployment> {
        if !self.pipelines(running) {
            return None;
        }
        // Each running instance takes its match from the plan; the same instances leave none over.
        let mut planned = std::mem::take(&mut self.instances);
        for kept in &running.instances {
            let i = planned.iter().position(|p| p.identity() == kept.identity())?;
            let instance = planned.remove(i);
            self.instances.push(PlannedInstances { places: kept.places.clone(), ..instance });
        }
        planned.is_empty().then_some(self)
    }

    fn pipelines(&self, other: &Deployment) -> bool {
        let pools = |d: &Deployment| -> Vec<(u32, Vec<PipelinePool>)> {
            d.pipelines.iter().map(|p| (p.batch, p.pools.clone())).collect()
        };
        pools(self) == pools(other)
    }
}

/// Slot, variant, segment, batch size, count and the nodes: [`PlannedInstances::identity`].
type Identity<'a> = (&'a str, &'a str, &'a str, u32, u32, Vec<Option<&'a str>>);

impl PlannedInstances {
    /// What makes planned instances the same ones: slot, variant, segment, batch size, count and the nodes they
    /// run on, not their rates.
    fn identity(&self) -> Identity<'_> {
        let mut nodes: Vec<Option<&str>> = self.places.iter().map(|p| p.node.as_deref()).collect();
        nodes.sort();
        (&self.slot, &self.variant, &self.segment, self.max_batch, self.count, nodes)
    }
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// What went wrong, naming the app, task or file, and what to do.
    pub error: String,
    /// What kind of failure: clients branch on this, never on the message.
    pub kind: ErrorKind,
}

/// What kind of failure an error answer reports; each kind has one HTTP status ([`ErrorKind::status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// 400: the request itself is malformed (a header, a path).
    InvalidRequest,
    /// 400: a function refused the invocation's input.
    InvalidInput,
    /// 400: the uploaded bundle cannot be deployed; the message names the file and field.
    InvalidBundle,
    /// 401: the bearer token is missing or wrong.
    Unauthorized,
    /// 404: no such app or route.
    NotFound,
    /// 408: the bundle upload took too long.
    RequestTimeout,
    /// 413: the body is larger than the gateway takes.
    TooLarge,
    /// 429: the app is at its limit of requests in progress; retry later.
    Busy,
    /// 503: a task or model instance was overloaded.
    Overloaded,
    /// 503: a model instance dropped the request early: it could no longer make its deadline.
    Dropped,
    /// 503: the gateway is shutting down, or it (or the model asked of) is not ready yet (`/readyz`).
    Unavailable,
    /// 504: the deadline passed.
    Deadline,
    /// 500: a function failed (trapped, or returned an error).
    FunctionFailed,
    /// 500: the gateway failed; the message says what it was doing.
    Internal,
}

impl ErrorKind {
    /// The HTTP status code of an answer of this kind.
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::InvalidRequest | ErrorKind::InvalidInput | ErrorKind::InvalidBundle => 400,
            ErrorKind::Unauthorized => 401,
            ErrorKind::NotFound => 404,
            ErrorKind::RequestTimeout => 408,
            ErrorKind::TooLarge => 413,
            ErrorKind::Busy => 429,
            ErrorKind::FunctionFailed | ErrorKind::Internal => 500,
            ErrorKind::Overloaded | ErrorKind::Dropped | ErrorKind::Unavailable => 503,
            ErrorKind::Deadline => 504,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_carry_a_snake_case_kind_and_its_status() {
        let body = ErrorBody { error: "app `x`: deadline".into(), kind: ErrorKind::Deadline };
        let text = serde_json::to_string(&body).unwrap();
        assert_eq!(text, r#"{"error":"app `x`: deadline","kind":"deadline"}"#);
        assert_eq!(serde_json::from_str::<ErrorBody>(&text).unwrap(), body);
        assert_eq!(ErrorKind::FunctionFailed.status(), 500);
        assert_eq!(serde_json::to_string(&ErrorKind::FunctionFailed).unwrap(), r#""function_failed""#);
    }

    #[test]
    fn output_parts_omit_what_they_lack() {
        let part = OutputPart { task: "speak".into(), port: None, json: None, base64: Some("AAA=".into()) };
        assert_eq!(serde_json::to_string(&part).unwrap(), r#"{"task":"speak","base64":"AAA="}"#);
        let read: OutputPart = serde_json::from_str(r#"{"task":"t","port":"p","json":{"a":1}}"#).unwrap();
        assert_eq!(read.port.as_deref(), Some("p"));
        assert_eq!(read.json, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn same_instances_ignores_rates_and_order_but_not_nodes() {
        let planned = |slot: &str, rate_rps: f64| PlannedInstances {
            slot: slot.into(),
            variant: "v".into(),
            segment: "cpu:2".into(),
            max_batch: 4,
            count: 1,
            rate_rps,
            latency_ms: 0.0,
            wait_ms: 0.0,
            drop_budget_ms: 0.0,
            stale_ms: 0.0,
            places: Vec::new(),
        };
        let a = Deployment {
            source: "planned".into(),
            instances: vec![planned("a", 1.0), planned("b", 2.0)],
            ..Deployment::default()
        };
        let b = Deployment { instances: vec![planned("b", 5.0), planned("a", 3.0)], ..a.clone() };
        assert!(a.same_instances(&b));
        assert_eq!(a.instances[0].cpu_cores(), Some(2));
        // The same instances moved to another node are not the same.
        let mut moved = b.clone();
        moved.instances[0].places = vec![InstancePlace { node: Some("10.0.0.2:7070".into()), ..Default::default() }];
        assert!(!a.same_instances(&moved));
        assert!(moved.keeping_places_of(&a).is_none());
        // A plan of the same instances in another order and on other cores runs as the running one: in its order
        // and places, at the plan's rates.
        let on = |core| vec![InstancePlace { cores: vec![core], ..InstancePlace::default() }];
        let mut running = a.clone();
        (running.instances[0].places, running.instances[1].places) = (on(0), on(1));
        let mut replanned = b.clone();
        (replanned.instances[0].places, replanned.instances[1].places) = (on(0), on(1));
        let kept = replanned.keeping_places_of(&running).unwrap();
        let seen: Vec<(&str, f64, u32)> =
            kept.instances.iter().map(|i| (&*i.slot, i.rate_rps, i.places[0].cores[0])).collect();
        assert_eq!(seen, [("a", 3.0, 0), ("b", 5.0, 1)]);
    }

    #[test]
    fn a_place_pins_a_gpu_segment_type_to_its_gpu() {
        let on = |gpu| InstancePlace { gpu, ..InstancePlace::default() };
        assert_eq!(on(Some(1)).segment("mps:50"), "mps:1:50");
        assert_eq!(on(Some(0)).segment("mig:3g.40gb:2"), "mig:0:3g.40gb:2");
        assert_eq!(on(None).segment("cpu:4"), "cpu:4");
    }
}
