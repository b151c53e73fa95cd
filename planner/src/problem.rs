//! A validated planning problem: the spec resolved into indices, the graph checked and ordered, its paths and
//! weights computed, and the profile table joined to the variants and segment types.
//!
//! Both the MILP and the independent evaluator read a [`Problem`]; neither trusts the raw spec.

use std::collections::{BTreeSet, HashMap};

use crate::error::PlanError;
use crate::profile::ProfileRow;
use crate::spec::{MigProfile, Objective, PlanSpec, SegmentKind};

/// The share of their time cores shared by pinned instances and work outside them (glue, unpinned models) are
/// busy at the most a plan counts on: a pinned instance's core idles while that work waits for the other cores,
/// and Poisson arrivals queue. Measured on 2 cores with the sign reader (2026-11-28, BENCHMARKS.md "Planned
/// against served"): 157 ms of CPU a request, and at most 10.9–11.1 req/s with ≥ 99% in SLO, 0.86–0.88.
pub const SHARED_CORES_BUSY: f64 = 0.87;

/// A validated planning problem, built by [`Problem::new`]: tasks, paths and segment types by index, and every
/// profiled instance type. Tasks, variants and segment types keep the spec's order.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The app's name.
    pub app: String,
    /// The tasks, in the spec's order; task indices elsewhere point here.
    pub tasks: Vec<Task>,
    /// Tasks in topological order.
    pub topo: Vec<usize>,
    /// The paths with their fractions f_p and weights g_p; every task lies on at least one. Unless the spec
    /// names them, every root-to-sink path, weighed by the product of the factors along it.
    pub paths: Vec<Path>,
    /// The declared segment types, in the spec's order.
    pub segments: Vec<Segment>,
    /// Every profiled (task, variant, segment type, batch) with its L and H.
    pub configs: Vec<Config>,
    /// SLO_l: the latency bound on every path's Σ 2·ℓ_t, ms.
    pub slo_latency_ms: f64,
    /// SLO_a: the lower bound on A_obj, a fraction of the best achievable accuracy.
    pub slo_accuracy: f64,
    /// JigsawServe's staleness beyond L̂, ms ([`AppSpec::staleness_ms`](crate::spec::AppSpec)); `None`: the
    /// task's share of the SLO.
    pub staleness_ms: Option<f64>,
    /// S_avail: GPU slices (or CPU cores) available in all.
    pub slices: u32,
    /// At most this many cores in all `cpu:` segments ([`Resources::cpu_cores`](crate::spec::Resources)).
    pub cpu_cores: Option<u32>,
    /// At most this many slices in all GPU segments ([`Resources::gpu_slices`](crate::spec::Resources)).
    pub gpu_slices: Option<u32>,
    /// At most this many MIG instances of each profile, in [`MigProfile::ALL`]'s order, where the machine's
    /// instances exist already ([`Resources::mig_instances`](crate::spec::Resources)); `None`: any layout.
    pub mig_instances: Option<crate::placement::MigCounts>,
    /// Cores of one CPU host: where `cpu:N` instances are placed, and what counts as a whole device without S.
    pub cores_per_host: u32,
    /// α, β of objective (14).
    pub objective: Objective,
    /// The planner strategy that plans it (`app.planner`).
    pub strategy: crate::spec::Strategy,
    /// IPA's weights, when `strategy` is IPA.
    pub ipa: crate::spec::IpaSpec,
    /// Compass's query classes, shares summing to 1: the spec's, or one with the app's SLOs.
    pub classes: Vec<Class>,
    /// Compass's settings.
    pub compass: crate::spec::CompassSpec,
    /// R, req/s at every root task.
    pub demand_rps: f64,
    /// CPU time each request at the roots costs outside the planned instances, ms: its glue, and models no task
    /// plans that run on the same cores. The cores' busy time, instances' and this together, stays within
    /// [`SHARED_CORES_BUSY`] of the cores (the MILP's CPU-time row). 0 when [`Problem::new`] builds it: the
    /// caller sets it.
    pub unplanned_cpu_ms: f64,
    /// Where the profile table came from, for the plan's report.
    pub profile_source: String,
    /// gpu-lets' measured interference between the tasks' models (in task order), which the `gpulet` strategy
    /// plans with when it is given (a bundle's `util.csv` and `pairs.csv`); `None`: it plans without.
    pub interference: Option<std::sync::Arc<crate::interference::MeasuredInterference>>,
    index: HashMap<(usize, usize, usize, u32), usize>,
}

/// A task t of the graph, with its variants and its neighbours.
#[derive(Debug, Clone)]
pub struct Task {
    /// The task's name, as in the spec.
    pub name: String,
    /// Its variants v, in the spec's order.
    pub variants: Vec<Variant>,
    /// Index of the most accurate variant (the first one on ties).
    pub best: usize,
    /// P(t): the tasks with an edge to this one; empty at a root.
    pub preds: Vec<usize>,
    /// The tasks this one has an edge to; empty at a sink.
    pub succs: Vec<usize>,
}

/// A model variant v of a task.
#[derive(Debug, Clone)]
pub struct Variant {
    /// The variant's name, as in the spec and the profile table.
    pub name: String,
    /// A(t,v), in the task's accuracy unit.
    pub accuracy: f64,
    /// F(t,v,t′) for every successor t′, in the order of [`Task::succs`].
    pub factors: Vec<f64>,
}

impl Task {
    /// A(t,v*): the accuracy of the task's most accurate variant.
    pub fn best_accuracy(&self) -> f64 {
        self.variants[self.best].accuracy
    }

    /// A(t,v) / A(t,v*): 1 for the best variant.
    pub fn normalised_accuracy(&self, v: usize) -> f64 {
        self.variants[v].accuracy / self.best_accuracy()
    }

    /// F(t,v,t′), 0 when t′ is not a successor.
    pub fn factor(&self, v: usize, to: usize) -> f64 {
        self.succs.iter().position(|&s| s == to).map_or(0.0, |i| self.variants[v].factors[i])
    }
}

/// A query class (Compass): requests of the app with SLOs of their own.
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    /// Its name.
    pub name: String,
    /// Its latency SLO, ms.
    pub slo_latency_ms: f64,
    /// Its accuracy SLO, a fraction of the best achievable.
    pub slo_accuracy: f64,
    /// Its share of the demand; the shares sum to 1.
    pub share: f64,
}

impl Class {
    /// The spec's classes, checked and their shares normalised; one with the app's SLOs when it has none.
    fn from_spec(spec: &PlanSpec) -> Result<Vec<Class>, PlanError> {
        let app = &spec.app;
        if app.classes.is_empty() {
            let name = app.name.clone();
            return Ok(vec![Class {
                name,
                slo_latency_ms: app.slo_latency_ms,
                slo_accuracy: app.slo_accuracy,
                share: 1.0,
            }]);
        }
        let total: f64 = app.classes.iter().map(|c| c.share).sum();
        let mut names = std::collections::HashSet::new();
        for c in &app.classes {
            let bad = |what: &str| PlanError::Input(format!("app `{}`, class `{}`: {what}", app.name, c.name));
            if !names.insert(c.name.as_str()) {
                return Err(bad("a second class of that name"));
            }
            if !(c.slo_latency_ms.is_finite() && c.slo_latency_ms > 0.0) {
                return Err(bad("slo_latency_ms must be a positive number of milliseconds"));
            }
            if !(0.0..=1.0).contains(&c.slo_accuracy) {
                return Err(bad("slo_accuracy must be a fraction in [0, 1]"));
            }
            if !(c.share.is_finite() && c.share > 0.0) {
                return Err(bad("share must be positive"));
            }
        }
        Ok(app
            .classes
            .iter()
            .map(|c| Class {
                name: c.name.clone(),
                slo_latency_ms: c.slo_latency_ms,
                slo_accuracy: c.slo_accuracy,
                share: c.share / total,
            })
            .collect())
    }
}

/// A path p through the graph.
#[derive(Debug, Clone)]
pub struct Path {
    /// Task indices, in order along the path.
    pub tasks: Vec<usize>,
    /// f_p, normalised to sum to 1.
    pub fraction: f64,
    /// g_p = f_p · Π A(t,v*) / A_max: the path's weight in the normalised accuracy A_obj.
    pub weight: f64,
}

/// A segment type n: where an instance runs, and what it costs.
#[derive(Debug, Clone)]
pub struct Segment {
    /// The canonical name ([`SegmentKind::name`]): `mig:PROFILE:MPS` or `cpu:N`.
    pub name: String,
    /// The MIG profile and MPS count, or the CPU cores, parsed from the name.
    pub kind: SegmentKind,
    /// s_n: the slices (GPU slices or CPU cores) one instance costs.
    pub slices: u32,
}

/// One instance type (t, v, s, b) with its profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// t, an index into [`Problem::tasks`].
    pub task: usize,
    /// v, an index into the task's [`Task::variants`].
    pub variant: usize,
    /// s, an index into [`Problem::segments`].
    pub segment: usize,
    /// b, the maximum batch size, requests.
    pub batch: u32,
    /// L(t,v,s,b), p95 batch latency, ms.
    pub latency_ms: f64,
    /// Median batch latency, ms (the simulator's latency distribution).
    pub p50_ms: f64,
    /// H(t,v,s,b), req/s of one instance.
    pub throughput_rps: f64,
    /// The host CPU one batch on a GPU segment costs its worker process, ms (the profile's `cpu_ms`): the
    /// machine's cores run it beside the CPU segments' instances. 0 on CPU segments and where not measured.
    pub host_cpu_ms: f64,
}

impl Config {
    /// L, no shorter than its measured throughput allows (b / H): what a planner that sizes capacity as b / L
    /// (gpu-lets, PPipe) reads, so that what it plans an instance to serve, the instance serves.
    pub fn paced_ms(&self) -> f64 {
        self.latency_ms.max(f64::from(self.batch) * 1e3 / self.throughput_rps)
    }
}

impl Problem {
    /// Validate `spec` and join `profile` to it. `profile_source` says where the rows came from.
    pub fn new(spec: &PlanSpec, profile: &[ProfileRow], profile_source: &str) -> Result<Self, PlanError> {
        let app = spec.app.name.clone();
        let input = |m: String| PlanError::Input(format!("app `{app}`: {m}"));
        let number_ok = |x: f64| x.is_finite() && x >= 0.0;
        if !(spec.app.slo_latency_ms.is_finite() && spec.app.slo_latency_ms > 0.0) {
            return Err(input("slo_latency_ms must be a positive number".into()));
        }
        if !number_ok(spec.app.slo_accuracy) {
            return Err(input("slo_accuracy must be a non-negative fraction".into()));
        }
        if spec.app.staleness_ms.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
            return Err(input("staleness_ms must be a positive number of milliseconds".into()));
        }
        if !(number_ok(spec.objective.alpha) && number_ok(spec.objective.beta)) {
            return Err(input("objective weights must be non-negative numbers".into()));
        }
        if spec.app.tasks.is_empty() {
            return Err(input("the app has no tasks".into()));
        }

        // Tasks and their names.
        let mut by_name = HashMap::new();
        for (i, t) in spec.app.tasks.iter().enumerate() {
            if by_name.insert(t.name.as_str(), i).is_some() {
                return Err(input(format!("task `{}` is declared twice", t.name)));
            }
            if t.variants.is_empty() {
                return Err(input(format!("task `{}` has no variants", t.name)));
            }
        }
        let lookup = |place: String, name: &str| {
            by_name.get(name).copied().ok_or_else(|| PlanError::UnknownTask {
                app: app.clone(),
                place,
                task: name.to_string(),
            })
        };
        let n = spec.app.tasks.len();
        let mut succs = vec![Vec::new(); n];
        let mut preds = vec![Vec::new(); n];
        for e in &spec.app.edges {
            let place = format!("edge {} → {}", e.from, e.to);
            let (a, b) = (lookup(place.clone(), &e.from)?, lookup(place, &e.to)?);
            if !succs[a].contains(&b) {
                succs[a].push(b);
                preds[b].push(a);
            }
        }
        let topo = topological_order(&succs).map_err(|cycle| PlanError::Cycle {
            app: app.clone(),
            cycle: cycle.iter().map(|&t| spec.app.tasks[t].name.as_str()).collect::<Vec<_>>().join(" → "),
        })?;

        let mut tasks = Vec::with_capacity(n);
        for (i, t) in spec.app.tasks.iter().enumerate() {
            let mut variants = Vec::new();
            let mut seen = BTreeSet::new();
            for v in &t.variants {
                if !seen.insert(v.name.as_str()) {
                    return Err(input(format!("task `{}` declares variant `{}` twice", t.name, v.name)));
                }
                if !(v.accuracy.is_finite() && v.accuracy > 0.0) {
                    return Err(input(format!("variant `{}` of task `{}`: accuracy must be positive", v.name, t.name)));
                }
                for (to, f) in &v.factors {
                    let j = lookup(format!("a factor of variant `{}` of task `{}`", v.name, t.name), to)?;
                    if !succs[i].contains(&j) {
                        return Err(input(format!(
                            "variant `{}` of task `{}` has a factor for `{to}`, which is not downstream of `{}` (add the edge)",
                            v.name, t.name, t.name
                        )));
                    }
                    if !number_ok(*f) {
                        return Err(input(format!("variant `{}` of task `{}`: factor {f} for `{to}`", v.name, t.name)));
                    }
                }
                let factors =
                    succs[i].iter().map(|&s| v.factors.get(&spec.app.tasks[s].name).copied().unwrap_or(1.0)).collect();
                variants.push(Variant { name: v.name.clone(), accuracy: v.accuracy, factors });
            }
            let best = (0..variants.len())
                .rev()
                .max_by(|&a, &b| variants[a].accuracy.total_cmp(&variants[b].accuracy))
                .unwrap_or(0);
            tasks.push(Task { name: t.name.clone(), variants, best, preds: preds[i].clone(), succs: succs[i].clone() });
        }

        // Paths.
        let raw_paths: Vec<(Vec<usize>, f64)> = match &spec.app.paths {
            Some(paths) => {
                let mut out = Vec::new();
                for p in paths {
                    let ids = p
                        .tasks
                        .iter()
                        .map(|name| lookup(format!("path [{}]", p.tasks.join(", ")), name))
                        .collect::<Result<Vec<_>, _>>()?;
                    if ids.is_empty() || !number_ok(p.fraction) {
                        return Err(input(format!(
                            "path [{}] needs tasks and a non-negative fraction",
                            p.tasks.join(", ")
                        )));
                    }
                    if let Some(w) = ids.windows(2).find(|w| !succs[w[0]].contains(&w[1])) {
                        return Err(input(format!(
                            "path [{}] steps from `{}` to `{}`, which is not an edge",
                            p.tasks.join(", "),
                            tasks[w[0]].name,
                            tasks[w[1]].name
                        )));
                    }
                    out.push((ids, p.fraction));
                }
                out
            }
            // JigsawServe weighs each path by the requests that take it (§3.2, Eq. 12): a path's share of the
            // sink invocations a request makes, the product of the factors along it (each task's most accurate
            // variant's, as A_max and Appendix B take them; observed factors where a deployment has them).
            // Equal shares where every path's product is 0.
            None => {
                let all = root_to_sink_paths(&succs, &preds);
                let along =
                    |p: &[usize]| p.windows(2).map(|w| tasks[w[0]].factor(tasks[w[0]].best, w[1])).product::<f64>();
                let weights: Vec<f64> = all.iter().map(|p| along(p)).collect();
                let equal = weights.iter().sum::<f64>() <= 0.0;
                all.into_iter().zip(weights).map(|(p, w)| (p, if equal { 1.0 } else { w })).collect()
            }
        };
        let total: f64 = raw_paths.iter().map(|p| p.1).sum();
        if raw_paths.is_empty() || total <= 0.0 {
            return Err(input("the paths' fractions sum to zero".into()));
        }
        if let Some(t) = (0..n).find(|t| !raw_paths.iter().any(|p| p.0.contains(t))) {
            return Err(input(format!("task `{}` lies on no path", tasks[t].name)));
        }
        let best_product = |p: &[usize]| p.iter().map(|&t| tasks[t].best_accuracy()).product::<f64>();
        let a_max: f64 = raw_paths.iter().map(|(p, f)| f / total * best_product(p)).sum();
        let paths = raw_paths
            .into_iter()
            .map(|(p, f)| {
                let fraction = f / total;
                let weight = fraction * best_product(&p) / a_max;
                Path { tasks: p, fraction, weight }
            })
            .collect();

        // Segment types.
        let mut segments: Vec<Segment> = Vec::new();
        for s in &spec.segments {
            let kind = SegmentKind::parse(&s.name).map_err(|e| input(e.to_string()))?;
            let name = kind.name();
            if segments.iter().any(|x| x.name == name) {
                return Err(input(format!("segment type `{name}` is declared twice")));
            }
            let slices = s.slices.unwrap_or_else(|| kind.default_slices());
            if slices == 0 {
                return Err(input(format!("segment type `{name}` must cost at least one slice")));
            }
            segments.push(Segment { name, kind, slices });
        }
        if segments.is_empty() {
            return Err(input("no segment types declared".into()));
        }
        if let Some(b) = spec.batch_sizes.as_ref().and_then(|bs| bs.iter().find(|&&b| b == 0)) {
            return Err(input(format!("batch size {b} must be positive")));
        }

        // Join the profile table, each share measured alone read as it runs beside others of its size.
        let slot_of: HashMap<&str, Vec<usize>> =
            spec.app.tasks.iter().enumerate().fold(HashMap::new(), |mut m, (i, t)| {
                m.entry(t.slot()).or_default().push(i);
                m
            });
        let seg_of: HashMap<&str, usize> = segments.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
        let mut configs = Vec::new();
        let mut index = HashMap::new();
        for row in &crate::profile::as_packed(profile) {
            let Some(task_ids) = slot_of.get(row.slot.as_str()) else { continue };
            let Ok(kind) = SegmentKind::parse(&row.segment) else { continue };
            let Some(&s) = seg_of.get(kind.name().as_str()) else { continue };
            if spec.batch_sizes.as_ref().is_some_and(|bs| !bs.contains(&row.batch)) || row.batch == 0 {
                continue;
            }
            if !(row.p95_ms > 0.0 && row.throughput_rps > 0.0) {
                continue; // a failed measurement (e.g. out of memory) leaves the configuration unavailable
            }
            for &t in task_ids {
                let Some(v) = tasks[t].variants.iter().position(|v| v.name == row.variant) else { continue };
                let key = (t, v, s, row.batch);
                if index.contains_key(&key) {
                    return Err(input(format!(
                        "the profile table has two rows for slot `{}` variant `{}` on `{}` batch {}; keep one device per table",
                        row.slot, row.variant, row.segment, row.batch
                    )));
                }
                index.insert(key, configs.len());
                configs.push(Config {
                    task: t,
                    variant: v,
                    segment: s,
                    batch: row.batch,
                    latency_ms: row.p95_ms,
                    p50_ms: row.p50_ms,
                    throughput_rps: row.throughput_rps,
                    host_cpu_ms: if matches!(kind, SegmentKind::Cpu { .. }) { 0.0 } else { row.cpu_ms.unwrap_or(0.0) },
                });
            }
        }
        for (t, task) in tasks.iter().enumerate() {
            for (v, variant) in task.variants.iter().enumerate() {
                if !configs.iter().any(|c| c.task == t && c.variant == v) {
                    return Err(PlanError::MissingProfile {
                        task: task.name.clone(),
                        variant: variant.name.clone(),
                        slot: spec.app.tasks[t].slot().to_string(),
                    });
                }
            }
        }

        let demand_rps = spec.demand.predict()?;
        let classes = Class::from_spec(spec)?;
        let mig_instances = match &spec.resources.mig_instances {
            None => None,
            Some(given) => {
                let mut counts = [0; 6];
                for (name, &count) in given {
                    let profile: MigProfile = name.parse().map_err(|e| {
                        PlanError::Input(format!("app `{}`, resources.mig_instances: {e}", spec.app.name))
                    })?;
                    counts[profile.index()] += count;
                }
                Some(counts)
            }
        };
        Ok(Self {
            app,
            tasks,
            topo,
            paths,
            segments,
            configs,
            slo_latency_ms: spec.app.slo_latency_ms,
            slo_accuracy: spec.app.slo_accuracy,
            staleness_ms: spec.app.staleness_ms,
            slices: spec.resources.slices,
            cpu_cores: spec.resources.cpu_cores,
            gpu_slices: spec.resources.gpu_slices,
            mig_instances,
            cores_per_host: spec.resources.cores_per_host.unwrap_or(16).max(1),
            objective: spec.objective,
            strategy: spec.app.planner,
            ipa: spec.ipa,
            classes,
            compass: spec.compass,
            demand_rps,
            unplanned_cpu_ms: 0.0,
            profile_source: profile_source.to_string(),
            interference: None,
            index,
        })
    }

    /// The same problem at another demand or slice count (for bisection and benchmarks).
    pub fn with_demand(mut self, demand_rps: f64, slices: u32) -> Self {
        self.demand_rps = demand_rps;
        self.slices = slices;
        self
    }

    /// The profiled instance type (t, v, s, b), if there is one.
    pub fn config(&self, task: usize, variant: usize, segment: usize, batch: u32) -> Option<&Config> {
        self.index.get(&(task, variant, segment, batch)).map(|&i| &self.configs[i])
    }

    /// Whether task `t` has no predecessors, so that it receives the demand R itself.
    pub fn is_root(&self, t: usize) -> bool {
        self.tasks[t].preds.is_empty()
    }

    /// Lowest and highest possible demand at each task when every task may use the variants `allowed` admits:
    /// demand propagated with the smallest, resp. largest, factors.
    pub fn demand_bounds(&self, allowed: impl Fn(usize, usize) -> bool) -> (Vec<f64>, Vec<f64>) {
        let allowed = &allowed;
        let factors = |t: usize, i: usize| {
            let task = &self.tasks[t];
            (0..task.variants.len()).filter(move |&v| allowed(t, v)).map(move |v| task.variants[v].factors[i])
        };
        let lo = self.propagate(|t, i| factors(t, i).reduce(f64::min).unwrap_or(0.0));
        let hi = self.propagate(|t, i| factors(t, i).fold(0.0, f64::max));
        (lo, hi)
    }

    /// The demand at each task when the roots see R and task t sends its i-th successor `factor(t, i)` requests
    /// for each of its own.
    pub fn propagate(&self, factor: impl Fn(usize, usize) -> f64) -> Vec<f64> {
        let mut demand = vec![0.0; self.tasks.len()];
        for &t in &self.topo {
            if self.is_root(t) {
                demand[t] = self.demand_rps;
            }
            for (i, &s) in self.tasks[t].succs.iter().enumerate() {
                demand[s] += demand[t] * factor(t, i);
            }
        }
        demand
    }

    /// Task names along a path, joined by arrows.
    pub fn path_name(&self, tasks: &[usize]) -> String {
        tasks.iter().map(|&t| self.tasks[t].name.as_str()).collect::<Vec<_>>().join(" → ")
    }
}

/// Kahn's algorithm; on a cycle, returns one cycle's tasks (first repeated at the end).
fn topological_order(succs: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let n = succs.len();
    let mut indegree = vec![0; n];
    succs.iter().flatten().for_each(|&s| indegree[s] += 1);
    let mut ready: Vec<usize> = (0..n).rev().filter(|&t| indegree[t] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(t) = ready.pop() {
        order.push(t);
        for &s in &succs[t] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push(s);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every task left has a predecessor left: walk backwards until a task repeats, then turn the walk around.
    let left: Vec<bool> = (0..n).map(|t| indegree[t] > 0).collect();
    let pred_left = |t: usize| (0..n).find(|&p| left[p] && succs[p].contains(&t));
    let start = (0..n).find(|&t| left[t]).unwrap_or(0);
    let mut walk = vec![start];
    while let Some(prev) = walk.last().and_then(|&t| pred_left(t)) {
        if let Some(pos) = walk.iter().position(|&t| t == prev) {
            let mut cycle = walk[pos..].to_vec();
            cycle.push(prev);
            cycle.reverse();
            return Err(cycle);
        }
        walk.push(prev);
    }
    Err(walk)
}

fn root_to_sink_paths(succs: &[Vec<usize>], preds: &[Vec<usize>]) -> Vec<Vec<usize>> {
    fn walk(t: usize, succs: &[Vec<usize>], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        prefix.push(t);
        if succs[t].is_empty() {
            out.push(prefix.clone());
        }
        for &s in &succs[t] {
            walk(s, succs, prefix, out);
        }
        prefix.pop();
    }
    let mut out = Vec::new();
    for root in (0..succs.len()).filter(|&t| preds[t].is_empty()) {
        walk(root, succs, &mut Vec::new(), &mut out);
    }
    out
}
