//! Exhaustive search of the paper's model on small problems, to check the MILP against (and of Compass's
//! program, [`compass`], and PPipe's, [`ppipe`]).
//!
//! It enumerates every multiset of instance types per task within the slice limit (no dominance pruning, only
//! the obviously valid cuts: a task's instances must be able to serve its least demand), routes each task's
//! demand greedily to its most accurate instances first, and scores the plan with the independent
//! [`crate::evaluate::evaluate`]. Greedy routing is optimal when a task's variants share their
//! multiplicative factors (demand is then fixed, and each Â(t) is best when the accurate instances are full);
//! otherwise it gives a lower bound on the optimum. Read literally ([`Weighting::Literal`]), routing is not a
//! choice: each type serves its capacity's share, and demand follows eq. (4) as printed.

use crate::baselines::{StaticBudgets, admits};
use crate::evaluate::evaluate_as;
use crate::problem::Problem;
use crate::solution::Assignment;
use crate::spec::{Features, Weighting};

/// The best plans found.
#[derive(Debug, Clone, PartialEq)]
pub struct Best {
    /// Highest exact objective (14) over feasible plans.
    pub exact: Option<(f64, Vec<Assignment>)>,
    /// Highest objective under the MILP's linear accuracy bound, over plans whose bound meets SLO_a: what the
    /// MILP optimises, found without it.
    pub linear: Option<(f64, Vec<Assignment>)>,
    /// Plans enumerated.
    pub plans: usize,
}

/// Search every plan of `problem` in space `features`; gives up (returns `None`) past `limit` plans.
pub fn search(problem: &Problem, features: Features, limit: usize) -> Option<Best> {
    let n = problem.tasks.len();
    let budgets = (!features.graph_budgets).then(|| StaticBudgets::new(problem, features));
    let allowed = |t: usize, v: usize| features.accuracy_scaling || v == problem.tasks[t].best;
    let (demand_min, _) = problem.demand_bounds(allowed);
    let types: Vec<Vec<usize>> = (0..n)
        .map(|t| {
            (0..problem.configs.len())
                .filter(|&i| {
                    let c = &problem.configs[i];
                    c.task == t
                        && admits(problem, features, c)
                        && budgets.as_ref().is_none_or(|b| 2.0 * c.latency_ms <= b.latency_ms[t] + 1e-9)
                })
                .collect()
        })
        .collect();
    let mut best = Best { exact: None, linear: None, plans: 0 };
    let mut chosen: Chosen = vec![Vec::new(); n];
    let ok =
        enumerate_task(problem, &types, &demand_min, budgets.as_ref(), 0, problem.slices, &mut chosen, &mut |plan| {
            best.plans += 1;
            if best.plans > limit {
                return false;
            }
            score(problem, features, budgets.as_ref(), &demand_min, plan, &mut best);
            true
        });
    ok.then_some(best)
}

/// Chosen (instance type, count) pairs per task.
type Chosen = Vec<Vec<(usize, u32)>>;

/// Enumerate multisets of task `t`'s types (then the next task's) within `slices_left`.
#[allow(clippy::too_many_arguments)]
fn enumerate_task(
    problem: &Problem,
    types: &[Vec<usize>],
    demand_min: &[f64],
    budgets: Option<&StaticBudgets>,
    t: usize,
    slices_left: u32,
    chosen: &mut Chosen,
    visit: &mut dyn FnMut(&Chosen) -> bool,
) -> bool {
    if t == types.len() {
        return visit(chosen);
    }
    let cap = budgets.map_or(slices_left, |b| slices_left.min((b.slices[t] + 1e-9).floor() as u32));
    let mut counts = vec![0u32; types[t].len()];
    multisets(problem, &types[t], 0, cap, &mut counts, &mut |counts, used| {
        let capacity: f64 =
            types[t].iter().zip(counts).map(|(&i, &m)| f64::from(m) * problem.configs[i].throughput_rps).sum();
        if capacity + 1e-9 < demand_min[t] {
            return true;
        }
        chosen[t] = types[t].iter().zip(counts).filter(|(_, m)| **m > 0).map(|(&i, &m)| (i, m)).collect();
        enumerate_task(problem, types, demand_min, budgets, t + 1, slices_left - used, chosen, visit)
    })
}

fn multisets(
    problem: &Problem,
    types: &[usize],
    from: usize,
    cap: u32,
    counts: &mut Vec<u32>,
    visit: &mut dyn FnMut(&[u32], u32) -> bool,
) -> bool {
    let used: u32 =
        types.iter().zip(counts.iter()).map(|(&i, &m)| m * problem.segments[problem.configs[i].segment].slices).sum();
    if !visit(counts, used) {
        return false;
    }
    for k in from..types.len() {
        let cost = problem.segments[problem.configs[types[k]].segment].slices;
        if used + cost <= cap {
            counts[k] += 1;
            let go_on = multisets(problem, types, k, cap, counts, visit);
            counts[k] -= 1;
            if !go_on {
                return false;
            }
        }
    }
    true
}

/// Route greedily, evaluate exactly and under the linear bound, and keep the best of those within the static
/// accuracy budgets (a space without T, read as the paper writes it).
fn score(
    problem: &Problem,
    features: Features,
    budgets: Option<&StaticBudgets>,
    demand_min: &[f64],
    plan: &[Vec<(usize, u32)>],
    best: &mut Best,
) {
    let n = problem.tasks.len();
    let mut demand = vec![0.0; n];
    let mut assignments = Vec::new();
    for &t in &problem.topo {
        if problem.is_root(t) {
            demand[t] = problem.demand_rps;
        }
        let mut entries = plan[t].clone();
        entries.sort_by(|a, b| {
            let (ca, cb) = (&problem.configs[a.0], &problem.configs[b.0]);
            let acc = |c: &crate::problem::Config| problem.tasks[t].variants[c.variant].accuracy;
            acc(cb).total_cmp(&acc(ca)).then(a.0.cmp(&b.0))
        });
        let literal = features.weighting == Weighting::Literal;
        let capacity: f64 = entries.iter().map(|&(i, m)| f64::from(m) * problem.configs[i].throughput_rps).sum();
        let mut left = demand[t];
        let task = &problem.tasks[t];
        for (i, m) in entries {
            let c = &problem.configs[i];
            let held = f64::from(m) * c.throughput_rps;
            let rate = if literal { held.min(demand[t] * held / capacity) } else { left.min(held).max(0.0) };
            left -= rate;
            for (j, &s) in task.succs.iter().enumerate() {
                // (4): the average factor over what is served, or as printed, Σ F over the active types.
                demand[s] += if literal { demand[t] } else { rate } * task.variants[c.variant].factors[j];
            }
            assignments.push(Assignment {
                task: t,
                variant: c.variant,
                segment: c.segment,
                batch: c.batch,
                instances: m,
                rate_rps: rate,
            });
        }
    }
    let losses = linear_losses(problem, features, demand_min, &assignments);
    if budgets.is_some_and(|b| losses.iter().zip(&b.accuracy_loss).any(|(lost, budget)| lost > &(budget + 1e-9))) {
        return;
    }
    let eval = evaluate_as(problem, &assignments, features.weighting);
    if !eval.is_feasible() {
        return;
    }
    if best.exact.as_ref().is_none_or(|(o, _)| eval.objective > *o + 1e-12) {
        best.exact = Some((eval.objective, assignments.clone()));
    }
    let bound = linear_accuracy(problem, features, demand_min, &assignments);
    if bound >= problem.slo_accuracy - 1e-9 {
        let objective = problem.objective.alpha * bound - problem.objective.beta * f64::from(eval.slices);
        if best.linear.as_ref().is_none_or(|(o, _)| objective > *o + 1e-12) {
            best.linear = Some((objective, assignments));
        }
    }
}

/// The MILP's lower bound on A_obj, 1 − Σ_t G_t·ε_t, computed independently of the MILP: ε_t is the task's
/// routed accuracy loss over its least demand, or its worst active variant's loss where demand may vanish.
pub fn linear_accuracy(problem: &Problem, features: Features, demand_min: &[f64], plan: &[Assignment]) -> f64 {
    let loss = linear_losses(problem, features, demand_min, plan);
    let weight = |t: usize| problem.paths.iter().filter(|p| p.tasks.contains(&t)).map(|p| p.weight).sum::<f64>();
    1.0 - (0..loss.len()).map(|t| weight(t) * loss[t]).sum::<f64>()
}

/// Each task's ε_t as [`linear_accuracy`] counts it.
fn linear_losses(problem: &Problem, features: Features, demand_min: &[f64], plan: &[Assignment]) -> Vec<f64> {
    let n = problem.tasks.len();
    let mut loss = vec![0.0; n];
    for a in plan {
        let lost = 1.0 - problem.tasks[a.task].normalised_accuracy(a.variant);
        if demand_min[a.task] > 1e-9 || !features.accuracy_scaling {
            loss[a.task] += a.rate_rps * lost / demand_min[a.task].max(1e-9);
        } else if a.instances > 0 {
            loss[a.task] = f64::max(loss[a.task], lost);
        }
    }
    loss
}

/// The best Compass plan found by enumeration ([`compass`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CompassBest {
    /// The most goodput, req/s.
    pub goodput_rps: f64,
    /// The fewest slices that serve it.
    pub slices: u32,
    /// Vectors of instance counts tried.
    pub plans: usize,
}

/// Compass's program searched by enumeration instead of branch and bound: every vector of instance counts
/// within the slices, each with the most goodput its counts allow (a linear program over the classes' shares of
/// their routes; routes enumerated here as every type per task, in pipeline order, within the class's SLOs).
/// Gives up (returns `None`) past `limit` vectors; `None` too for a graph that is not a chain.
pub fn compass(problem: &Problem, limit: usize) -> Option<CompassBest> {
    use good_lp::{Expression, ProblemVariables, SolverModel, constraint, default_solver, variable};
    let order = crate::ipa::chain(problem, "Compass").ok()?;
    let n = problem.configs.len();
    let mut routes: Vec<Vec<Vec<usize>>> = Vec::new();
    for class in &problem.classes {
        let mut all: Vec<Vec<usize>> = vec![vec![]];
        for &t in &order {
            let on: Vec<usize> = (0..n).filter(|&i| problem.configs[i].task == t).collect();
            all = all.into_iter().flat_map(|r| on.iter().map(move |&i| [r.clone(), vec![i]].concat())).collect();
        }
        all.retain(|r| {
            let latency: f64 = r.iter().map(|&i| 2.0 * problem.configs[i].latency_ms).sum();
            let accuracy: f64 = r
                .iter()
                .map(|&i| problem.tasks[problem.configs[i].task].normalised_accuracy(problem.configs[i].variant))
                .product();
            latency <= class.slo_latency_ms && accuracy >= class.slo_accuracy - 1e-9
        });
        routes.push(all);
    }
    let slices_of = |i: usize| problem.segments[problem.configs[i].segment].slices.max(1);
    // The most goodput `counts` allow.
    let served = |counts: &[u32]| -> f64 {
        let mut vars = ProblemVariables::new();
        let (mut goodput, mut rows, mut load) = (Expression::default(), Vec::new(), vec![Expression::default(); n]);
        for (class, rs) in problem.classes.iter().zip(&routes) {
            let demand = class.share * problem.demand_rps;
            let mut whole = Expression::default();
            for route in rs {
                let u = vars.add(variable().min(0).max(1));
                whole += u;
                goodput.add_mul(demand, u);
                for (i, per_request) in crate::compass::along(problem, route) {
                    load[i].add_mul(demand * per_request, u);
                }
            }
            rows.push(constraint!(whole <= 1));
        }
        if routes.iter().all(Vec::is_empty) {
            return 0.0;
        }
        for (i, l) in load.into_iter().enumerate() {
            rows.push(constraint!(l <= problem.configs[i].throughput_rps * f64::from(counts[i])));
        }
        let mut model = vars.maximise(goodput.clone()).using(default_solver);
        for row in rows {
            model.add_constraint(row);
        }
        model.solve().map_or(0.0, |s| goodput.eval_with(&s))
    };
    let mut best = CompassBest { goodput_rps: 0.0, slices: 0, plans: 0 };
    let mut counts = vec![0u32; n];
    // Depth first over the types, each count within the slices the types before it left.
    fn next(
        k: usize,
        left: u32,
        counts: &mut Vec<u32>,
        slices_of: &dyn Fn(usize) -> u32,
        visit: &mut dyn FnMut(&[u32]) -> bool,
    ) -> bool {
        if k == counts.len() {
            return visit(counts);
        }
        for m in 0..=left / slices_of(k) {
            counts[k] = m;
            if !next(k + 1, left - m * slices_of(k), counts, slices_of, visit) {
                return false;
            }
        }
        counts[k] = 0;
        true
    }
    let complete = next(0, problem.slices, &mut counts, &slices_of, &mut |counts| {
        best.plans += 1;
        if best.plans > limit {
            return false;
        }
        let used: u32 = counts.iter().enumerate().map(|(i, &m)| m * slices_of(i)).sum();
        let (cpu, gpu) = counts.iter().enumerate().fold((0, 0), |(cpu, gpu), (i, &m)| {
            match problem.segments[problem.configs[i].segment].kind {
                crate::spec::SegmentKind::Cpu { .. } => (cpu + m * slices_of(i), gpu),
                _ => (cpu, gpu + m * slices_of(i)),
            }
        });
        if problem.cpu_cores.is_some_and(|cap| cpu > cap) || problem.gpu_slices.is_some_and(|cap| gpu > cap) {
            return true;
        }
        let goodput = served(counts);
        let tie = 1e-6 * best.goodput_rps.max(1.0);
        if goodput > best.goodput_rps + tie || (goodput >= best.goodput_rps - tie && used < best.slices) {
            best.goodput_rps = goodput.max(best.goodput_rps);
            best.slices = used;
        }
        true
    });
    complete.then_some(best)
}

/// The most throughput any PPipe plan of `problem` serves, found by enumeration, independently of the MILP's
/// candidate generation: every sequence of classes the scheme allows, every cut of the blocks into that many
/// partitions, every batch size and share per partition within the budget, at most one such pipeline per class
/// sequence, and every pool size per partition within the units.
pub fn ppipe(problem: &crate::ppipe::PpipeProblem) -> f64 {
    use crate::ppipe::Scheme;
    let (k, m) = (problem.classes.len(), problem.model.blocks);
    let lcm = crate::ppipe::lcm_of_shares(&problem.classes);
    let (fewest, most) = match problem.scheme {
        Scheme::PPipe => (1, problem.max_partitions.min(m)),
        Scheme::NoPartitioning => (1, 1),
        Scheme::DartR => (1, 2.min(m)),
        Scheme::EveryBlock => (m, m),
    };
    let mut groups: Vec<Vec<Pools>> = Vec::new();
    for parts in fewest..=most {
        for code in 0..k.pow(parts as u32) {
            let classes: Vec<usize> = (0..parts).map(|d| code / k.pow(d as u32) % k).collect();
            let dart_chain = problem.scheme == Scheme::DartR && parts == 2;
            if dart_chain && classes[0] == classes[1] {
                continue;
            }
            let mut group = Vec::new();
            // Cuts: ends[d] is where partition d ends; the last ends at m.
            let mut cuts: Vec<Vec<usize>> = vec![vec![]];
            for _ in 1..parts {
                cuts = cuts
                    .into_iter()
                    .flat_map(|c| {
                        let from = c.last().copied().unwrap_or(0) + 1;
                        (from..m).map(move |e| [c.clone(), vec![e]].concat())
                    })
                    .collect();
            }
            for mut ends in cuts.into_iter().filter(|c| c.len() == parts - 1) {
                ends.push(m);
                let ranges: Vec<std::ops::Range<usize>> =
                    (0..parts).map(|d| if d == 0 { 0..ends[0] } else { ends[d - 1]..ends[d] }).collect();
                for &batch in &problem.batches {
                    let mut shares: Vec<Vec<u32>> = vec![vec![]];
                    for &class in &classes {
                        let offered: Vec<u32> =
                            if dart_chain { vec![1] } else { problem.classes[class].shares.clone() };
                        shares = shares
                            .into_iter()
                            .flat_map(|s| offered.iter().map(move |&v| [s.clone(), vec![v]].concat()))
                            .collect();
                    }
                    for share in shares {
                        let mut total = 0.0;
                        let mut pools = Vec::new();
                        for d in 0..parts {
                            let latency: Option<f64> = ranges[d]
                                .clone()
                                .map(|b| problem.model.latency_ms.get(&(classes[d], share[d], batch, b)).copied())
                                .sum();
                            let Some(latency) = latency else { break };
                            total += latency;
                            if d + 1 < parts {
                                total += f64::from(batch) * problem.model.output_bytes[ranges[d].end - 1] as f64
                                    / problem.bandwidth_bytes_per_s
                                    * 1e3;
                            }
                            pools.push((classes[d], share[d], f64::from(batch) * 1e3 / latency));
                        }
                        if pools.len() == parts && total <= problem.budget_ms() {
                            group.push(pools);
                        }
                    }
                }
            }
            groups.push(group);
        }
    }
    let mut left: Vec<u64> = problem.classes.iter().map(|c| u64::from(c.units) * u64::from(lcm)).collect();
    best_pipelines(&groups, 0, &mut left, lcm, problem.scheme == Scheme::DartR)
}

/// A pipeline's partitions: (class, share, requests/s of one virtual GPU) each. Groups hold a class sequence's.
type Pools = Vec<(usize, u32, f64)>;

/// The most throughput of groups `g..`, each running at most one of its pipelines, within `left` parts of units.
fn best_pipelines(groups: &[Vec<Pools>], g: usize, left: &mut [u64], lcm: u32, dart: bool) -> f64 {
    let Some(group) = groups.get(g) else { return 0.0 };
    let mut best = best_pipelines(groups, g + 1, left, lcm, dart);
    for pools in group {
        let equal = dart && pools.len() == 2;
        best = best.max(best_pools(groups, g, pools, 0, f64::INFINITY, None, left, lcm, equal, dart));
    }
    best
}

/// The most throughput with pool sizes chosen for `pools[d..]` (the pipeline's throughput so far `rate`), then
/// groups after `g`. `equal`: every pool the size of the first (DART's replicated chains).
#[allow(clippy::too_many_arguments)]
fn best_pools(
    groups: &[Vec<Pools>],
    g: usize,
    pools: &[(usize, u32, f64)],
    d: usize,
    rate: f64,
    first: Option<u64>,
    left: &mut [u64],
    lcm: u32,
    equal: bool,
    dart: bool,
) -> f64 {
    let Some(&(class, share, one)) = pools.get(d) else {
        return rate + best_pipelines(groups, g + 1, left, lcm, dart);
    };
    let cost = u64::from(lcm / share);
    let mut best = f64::NEG_INFINITY;
    for count in 1..=left[class] / cost {
        if equal && first.is_some_and(|f| f != count) {
            continue;
        }
        left[class] -= count * cost;
        let here = best_pools(
            groups,
            g,
            pools,
            d + 1,
            rate.min(one * count as f64),
            first.or(Some(count)),
            left,
            lcm,
            equal,
            dart,
        );
        left[class] += count * cost;
        best = best.max(here);
    }
    best
}
