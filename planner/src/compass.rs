//! Compass's planner (§3–5): several query classes, each with its own latency and accuracy SLOs and share of the
//! demand, over the shared operators of a linear pipeline, planned together for **SLO goodput** (the requests
//! served within their SLOs) on limited slices; solved exactly on HiGHS.
//!
//! A *route* of a class is one instance type k = (variant, segment, batch) per task whose 2·L_k sum within the
//! class's latency SLO and whose accuracies, multiplied, meet its accuracy SLO; jig enumerates them (Compass
//! searches them with Bayesian optimisation, profiling each: here the profile table has every type measured).
//! A class's requests are split over its routes (u_cp, the share of class c on route p); classes whose routes
//! take the same type share its instances: the operator sharing that planning each query alone misses.
//!
//! ```text
//! max  Σ_c R_c·Σ_p u_cp, then the fewest Σ_k s_k·M_k that serve it
//!      Σ_p u_cp ≤ 1                                  (a class is served at most in full)
//!      Σ_c Σ_{p ∋ k} R_c·F_p(k)·u_cp ≤ H_k·M_k       (F_p(k): requests at k per request of the class on p)
//!      Σ_k s_k·M_k ≤ S   (and the cores and GPU slices apart)
//! ```
//!
//! Only the instance counts M_k are integers, so HiGHS solves it quickly (twice: the most goodput, then the
//! fewest slices for it). `[compass] alone = true` plans each class alone instead, in the spec's order, each on the slices
//! the ones before it left and with instances of its own: Compass's baseline. MIG segments are left out (their
//! layouts are JigsawServe's MILP's). Deployments (`jig_app`) and `jig simulate` route each class's requests
//! over its routes. A re-plan starts from the running plan's instances and the routes through them that still
//! meet the classes' SLOs (`reuse`), within the re-plan budget.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use good_lp::solvers::highs::highs;
use good_lp::{Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel, Variable};
use good_lp::{WithInitialSolution, constraint, variable};

use crate::error::PlanError;
use crate::problem::{Class, Problem};
use crate::solution::{Assignment, Route, SolveOptions, Solved, highs_with};
use crate::spec::SegmentKind;

// Kept while `jig-sim` still names it here; its home is `crate::solution`.
use crate::solution::ClassPlan;

/// The most routes a class may have before the planner refuses the problem as too large to enumerate.
const MAX_ROUTES: usize = 200_000;

/// The slices, CPU cores and GPU slices a plan may take.
#[derive(Debug, Clone, Copy)]
struct Budget {
    slices: u32,
    cpu: Option<u32>,
    gpu: Option<u32>,
}

/// Plan `problem`'s classes as Compass does (or each alone, as its baseline, with `[compass] alone`), starting
/// from `previous`, the running plan's instances, where there is one (a re-plan: see `reuse`).
pub fn solve(problem: &Problem, options: &SolveOptions, previous: &[Assignment]) -> Result<Solved, PlanError> {
    let started = Instant::now();
    let order = crate::ipa::chain(problem, "Compass")?;
    let budget = Budget { slices: problem.slices, cpu: problem.cpu_cores, gpu: problem.gpu_slices };
    let classes: Vec<(&Class, f64)> = problem.classes.iter().map(|c| (c, c.share * problem.demand_rps)).collect();
    let (mut assignments, mut plans, mut optimal) = (Vec::new(), Vec::new(), true);
    if problem.compass.alone {
        let mut left = budget;
        for class in &classes {
            let (a, p, opt) = joint(problem, options, &order, std::slice::from_ref(class), left, &[])?;
            let used = |cpu: bool| -> u32 {
                a.iter()
                    .filter(|a| matches!(problem.segments[a.segment].kind, SegmentKind::Cpu { .. }) == cpu)
                    .map(|a| a.instances * problem.segments[a.segment].slices)
                    .sum()
            };
            let (cpu, gpu) = (used(true), used(false));
            left = Budget {
                slices: left.slices - cpu - gpu,
                cpu: left.cpu.map(|c| c.saturating_sub(cpu)),
                gpu: left.gpu.map(|g| g.saturating_sub(gpu)),
            };
            assignments.extend(a);
            plans.extend(p);
            optimal &= opt;
        }
    } else {
        (assignments, plans, optimal) = joint(problem, options, &order, &classes, budget, previous)?;
    }
    Ok(Solved {
        instance_types: (0..problem.configs.len()).filter(|&i| plans_on(problem, i)).count(),
        instance_types_profiled: problem.configs.len(),
        assignments,
        // No linear bound of its own: the plan reports the accuracy evaluated on it.
        accuracy_bound: f64::INFINITY,
        optimal,
        seconds: started.elapsed().as_secs_f64(),
        gpu_layouts: Vec::new(),
        classes: plans,
        pipelines: Vec::new(),
        colocated: Vec::new(),
    })
}

/// Whether Compass plans instance type `config`: one on CPU cores or an MPS share, not on a MIG instance (MIG
/// layouts are JigsawServe's MILP's).
fn plans_on(problem: &Problem, config: usize) -> bool {
    !matches!(problem.segments[problem.configs[config].segment].kind, SegmentKind::Mig { .. })
}

/// The joint program over `classes` (class, demand) within `budget`, from `previous` where it gives a start.
fn joint(
    problem: &Problem,
    options: &SolveOptions,
    order: &[usize],
    classes: &[(&Class, f64)],
    budget: Budget,
    previous: &[Assignment],
) -> Result<(Vec<Assignment>, Vec<ClassPlan>, bool), PlanError> {
    let types: Vec<Vec<usize>> = order
        .iter()
        .map(|&t| {
            (0..problem.configs.len()).filter(|&i| problem.configs[i].task == t && plans_on(problem, i)).collect()
        })
        .collect();
    let routes: Vec<Vec<Vec<usize>>> =
        classes.iter().map(|(c, _)| routes_of(problem, c, &types)).collect::<Result<_, _>>()?;
    if routes.iter().all(Vec::is_empty) {
        // No class has a route within its SLOs: nothing to serve, and nothing for HiGHS to solve.
        let none = |&(class, demand): &(&Class, f64)| ClassPlan {
            class: class.name.clone(),
            demand_rps: demand,
            served_rps: 0.0,
            routes: Vec::new(),
        };
        return Ok((Vec::new(), classes.iter().map(none).collect(), true));
    }
    // Two solves: the most goodput, then the fewest slices that serve it (one weighted objective would leave the
    // slices to within the solver's gap). The first starts from the running plan where it fits, the second from
    // the first's answer, which it keeps feasible. A re-plan from a running plan has a plan from the start, so it
    // keeps to the re-plan budget, as JigsawServe's do.
    let mut most: Option<f64> = None;
    let mut start = reuse(problem, classes, &routes, previous, budget);
    let mut first = None;
    let time_limit_s = match start {
        Some(_) => options.time_limit_s.min(options.replan_time_limit_s),
        None => options.time_limit_s,
    };
    let (solution, shares, load, instances) = loop {
        let mut vars = ProblemVariables::new();
        let shares: Vec<Vec<Variable>> =
            routes.iter().map(|rs| rs.iter().map(|_| vars.add(variable().min(0).max(1))).collect()).collect();
        // Load on each type: over the routes through it, the class's demand × the requests per request there.
        let mut load: BTreeMap<usize, Expression> = Default::default();
        // Each class's share served, Σ_p u_cp, as a variable of its own: the goodput row then has a term per
        // class, not per route (a dense row of thousands of routes slowed HiGHS's presolve severalfold).
        let whole: Vec<Variable> = classes.iter().map(|_| vars.add(variable().min(0).max(1))).collect();
        let mut goodput = Expression::default();
        let mut rows = Vec::new();
        for ((((_, demand), rs), us), &served) in classes.iter().zip(&routes).zip(&shares).zip(&whole) {
            goodput.add_mul(*demand, served);
            let mut routed = Expression::default();
            for (route, &u) in rs.iter().zip(us) {
                routed += u;
                for (i, per_request) in along(problem, route) {
                    load.entry(i).or_default().add_mul(demand * per_request, u);
                }
            }
            rows.push(constraint!(routed == served));
        }
        let (mut slices, mut cpu, mut gpu) = (Expression::default(), Expression::default(), Expression::default());
        let mut instances = Vec::with_capacity(load.len());
        for (&i, used) in &load {
            let c = &problem.configs[i];
            let segment = &problem.segments[c.segment];
            let m = vars.add(variable().integer().min(0).max(f64::from(budget.slices / segment.slices.max(1))));
            rows.push(constraint!(used.clone() <= c.throughput_rps * m));
            slices.add_mul(segment.slices, m);
            if matches!(segment.kind, SegmentKind::Cpu { .. }) { &mut cpu } else { &mut gpu }
                .add_mul(segment.slices, m);
            instances.push((i, m));
        }
        rows.push(constraint!(slices.clone() <= budget.slices));
        if let Some(cap) = budget.cpu {
            rows.push(constraint!(cpu <= cap));
        }
        if let Some(cap) = budget.gpu {
            rows.push(constraint!(gpu <= cap));
        }
        let unsolved = match most {
            None => vars.maximise(goodput.clone()),
            Some(best) => {
                rows.push(constraint!(goodput.clone() >= best - 1e-7 * best.max(1.0)));
                vars.minimise(slices)
            }
        };
        // HiGHS's presolve reduces nothing here (every route share is a column of its own) and took most of the
        // solve on thousands of routes.
        let mut model = unsolved
            .using(|p| highs_with(highs(p), options).set_time_limit(time_limit_s).set_option("presolve", "off"));
        if let Some((u, m)) = &start {
            let shares = shares.iter().flatten().zip(u.iter().flatten()).map(|(&var, &value)| (var, value));
            let served = whole.iter().zip(u).map(|(&var, us)| (var, us.iter().sum::<f64>()));
            let counts = instances.iter().map(|&(i, var)| (var, m.get(&i).copied().unwrap_or(0.0)));
            model = model.with_initial_solution(shares.chain(served).chain(counts));
        }
        if most.is_some() {
            // Slices are whole: within one of the fewest is the fewest.
            model = model.set_mip_abs_gap(0.99).map_err(|e| PlanError::Solver(e.to_string()))?;
        }
        for row in rows {
            model.add_constraint(row);
        }
        let solution = match model.solve() {
            Ok(s) => s,
            // The fewest slices is a refinement: where the solver's tolerances leave the first answer's goodput
            // just out of its reach, the first answer stands.
            Err(ResolutionError::Infeasible) if first.is_some() => break first.expect("the first solve's answer"),
            Err(ResolutionError::Other("NoSolutionFound")) => return Err(PlanError::TimeLimit(options.time_limit_s)),
            Err(e) => return Err(PlanError::Solver(e.to_string())),
        };
        match most {
            None => {
                most = Some(goodput.eval_with(&solution));
                let u = shares.iter().map(|us| us.iter().map(|&u| solution.value(u)).collect()).collect();
                start = Some((u, instances.iter().map(|&(i, m)| (i, solution.value(m).round())).collect()));
                first = Some((solution, shares, load, instances));
            }
            Some(_) => break (solution, shares, load, instances),
        }
    };
    let optimal = !matches!(solution.status(), SolutionStatus::TimeLimit);
    let mut assignments = Vec::new();
    for (i, m) in instances {
        let c = &problem.configs[i];
        let m = solution.value(m).round().max(0.0) as u32;
        let rate = load[&i].eval_with(&solution).clamp(0.0, f64::from(m) * c.throughput_rps);
        if m > 0 {
            let (task, variant, segment, batch) = (c.task, c.variant, c.segment, c.batch);
            assignments.push(Assignment { task, variant, segment, batch, instances: m, rate_rps: rate });
        }
    }
    let key = |i: &usize| {
        let c = &problem.configs[*i];
        (c.task, c.variant, c.segment, c.batch)
    };
    // A route whose types got no instances carries only the solver's round-off.
    let held = |i: &usize| assignments.iter().any(|a| key(i) == (a.task, a.variant, a.segment, a.batch));
    let plans = classes
        .iter()
        .zip(routes.iter().zip(&shares))
        .map(|(&(class, demand), (rs, us))| {
            let mut taken: Vec<Route> = rs
                .iter()
                .zip(us)
                .map(|(route, &u)| (route, demand * solution.value(u)))
                .filter(|&(route, rate)| rate > 1e-6 && route.iter().all(held))
                .map(|(route, rate_rps)| Route { types: route.iter().map(key).collect(), rate_rps })
                .collect();
            taken.sort_by(|a, b| b.rate_rps.total_cmp(&a.rate_rps));
            // (+ 0.0: an empty sum of floats is −0.0.)
            let served_rps = taken.iter().map(|r| r.rate_rps).sum::<f64>() + 0.0;
            ClassPlan { class: class.name.clone(), demand_rps: demand, served_rps, routes: taken }
        })
        .collect();
    Ok((assignments, plans, optimal))
}

/// A first incumbent from `previous`, the running plan's instances (a re-plan after demand or SLOs changed):
/// per class, its share on each route; per type, its instances. The counts are the running plan's, scaled to
/// this demand (or as they were, where the scaled ones overrun the budget), and each class's requests are put,
/// in order, on its routes through those types while their capacity lasts. So a plan made for similar SLOs is
/// reused through the routes of it that still meet them. `None` without a previous plan or within no budget.
#[allow(clippy::type_complexity)]
fn reuse(
    problem: &Problem,
    classes: &[(&Class, f64)],
    routes: &[Vec<Vec<usize>>],
    previous: &[Assignment],
    budget: Budget,
) -> Option<(Vec<Vec<f64>>, BTreeMap<usize, f64>)> {
    let key = |i: usize| {
        let c = &problem.configs[i];
        (c.task, c.variant, c.segment, c.batch)
    };
    let first = routes.iter().flatten().next()?[0];
    let served_before: f64 =
        previous.iter().filter(|a| a.task == problem.configs[first].task).map(|a| a.rate_rps).sum();
    if served_before <= 0.0 {
        return None;
    }
    let scale = problem.demand_rps / served_before;
    let types: BTreeSet<usize> = routes.iter().flatten().flatten().copied().collect();
    let counts = |scaled: bool| -> BTreeMap<usize, f64> {
        (types.iter())
            .filter_map(|&i| {
                let held = previous.iter().find(|a| (a.task, a.variant, a.segment, a.batch) == key(i))?;
                let m = if scaled {
                    (held.rate_rps * scale / problem.configs[i].throughput_rps - 1e-9).ceil().max(1.0)
                } else {
                    f64::from(held.instances)
                };
                Some((i, m))
            })
            .collect()
    };
    let within = |m: &BTreeMap<usize, f64>| {
        let (mut cpu, mut gpu) = (0.0, 0.0);
        for (&i, &n) in m {
            let segment = &problem.segments[problem.configs[i].segment];
            *if matches!(segment.kind, SegmentKind::Cpu { .. }) { &mut cpu } else { &mut gpu } +=
                n * f64::from(segment.slices);
        }
        let fits = |used: f64, cap: Option<u32>| cap.is_none_or(|cap| used <= f64::from(cap));
        fits(cpu + gpu, Some(budget.slices)) && fits(cpu, budget.cpu) && fits(gpu, budget.gpu)
    };
    let m = [counts(true), counts(false)].into_iter().find(|m| !m.is_empty() && within(m))?;
    let mut spare: BTreeMap<usize, f64> = m.iter().map(|(&i, &n)| (i, n * problem.configs[i].throughput_rps)).collect();
    let u = classes
        .iter()
        .zip(routes)
        .map(|(&(_, demand), rs)| {
            let mut left = 1.0f64;
            rs.iter()
                .map(|route| {
                    // The share of the class this route can still take: its types' spare capacity over the
                    // requests a request of the class brings each.
                    let types = along(problem, route);
                    let u = (types.iter())
                        .map(|&(i, per_request)| spare.get(&i).map_or(0.0, |s| s / (demand * per_request).max(1e-12)))
                        .fold(left, f64::min);
                    // Rounded down a little, so the start stays feasible within HiGHS's tolerance.
                    let u = (u * (1.0 - 1e-9)).max(0.0);
                    for (i, per_request) in types {
                        if let Some(s) = spare.get_mut(&i) {
                            *s -= demand * per_request * u;
                        }
                    }
                    left -= u;
                    u
                })
                .collect()
        })
        .collect();
    Some((u, m))
}

/// Every route of `class`: a type of `types` per task, within its latency and accuracy SLOs (enumerated depth
/// first, cut as soon as a prefix breaks either).
fn routes_of(problem: &Problem, class: &Class, types: &[Vec<usize>]) -> Result<Vec<Vec<usize>>, PlanError> {
    fn extend(
        problem: &Problem,
        class: &Class,
        types: &[Vec<usize>],
        prefix: &mut Vec<usize>,
        (latency, accuracy): (f64, f64),
        out: &mut Vec<Vec<usize>>,
    ) -> Result<(), PlanError> {
        let Some(here) = types.get(prefix.len()) else {
            out.push(prefix.clone());
            if out.len() > MAX_ROUTES {
                return Err(PlanError::Input(format!(
                    "app `{}`, class `{}`: more than {MAX_ROUTES} routes meet its SLOs; profile fewer variants, \
                     segments or batch sizes",
                    problem.app, class.name
                )));
            }
            return Ok(());
        };
        for &i in here {
            let c = &problem.configs[i];
            let l = latency + 2.0 * c.latency_ms;
            let a = accuracy * problem.tasks[c.task].normalised_accuracy(c.variant);
            if l <= class.slo_latency_ms && a >= class.slo_accuracy - 1e-9 {
                prefix.push(i);
                extend(problem, class, types, prefix, (l, a), out)?;
                prefix.pop();
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    extend(problem, class, types, &mut Vec::with_capacity(types.len()), (0.0, 1.0), &mut out)?;
    Ok(out)
}

/// Each type of `route` (indices into the problem's configs) with the requests it gets per request that enters
/// the route.
pub(crate) fn along(problem: &Problem, route: &[usize]) -> Vec<(usize, f64)> {
    let mut per_request = 1.0;
    (route.iter())
        .map(|&i| {
            let here = (i, per_request);
            let c = &problem.configs[i];
            per_request *= onward(problem, c.task, c.variant);
            here
        })
        .collect()
}

/// Requests the next task of the pipeline gets per request of `variant` at `task`.
fn onward(problem: &Problem, task: usize, variant: usize) -> f64 {
    problem.tasks[task].variants[variant].factors.first().copied().unwrap_or(0.0)
}

/// A route's Σ 2·L over its types (an unprofiled type counts 0) and the product of their normalised accuracies:
/// what its class's latency and accuracy SLOs bound.
pub fn route_totals(problem: &Problem, types: &[(usize, usize, usize, u32)]) -> (f64, f64) {
    types.iter().fold((0.0, 1.0), |(latency, accuracy), &(t, v, s, b)| {
        let l = problem.config(t, v, s, b).map_or(0.0, |c| c.latency_ms);
        (latency + 2.0 * l, accuracy * problem.tasks[t].normalised_accuracy(v))
    })
}

/// What a Compass plan breaks, checked apart from the solver: every route of a class within its latency and
/// accuracy SLOs, no class served beyond its demand, and no type's instances given more than they serve.
pub fn check(problem: &Problem, solved: &Solved) -> Vec<String> {
    // Rates are the solver's, within its feasibility tolerance: a relative 1e-5 and 1e-4 req/s.
    let over = |rate: f64, limit: f64| rate > limit * (1.0 + 1e-5) + 1e-4;
    let mut violations = Vec::new();
    let mut load = std::collections::HashMap::<(usize, usize, usize, u32), f64>::new();
    for plan in &solved.classes {
        let Some(class) = problem.classes.iter().find(|c| c.name == plan.class) else {
            violations.push(format!("class `{}` is not the app's", plan.class));
            continue;
        };
        if over(plan.served_rps, plan.demand_rps) {
            violations
                .push(format!("class `{}`: {:.2} req/s served of {:.2}", class.name, plan.served_rps, plan.demand_rps));
        }
        for route in &plan.routes {
            let mut rate = route.rate_rps;
            for &key @ (task, variant, segment, batch) in &route.types {
                if problem.config(task, variant, segment, batch).is_none() {
                    violations.push(format!("class `{}`: an unprofiled type at task {task}", class.name));
                    continue;
                }
                *load.entry(key).or_default() += rate;
                rate *= onward(problem, task, variant);
            }
            let (latency, accuracy) = route_totals(problem, &route.types);
            if latency > class.slo_latency_ms * (1.0 + 1e-6) {
                violations.push(format!(
                    "class `{}`: a route of {latency:.1} ms, over its SLO of {} ms",
                    class.name, class.slo_latency_ms
                ));
            }
            if accuracy < class.slo_accuracy - 1e-6 {
                violations.push(format!(
                    "class `{}`: a route of accuracy {accuracy:.4}, below its SLO of {}",
                    class.name, class.slo_accuracy
                ));
            }
        }
    }
    for ((task, variant, segment, batch), served) in load {
        let capacity: f64 = solved
            .assignments
            .iter()
            .filter(|a| (a.task, a.variant, a.segment, a.batch) == (task, variant, segment, batch))
            .filter_map(|a| {
                Some(f64::from(a.instances) * problem.config(task, variant, segment, batch)?.throughput_rps)
            })
            .sum();
        if over(served, capacity) {
            violations.push(format!(
                "task `{}`: {served:.2} req/s of the classes on `{}` {} batch {batch}, which serve {capacity:.2}",
                problem.tasks[task].name, problem.tasks[task].variants[variant].name, problem.segments[segment].name
            ));
        }
    }
    violations
}
