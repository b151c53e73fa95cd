//! The IPA strategy: on random small linear pipelines (≤ 3 stages, ≤ 3 variants, CPU segments of 1, 2 and 4
//! cores, batches 1, 2, 4), with model switching or the baselines' fixed variants or replicas, its plan passes
//! the independent evaluator and its objective matches exhaustive search of IPA's program (one variant on its
//! base allocation, one batch size and the fewest replicas that serve the stage's demand, per stage); and a
//! graph that is no chain is refused by name.

use jig_planner::evaluate::{evaluate, queueing_ms};
use jig_planner::ipa::{base_allocations, fixed_variant, stages};
use jig_planner::spec::*;
use jig_planner::{PlanError, Problem, SolveOptions, solve};
use proptest::prelude::*;
// The proptest trait, not the planner `Strategy` that `jig_planner::spec::*` brings too.
use proptest::strategy::Strategy;

use crate::common;

/// A random pipeline's raw numbers.
#[derive(Debug, Clone)]
struct Case {
    /// Per stage, per variant: accuracy and the factor to the next stage.
    variants: Vec<Vec<(f64, f64)>>,
    /// Per (stage, variant, cores, batch): batch-1 latency ms and throughput req/s, scaled with cores and batch.
    profile: Vec<(f64, f64)>,
    slo_ms: f64,
    slo_acc: f64,
    demand: f64,
    cores: u32,
    weights: IpaSpec,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=3, 1usize..=3).prop_flat_map(|(nt, nv)| {
        (
            proptest::collection::vec(proptest::collection::vec((50.0f64..100.0, 0.5f64..2.0), nv), nt),
            proptest::collection::vec((5.0f64..80.0, 5.0f64..40.0), nt * nv),
            100.0f64..1500.0,
            prop_oneof![Just(0.0), 0.5f64..0.95],
            1.0f64..60.0,
            4u32..40,
            (prop_oneof![Just(2.0), Just(10.0), Just(40.0)], prop_oneof![Just(1.0), Just(0.5)], 1.0f64..60.0),
            (
                prop_oneof![Just(IpaVariants::Switch), Just(IpaVariants::Lightest), Just(IpaVariants::Heaviest)],
                prop_oneof![3 => Just(0u32), 1 => 1u32..4],
            ),
        )
            .prop_map(
                |(
                    variants,
                    profile,
                    slo_ms,
                    slo_acc,
                    demand,
                    cores,
                    (alpha, beta, threshold_rps),
                    (mode, replicas),
                )| {
                    Case {
                        variants,
                        profile,
                        slo_ms,
                        slo_acc,
                        demand,
                        cores,
                        weights: IpaSpec { alpha, beta, delta: 1e-6, threshold_rps, variants: mode, replicas },
                    }
                },
            )
    })
}

impl Case {
    /// `stages` stages of one variant each (accuracy 90, factor 1; 10 ms and 20 req/s at batch 1 on a core),
    /// 5 req/s, a 1 s SLO, no accuracy floor, 16 cores.
    fn chain(stages: usize) -> Case {
        Case {
            variants: vec![vec![(90.0, 1.0)]; stages],
            profile: vec![(10.0, 20.0); stages],
            slo_ms: 1000.0,
            slo_acc: 0.0,
            demand: 5.0,
            cores: 16,
            weights: IpaSpec::default(),
        }
    }

    fn problem(&self) -> Problem {
        let (tasks, edges, segments, rows) = common::chain(&self.variants, &self.profile);
        let spec = PlanSpec {
            app: AppSpec {
                name: "chain".into(),
                slo_latency_ms: self.slo_ms,
                slo_accuracy: self.slo_acc,
                tasks,
                edges,
                paths: None,
                planner: jig_planner::Strategy::Ipa,
                classes: Vec::new(),
                staleness_ms: None,
            },
            segments,
            resources: Resources { slices: self.cores, ..Resources::default() },
            demand: DemandSpec { windows: vec![self.demand], slack: Some(0.0) },
            objective: Objective::default(),
            ipa: self.weights,
            compass: Default::default(),
            batch_sizes: None,
        };
        Problem::new(&spec, &rows, "test").expect("a valid problem")
    }
}

/// The best objective of IPA's program by enumeration, or `None` when no choice is feasible.
fn exhaustive(problem: &Problem) -> Option<f64> {
    let order = stages(problem).unwrap();
    let base = base_allocations(problem, problem.ipa.threshold_rps, &order);
    let least = problem.demand_bounds(|_, _| true).0;
    let choices: Vec<Vec<&jig_planner::problem::Config>> = order
        .iter()
        .map(|&t| {
            let fixed = fixed_variant(problem, &base, t);
            let allowed = |v: usize| fixed.is_none_or(|f| f == v);
            problem
                .configs
                .iter()
                .filter(|c| c.task == t && base[t][c.variant] == Some(c.segment) && allowed(c.variant))
                .collect()
        })
        .collect();
    let mut best: Option<f64> = None;
    let mut pick = vec![0usize; order.len()];
    loop {
        let (mut rate, mut latency, mut pas, mut cores, mut batches) = (problem.demand_rps, 0.0, 1.0, 0u32, 0u32);
        for (s, &t) in order.iter().enumerate() {
            let c = choices[s][pick[s]];
            let needed = ((rate / c.throughput_rps) - 1e-9).ceil().max(1.0) as u32;
            let replicas = match problem.ipa.replicas {
                0 => needed,
                fixed if fixed >= needed => fixed,
                _ => u32::MAX / 64, // too few replicas: over any core budget
            };
            cores += replicas * problem.segments[c.segment].slices;
            latency += c.latency_ms + queueing_ms(c.batch, least[t]);
            pas *= problem.tasks[t].normalised_accuracy(c.variant);
            batches += c.batch;
            rate *= problem.tasks[t].variants[c.variant].factors.first().copied().unwrap_or(0.0);
        }
        if latency <= problem.slo_latency_ms && cores <= problem.slices && pas >= problem.slo_accuracy - 1e-9 {
            let w = problem.ipa;
            let objective = w.alpha * 100.0 * pas - w.beta * f64::from(cores) - w.delta * f64::from(batches);
            best = Some(best.map_or(objective, |b: f64| b.max(objective)));
        }
        // Next combination.
        let mut s = 0;
        while s < pick.len() {
            pick[s] += 1;
            if pick[s] < choices[s].len() {
                break;
            }
            pick[s] = 0;
            s += 1;
        }
        if s == pick.len() {
            return best;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn ipa_matches_exhaustive_search(c in case()) {
        let problem = c.problem();
        let best = exhaustive(&problem);
        match (solve(&problem, jig_planner::Features::ALL, &SolveOptions::default()), best) {
            (Ok(solved), Some(best)) => {
                let eval = evaluate(&problem, &solved.assignments);
                prop_assert!(eval.is_feasible(), "IPA's plan fails the evaluator: {:?}", eval.violations);
                prop_assert_eq!(solved.assignments.len(), problem.tasks.len(), "one type per stage");
                prop_assert!((eval.objective - best).abs() <= 1e-6 * best.abs().max(1.0),
                    "IPA {} against exhaustive {best}", eval.objective);
            }
            (Err(PlanError::Infeasible(_)), None) => {}
            (got, best) => prop_assert!(false, "IPA {got:?} but exhaustive search {best:?}"),
        }
    }
}

#[test]
fn a_graph_that_is_no_chain_is_refused_by_name() {
    let mut problem = Case::chain(3).problem();
    assert!(solve(&problem, jig_planner::Features::ALL, &SolveOptions::default()).is_ok());
    // a → b and a → c: a fork.
    let c = 2;
    problem.tasks[1].succs.clear();
    problem.tasks[c].preds = vec![0];
    problem.tasks[0].succs.push(c);
    let err = solve(&problem, jig_planner::Features::ALL, &SolveOptions::default()).unwrap_err().to_string();
    assert!(err.contains("app `chain`") && err.contains("task `a` fans out") && err.contains("jigsaw"), "{err}");
}

#[test]
fn larger_batches_wait_longer_at_low_demand() {
    assert_eq!(queueing_ms(1, 0.0), 0.0);
    assert_eq!(queueing_ms(4, 10.0), 300.0);
    assert!(queueing_ms(2, 0.0).is_infinite());
}

#[test]
fn the_strategy_is_read_from_the_spec() {
    let text = r#"
        [app]
        name = "x"
        slo_latency_ms = 100
        slo_accuracy = 0.5
        planner = "ipa"
        tasks = [{ name = "a", variants = [{ name = "v", accuracy = 1 }] }]
        [[segments]]
        name = "cpu:1"
        [resources]
        slices = 4
        [demand]
        windows = [1]
        [ipa]
        alpha = 10
        "#;
    let spec = PlanSpec::from_toml(text).unwrap();
    assert_eq!(spec.app.planner, jig_planner::Strategy::Ipa);
    assert_eq!(spec.ipa, IpaSpec { alpha: 10.0, ..IpaSpec::default() });
    let bad = PlanSpec::from_toml(&text.replace("\"ipa\"", "\"simple\"")).unwrap_err().to_string();
    assert!(bad.contains("unknown variant `simple`") && bad.contains("jigsaw"), "{bad}");
}

#[test]
fn a_task_profiled_off_cpu_cores_is_named() {
    let mut problem = Case::chain(2).problem();
    for segment in &mut problem.segments {
        segment.kind = SegmentKind::parse("mps:0:50").unwrap();
    }
    let err = solve(&problem, jig_planner::Features::ALL, &SolveOptions::default()).unwrap_err().to_string();
    assert!(err.contains("app `chain`") && err.contains("task `a`") && err.contains("cpu:N"), "{err}");
}

#[test]
fn ipa_plans_run_with_its_runtime_policy() {
    let case = Case { variants: vec![vec![(90.0, 2.0)], vec![(80.0, 1.0)]], demand: 50.0, cores: 64, ..Case::chain(2) };
    let problem = case.problem();
    let plan = jig_planner::plan(&problem, jig_planner::Features::ALL, &SolveOptions::default()).unwrap();
    let least = problem.demand_bounds(|_, _| true).0;
    for (t, task) in plan.tasks.iter().enumerate() {
        let batch = task.entries[0].batch;
        // The wait for a full batch that IPA's latency counts; drops only once late, or after twice the SLO.
        assert_eq!(task.policy.wait_ms, queueing_ms(batch, least[t]), "{task:?}");
        assert_eq!((task.policy.drop_budget_ms, task.policy.stale_ms), (0.0, 2000.0));
    }
    assert!(plan.tasks.iter().any(|t| t.entries[0].batch > 1), "batching pays here: {plan:?}");
}
