//! The A/S/T switches: which instance types a configuration space admits, and the static per-task budgets of
//! task-graph-uninformed spaces (paper Appendix B).

use crate::problem::{Config, Problem};
use crate::spec::{Features, MigProfile, SegmentKind};

/// Whether `features` admits instance type `c`: without A only each task's most accurate variant, without S
/// only whole devices (a 7g.80gb MIG instance with one process, or a whole CPU host).
pub fn admits(problem: &Problem, features: Features, c: &Config) -> bool {
    let variant_ok = features.accuracy_scaling || c.variant == problem.tasks[c.task].best;
    let segment_ok = features.spatial || is_whole_device(problem, problem.segments[c.segment].kind);
    variant_ok && segment_ok
}

/// Whether segment type `kind` is a whole device, the only kind admitted without S: a 7g.80gb MIG instance
/// with one process, or all the cores of a CPU host.
pub fn is_whole_device(problem: &Problem, kind: SegmentKind) -> bool {
    match kind {
        SegmentKind::Mig { profile, mps } => profile == MigProfile::G7_80 && mps == 1,
        SegmentKind::Mps { percent } => percent == 100,
        SegmentKind::Cpu { cores } => cores == problem.cores_per_host,
    }
}

/// Appendix B's static budgets for a task-graph-uninformed space.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticBudgets {
    /// Each task's share of the latency SLO, for 2·L̂(t), ms.
    pub latency_ms: Vec<f64>,
    /// Each task's share of S_avail, slices.
    pub slices: Vec<f64>,
}

impl StaticBudgets {
    /// Expected demand per task with the most accurate variants' factors; each task's slices needed at the
    /// highest-throughput instance type of its most accurate variant; S_avail split in that ratio. The latency
    /// SLO is split along each path in the ratio of each task's highest latency (most accurate variant, any
    /// admitted segment and batch whose doubled latency fits the SLO), a task on several paths taking its
    /// smallest share.
    pub fn new(problem: &Problem, features: Features) -> Self {
        let n = problem.tasks.len();
        let best_configs = |t: usize| {
            problem
                .configs
                .iter()
                .filter(move |c| c.task == t && c.variant == problem.tasks[t].best && admits(problem, features, c))
        };
        let (expected, _) = problem.demand_bounds(|t, v| v == problem.tasks[t].best);
        let need: Vec<f64> = (0..n)
            .map(|t| {
                best_configs(t)
                    .max_by(|a, b| a.throughput_rps.total_cmp(&b.throughput_rps))
                    .map_or(0.0, |c| expected[t] / c.throughput_rps * f64::from(problem.segments[c.segment].slices))
            })
            .collect();
        let total: f64 = need.iter().sum();
        let slices =
            need.iter().map(|x| if total > 0.0 { f64::from(problem.slices) * x / total } else { 0.0 }).collect();

        // Only instance types that could serve within the SLO on their own count: a batch of 128 on the
        // smallest segment would otherwise set every budget.
        let worst: Vec<f64> = (0..n)
            .map(|t| {
                best_configs(t).map(|c| c.latency_ms).filter(|&l| 2.0 * l <= problem.slo_latency_ms).fold(0.0, f64::max)
            })
            .collect();
        let mut latency_ms = vec![f64::INFINITY; n];
        for p in &problem.paths {
            let sum: f64 = p.tasks.iter().map(|&t| worst[t]).sum();
            for &t in &p.tasks {
                let share = if sum > 0.0 { worst[t] / sum } else { 1.0 / p.tasks.len() as f64 };
                latency_ms[t] = f64::min(latency_ms[t], problem.slo_latency_ms * share);
            }
        }
        Self { latency_ms, slices }
    }
}
