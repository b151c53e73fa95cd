//! IPA's planner (Ghafouri et al., "IPA: Inference Pipeline Adaptation", §4): for a linear pipeline on CPU
//! cores, each stage's model variant, batch size and replica count, solved exactly as one integer program on
//! HiGHS.
//!
//! * **Base allocation** (Eq. 1): each variant runs on a fixed number of cores, the fewest of its profiled
//!   `cpu:N` segments on which one replica sustains `threshold_rps` at batch 1 (1b) and its largest profiled
//!   batch fits the stage's SLA (1c). A stage's SLA is the app's latency SLO split over the stages in
//!   proportion to their variants' mean batch-1 latency (the paper's 5 × that mean, rescaled to sum to the
//!   SLO). Where no segment meets both, the fewest cores that meet (1b), else the most cores profiled.
//! * **Program** (Eq. 10), one type k = (variant, base segment, batch) active per stage (I_k binary), n_k
//!   replicas:
//!
//! ```text
//! max  α·100·PAS − β·Σ_k cores_k·n_k − δ·Σ_k b_k·I_k
//!      Σ_{k∈s} I_k = 1,   n_k ≤ U_k·I_k                                   (10d)
//!      Σ_k (l_k + (b_k − 1)/λmin(s_k))·I_k ≤ SLO                          (10b, with q of Eq. 7)
//!      Σ_{k∈s} h_k·n_k ≥ r_s                                               (10c)
//!      r_1 = λ,  r_{s+1} = Σ_{k∈s} F_k·(r_s·I_k)                          jig's: factors between stages
//!      PAS = Π_s Σ_{k∈s} â_k·I_k ≥ SLO_a,  Σ_k cores_k·n_k ≤ cores
//! ```
//!
//! PAS is the product of the stages' accuracies normalised by their best variant's (so it is jig's A_obj of
//! the chain), in percent, the scale the paper's weights (α = 2…40, β = 0.5…1 per core, δ = 10⁻⁶) balance
//! against cores. Both products (PAS and the demand a stage passes on) are of one-hot choices, so each is exact
//! as a chain r_{s+1} = Σ_k F_k·w_k with w_k = r_s·I_k linearised by I_k's bounds (w ≤ U·I, w ≤ r,
//! w ≥ r − U·(1 − I)). IPA has one λ for every stage; jig's graphs have multiplicative factors, so a stage's
//! λ is what the stages before it emit, and its queueing bound (Eq. 7) uses the least demand the stage can see.
//! The paper's batch sizes are any positive integer under a quadratic latency fit; here they are the profiled
//! ones, whose rows are measured.

use std::time::Instant;

use good_lp::solvers::highs::highs;
use good_lp::{
    Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel, constraint, variable,
};

use crate::error::PlanError;
use crate::problem::{Config, Problem};
use crate::solution::{Assignment, SolveOptions, Solved, highs_with};
use crate::spec::{IpaVariants, SegmentKind};

use crate::evaluate::queueing_ms;

/// The stages of `problem` in pipeline order, or an error naming the task that makes it no chain.
pub fn stages(problem: &Problem) -> Result<Vec<usize>, PlanError> {
    chain(problem, "IPA")
}

/// The tasks of `problem` in pipeline order, or an error naming the task that makes it no chain and the
/// `planner` that needs one.
pub fn chain(problem: &Problem, planner: &str) -> Result<Vec<usize>, PlanError> {
    let not_linear = |why: String| {
        PlanError::Input(format!(
            "app `{}`: the {planner} planner plans linear pipelines (one chain of tasks, as the paper does); {why}; \
             plan it with `planner = \"jigsaw\"`",
            problem.app
        ))
    };
    if let Some(t) = (0..problem.tasks.len()).find(|&t| problem.tasks[t].succs.len() > 1) {
        return Err(not_linear(format!(
            "task `{}` fans out to {} tasks",
            problem.tasks[t].name,
            problem.tasks[t].succs.len()
        )));
    }
    if let Some(t) = (0..problem.tasks.len()).find(|&t| problem.tasks[t].preds.len() > 1) {
        return Err(not_linear(format!(
            "task `{}` joins {} tasks",
            problem.tasks[t].name,
            problem.tasks[t].preds.len()
        )));
    }
    let roots: Vec<usize> = (0..problem.tasks.len()).filter(|&t| problem.is_root(t)).collect();
    if roots.len() != 1 {
        return Err(not_linear(format!("it has {} first tasks", roots.len())));
    }
    Ok(problem.topo.clone())
}

/// Each task's variants' base allocations (Eq. 1): the segment index each variant runs on, or `None` for a
/// variant with no CPU rows.
pub fn base_allocations(problem: &Problem, threshold_rps: f64, stages: &[usize]) -> Vec<Vec<Option<usize>>> {
    let cpu = |c: &&Config| matches!(problem.segments[c.segment].kind, SegmentKind::Cpu { .. });
    let rows = |t: usize, v: usize| problem.configs.iter().filter(move |c| c.task == t && c.variant == v).filter(cpu);
    let smallest_batch = |t: usize, v: usize, s: usize| {
        rows(t, v).filter(|c| c.segment == s).min_by_key(|c| c.batch).map(|c| (c.latency_ms, c.throughput_rps))
    };
    let largest_batch_ms = |t: usize, v: usize, s: usize| {
        rows(t, v).filter(|c| c.segment == s).max_by_key(|c| c.batch).map(|c| c.latency_ms)
    };
    // Each variant's segments, fewest cores first.
    let segments = |t: usize, v: usize| {
        let mut s: Vec<usize> = rows(t, v).map(|c| c.segment).collect();
        s.sort_by_key(|&s| (problem.segments[s].slices, s));
        s.dedup();
        s
    };
    let meets_threshold =
        |t: usize, v: usize, s: usize| smallest_batch(t, v, s).is_some_and(|(_, h)| h >= threshold_rps);
    // (1b) alone, then the stage SLAs from those allocations' batch-1 latencies.
    let by_throughput = |t: usize, v: usize| {
        let s = segments(t, v);
        s.iter().copied().find(|&s| meets_threshold(t, v, s)).or(s.last().copied())
    };
    let mean_ms: Vec<f64> = (0..problem.tasks.len())
        .map(|t| {
            let ms: Vec<f64> = (0..problem.tasks[t].variants.len())
                .filter_map(|v| smallest_batch(t, v, by_throughput(t, v)?).map(|(l, _)| l))
                .collect();
            if ms.is_empty() { 0.0 } else { ms.iter().sum::<f64>() / ms.len() as f64 }
        })
        .collect();
    let total: f64 = stages.iter().map(|&t| mean_ms[t]).sum();
    (0..problem.tasks.len())
        .map(|t| {
            let sla_ms = if total > 0.0 { problem.slo_latency_ms * mean_ms[t] / total } else { problem.slo_latency_ms };
            (0..problem.tasks[t].variants.len())
                .map(|v| {
                    let fits = |s: usize| largest_batch_ms(t, v, s).is_some_and(|l| l <= sla_ms);
                    segments(t, v).into_iter().find(|&s| meets_threshold(t, v, s) && fits(s)).or(by_throughput(t, v))
                })
                .collect()
        })
        .collect()
}

/// The variant a baseline fixes stage `t` to, as the paper's do (`base`: [`base_allocations`]): FA2-low
/// (`lightest`) its lightest, the fewest cores at its base allocation, then the fastest there at batch 1;
/// FA2-high (`heaviest`) its most accurate. `None` for IPA, which switches.
pub fn fixed_variant(problem: &Problem, base: &[Vec<Option<usize>>], t: usize) -> Option<usize> {
    let weight = |v: usize| -> Option<(u32, f64)> {
        let s = base[t][v]?;
        let at_base = problem.configs.iter().filter(|c| c.task == t && c.variant == v && c.segment == s);
        Some((problem.segments[s].slices, at_base.min_by_key(|c| c.batch)?.latency_ms))
    };
    match problem.ipa.variants {
        IpaVariants::Switch => None,
        IpaVariants::Heaviest => Some(problem.tasks[t].best),
        IpaVariants::Lightest => (0..problem.tasks[t].variants.len())
            .filter_map(|v| weight(v).map(|w| (v, w)))
            .min_by(|(_, (s1, l1)), (_, (s2, l2))| s1.cmp(s2).then(l1.total_cmp(l2)))
            .map(|(v, _)| v),
    }
}

/// Plan `problem` (its `ipa` weights) as IPA does.
pub fn solve(problem: &Problem, options: &SolveOptions) -> Result<Solved, PlanError> {
    let started = Instant::now();
    let stages = stages(problem)?;
    let weights = problem.ipa;
    let base = base_allocations(problem, weights.threshold_rps, &stages);
    let (demand_min, demand_max) = problem.demand_bounds(|_, _| true);
    let cores = problem.cpu_cores.map_or(problem.slices, |c| c.min(problem.slices));
    let cpu_types =
        problem.configs.iter().filter(|c| matches!(problem.segments[c.segment].kind, SegmentKind::Cpu { .. }));
    let profiled = cpu_types.count();

    // Each stage's fixed variant, once (a baseline's), not once per candidate.
    let fixed: Vec<Option<usize>> = (0..base.len()).map(|t| fixed_variant(problem, &base, t)).collect();
    let allowed = |t: usize, v: usize| fixed[t].is_none_or(|f| f == v);
    // Candidates: each stage's variants on their base allocation, at every profiled batch that could fit.
    struct Candidate {
        config: usize,
        bound: u32,
        latency_ms: f64,
    }
    let mut cands: Vec<Vec<Candidate>> = Vec::with_capacity(stages.len());
    for &t in &stages {
        let mut here = Vec::new();
        for (i, c) in problem.configs.iter().enumerate().filter(|(_, c)| c.task == t) {
            if base[t][c.variant] != Some(c.segment) || !allowed(t, c.variant) {
                continue;
            }
            let latency_ms = c.latency_ms + queueing_ms(c.batch, demand_min[t]);
            let slices = problem.segments[c.segment].slices.max(1);
            let bound = match weights.replicas {
                0 => ((demand_max[t] / c.throughput_rps - 1e-9).ceil().max(1.0) as u32).min(cores / slices),
                fixed if fixed * slices <= cores => fixed,
                _ => 0, // the fixed replicas do not fit the cores
            };
            if latency_ms <= problem.slo_latency_ms && bound > 0 {
                here.push(Candidate { config: i, bound, latency_ms });
            }
        }
        if base[t].iter().all(Option::is_none) {
            return Err(PlanError::Input(format!(
                "app `{}`: task `{}` has no `cpu:N` rows in {}: the IPA planner plans on CPU cores (`jig profile` \
                 measures them)",
                problem.app, problem.tasks[t].name, problem.profile_source
            )));
        }
        if here.is_empty() {
            return Err(PlanError::Infeasible(format!(
                "app `{}`: task `{}` has no variant whose base allocation fits {cores} cores and whose batch latency, \
                 with the wait for a full batch, fits the {} ms SLO; profile it on more cores or smaller batches",
                problem.app, problem.tasks[t].name, problem.slo_latency_ms
            )));
        }
        cands.push(here);
    }

    let mut vars = ProblemVariables::new();
    let active: Vec<Vec<_>> = cands.iter().map(|c| c.iter().map(|_| vars.add(variable().binary())).collect()).collect();
    let replicas: Vec<Vec<_>> = cands
        .iter()
        .map(|c| c.iter().map(|k| vars.add(variable().integer().min(0).max(f64::from(k.bound)))).collect())
        .collect();
    // r_s and PAS along the chain, with the products w = r·I and z = PAS·I.
    let mut rate_in: Vec<Expression> = vec![Expression::from(problem.demand_rps)];
    let mut pas = Expression::from(1.0);
    let mut rows: Vec<good_lp::constraint::Constraint> = Vec::new();
    for (s, &t) in stages.iter().enumerate() {
        let task = &problem.tasks[t];
        let mut next_rate = Expression::default();
        let mut next_pas = Expression::default();
        let mut one = Expression::default();
        for (k, cand) in cands[s].iter().enumerate() {
            let c = &problem.configs[cand.config];
            let (i, n) = (active[s][k], replicas[s][k]);
            one += i;
            rows.push(constraint!(n <= f64::from(cand.bound) * i));
            if weights.replicas > 0 {
                rows.push(constraint!(n == f64::from(weights.replicas) * i));
            }
            let w = vars.add(variable().min(0).max(demand_max[t]));
            let r = rate_in[s].clone();
            rows.extend([
                constraint!(w <= demand_max[t] * i),
                constraint!(w <= r.clone()),
                constraint!(w >= r - demand_max[t] + demand_max[t] * i),
            ]);
            if let Some(&factor) = task.variants[c.variant].factors.first() {
                next_rate.add_mul(factor, w);
            }
            let z = vars.add(variable().min(0).max(1));
            rows.extend([constraint!(z <= i), constraint!(z <= pas.clone()), constraint!(z >= pas.clone() - 1 + i)]);
            next_pas.add_mul(task.normalised_accuracy(c.variant), z);
        }
        rows.push(constraint!(one == 1));
        let mut capacity = Expression::default();
        for (k, cand) in cands[s].iter().enumerate() {
            capacity.add_mul(problem.configs[cand.config].throughput_rps, replicas[s][k]);
        }
        rows.push(constraint!(capacity >= rate_in[s].clone()));
        rate_in.push(next_rate);
        pas = next_pas;
    }
    let (mut latency, mut used, mut batches) = (Expression::default(), Expression::default(), Expression::default());
    for (s, stage) in cands.iter().enumerate() {
        for (k, cand) in stage.iter().enumerate() {
            let c = &problem.configs[cand.config];
            latency.add_mul(cand.latency_ms, active[s][k]);
            used.add_mul(problem.segments[c.segment].slices, replicas[s][k]);
            batches.add_mul(c.batch, active[s][k]);
        }
    }
    rows.push(constraint!(latency <= problem.slo_latency_ms));
    rows.push(constraint!(used.clone() <= cores));
    rows.push(constraint!(pas.clone() >= problem.slo_accuracy));
    let objective = 100.0 * weights.alpha * pas - weights.beta * used - weights.delta * batches;
    let mut model = vars.maximise(objective).using(|p| highs_with(highs(p), options));
    for row in rows {
        model.add_constraint(row);
    }
    let solution = match model.solve() {
        Ok(s) => s,
        Err(ResolutionError::Infeasible) => {
            return Err(PlanError::Infeasible(format!(
                "app `{}`: no choice of one variant, batch size and replica count per stage serves {:.1} req/s within \
                 the {} ms SLO, the accuracy SLO of {} and {cores} cores (IPA's latency counts the wait for a full \
                 batch, (b − 1)/λ)",
                problem.app, problem.demand_rps, problem.slo_latency_ms, problem.slo_accuracy
            )));
        }
        Err(ResolutionError::Other("NoSolutionFound")) => return Err(PlanError::TimeLimit(options.time_limit_s)),
        Err(e) => return Err(PlanError::Solver(e.to_string())),
    };
    let optimal = !matches!(solution.status(), SolutionStatus::TimeLimit);
    // The chosen type per stage, its demand propagated exactly with the chosen factors.
    let mut assignments = Vec::with_capacity(stages.len());
    let mut rate = problem.demand_rps;
    let mut accuracy = 1.0;
    for (s, &t) in stages.iter().enumerate() {
        let k = (0..cands[s].len())
            .max_by(|&a, &b| solution.value(active[s][a]).total_cmp(&solution.value(active[s][b])))
            .expect("every stage has a candidate");
        let c = &problem.configs[cands[s][k].config];
        let instances = (solution.value(replicas[s][k]).round().max(0.0) as u32).max(1);
        assignments.push(Assignment {
            task: t,
            variant: c.variant,
            segment: c.segment,
            batch: c.batch,
            instances,
            rate_rps: rate.min(f64::from(instances) * c.throughput_rps),
        });
        accuracy *= problem.tasks[t].normalised_accuracy(c.variant);
        rate *= problem.tasks[t].variants[c.variant].factors.first().copied().unwrap_or(0.0);
    }
    Ok(Solved {
        assignments,
        accuracy_bound: accuracy,
        optimal,
        seconds: started.elapsed().as_secs_f64(),
        gpu_layouts: Vec::new(),
        instance_types: cands.iter().map(Vec::len).sum(),
        instance_types_profiled: profiled,
        classes: Vec::new(),
        pipelines: Vec::new(),
        colocated: Vec::new(),
    })
}
