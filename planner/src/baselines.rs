//! The A/S/T switches: which instance types a configuration space admits, and the static per-task budgets of
//! task-graph-uninformed spaces (paper Appendix B).

use crate::problem::{Config, Problem};
use crate::spec::{Features, MigProfile, SegmentKind, Uninformed};

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
        SegmentKind::Mps { percent, processes } => percent == 100 && processes == 1,
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
    /// Each task's share of the allowed normalised accuracy loss 1 − SLO_a, a bound on ε_t; infinite when the
    /// accuracy SLO stays end-to-end ([`Uninformed::Strong`]).
    pub accuracy_loss: Vec<f64>,
}

impl StaticBudgets {
    /// Expected demand per task with the most accurate variants' factors; each task's slices needed at the
    /// highest-throughput instance type of its most accurate variant; S_avail split in that ratio. The latency
    /// SLO is split along each path in the ratio of each task's highest latency (most accurate variant, any
    /// admitted segment and batch, or with [`Uninformed::Strong`] only those whose doubled latency fits the
    /// SLO), a task on several paths taking its smallest share; the allowed accuracy loss likewise, in the
    /// ratio of each task's largest loss ([`Uninformed::Paper`] only).
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

        let strong = features.uninformed == Uninformed::Strong;
        // Stronger baselines count only instance types that could serve within the SLO on their own: a batch of
        // 128 on the smallest segment would otherwise set every budget.
        let worst: Vec<f64> = (0..n)
            .map(|t| {
                best_configs(t)
                    .map(|c| c.latency_ms)
                    .filter(|&l| !strong || 2.0 * l <= problem.slo_latency_ms)
                    .fold(0.0, f64::max)
            })
            .collect();
        let latency_ms = split_along_paths(problem, &worst, problem.slo_latency_ms);
        let accuracy_loss = if strong {
            vec![f64::INFINITY; n]
        } else {
            let largest_loss: Vec<f64> = (0..n)
                .map(|t| {
                    let task = &problem.tasks[t];
                    (0..task.variants.len())
                        .filter(|&v| features.accuracy_scaling || v == task.best)
                        .map(|v| 1.0 - task.normalised_accuracy(v))
                        .fold(0.0, f64::max)
                })
                .collect();
            split_along_paths(problem, &largest_loss, (1.0 - problem.slo_accuracy).max(0.0))
        };
        Self { latency_ms, slices, accuracy_loss }
    }

    /// Whether each task has its own accuracy budget, standing for the end-to-end accuracy SLO.
    pub fn budgets_accuracy(&self) -> bool {
        self.accuracy_loss.iter().all(|l| l.is_finite())
    }
}

/// `total` split along each path in the ratio of `weight` (evenly where a path's weights are all 0), each task
/// taking its smallest share over the paths through it.
fn split_along_paths(problem: &Problem, weight: &[f64], total: f64) -> Vec<f64> {
    let mut share = vec![f64::INFINITY; weight.len()];
    for p in &problem.paths {
        let sum: f64 = p.tasks.iter().map(|&t| weight[t]).sum();
        for &t in &p.tasks {
            let part = if sum > 0.0 { weight[t] / sum } else { 1.0 / p.tasks.len() as f64 };
            share[t] = f64::min(share[t], total * part);
        }
    }
    share
}
