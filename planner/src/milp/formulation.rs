//! The JigsawServe MILP's formulation (crate docs): the instance types that survive pruning, the model built for
//! HiGHS, with a running plan as its start, and its solution.

use std::collections::HashMap;
use std::time::Instant;

use good_lp::solvers::highs::highs;
use good_lp::{
    Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel, Variable,
    WithInitialSolution, constraint, variable,
};

use crate::baselines::{StaticBudgets, admits};
use crate::error::PlanError;
use crate::evaluate::evaluate;
use crate::placement::{mig_counts, pack_layouts};
use crate::problem::Problem;
use crate::solution::{Assignment, SolveOptions, Solved, highs_with};
use crate::spec::{Features, MigProfile, SegmentKind, Weighting};
use jig_policy::mig::layouts;

/// Slices up to which a problem counts as small for HiGHS's heuristics (see `solve_relaxed`).
const SMALL_INSTANCE_SLICES: u32 = 64;

/// An instance type that survives pruning, with its big-M bound U on M(t,v,s,b).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    pub config: usize,
    pub bound: u32,
}

/// The instance types the space admits, less those that cannot be part of a feasible plan or are dominated.
///
/// Pruning keeps the optimum: a type is dropped when 2·L exceeds what its task may take on some path given the
/// fastest types of the path's other tasks (T) or the task's static latency budget (no T), when it costs more
/// slices than the task may use, or when another type of the same variant is no slower and as many copies of it
/// as fit in the type's slices are no less productive (any plan using the dominated type stays feasible and no
/// costlier with those copies instead).
pub(crate) fn candidates(
    problem: &Problem,
    features: Features,
    budgets: Option<&StaticBudgets>,
    (demand_min, demand_max): (&[f64], &[f64]),
) -> (Vec<Candidate>, usize) {
    let n = problem.tasks.len();
    let admitted: Vec<usize> =
        (0..problem.configs.len()).filter(|&i| admits(problem, features, &problem.configs[i])).collect();
    let fastest: Vec<f64> = (0..n)
        .map(|t| {
            // A task that may see no demand may have no instance, and then adds no latency.
            if demand_min[t] <= 0.0 {
                return 0.0;
            }
            admitted
                .iter()
                .map(|&i| &problem.configs[i])
                .filter(|c| c.task == t)
                .map(|c| c.latency_ms)
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let mut limit = vec![f64::INFINITY; n];
    for p in &problem.paths {
        let total: f64 = p.tasks.iter().map(|&t| 2.0 * fastest[t]).sum();
        for &t in &p.tasks {
            limit[t] = limit[t].min(problem.slo_latency_ms - (total - 2.0 * fastest[t]));
        }
    }
    if let Some(b) = budgets {
        (0..n).for_each(|t| limit[t] = limit[t].min(b.latency_ms[t]));
    }
    let slice_cap = |t: usize| budgets.map_or(f64::from(problem.slices), |b| b.slices[t]);
    let fits = |i: usize| {
        let c = &problem.configs[i];
        2.0 * c.latency_ms <= limit[c.task] * (1.0 + 1e-9)
            && f64::from(problem.segments[c.segment].slices) <= slice_cap(c.task) + 1e-9
    };
    let feasible: Vec<usize> = admitted.iter().copied().filter(|&i| fits(i)).collect();
    let mig_profile = |c: &crate::problem::Config| match problem.segments[c.segment].kind {
        SegmentKind::Mig { profile, .. } => Some(profile),
        _ => None,
    };
    // Where cores and GPU slices have budgets of their own, copies of a type on one kind do not stand in for a type
    // on the other: the cores the copies need may be spent when the GPU's slices are not (the voice on cores is
    // more productive a slice than on a GPU share, and still the share serves more once the cores are full).
    let kinds_apart = problem.cpu_cores.is_some() || problem.gpu_slices.is_some();
    let on_cores = |c: &crate::problem::Config| matches!(problem.segments[c.segment].kind, SegmentKind::Cpu { .. });
    let dominates = |a: usize, b: usize| {
        let (x, y) = (&problem.configs[a], &problem.configs[b]);
        // Where the MIG instances exist already, one of a profile is not there to copy (nor, with others
        // holding them, there at all): it stands in only for a type on the same profile.
        if problem.mig_instances.is_some() && mig_profile(x).is_some() && mig_profile(x) != mig_profile(y) {
            return false;
        }
        if kinds_apart && on_cores(x) != on_cores(y) {
            return false;
        }
        let (sx, sy) = (problem.segments[x.segment].slices, problem.segments[y.segment].slices);
        let copies = f64::from(sy / sx.max(1));
        let no_worse = sx <= sy && x.latency_ms <= y.latency_ms && copies * x.throughput_rps >= y.throughput_rps;
        let better = x.latency_ms < y.latency_ms || copies * x.throughput_rps > y.throughput_rps || sx < sy;
        no_worse && (better || a < b)
    };
    // A type may stand in for another of its task when its variant is the same, or at least as accurate with the
    // same factors (the same work downstream): equally accurate variants then tie no more on a slower type, which
    // a later re-plan at more demand would swap out, loading a new group for nothing. Not across variants when
    // read literally: there requests split by capacity, so a faster type of another variant takes a share of
    // the requests from a more accurate third type, and may lower the task's accuracy.
    let across_variants = features.weighting != Weighting::Literal;
    let stands_in = |a: usize, b: usize| {
        let task = &problem.tasks[problem.configs[b].task];
        let (va, vb) = (problem.configs[a].variant, problem.configs[b].variant);
        va == vb
            || (across_variants
                && task.variants[va].accuracy >= task.variants[vb].accuracy
                && task.variants[va].factors == task.variants[vb].factors)
    };
    let kept = feasible
        .iter()
        .copied()
        .filter(|&b| {
            let cb = &problem.configs[b];
            !feasible
                .iter()
                .any(|&a| a != b && problem.configs[a].task == cb.task && stands_in(a, b) && dominates(a, b))
        })
        .filter_map(|i| {
            let c = &problem.configs[i];
            let slices = f64::from(problem.segments[c.segment].slices);
            let by_slices = (slice_cap(c.task) / slices + 1e-9).floor();
            let by_demand = (demand_max[c.task] / c.throughput_rps - 1e-9).ceil();
            let bound = by_slices.min(by_demand).max(0.0);
            (bound >= 1.0).then_some(Candidate { config: i, bound: bound.min(f64::from(u32::MAX)) as u32 })
        })
        .collect();
    (kept, admitted.len())
}

/// The variables of one candidate.
struct Vars {
    m: Variable,
    n: Variable,
    x: Variable,
}

/// Which constraints to leave out (the infeasibility diagnosis asks what becomes feasible without one).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Relax {
    pub accuracy: bool,
}

/// Values of the variables for `previous` scaled to `problem`'s demand, or `None` where that cannot be a
/// feasible start.
fn warm_start(
    problem: &Problem,
    cands: &[Candidate],
    v: &[Vars],
    latency: &[Variable],
    loss_vars: &[Option<Variable>],
    gpu_layouts: &[(usize, Variable)],
    previous: &[Assignment],
) -> Option<Vec<(Variable, f64)>> {
    // Every request reaches every root task: the previous demand is what one root task served.
    let root_rate: f64 = (0..problem.tasks.len())
        .filter(|&t| problem.is_root(t))
        .map(|t| previous.iter().filter(|a| a.task == t).map(|a| a.rate_rps).sum::<f64>())
        .fold(0.0, f64::max);
    if root_rate <= 0.0 {
        return None;
    }
    let scale = problem.demand_rps / root_rate;
    let n = problem.tasks.len();
    let (mut task_latency, mut task_loss) = (vec![0.0f64; n], vec![0.0f64; n]);
    let (mut slices, mut cpu, mut gpu) = (0.0, 0.0, 0.0);
    let mut values = Vec::with_capacity(3 * previous.len() + 2 * n);
    let mut kinds = Vec::new();
    for a in previous {
        let i = cands.iter().position(|c| {
            let cfg = &problem.configs[c.config];
            (cfg.task, cfg.variant, cfg.segment, cfg.batch) == (a.task, a.variant, a.segment, a.batch)
        })?;
        let cfg = &problem.configs[cands[i].config];
        let x = a.rate_rps * scale;
        let m = (x / cfg.throughput_rps - 1e-9).ceil().max(1.0);
        if m > f64::from(cands[i].bound) {
            return None;
        }
        values.extend([(v[i].m, m), (v[i].n, 1.0), (v[i].x, x)]);
        let segment = &problem.segments[cfg.segment];
        kinds.extend(std::iter::repeat_n(segment.kind, m as usize));
        let used = m * f64::from(segment.slices);
        slices += used;
        if matches!(segment.kind, SegmentKind::Cpu { .. }) {
            cpu += used
        } else {
            gpu += used
        }
        task_latency[cfg.task] = task_latency[cfg.task].max(cfg.latency_ms);
        task_loss[cfg.task] = task_loss[cfg.task].max(1.0 - problem.tasks[cfg.task].normalised_accuracy(cfg.variant));
    }
    // The start's MIG instances packed onto GPUs, as the layout variables count them.
    let counts = mig_counts(&kinds);
    if counts != [0; 6] {
        let packing = pack_layouts(&counts)?;
        for &(i, y) in gpu_layouts {
            let gpus = packing.iter().find(|&&(j, _)| j == i).map_or(0, |&(_, n)| n);
            values.push((y, f64::from(gpus)));
        }
        let overcharged: u32 = packing.iter().map(|&(i, n)| layouts()[i].overcharge() * n).sum();
        let used_gpus: u32 = packing.iter().map(|&(_, n)| n).sum();
        if packing.iter().any(|(i, _)| !gpu_layouts.iter().any(|(j, _)| j == i))
            || used_gpus > problem.gpu_slices.unwrap_or(problem.slices).div_ceil(7)
        {
            return None;
        }
        slices -= f64::from(overcharged);
        gpu -= f64::from(overcharged);
    }
    let fits = |used: f64, cap: Option<u32>| cap.is_none_or(|cap| used <= f64::from(cap));
    if !fits(slices, Some(problem.slices)) || !fits(cpu, problem.cpu_cores) || !fits(gpu, problem.gpu_slices) {
        return None;
    }
    values.extend(latency.iter().zip(&task_latency).map(|(&var, &ms)| (var, ms)));
    values.extend(loss_vars.iter().zip(&task_loss).filter_map(|(var, &lost)| Some(((*var)?, lost))));
    Some(values)
}

/// The most demand each task can see when F̂ sums the factors of all its active types (eq. 4 as printed): every
/// admitted type of every upstream task active at once.
fn literal_demand_max(problem: &Problem, features: Features) -> Vec<f64> {
    problem.propagate(|t, i| {
        (problem.configs.iter())
            .filter(|c| c.task == t && admits(problem, features, c))
            .map(|c| problem.tasks[t].variants[c.variant].factors[i])
            .sum()
    })
}

/// The variables of [`Weighting::Literal`]'s rows (see [`Literal::rows`]).
struct Literal {
    /// u_t, each task's utilisation.
    utilisation: Vec<Variable>,
    /// Per candidate.
    per_type: Vec<LiteralType>,
}

/// One candidate's variables in [`Literal`]: z_k = R̂(t)·N_k where its task has successors, and (β_kj, w_kj)
/// per binary digit of M_k.
type LiteralType = (Option<Variable>, Vec<(Variable, Variable)>);

impl Literal {
    fn new(problem: &Problem, cands: &[Candidate], demand_max: &[f64], vars: &mut ProblemVariables) -> Self {
        let utilisation = (0..problem.tasks.len()).map(|_| vars.add(variable().min(0).max(1))).collect();
        let per_type = cands
            .iter()
            .map(|c| {
                let t = problem.configs[c.config].task;
                let z = (!problem.tasks[t].succs.is_empty()).then(|| vars.add(variable().min(0).max(demand_max[t])));
                let digits = 32 - c.bound.leading_zeros();
                (z, (0..digits).map(|_| (vars.add(variable().binary()), vars.add(variable().min(0).max(1)))).collect())
            })
            .collect();
        Self { utilisation, per_type }
    }

    /// The rows, both exact:
    ///
    /// * (4) as printed, R̂(t′) = Σ_t R̂(t)·Σ_k F_k·N_k: the products z_k = R̂(t)·N_k of a rate and a binary, by
    ///   z_k ≤ R̂max(t)·N_k, z_k ≤ R̂(t), z_k ≥ R̂(t) − R̂max(t)·(1 − N_k).
    /// * (9)–(10) with Ĥ = M·H: each type's rate is its capacity's share of the task's demand, x_k = u_t·H_k·M_k
    ///   for one utilisation u_t ∈ [0, 1] per task, so the served accuracy is the capacity-weighted one and the
    ///   linear accuracy rows stay as they are. The product u_t·M_k is exact over M_k's binary digits β_kj:
    ///   x_k = H_k·Σ_j 2^j·w_kj with w_kj = u_t·β_kj (w ≤ β, w ≤ u, w ≥ u + β − 1).
    #[allow(clippy::too_many_arguments)]
    fn rows(
        &self,
        problem: &Problem,
        cands: &[Candidate],
        v: &[Vars],
        served: &[Expression],
        demand_max: &[f64],
        emitted: &mut [Expression],
        model: &mut impl SolverModel,
    ) {
        for ((c, var), (z, digits)) in cands.iter().zip(v).zip(&self.per_type) {
            let cfg = &problem.configs[c.config];
            let (t, task) = (cfg.task, &problem.tasks[cfg.task]);
            if let Some(z) = *z {
                let most = demand_max[t];
                model.add_constraint(constraint!(z <= most * var.n));
                model.add_constraint(constraint!(z <= served[t].clone()));
                model.add_constraint(constraint!(z >= served[t].clone() - most + most * var.n));
                for (i, &s) in task.succs.iter().enumerate() {
                    emitted[s].add_mul(task.variants[cfg.variant].factors[i], z);
                }
            }
            let u = self.utilisation[t];
            let (mut count, mut rate) = (Expression::default(), Expression::default());
            for (j, &(beta, w)) in digits.iter().enumerate() {
                let weight = f64::from(1u32 << j);
                model.add_constraint(constraint!(w <= beta));
                model.add_constraint(constraint!(w <= u));
                model.add_constraint(constraint!(w >= u + beta - 1));
                count.add_mul(weight, beta);
                rate.add_mul(weight * cfg.throughput_rps, w);
            }
            model.add_constraint(constraint!(var.m == count));
            model.add_constraint(constraint!(var.x == rate));
        }
    }
}

pub(crate) fn solve_relaxed(
    problem: &Problem,
    features: Features,
    options: &SolveOptions,
    relax: Relax,
    previous: &[Assignment],
) -> Result<Solved, PlanError> {
    let started = Instant::now();
    let n = problem.tasks.len();
    let budgets = (!features.graph_budgets).then(|| StaticBudgets::new(problem, features));
    let allowed = |t: usize, v: usize| features.accuracy_scaling || v == problem.tasks[t].best;
    let literal = features.weighting == Weighting::Literal;
    let (demand_min, mut demand_max) = problem.demand_bounds(allowed);
    if literal {
        demand_max = literal_demand_max(problem, features);
    }
    let (cands, profiled) = candidates(problem, features, budgets.as_ref(), (&demand_min, &demand_max));
    // Re-plans read literally start cold: the start sets no values for the variables of the literal rows.
    let previous = if literal { &[][..] } else { previous };

    let mut vars = ProblemVariables::new();
    let v: Vec<Vars> = cands
        .iter()
        .map(|c| {
            let cfg = &problem.configs[c.config];
            let u = f64::from(c.bound);
            Vars {
                m: vars.add(variable().integer().min(0).max(u)),
                n: vars.add(variable().binary()),
                x: vars.add(variable().min(0).max(u * cfg.throughput_rps)),
            }
        })
        .collect();
    // A task that must serve has at least one instance, so its latency is at least its fastest type's: a bound
    // the LP relaxation (latency ≥ L·N with fractional N) does not see, and that tightens every path row (3).
    let latency_floor: Vec<f64> = (0..n)
        .map(|t| {
            if demand_min[t] <= 1e-9 {
                return 0.0;
            }
            let fastest = (cands.iter().map(|c| &problem.configs[c.config]).filter(|c| c.task == t))
                .map(|c| c.latency_ms)
                .fold(f64::INFINITY, f64::min);
            if fastest.is_finite() { fastest } else { 0.0 }
        })
        .collect();
    let latency: Vec<Variable> = latency_floor.iter().map(|&floor| vars.add(variable().min(floor))).collect();
    let literal = literal.then(|| Literal::new(problem, &cands, &demand_max, &mut vars));
    // Plans that fit: y_L GPUs take MIG layout L, over the layouts of the profiles the candidates use.
    let profile_of = |c: &Candidate| match problem.segments[problem.configs[c.config].segment].kind {
        SegmentKind::Mig { profile, .. } => Some(profile),
        _ => None,
    };
    let profiles: Vec<MigProfile> =
        MigProfile::ALL.into_iter().filter(|p| cands.iter().any(|c| profile_of(c) == Some(*p))).collect();
    // Whole GPUs; a budget that is not a multiple of 7 slices has part of one more, which (8) bounds.
    let gpus = problem.gpu_slices.unwrap_or(problem.slices).div_ceil(7);
    let gpu_layouts: Vec<(usize, Variable)> = if profiles.is_empty() {
        Vec::new()
    } else {
        let usable = |i: &usize| layouts()[*i].instances.iter().all(|(p, _)| profiles.contains(p));
        (0..layouts().len()).filter(usable).map(|i| (i, vars.add(variable().integer().min(0).max(gpus)))).collect()
    };
    // ε_t, the normalised accuracy loss of task t, as an expression (or a variable where demand may vanish).
    let mut loss: Vec<Expression> = vec![Expression::default(); n];
    let mut loss_vars: Vec<Option<Variable>> = vec![None; n];
    for t in 0..n {
        if demand_min[t] <= 1e-9 && features.accuracy_scaling {
            let e = vars.add(variable().min(0).max(1));
            loss[t] = e.into();
            loss_vars[t] = Some(e);
        }
    }
    for (c, var) in cands.iter().zip(&v) {
        let cfg = &problem.configs[c.config];
        let t = cfg.task;
        if loss_vars[t].is_none() && demand_min[t] > 1e-9 {
            let lost = 1.0 - problem.tasks[t].normalised_accuracy(cfg.variant);
            if lost > 0.0 {
                loss[t].add_mul(lost / demand_min[t], var.x);
            }
        }
    }
    let task_weight: Vec<f64> =
        (0..n).map(|t| problem.paths.iter().filter(|p| p.tasks.contains(&t)).map(|p| p.weight).sum()).collect();
    let mut accuracy = Expression::from(1.0);
    for t in 0..n {
        accuracy -= task_weight[t] * loss[t].clone();
    }
    let mut slices = Expression::default();
    for (c, var) in cands.iter().zip(&v) {
        slices.add_mul(problem.segments[problem.configs[c.config].segment].slices, var.m);
    }
    // A GPU whose layout's instances are priced 8 slices holds 7.
    let mut overcharge = Expression::default();
    for &(i, y) in &gpu_layouts {
        overcharge.add_mul(layouts()[i].overcharge(), y);
    }
    slices -= overcharge.clone();
    let objective = if options.feasibility_only {
        Expression::from(0.0)
    } else {
        problem.objective.alpha * accuracy.clone() - problem.objective.beta * slices.clone()
    };

    let objective_value = objective.clone();
    let every_variable: Vec<Variable> = (v.iter().flat_map(|x| [x.m, x.n, x.x]))
        .chain(latency.iter().copied())
        .chain(loss_vars.iter().flatten().copied())
        .chain(gpu_layouts.iter().map(|&(_, y)| y))
        .collect();
    let mut model = vars
        .maximise(objective)
        .using(|p| highs_with(highs(p), options))
        // HiGHS's root reduced-cost heuristic (a sub-MIP over the columns the root LP prices near zero) finds
        // the plans that end the search at hundreds of slices, but on a few dozen it costs more than it saves:
        // measured in BENCHMARKS.md ("Planner").
        .set_option("mip_heuristic_run_root_reduced_cost", problem.slices > SMALL_INSTANCE_SLICES)
        .set_mip_rel_gap(options.mip_rel_gap as f32)
        .and_then(|m| m.set_mip_abs_gap((options.abs_gap_slices * problem.objective.beta) as f32))
        .map_err(|e| PlanError::Solver(e.to_string()))?;
    // The start as a whole assignment (every other variable 0), to compare with what a search cut short found.
    let mut start_values: Option<HashMap<Variable, f64>> = None;
    if let Some(start) = warm_start(problem, &cands, &v, &latency, &loss_vars, &gpu_layouts, previous) {
        let mut values: HashMap<Variable, f64> = every_variable.iter().map(|&var| (var, 0.0)).collect();
        values.extend(start.iter().copied());
        start_values = Some(values);
        // From a start, HiGHS's restarts (presolving again once the root fixes columns) and its RENS sub-MIPs
        // repeat work the start already spares it: without them the paper apps' re-plans at 28 slices take a
        // third of the time for AR and no longer for traffic, with the same plans (BENCHMARKS.md, "Re-plans").
        model = model
            .with_initial_solution(start)
            .set_time_limit(options.time_limit_s.min(options.replan_time_limit_s))
            .set_option("mip_allow_restart", false)
            .set_option("mip_heuristic_run_rens", false);
    }

    // (1), (2), capacity of (6).
    let mut served: Vec<Expression> = vec![Expression::default(); n];
    let mut emitted: Vec<Expression> = vec![Expression::default(); n];
    for (c, var) in cands.iter().zip(&v) {
        let cfg = &problem.configs[c.config];
        let task = &problem.tasks[cfg.task];
        model.add_constraint(constraint!(var.x <= cfg.throughput_rps * var.m));
        model.add_constraint(constraint!(var.m <= f64::from(c.bound) * var.n));
        model.add_constraint(constraint!(var.n <= var.m));
        model.add_constraint(constraint!(latency[cfg.task] >= cfg.latency_ms * var.n));
        served[cfg.task] += var.x;
        if literal.is_none() {
            for (i, &s) in task.succs.iter().enumerate() {
                emitted[s].add_mul(task.variants[cfg.variant].factors[i], var.x);
            }
        }
        if let Some(e) = loss_vars[cfg.task] {
            let lost = 1.0 - task.normalised_accuracy(cfg.variant);
            model.add_constraint(constraint!(e >= lost * var.n));
        }
    }
    // Σ_k H_k·M_k ≥ R̂(t), implied by (6) and (4)–(5), but as one row it gives HiGHS knapsack cover cuts on
    // the instance counts: the LP relaxation buys fractional instances, and rounding them is the hard part.
    for (t, served_t) in served.iter().enumerate() {
        let mut capacity = Expression::default();
        for (c, var) in cands.iter().zip(&v).filter(|(c, _)| problem.configs[c.config].task == t) {
            capacity.add_mul(problem.configs[c.config].throughput_rps, var.m);
        }
        model.add_constraint(constraint!(capacity >= served_t.clone()));
    }
    if let Some(literal) = &literal {
        literal.rows(problem, &cands, &v, &served, &demand_max, &mut emitted, &mut model);
    }
    // (4)–(6): the served rates carry the demand down the graph.
    for t in 0..n {
        let demand = if problem.is_root(t) { Expression::from(problem.demand_rps) } else { emitted[t].clone() };
        model.add_constraint(constraint!(served[t].clone() == demand));
    }
    // (3)
    for p in &problem.paths {
        let total: Expression = p.tasks.iter().map(|&t| 2.0 * latency[t]).sum();
        model.add_constraint(constraint!(total <= problem.slo_latency_ms));
    }
    // Each MIG profile's instances are exactly those of the GPUs' layouts, on at most the GPUs there are.
    for &p in &profiles {
        let mut instances = Expression::default();
        for (_, var) in cands.iter().zip(&v).filter(|(c, _)| profile_of(c) == Some(p)) {
            instances += var.m;
        }
        let mut held = Expression::default();
        for &(i, y) in &gpu_layouts {
            held.add_mul(layouts()[i].count(p), y);
        }
        model.add_constraint(constraint!(instances.clone() == held));
        // Where the instances exist already, at most those: jig creates none.
        if let Some(existing) = problem.mig_instances {
            let free = existing[p.index()];
            model.add_constraint(constraint!(instances <= free));
        }
    }
    if !gpu_layouts.is_empty() {
        let used: Expression = gpu_layouts.iter().map(|&(_, y)| y).sum();
        model.add_constraint(constraint!(used <= gpus));
    }
    // (7)–(8), and Appendix B's per-task slice budgets without T.
    model.add_constraint(constraint!(slices <= f64::from(problem.slices)));
    // A machine with both kinds bounds its cores and its GPU slices each.
    for (cpu, cap) in [(true, problem.cpu_cores), (false, problem.gpu_slices)] {
        let Some(cap) = cap else { continue };
        let mut kind_slices = Expression::default();
        for (c, var) in cands.iter().zip(&v) {
            let segment = &problem.segments[problem.configs[c.config].segment];
            if matches!(segment.kind, SegmentKind::Cpu { .. }) == cpu {
                kind_slices.add_mul(segment.slices, var.m);
            }
        }
        if !cpu {
            kind_slices -= overcharge.clone();
        }
        model.add_constraint(constraint!(kind_slices <= f64::from(cap)));
    }
    // The cores run what no instance on them plans too (glue, models no task plans, the host side of GPU
    // instances): the time instances on cores are busy, N/H per row on `cpu:N`, a GPU row's host CPU (its
    // profiled `cpu_ms` a batch, over its rows) where the machine's cores are known, and that work at R
    // requests a second fit the share of the cores' time that shared cores give (`SHARED_CORES_BUSY`). Without
    // such work each instance has its cores to itself (the core count holds); not counted on a share without
    // cores of its own.
    let cores = problem.cpu_cores.unwrap_or(problem.slices);
    let host_cpu = |cfg: &crate::problem::Config| match problem.cpu_cores {
        Some(_) => cfg.host_cpu_ms / f64::from(cfg.batch.max(1)) / 1000.0,
        None => 0.0,
    };
    let hosted = cands.iter().any(|c| host_cpu(&problem.configs[c.config]) > 0.0);
    if (problem.unplanned_cpu_ms > 0.0 || hosted) && cores > 0 {
        let mut busy = Expression::from(problem.demand_rps * problem.unplanned_cpu_ms / 1000.0);
        for (c, var) in cands.iter().zip(&v) {
            let cfg = &problem.configs[c.config];
            let segment = &problem.segments[cfg.segment];
            if matches!(segment.kind, SegmentKind::Cpu { .. }) && cfg.throughput_rps > 0.0 {
                busy.add_mul(f64::from(segment.slices) / cfg.throughput_rps, var.x);
            } else if host_cpu(cfg) > 0.0 {
                busy.add_mul(host_cpu(cfg), var.x);
            }
        }
        model.add_constraint(constraint!(busy <= crate::problem::SHARED_CORES_BUSY * f64::from(cores)));
    }
    // Without T, each task within its static budgets (Appendix B): (bound, what must stay within it).
    let mut within_budgets: Vec<(f64, Expression)> = Vec::new();
    if let Some(b) = &budgets {
        for (t, task_loss) in loss.iter().enumerate() {
            let mut task_slices = Expression::default();
            for (c, var) in cands.iter().zip(&v).filter(|(c, _)| problem.configs[c.config].task == t) {
                task_slices.add_mul(problem.segments[problem.configs[c.config].segment].slices, var.m);
            }
            within_budgets.push((b.slices[t], task_slices));
            if !relax.accuracy && b.accuracy_loss[t].is_finite() {
                within_budgets.push((b.accuracy_loss[t], task_loss.clone()));
            }
        }
    }
    for (bound, used) in &within_budgets {
        model.add_constraint(constraint!(used.clone() <= *bound));
    }
    // (9)–(13), linearised: 1 − Σ_t G_t ε_t ≥ SLO_a, unless static per-task accuracy budgets stand for it.
    let static_accuracy = budgets.as_ref().is_some_and(StaticBudgets::budgets_accuracy);
    if !relax.accuracy && !static_accuracy {
        model.add_constraint(constraint!(accuracy.clone() >= problem.slo_accuracy));
    }

    let solution = match model.solve() {
        Ok(s) => Some(s),
        Err(ResolutionError::Infeasible) => return Err(PlanError::Infeasible(String::new())),
        Err(ResolutionError::Other("NoSolutionFound")) if start_values.is_some() => None,
        Err(ResolutionError::Other("NoSolutionFound")) => return Err(PlanError::TimeLimit(options.time_limit_s)),
        Err(e) => return Err(PlanError::Solver(e.to_string())),
    };
    let optimal = solution.as_ref().is_some_and(|s| !matches!(s.status(), SolutionStatus::TimeLimit));
    // A search cut short may end with less than the start it was given (under load HiGHS can stop before it
    // reads the start): a re-plan is never worse than the running plan scaled to the demand.
    let assignments_of = |values: &HashMap<Variable, f64>| -> Vec<Assignment> {
        cands
            .iter()
            .zip(&v)
            .filter_map(|(c, var)| {
                let instances = values[&var.m].round().max(0.0) as u32;
                let cfg = &problem.configs[c.config];
                // Clamp solver round-off so the rate never exceeds what the instances serve.
                let rate = values[&var.x].clamp(0.0, f64::from(instances) * cfg.throughput_rps);
                (instances > 0).then_some(Assignment {
                    task: cfg.task,
                    variant: cfg.variant,
                    segment: cfg.segment,
                    batch: cfg.batch,
                    instances,
                    rate_rps: rate,
                })
            })
            .collect()
    };
    let found: Option<HashMap<Variable, f64>> =
        solution.map(|found| every_variable.iter().map(|&var| (var, found.value(var))).collect());
    // A search cut short may end with less than the start it was given (HiGHS drops a start that breaks one
    // of its rows, and under load may stop before it reads one): a re-plan keeps the running plan scaled to
    // the demand when that is a plan (the independent check passes) and no worse.
    let start = start_values.filter(|start| {
        !optimal
            && evaluate(problem, &assignments_of(start)).is_feasible()
            && within_budgets.iter().all(|(bound, used)| used.eval_with(start) <= bound + 1e-6)
            && found.as_ref().is_none_or(|f| objective_value.eval_with(start) > objective_value.eval_with(f) + 1e-9)
    });
    let Some(solution) = start.or(found) else { return Err(PlanError::TimeLimit(options.time_limit_s)) };
    let gpu_layouts: Vec<(usize, u32)> = gpu_layouts
        .iter()
        .map(|&(i, y)| (i, solution[&y].round().max(0.0) as u32))
        .filter(|&(_, count)| count > 0)
        .collect();
    let assignments = assignments_of(&solution);
    Ok(Solved {
        assignments,
        accuracy_bound: accuracy.eval_with(&solution),
        gpu_layouts,
        optimal,
        seconds: started.elapsed().as_secs_f64(),
        instance_types: cands.len(),
        instance_types_profiled: profiled,
        classes: Vec::new(),
        pipelines: Vec::new(),
        colocated: Vec::new(),
    })
}
