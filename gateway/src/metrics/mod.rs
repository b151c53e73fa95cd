//! The gateway's metrics, served at `/metrics` as OpenMetrics to a scraper that asks for it (Prometheus does),
//! else in the Prometheus text format ([`exposition`]).
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `jig_requests_total` | app, code | invocations answered, by HTTP status |
//! | `jig_request_duration_seconds` | app | invocation latency, arrival to response (histogram) |
//! | `jig_slo_violations_total` | app | invocations that missed their deadline, were dropped or overloaded |
//! | `jig_early_drops_total` | app | invocations a model instance dropped early (part of the violations) |
//! | `jig_requests_in_flight` | app | invocations in progress |
//! | `jig_model_requests_total` | app, slot, code | direct calls of a model slot over the Open Inference Protocol (`/v2/models/APP.SLOT/infer`), by HTTP status: not the app's invocations, nor its demand |
//! | `jig_model_request_duration_seconds` | app, slot | their latency, arrival to response (histogram) |
//! | `jig_model_requests_in_flight` | app, slot | direct model calls in progress |
//! | `jig_task_invocations_total` | app, task, outcome | glue invocations: `ok`, `error`, `deadline`, `queued` |
//! | `jig_task_duration_seconds` | app, task | glue invocation latency, `infer` calls included (histogram) |
//! | `jig_instance_requests_total` … | app, slot, instance | per model instance: requests, batches, rows, drops, failures |
//! | `jig_instance_busy_seconds_total` | app, slot, instance | time spent running batches: its rate is the segment's use |
//! | `jig_instance_restarts_total` | app, slot, instance | times the instance's worker process was replaced after dying |
//! | `jig_instance_queue_depth` | app, slot, instance | requests waiting for a batch |
//! | `jig_edge_factor` | app, from, to | observed invocations of model task `to` per invocation of `from` |
//! | `jig_pipeline_batches_total`, `jig_pipeline_rows_total` | app, pipeline | a PPipe app's batches booked along each pooled pipeline, and the requests in them |
//! | `jig_pipeline_dropped_total` | app | requests a PPipe app's head dropped early (part of the early drops) |
//! | `jig_pipeline_queue_depth` | app | requests waiting at a PPipe app's head for a batch |
//! | `jig_cpu_cores` | state | cores the gateway may give instances: `free`, or `held` by an app's instances |
//! | `jig_gpu_mps_free_percent` | gpu | percent of a GPU's SMs no app's `mps:` share holds |
//! | `jig_gpu_mig_instances` | gpu, state | a GPU's MIG instances, `free` or `held` |
//! | `jig_build_info` | version | 1, labelled with the running jig's version |
//! | `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`, `process_start_time_seconds` | | the gateway process, as every Prometheus client library exports it (from `/proc`) |

pub mod exposition;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use jig_app::{App, TaskObserver};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AppLabels {
    app: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    app: String,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SlotLabels {
    app: String,
    slot: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SlotCodeLabels {
    app: String,
    slot: String,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    app: String,
    task: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    app: String,
    task: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    app: String,
    slot: String,
    instance: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PipelineLabels {
    app: String,
    pipeline: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EdgeLabels {
    app: String,
    from: String,
    to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GpuLabels {
    gpu: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GpuStateLabels {
    gpu: u32,
    state: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 0.5 ms to about 33 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 17))
}

/// The apps whose instances the registry reports on each scrape.
pub type Apps = Arc<RwLock<std::collections::BTreeMap<String, Arc<App>>>>;

/// Every metric of a gateway. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<CodeLabels, Counter>,
    request_duration: HistogramFamily<AppLabels>,
    slo_violations: Family<AppLabels, Counter>,
    early_drops: Family<AppLabels, Counter>,
    in_flight: Family<AppLabels, Gauge>,
    model_requests: Family<SlotCodeLabels, Counter>,
    model_request_duration: HistogramFamily<SlotLabels>,
    model_in_flight: Family<SlotLabels, Gauge>,
    task_invocations: Family<OutcomeLabels, Counter>,
    task_duration: HistogramFamily<TaskLabels>,
    cpu_cores: Family<StateLabels, Gauge>,
    gpu_mps_free: Family<GpuLabels, Gauge>,
    gpu_mig_instances: Family<GpuStateLabels, Gauge>,
    apps: Apps,
}

impl Metrics {
    /// A registry with every family, reporting the instances of `apps` on each scrape.
    pub fn new(apps: Apps) -> Metrics {
        // The process's own figures keep their conventional names; jig's are under `jig_`.
        let mut root = Registry::default();
        root.register_collector(Box::new(ProcessCollector));
        let registry = root.sub_registry_with_prefix("jig");
        let build_info = Family::<VersionLabels, Gauge>::default();
        build_info.get_or_create(&VersionLabels { version: env!("CARGO_PKG_VERSION").into() }).set(1);
        registry.register("build_info", "1, labelled with the running jig's version", build_info);
        let requests = Family::<CodeLabels, Counter>::default();
        let request_duration = HistogramFamily::<AppLabels>::new_with_constructor(latency_histogram as fn() -> _);
        let slo_violations = Family::<AppLabels, Counter>::default();
        let early_drops = Family::<AppLabels, Counter>::default();
        let in_flight = Family::<AppLabels, Gauge>::default();
        let task_invocations = Family::<OutcomeLabels, Counter>::default();
        let task_duration = HistogramFamily::<TaskLabels>::new_with_constructor(latency_histogram as fn() -> _);
        registry.register("requests", "Invocations answered, by HTTP status", requests.clone());
        registry.register("request_duration_seconds", "Invocation latency", request_duration.clone());
        registry.register(
            "slo_violations",
            "Invocations that missed their deadline, were dropped or overloaded",
            slo_violations.clone(),
        );
        registry.register("early_drops", "Invocations a model instance dropped early", early_drops.clone());
        registry.register("requests_in_flight", "Invocations in progress", in_flight.clone());
        registry.register("task_invocations", "Glue invocations by outcome", task_invocations.clone());
        let model_requests = Family::<SlotCodeLabels, Counter>::default();
        let model_request_duration =
            HistogramFamily::<SlotLabels>::new_with_constructor(latency_histogram as fn() -> _);
        let model_in_flight = Family::<SlotLabels, Gauge>::default();
        registry.register(
            "model_requests",
            "Direct calls of a model slot answered, by HTTP status",
            model_requests.clone(),
        );
        registry.register(
            "model_request_duration_seconds",
            "Direct model call latency",
            model_request_duration.clone(),
        );
        registry.register("model_requests_in_flight", "Direct model calls in progress", model_in_flight.clone());
        let cpu_cores = Family::<StateLabels, Gauge>::default();
        let gpu_mps_free = Family::<GpuLabels, Gauge>::default();
        let gpu_mig_instances = Family::<GpuStateLabels, Gauge>::default();
        registry.register("cpu_cores", "Cores the gateway may give model instances, free or held", cpu_cores.clone());
        registry.register("gpu_mps_free_percent", "Percent of a GPU's SMs no MPS share holds", gpu_mps_free.clone());
        registry.register("gpu_mig_instances", "A GPU's MIG instances, free or held", gpu_mig_instances.clone());
        registry.register("task_duration_seconds", "Glue invocation latency", task_duration.clone());
        registry.register_collector(Box::new(InstanceCollector { apps: apps.clone() }));
        Metrics {
            registry: Arc::new(root),
            requests,
            request_duration,
            slo_violations,
            early_drops,
            in_flight,
            model_requests,
            model_request_duration,
            model_in_flight,
            task_invocations,
            task_duration,
            cpu_cores,
            gpu_mps_free,
            gpu_mig_instances,
            apps,
        }
    }

    /// Record what the machine offers and what apps hold, as of this scrape.
    pub fn machine(&self, machine: &jig_api::MachineStatus) {
        let free = machine.free_cores.len() as i64;
        self.cpu_cores.get_or_create(&StateLabels { state: "free" }).set(free);
        self.cpu_cores.get_or_create(&StateLabels { state: "held" }).set(machine.cores.len() as i64 - free);
        for gpu in &machine.gpus {
            self.gpu_mps_free.get_or_create(&GpuLabels { gpu: gpu.index }).set(gpu.free_mps_percent.into());
            let free = gpu.free_mig_instances.len() as i64;
            let held = gpu.mig_instances.len() as i64 - free;
            self.gpu_mig_instances.get_or_create(&GpuStateLabels { gpu: gpu.index, state: "free" }).set(free);
            self.gpu_mig_instances.get_or_create(&GpuStateLabels { gpu: gpu.index, state: "held" }).set(held);
        }
    }

    /// An invocation of `app` started; the guard counts it in flight until dropped.
    pub fn request_started(&self, app: &str) -> InFlight {
        let gauge = self.in_flight.get_or_create_owned(&AppLabels { app: app.into() });
        gauge.inc();
        InFlight(gauge)
    }

    /// An invocation of `app` was answered with `code` after `elapsed`.
    pub fn request_done(&self, app: &str, code: u16, elapsed: Duration, early_drop: bool) {
        let labels = AppLabels { app: app.into() };
        self.requests.get_or_create(&CodeLabels { app: app.into(), code }).inc();
        self.request_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
        if matches!(code, 429 | 503 | 504) {
            self.slo_violations.get_or_create(&labels).inc();
        }
        if early_drop {
            self.early_drops.get_or_create(&labels).inc();
        }
    }

    /// A direct call of `app`'s model slot `slot` started; the guard counts it in flight until dropped.
    pub fn model_request_started(&self, app: &str, slot: &str) -> InFlight {
        let gauge = self.model_in_flight.get_or_create_owned(&SlotLabels { app: app.into(), slot: slot.into() });
        gauge.inc();
        InFlight(gauge)
    }

    /// A direct call of `app`'s model slot `slot` was answered with `code` after `elapsed`.
    pub fn model_request_done(&self, app: &str, slot: &str, code: u16, elapsed: Duration) {
        let (app, slot) = (app.to_string(), slot.to_string());
        self.model_requests.get_or_create(&SlotCodeLabels { app: app.clone(), slot: slot.clone(), code }).inc();
        self.model_request_duration.get_or_create(&SlotLabels { app, slot }).observe(elapsed.as_secs_f64());
    }

    /// The OpenMetrics exposition of every metric. Every deployed app's violation and early-drop counters and
    /// in-flight gauge show from its deployment, at 0 until something happens, so that rates over them are
    /// defined.
    pub fn encode(&self) -> String {
        for app in self.apps.read().unwrap_or_else(|p| p.into_inner()).keys() {
            let labels = AppLabels { app: app.clone() };
            drop(self.slo_violations.get_or_create(&labels));
            drop(self.early_drops.get_or_create(&labels));
            drop(self.in_flight.get_or_create(&labels));
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// Counts an invocation in flight while alive.
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The process's own figures (`process_*`, as Prometheus' client libraries name them), read from `/proc` at
/// scrape time; none where there is no `/proc`.
#[derive(Debug)]
struct ProcessCollector;

impl prometheus_client::collector::Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return Ok(()) };
        // proc(5)'s fields, numbered from 1; the second, the command, is in parentheses and may hold spaces.
        let after_command: Vec<&str> =
            stat.rsplit_once(')').map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let field = |n: usize| after_command.get(n - 3).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
        // SAFETY: sysconf reads a constant of the system.
        let (ticks, page) =
            unsafe { (libc::sysconf(libc::_SC_CLK_TCK) as f64, libc::sysconf(libc::_SC_PAGESIZE) as f64) };
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse::<f64>().ok()))
            .unwrap_or(0.0);
        let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count()) as f64;
        let counter = ConstCounter::new(0.0f64);
        let cpu = (field(14) + field(15)) / ticks.max(1.0);
        ConstCounter::new(cpu).encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "User and system CPU time spent, seconds",
            None,
            counter.metric_type(),
        )?)?;
        let gauge = ConstGauge::new(0.0f64);
        for (name, help, value) in [
            ("process_resident_memory_bytes", "Resident memory size, bytes", field(24) * page),
            ("process_virtual_memory_bytes", "Virtual memory size, bytes", field(23)),
            ("process_open_fds", "Open file descriptors", fds),
            (
                "process_start_time_seconds",
                "Start time since the Unix epoch, seconds",
                boot + field(22) / ticks.max(1.0),
            ),
        ] {
            ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// Reads the model instances' own counters at scrape time.
struct InstanceCollector {
    apps: Apps,
}

impl std::fmt::Debug for InstanceCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstanceCollector")
    }
}

impl prometheus_client::collector::Collector for InstanceCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let apps = self.apps.read().unwrap_or_else(|p| p.into_inner());
        let mut rows = Vec::new();
        for app in apps.values() {
            for (slot, pool) in app.models().iter() {
                for instance in pool.instances() {
                    let labels = InstanceLabels {
                        app: app.name.clone(),
                        slot: slot.to_string(),
                        instance: instance.name().into(),
                    };
                    rows.push((labels, instance.clone()));
                }
            }
        }
        type Read = fn(&jig_model_host::instance::Stats) -> u64;
        let counters: [(&str, &str, Read); 6] = [
            ("instance_requests", "Requests a model instance received", |s| s.requests.load(Relaxed)),
            ("instance_batches", "Batches a model instance ran", |s| s.batches.load(Relaxed)),
            ("instance_rows", "Rows (batch items) a model instance ran", |s| s.rows.load(Relaxed)),
            ("instance_dropped_late", "Requests dropped because they could no longer meet their deadline", |s| {
                s.dropped_late.load(Relaxed)
            }),
            ("instance_dropped_stale", "Requests dropped after waiting too long for a batch", |s| {
                s.dropped_stale.load(Relaxed)
            }),
            ("instance_failed", "Requests whose batch failed", |s| s.failed.load(Relaxed)),
        ];
        for (name, help, read) in counters {
            let counter = ConstCounter::new(0u64);
            let mut family = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            for (labels, instance) in &rows {
                ConstCounter::new(read(instance.stats())).encode(family.encode_family(labels)?)?;
            }
        }
        let counter = ConstCounter::new(0u64);
        let help = "Times a model instance's worker process was replaced after dying or misbehaving (0 in process)";
        let mut family = encoder.encode_descriptor("instance_restarts", help, None, counter.metric_type())?;
        for (labels, instance) in &rows {
            ConstCounter::new(instance.restarts()).encode(family.encode_family(labels)?)?;
        }
        let busy = ConstCounter::new(0.0f64);
        let mut family = encoder.encode_descriptor(
            "instance_busy_seconds",
            "Time a model instance spent running batches; its rate is the share of the segment in use",
            None,
            busy.metric_type(),
        )?;
        for (labels, instance) in &rows {
            let seconds = instance.stats().busy_ns.load(Relaxed) as f64 / 1e9;
            ConstCounter::new(seconds).encode(family.encode_family(labels)?)?;
        }
        let gauge = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(
            "instance_queue_depth",
            "Requests waiting for a batch",
            None,
            gauge.metric_type(),
        )?;
        for (labels, instance) in &rows {
            ConstGauge::new(instance.stats().queued.load(Relaxed) as i64).encode(family.encode_family(labels)?)?;
        }
        let factor = ConstGauge::new(0.0f64);
        let mut family = encoder.encode_descriptor(
            "edge_factor",
            "Invocations of the downstream model task per invocation of the upstream one, as observed",
            None,
            factor.metric_type(),
        )?;
        for app in apps.values() {
            for observed in app.observed_factors() {
                let Some(value) = observed.factor else { continue };
                let labels = EdgeLabels { app: app.name.clone(), from: observed.from, to: observed.to };
                ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
        let heads: Vec<(String, jig_app::HeadStats)> =
            apps.values().filter_map(|app| Some((app.name.clone(), app.pipeline_stats()?))).collect();
        type ReadBooked = fn(&jig_app::Booked) -> u64;
        let booked: [(&str, &str, ReadBooked); 2] = [
            ("pipeline_batches", "Batches a PPipe app's head booked along a pooled pipeline", |b| b.batches),
            ("pipeline_rows", "Requests in the batches a PPipe app's head booked along a pooled pipeline", |b| {
                b.requests
            }),
        ];
        for (name, help, read) in booked {
            let counter = ConstCounter::new(0u64);
            let mut family = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            for (app, head) in &heads {
                for (k, pipeline) in head.booked.iter().enumerate() {
                    let labels = PipelineLabels { app: app.clone(), pipeline: k.to_string() };
                    ConstCounter::new(read(pipeline)).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        let counter = ConstCounter::new(0u64);
        let help = "Requests a PPipe app's head dropped early: no pooled pipeline could finish them in time";
        let mut family = encoder.encode_descriptor("pipeline_dropped", help, None, counter.metric_type())?;
        for (app, head) in &heads {
            ConstCounter::new(head.dropped).encode(family.encode_family(&AppLabels { app: app.clone() })?)?;
        }
        let gauge = ConstGauge::new(0i64);
        let help = "Requests waiting at a PPipe app's head for a batch";
        let mut family = encoder.encode_descriptor("pipeline_queue_depth", help, None, gauge.metric_type())?;
        for (app, head) in &heads {
            ConstGauge::new(head.queued as i64).encode(family.encode_family(&AppLabels { app: app.clone() })?)?;
        }
        let limit = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(
            "admission_limit",
            "Requests a planned app admits at once now: at most its capacity times its SLO, less after misses or while it answers fewer",
            None,
            limit.metric_type(),
        )?;
        for app in apps.values() {
            let Some(admitted) = app.admission_limit() else { continue };
            ConstGauge::new(i64::from(admitted)).encode(family.encode_family(&AppLabels { app: app.name.clone() })?)?;
        }
        Ok(())
    }
}

impl TaskObserver for Metrics {
    /// A glue invocation of `task` ended with `outcome` after `elapsed`.
    fn task_done(&self, app: &str, task: &str, outcome: &str, elapsed: Duration) {
        let labels = OutcomeLabels { app: app.into(), task: task.into(), outcome: outcome.into() };
        self.task_invocations.get_or_create(&labels).inc();
        self.task_duration
            .get_or_create(&TaskLabels { app: app.into(), task: task.into() })
            .observe(elapsed.as_secs_f64());
    }
}
