//! What a simulation reports: each bin's run as the engine measured it ([`BinRun`]), each bin's outcome
//! ([`BinReport`]) and the whole trace's ([`Simulation`]), with the aggregates over the day. The driver fills these
//! types, the renderers read them, and callers serialise them.

use jig_planner::problem::Problem;
use serde::Serialize;

/// One bin's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BinReport {
    /// When the bin starts, seconds into the trace.
    pub start_s: f64,
    /// The trace's rate in the bin, req/s.
    pub rate_rps: f64,
    /// The rate the bin's plan was made for, req/s.
    pub planned_rps: f64,
    /// Slices the plan uses.
    pub slices: u32,
    /// False when no plan met the predicted demand and the plan for the largest serviceable demand ran.
    pub replanned: bool,
    /// Whether a node failed at the bin's start ([`NodeFailures`](super::NodeFailures)): it ran the plan before it,
    /// less the node.
    pub node_lost: bool,
    /// Seconds spent planning the bin (about 0 under `fixed_demand`, whose plan is made once before the trace).
    pub solve_s: f64,
    /// Under a controller, the surges it re-planned for within the bin ([`Replan::surge`]); the bin's plan
    /// (`planned_rps`, `slices`, `instances`) is then the last surge's.
    ///
    /// [`Replan::surge`]: jig_planner::spec::Replan::surge
    pub surges: u32,
    /// Root requests simulated.
    pub requests: u64,
    /// Sink requests, served or dropped (a dropped request counts the sink requests it would have led to).
    pub sink_requests: f64,
    /// Sink requests late or dropped.
    pub violations: f64,
    /// `violations / sink_requests`.
    pub violation_rate: f64,
    /// 1 − A_obj of the sink requests served ([`BinRun::accuracy`]).
    pub accuracy_drop: f64,
    /// Median end-to-end latency of root requests served in full, ms.
    pub p50_ms: f64,
    /// 99th percentile of the same, ms.
    pub p99_ms: f64,
    /// The plan that ran: its instances by task, variant and segment type.
    pub instances: Vec<Instances>,
    /// For a plan with query classes (Compass's): each class's root requests and those answered in full within
    /// its SLO; empty otherwise.
    pub classes: Vec<ClassOutcome>,
}

/// One query class's requests in a bin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassOutcome {
    /// The class.
    pub class: String,
    /// Its root requests simulated.
    pub requests: u64,
    /// Those answered in full within its SLO.
    pub within_slo: u64,
}

/// Instances of one variant of a task on one segment type, in a bin's plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instances {
    /// The task.
    pub task: String,
    /// The model variant.
    pub variant: String,
    /// The segment type, e.g. `mig:1g.10gb:2`.
    pub segment: String,
    /// How many.
    pub count: u32,
}

/// A simulated trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Simulation {
    /// The app simulated.
    pub app: String,
    /// The configuration space, e.g. `A+S+T`, or the planner when it is not JigsawServe (`ipa`).
    pub features: String,
    /// S_avail: GPU slices (or CPU cores) the plans could use.
    pub slices_available: u32,
    /// β of objective (14) the plans were made with.
    pub beta: f64,
    /// Each bin's outcome, in trace order.
    pub bins: Vec<BinReport>,
    /// p50 and p99 of the end-to-end latency over the whole trace (each bin weighted by its real number of
    /// requests), ms.
    pub p50_ms: f64,
    /// The whole trace's p99, ms (see `p50_ms`).
    pub p99_ms: f64,
    /// Why the space serves no demand at all (it then runs no instances and refuses every request).
    pub serves_nothing: Option<String>,
}

impl Simulation {
    /// Mean slices over the bins.
    pub fn mean_slices(&self) -> f64 {
        self.bins.iter().map(|b| f64::from(b.slices)).sum::<f64>() / self.bins.len().max(1) as f64
    }

    /// Violations over the day, each bin weighted by its real number of requests (its rate).
    pub fn violation_rate(&self) -> f64 {
        let total: f64 = self.bins.iter().map(|b| b.rate_rps).sum();
        self.bins.iter().map(|b| b.violation_rate * b.rate_rps).sum::<f64>() / total.max(f64::MIN_POSITIVE)
    }

    /// Each query class's SLO goodput over the day: the share of its requests answered in full within its SLO,
    /// each bin weighted by its rate; empty without classes.
    pub fn class_goodput(&self) -> Vec<(String, f64)> {
        let names: Vec<&String> = self.bins.iter().flat_map(|b| b.classes.iter().map(|c| &c.class)).collect();
        let mut unique: Vec<&String> = Vec::new();
        names.into_iter().for_each(|n| {
            if !unique.contains(&n) {
                unique.push(n)
            }
        });
        unique
            .into_iter()
            .map(|name| {
                let (mut good, mut weight) = (0.0, 0.0);
                for b in &self.bins {
                    if let Some(c) = b.classes.iter().find(|c| &c.class == name).filter(|c| c.requests > 0) {
                        good += b.rate_rps * c.within_slo as f64 / c.requests as f64;
                        weight += b.rate_rps;
                    }
                }
                (name.clone(), if weight > 0.0 { good / weight } else { 0.0 })
            })
            .collect()
    }

    /// Accuracy drop over the day, weighted by rate.
    pub fn accuracy_drop(&self) -> f64 {
        let total: f64 = self.bins.iter().map(|b| b.rate_rps).sum();
        self.bins.iter().map(|b| b.accuracy_drop * b.rate_rps).sum::<f64>() / total.max(f64::MIN_POSITIVE)
    }

    /// The bins as CSV.
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "start_s,rate_rps,planned_rps,slices,replanned,solve_s,requests,violation_rate,accuracy_drop,p50_ms,p99_ms,plan\n",
        );
        for b in &self.bins {
            let plan: Vec<String> =
                b.instances.iter().map(|i| format!("{}/{}/{}*{}", i.task, i.variant, i.segment, i.count)).collect();
            out.push_str(&format!(
                "{},{:.3},{:.3},{},{},{:.3},{},{:.6},{:.6},{:.2},{:.2},{}\n",
                b.start_s,
                b.rate_rps,
                b.planned_rps,
                b.slices,
                b.replanned,
                b.solve_s,
                b.requests,
                b.violation_rate,
                b.accuracy_drop,
                b.p50_ms,
                b.p99_ms,
                plan.join(" ")
            ));
        }
        out
    }
}

/// What one bin's run measured.
#[derive(Debug, Default)]
pub struct BinRun {
    /// Root requests simulated.
    pub requests: u64,
    /// Sink requests, served or dropped (dropped ones counted by the sink requests they would have led to).
    pub units: f64,
    /// Sink requests late or dropped.
    pub violations: f64,
    /// Sink requests served.
    pub served: u64,
    /// Per path of the problem: the sink requests served along it and the sum of their normalised accuracies
    /// (the product of A(t,v)/A(t,v*) along the way: 1 for the best variants).
    pub paths: Vec<(u64, f64)>,
    /// End-to-end latencies of root requests served in full, sorted, ms.
    pub latencies_ms: Vec<f64>,
    /// Per query class of the plan (in its order): root requests, and those answered in full within the SLO.
    pub classes: Vec<(u64, u64)>,
}

impl BinRun {
    /// Add `other`, a later part of the same bin (run on another plan), to this run.
    pub fn absorb(&mut self, other: BinRun) {
        self.requests += other.requests;
        self.units += other.units;
        self.violations += other.violations;
        self.served += other.served;
        if self.paths.len() < other.paths.len() {
            self.paths.resize(other.paths.len(), (0, 0.0));
        }
        for (path, (served, accuracy)) in self.paths.iter_mut().zip(other.paths) {
            (path.0, path.1) = (path.0 + served, path.1 + accuracy);
        }
        if self.classes.len() < other.classes.len() {
            self.classes.resize(other.classes.len(), (0, 0));
        }
        for (class, (requests, within)) in self.classes.iter_mut().zip(other.classes) {
            (class.0, class.1) = (class.0 + requests, class.1 + within);
        }
        self.latencies_ms.extend(other.latencies_ms);
        self.latencies_ms.sort_by(f64::total_cmp);
    }

    /// The normalised accuracy A_obj the bin served: each path's mean over its sink requests, weighted by the
    /// path weights g_p (eq. 9–10), over the paths that served any; 1 when none did.
    pub fn accuracy(&self, problem: &Problem) -> f64 {
        let (mut sum, mut weight) = (0.0, 0.0);
        for (path, &(served, accuracy)) in problem.paths.iter().zip(&self.paths) {
            if served > 0 {
                sum += path.weight * accuracy / served as f64;
                weight += path.weight;
            }
        }
        if weight > 0.0 { sum / weight } else { 1.0 }
    }
}
