//! Property tests: on random small problems (≤ 3 tasks, ≤ 3 variants, ≤ 4 segment types, ≤ 3 batch sizes) the
//! MILP's plan is feasible under the independent evaluator of equations (1)–(13), and its objective matches
//! exhaustive search of the paper's model.

#![allow(clippy::needless_range_loop)] // tasks index several parallel tables

use std::collections::BTreeMap;

use jig_planner::evaluate::{evaluate, evaluate_as};
use jig_planner::exhaustive;
use jig_planner::milp::solve;
use jig_planner::profile::ProfileRow;
use jig_planner::solution::Assignment;
use jig_planner::spec::*;
use jig_planner::{Features, PlanError, Problem, SolveOptions};
use proptest::prelude::*;
// The proptest trait, not the planner `Strategy` that `jig_planner::spec::*` brings too.
use proptest::strategy::Strategy;

/// A random problem's raw numbers.
#[derive(Debug, Clone)]
struct Case {
    /// 1 = one task, 2 = chain a → b, 3 = chain a → b → c, 4 = fork a → {b, c}.
    shape: u8,
    /// Per task, per variant: normalised accuracy and a factor multiplier (1 when factors are shared).
    variants: Vec<Vec<(f64, f64)>>,
    /// Segment types: (MIG profile index, MPS).
    segments: Vec<(usize, u8)>,
    batches: Vec<u32>,
    /// Per (task, variant, segment, batch): latency ms, throughput req/s, or missing.
    profile: Vec<Option<(f64, f64)>>,
    edge_factors: Vec<f64>,
    slo_ms: f64,
    slo_acc: f64,
    demand: f64,
    beta: f64,
    /// Existing MIG instances per profile, where the machine's are fixed (`resources.mig_instances`).
    mig_cap: Option<u32>,
}

fn case(shared_factors: bool) -> impl Strategy<Value = Case> {
    (1u8..=4, 1usize..=3, 1usize..=4, 1usize..=3).prop_flat_map(move |(shape, nv, ns, nb)| {
        let nt = if shape == 1 {
            1
        } else if shape == 2 {
            2
        } else {
            3
        };
        let variant = (0.97f64..=1.0, if shared_factors { 1.0f64..=1.0 } else { 0.7f64..=1.3 });
        (
            Just(shape),
            proptest::collection::vec(proptest::collection::vec(variant, nv), nt),
            proptest::collection::vec((0usize..3, 1u8..=2), ns),
            proptest::sample::subsequence(vec![1u32, 2, 4], nb),
            proptest::collection::vec(
                proptest::option::weighted(0.9, (5.0f64..80.0, 10.0f64..60.0)),
                nt * nv * ns * nb,
            ),
            proptest::collection::vec(0.5f64..1.5, 2),
            60.0f64..400.0,
            0.9f64..1.0,
            2.0f64..30.0,
            prop_oneof![Just(0.035), Just(0.01)],
            prop_oneof![3 => Just(None), 1 => (0u32..=2).prop_map(Some)],
        )
            .prop_map(
                |(
                    shape,
                    variants,
                    segments,
                    batches,
                    profile,
                    edge_factors,
                    slo_ms,
                    slo_acc,
                    demand,
                    beta,
                    mig_cap,
                )| Case {
                    shape,
                    variants,
                    segments,
                    batches,
                    profile,
                    edge_factors,
                    slo_ms,
                    slo_acc,
                    demand,
                    beta,
                    mig_cap,
                },
            )
    })
}

const PROFILES: [MigProfile; 3] = [MigProfile::G1_10, MigProfile::G2_20, MigProfile::G3_40];
const TASKS: [&str; 3] = ["a", "b", "c"];

impl Case {
    fn tasks(&self) -> usize {
        self.variants.len()
    }

    fn edges(&self) -> Vec<(usize, usize)> {
        match self.shape {
            1 => vec![],
            2 => vec![(0, 1)],
            3 => vec![(0, 1), (1, 2)],
            _ => vec![(0, 1), (0, 2)],
        }
    }

    /// The spec, the profile rows, and S_avail small enough to enumerate.
    fn build(&self) -> (PlanSpec, Vec<ProfileRow>) {
        let nt = self.tasks();
        let edges = self.edges();
        let mut segments: Vec<SegmentKind> = Vec::new();
        for &(p, mps) in &self.segments {
            let k = SegmentKind::Mig { profile: PROFILES[p], mps };
            if !segments.contains(&k) {
                segments.push(k);
            }
        }
        let tasks = (0..nt)
            .map(|t| TaskSpec {
                name: TASKS[t].into(),
                slot: None,
                variants: self.variants[t]
                    .iter()
                    .enumerate()
                    .map(|(v, &(acc, mult))| VariantSpec {
                        name: format!("v{v}"),
                        accuracy: acc * 10.0,
                        factors: edges
                            .iter()
                            .enumerate()
                            .filter(|(_, e)| e.0 == t)
                            .map(|(i, e)| (TASKS[e.1].to_string(), self.edge_factors[i.min(1)] * mult))
                            .collect::<BTreeMap<_, _>>(),
                    })
                    .collect(),
            })
            .collect();
        let mut rows = Vec::new();
        let mut i = 0;
        for t in 0..nt {
            for v in 0..self.variants[t].len() {
                for (s, _) in self.segments.iter().enumerate() {
                    for &b in &self.batches {
                        if let Some((l, h)) = self.profile[i % self.profile.len()] {
                            let kind =
                                SegmentKind::Mig { profile: PROFILES[self.segments[s].0], mps: self.segments[s].1 };
                            rows.push(ProfileRow {
                                slot: TASKS[t].into(),
                                variant: format!("v{v}"),
                                segment: kind.name(),
                                batch: b,
                                p50_ms: l * f64::from(b).sqrt(),
                                p95_ms: l * f64::from(b).sqrt(),
                                throughput_rps: h * f64::from(b).sqrt(),
                                device: "test".into(),
                                cpu_ms: None,
                            });
                        }
                        i += 1;
                    }
                }
            }
        }
        // Duplicate segment draws repeat rows: keep the first of each key.
        let mut seen = std::collections::HashSet::new();
        rows.retain(|r| seen.insert((r.slot.clone(), r.variant.clone(), r.segment.clone(), r.batch)));
        // Every variant needs a row: give missing ones a slow default on the first segment.
        for t in 0..nt {
            for v in 0..self.variants[t].len() {
                if !rows.iter().any(|r| r.slot == TASKS[t] && r.variant == format!("v{v}")) {
                    rows.push(ProfileRow {
                        slot: TASKS[t].into(),
                        variant: format!("v{v}"),
                        segment: segments[0].name(),
                        batch: self.batches[0],
                        p50_ms: 50.0,
                        p95_ms: 50.0,
                        throughput_rps: 20.0,
                        device: "test".into(),
                        cpu_ms: None,
                    });
                }
            }
        }
        let spec = PlanSpec {
            app: AppSpec {
                name: "random".into(),
                slo_latency_ms: self.slo_ms,
                slo_accuracy: self.slo_acc,
                tasks,
                edges: edges.iter().map(|&(a, b)| EdgeSpec { from: TASKS[a].into(), to: TASKS[b].into() }).collect(),
                paths: None,
                planner: Default::default(),
                classes: Vec::new(),
                staleness_ms: None,
            },
            segments: segments.iter().map(|k| SegmentSpec { name: k.name(), slices: None }).collect(),
            resources: Resources {
                slices: if nt == 3 { 5 } else { 6 },
                mig_instances: self.mig_cap.map(|n| PROFILES.iter().map(|p| (p.to_string(), n)).collect()),
                ..Resources::default()
            },
            demand: DemandSpec { windows: vec![self.demand], slack: Some(0.0) },
            objective: Objective { alpha: 1.0, beta: self.beta },
            ipa: Default::default(),
            compass: Default::default(),
            batch_sizes: None,
        };
        (spec, rows)
    }
}

const ENUMERATION_LIMIT: usize = 400_000;

fn options() -> SolveOptions {
    SolveOptions { time_limit_s: 20.0, mip_rel_gap: 1e-7, abs_gap_slices: 0.0, ..SolveOptions::default() }
}

fn tolerance(x: f64) -> f64 {
    0.005 * x.abs().max(1.0)
}

/// Solve and check against exhaustive search; `exact` when greedy routing makes the search exact.
fn check(c: &Case, features: Features, exact: bool) -> Result<(), TestCaseError> {
    let (spec, rows) = c.build();
    let problem = Problem::new(&spec, &rows, "test").map_err(|e| TestCaseError::fail(e.to_string()))?;
    let Some(best) = exhaustive::search(&problem, features, ENUMERATION_LIMIT) else {
        return Ok(()); // too large to enumerate: not this test's business
    };
    match solve(&problem, features, &options()) {
        Ok(solved) => {
            let eval = evaluate_as(&problem, &solved.assignments, features.weighting);
            prop_assert!(eval.is_feasible(), "MILP plan infeasible: {:?}\n{:?}", eval.violations, solved.assignments);
            let (lin_best, _) = best.linear.clone().ok_or_else(|| {
                TestCaseError::fail(format!("MILP found a plan but exhaustive search found none: {solved:?}"))
            })?;
            let (dmin, _) = problem.demand_bounds(|t, v| features.accuracy_scaling || v == problem.tasks[t].best);
            let bound = exhaustive::linear_accuracy(&problem, features, &dmin, &solved.assignments);
            let milp_lin = problem.objective.alpha * bound - problem.objective.beta * f64::from(eval.slices);
            // The MILP never claims more accuracy than the plan has.
            prop_assert!(bound <= eval.accuracy + 1e-9, "bound {bound} above exact {}", eval.accuracy);
            prop_assert!(
                (solved.accuracy_bound - bound).abs() < 1e-6,
                "MILP's bound {} vs {bound}",
                solved.accuracy_bound
            );
            if exact {
                // Same model, two solvers: the optima agree.
                prop_assert!(
                    (milp_lin - lin_best).abs() <= tolerance(lin_best),
                    "linearised objective: MILP {milp_lin} vs exhaustive {lin_best}"
                );
                // Against the paper's exact model, whenever the exact optimum is a plan the linear bound admits:
                // the MILP's plan is worth, exactly, at least what that optimum is worth under the bound (its
                // exact accuracy is at least its bound, which is at least that optimum's). So it falls short of
                // the exact optimum by the bound's slack on that plan at most: 0.005 a path losing 10%, and a
                // random case found 0.0086 (0.94%) where this test once asked 0.5%.
                let (exact_best, exact_plan) = best.exact.clone().expect("a linear plan is an exact plan");
                let exact_lin = exhaustive::linear_accuracy(&problem, features, &dmin, &exact_plan);
                if exact_lin >= problem.slo_accuracy {
                    let slices = evaluate_as(&problem, &exact_plan, features.weighting).slices;
                    let admitted = problem.objective.alpha * exact_lin - problem.objective.beta * f64::from(slices);
                    prop_assert!(
                        eval.objective >= admitted - tolerance(admitted),
                        "exact objective: MILP {} below the exact optimum's {admitted} under the bound (its exact \
                         {exact_best})",
                        eval.objective
                    );
                }
                prop_assert!(eval.objective <= exact_best + 1e-6, "MILP beats the exact optimum");
            } else {
                prop_assert!(milp_lin >= lin_best - tolerance(lin_best), "MILP {milp_lin} below greedy {lin_best}");
            }
        }
        Err(PlanError::Infeasible(why)) => {
            prop_assert!(best.linear.is_none(), "MILP infeasible ({why}) but exhaustive found {:?}", best.linear);
            prop_assert!(!why.is_empty());
        }
        Err(e) => return Err(TestCaseError::fail(e.to_string())),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn milp_matches_exhaustive_search(c in case(true)) {
        check(&c, Features::ALL, true)?;
    }

    #[test]
    fn milp_matches_exhaustive_search_in_every_space(c in case(true), space in 0usize..8, strong: bool) {
        let uninformed = if strong { Uninformed::Strong } else { Uninformed::Paper };
        check(&c, Features::combinations()[space].with_uninformed(uninformed), true)?;
    }

    #[test]
    fn milp_is_feasible_and_no_worse_than_greedy_with_variant_factors(c in case(false)) {
        check(&c, Features::ALL, false)?;
    }

    /// Read as printed, eq. (4) and (9)–(10) leave no routing choice, so the search is exact even when variants
    /// differ in their factors.
    #[test]
    fn milp_matches_exhaustive_search_read_literally(c in case(false), space in 0usize..8) {
        check(&c, Features::combinations()[space].with_weighting(Weighting::Literal), true)?;
    }
}

/// A case a random run found, read literally in the A+S+T space: the MILP's plan is worth 0.9021 exactly where the
/// exact optimum is worth 0.9107 (0.94% more), but only 0.8992 under the linear bound the MILP plans with.
#[test]
fn the_milp_falls_short_of_the_exact_optimum_by_the_linear_bound_s_slack_at_most() {
    let c = Case {
        shape: 2,
        variants: vec![
            vec![(0.97, 1.2384262723170152), (0.9978536334779242, 1.2695282153493934), (0.97, 0.7978968300693634)],
            vec![(0.97, 0.7), (0.9975721659295212, 0.7), (0.9782803515273873, 0.7)],
        ],
        segments: vec![(0, 1), (1, 1)],
        batches: vec![1, 4],
        profile: [
            [None, None, None, None, Some((55.75328200390664, 10.0)), None, None, None],
            [Some((5.0, 10.0)), None, None, None, None, None, None, None],
            [None, Some((54.5256941440859, 10.0)), None, None, None, Some((5.0, 10.0)), None, None],
        ]
        .concat(),
        edge_factors: vec![0.5, 0.5],
        slo_ms: 242.14479908984106,
        slo_acc: 0.9,
        demand: 2.0,
        beta: 0.035,
        mig_cap: None,
    };
    check(&c, Features::combinations()[7].with_weighting(Weighting::Literal), true).unwrap();
}

#[test]
fn evaluator_catches_broken_plans() {
    let c = Case {
        shape: 2,
        variants: vec![vec![(1.0, 1.0)], vec![(1.0, 1.0)]],
        segments: vec![(0, 1)],
        batches: vec![1],
        profile: vec![Some((20.0, 30.0))],
        edge_factors: vec![2.0, 1.0],
        slo_ms: 100.0,
        slo_acc: 0.9,
        demand: 10.0,
        beta: 0.035,
        mig_cap: None,
    };
    let (spec, rows) = c.build();
    let problem = Problem::new(&spec, &rows, "test").unwrap();
    let a = |task, instances, rate_rps| Assignment { task, variant: 0, segment: 0, batch: 1, instances, rate_rps };
    assert!(evaluate(&problem, &[a(0, 1, 10.0), a(1, 1, 20.0)]).is_feasible());
    // b gets 20 req/s (factor 2) but one instance serves 30: routing only 15 misses demand.
    let short = evaluate(&problem, &[a(0, 1, 10.0), a(1, 1, 15.0)]);
    assert!(short.violations.iter().any(|v| v.contains("demand")), "{:?}", short.violations);
    // 40 req/s on one instance exceeds its capacity.
    let over = evaluate(&problem, &[a(0, 1, 10.0), a(1, 1, 40.0)]);
    assert!(!over.is_feasible());
}

/// A detector mixing an accurate and a cheap variant: read as printed, F̂ sums over both active types (the next
/// task sees twice the requests) and the requests split by capacity; jig's reading routes what each serves.
#[test]
fn the_literal_reading_counts_every_active_type_and_splits_by_capacity() {
    let c = Case {
        shape: 2,
        variants: vec![vec![(1.0, 1.0), (0.97, 1.0)], vec![(1.0, 1.0)]],
        segments: vec![(0, 1)],
        batches: vec![1],
        profile: vec![Some((20.0, 10.0)), Some((20.0, 30.0)), Some((20.0, 40.0))],
        edge_factors: vec![1.0, 1.0],
        slo_ms: 200.0,
        slo_acc: 0.975,
        demand: 35.0,
        beta: 0.035,
        mig_cap: None,
    };
    let (spec, rows) = c.build();
    let problem = Problem::new(&spec, &rows, "test").unwrap();
    for weighting in [Weighting::Served, Weighting::Literal] {
        let features = Features::ALL.with_weighting(weighting);
        let solved = solve(&problem, features, &options()).unwrap();
        let eval = evaluate_as(&problem, &solved.assignments, weighting);
        assert!(eval.is_feasible(), "{weighting:?}: {:?}", eval.violations);
        let detector: Vec<&Assignment> = solved.assignments.iter().filter(|a| a.task == 0).collect();
        assert_eq!(detector.len(), 2, "{weighting:?}: both variants: {:?}", solved.assignments);
        let (demand_b, slices) = (eval.task_demand_rps[1], eval.slices);
        match weighting {
            Weighting::Served => assert_eq!((demand_b, slices), (35.0, 3), "{:?}", solved.assignments),
            Weighting::Literal => {
                assert_eq!((demand_b, slices), (70.0, 4), "{:?}", solved.assignments);
                let cheap = detector.iter().find(|a| a.variant == 1).unwrap();
                assert!((cheap.rate_rps - 35.0 * 30.0 / 40.0).abs() < 1e-6, "its capacity's share: {cheap:?}");
                // Literally, routing the served way breaks (4) and the split.
                let served = solve(&problem, Features::ALL, &options()).unwrap();
                assert!(!evaluate_as(&problem, &served.assignments, weighting).is_feasible());
            }
        }
        check(&c, features, true).unwrap();
    }
}

/// Where the machine's MIG instances exist already, a plan holds at most those of each profile: two 1g
/// instances are the cheapest plan, but with one of each profile the 3g instance serves instead.
#[test]
fn a_plan_holds_no_more_mig_instances_than_exist() {
    let c = Case {
        shape: 1,
        variants: vec![vec![(1.0, 1.0)]],
        segments: vec![(0, 1), (2, 1)],
        batches: vec![1],
        profile: vec![Some((20.0, 30.0)), Some((20.0, 60.0))],
        edge_factors: vec![1.0, 1.0],
        slo_ms: 100.0,
        slo_acc: 0.9,
        demand: 50.0,
        beta: 0.035,
        mig_cap: None,
    };
    let used = |c: &Case| {
        let (spec, rows) = c.build();
        let problem = Problem::new(&spec, &rows, "test").unwrap();
        let solved = solve(&problem, Features::ALL, &options()).unwrap();
        assert!(evaluate(&problem, &solved.assignments).is_feasible());
        let mut used: Vec<(String, u32)> = solved
            .assignments
            .iter()
            .filter(|a| a.instances > 0)
            .map(|a| (problem.segments[a.segment].name.clone(), a.instances))
            .collect();
        used.sort();
        used
    };
    assert_eq!(used(&c), [("mig:1g.10gb:1".to_string(), 2)]);
    assert_eq!(used(&Case { mig_cap: Some(1), ..c.clone() }), [("mig:3g.40gb:1".to_string(), 1)]);
    // A profile jig does not know is refused by name.
    let (mut spec, rows) = c.build();
    spec.resources.mig_instances = Some(BTreeMap::from([("5g.50gb".to_string(), 1)]));
    let error = Problem::new(&spec, &rows, "test").unwrap_err().to_string();
    assert!(error.contains("resources.mig_instances") && error.contains("5g.50gb"), "{error}");
    // The evaluator holds a plan to the same count.
    let (spec, rows) = Case { mig_cap: Some(1), ..c }.build();
    let problem = Problem::new(&spec, &rows, "test").unwrap();
    let two = [Assignment { task: 0, variant: 0, segment: 0, batch: 1, instances: 2, rate_rps: 50.0 }];
    let eval = evaluate(&problem, &two);
    assert!(
        eval.violations.iter().any(|v| v.contains("2 MIG instances of 1g.10gb used, 1 exist")),
        "{:?}",
        eval.violations
    );
}
