//! The Compass strategy on random linear pipelines (1–3 stages, 1–3 variants, cpu:1/2/4, batches 1, 2, 4) with
//! 1–3 query classes: its plans pass the independent checks (every route within its class's SLOs, no type's
//! instances over their capacity, the slices within the budget), planning the classes together serves at least
//! what planning each alone serves, and with slices to spare every class that has a route is served in full. On
//! tiny pipelines it plans as exhaustive search does, and a re-plan from the running plan finds what a fresh
//! one does.

use jig_planner::profile::ProfileRow;
use jig_planner::spec::*;
use jig_planner::{Features, Problem, SolveOptions, plan};
use proptest::prelude::*;
// The proptest trait, not the planner `Strategy` that `jig_planner::spec::*` brings too.
use proptest::strategy::Strategy;

use crate::common;

#[derive(Debug, Clone)]
struct Case {
    /// Per stage, per variant: accuracy and the factor to the next stage.
    variants: Vec<Vec<(f64, f64)>>,
    /// Per (stage, variant): batch-1 latency ms and throughput req/s on one core.
    profile: Vec<(f64, f64)>,
    /// Per class: latency SLO ms, accuracy SLO, share.
    classes: Vec<(f64, f64, f64)>,
    demand: f64,
    slices: u32,
}

fn case() -> impl Strategy<Value = Case> {
    cases(3, 50.0..800.0, 1.0..80.0, 2..=23)
}

/// Up to `most` stages, variants per stage and classes; class latency SLOs in `latency` ms.
fn cases(
    most: usize,
    latency: std::ops::Range<f64>,
    demand: std::ops::Range<f64>,
    slices: std::ops::RangeInclusive<u32>,
) -> impl Strategy<Value = Case> {
    (1usize..=most, 1usize..=most, 1usize..=most).prop_flat_map(move |(nt, nv, nc)| {
        (
            proptest::collection::vec(proptest::collection::vec((50.0f64..100.0, 0.5f64..2.0), nv), nt),
            proptest::collection::vec((5.0f64..80.0, 5.0f64..40.0), nt * nv),
            proptest::collection::vec((latency.clone(), prop_oneof![Just(0.0), 0.6f64..1.0], 0.1f64..1.0), nc),
            demand.clone(),
            slices.clone(),
        )
            .prop_map(|(variants, profile, classes, demand, slices)| Case {
                variants,
                profile,
                classes,
                demand,
                slices,
            })
    })
}

impl Case {
    fn problem(&self, alone: bool, slices: u32) -> Problem {
        self.problem_on(alone, slices, |_| true)
    }

    /// [`Case::problem`] with only the profile rows `keep` keeps, and their segments.
    fn problem_on(&self, alone: bool, slices: u32, keep: impl Fn(&ProfileRow) -> bool) -> Problem {
        let (tasks, edges, mut segments, mut rows) = common::chain(&self.variants, &self.profile);
        rows.retain(keep);
        segments.retain(|s| rows.iter().any(|r| r.segment == s.name));
        let classes = self
            .classes
            .iter()
            .enumerate()
            .map(|(i, &(slo_latency_ms, slo_accuracy, share))| ClassSpec {
                name: format!("q{i}"),
                slo_latency_ms,
                slo_accuracy,
                share,
            })
            .collect();
        let spec = PlanSpec {
            app: AppSpec {
                name: "classes".into(),
                slo_latency_ms: 1000.0,
                slo_accuracy: 0.0,
                tasks,
                edges,
                paths: None,
                planner: jig_planner::Strategy::Compass,
                classes,
                staleness_ms: None,
            },
            segments,
            resources: Resources { slices, ..Resources::default() },
            demand: DemandSpec { windows: vec![self.demand], slack: Some(0.0) },
            objective: Objective::default(),
            ipa: IpaSpec::default(),
            compass: CompassSpec { alone },
            batch_sizes: None,
        };
        Problem::new(&spec, &rows, "test").expect("a valid problem")
    }
}

fn goodput(problem: &Problem) -> (f64, jig_planner::Plan) {
    let plan = plan(problem, Features::ALL, &SolveOptions::default()).expect("Compass plans pass their checks");
    (plan.classes.iter().map(|c| c.served_rps).sum(), plan)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20, ..ProptestConfig::default() })]

    #[test]
    fn classes_planned_together_serve_at_least_what_each_alone_does(c in case()) {
        let (together, plan) = goodput(&c.problem(false, c.slices));
        let (alone, _) = goodput(&c.problem(true, c.slices));
        prop_assert!(together >= alone - 1e-3 * c.demand, "together {together} < alone {alone}");
        prop_assert!(plan.slices_used <= c.slices);
        prop_assert!(together <= c.demand * (1.0 + 1e-6));
        // With slices to spare, each class with a route is served in full, to the planner's MIP gap: HiGHS stops
        // once its goodput is within `mip_rel_gap` (1e-4) of the best bound, so a class may be served that much
        // short (a fresh run found 3.2e-3 req/s of 79.0; the case is in proptest-regressions/).
        let (_, ample) = goodput(&c.problem(false, 200));
        for class in &ample.classes {
            if !class.routes.is_empty() {
                prop_assert!((class.served_rps - class.demand_rps).abs() <= 1e-4 * class.demand_rps + 1e-4, "{class:?}");
            }
        }
    }
}

#[test]
fn a_class_no_route_meets_is_not_served_and_classes_must_be_well_formed() {
    let case = Case {
        variants: vec![vec![(90.0, 1.0)]],
        profile: vec![(100.0, 20.0)],
        // 2·L on four cores is 2·100/4^0.7 ≈ 76 ms: 50 ms is out of reach, 400 ms is not.
        classes: vec![(50.0, 0.0, 1.0), (400.0, 0.0, 1.0)],
        demand: 10.0,
        slices: 8,
    };
    let (served, plan) = goodput(&case.problem(false, 8));
    assert_eq!(plan.classes[0].served_rps, 0.0);
    assert!(plan.classes[0].routes.is_empty());
    assert!((served - 5.0).abs() < 1e-6, "the other class's 5 req/s: {plan:?}");
    let spec = |classes: &str| {
        PlanSpec::from_toml(&format!(
            "[app]\nname = \"x\"\nslo_latency_ms = 100\nslo_accuracy = 0\nplanner = \"compass\"\nclasses = [{classes}]\n\
             tasks = [{{ name = \"a\", variants = [{{ name = \"v\", accuracy = 1 }}] }}]\n\
             [[segments]]\nname = \"cpu:1\"\n[resources]\nslices = 4\n[demand]\nwindows = [1]\n"
        ))
        .unwrap()
    };
    let row = ProfileRow {
        slot: "a".into(),
        variant: "v".into(),
        segment: "cpu:1".into(),
        batch: 1,
        p50_ms: 1.0,
        p95_ms: 1.0,
        throughput_rps: 10.0,
        device: "test".into(),
        cpu_ms: None,
    };
    let twice = "{ name = \"q\", slo_latency_ms = 10, slo_accuracy = 0, share = 1 }";
    let err = Problem::new(&spec(&format!("{twice}, {twice}")), std::slice::from_ref(&row), "t").unwrap_err();
    assert!(err.to_string().contains("class `q`: a second class of that name"), "{err}");
    let negative = "{ name = \"q\", slo_latency_ms = 10, slo_accuracy = 0, share = -1 }";
    let err = Problem::new(&spec(negative), std::slice::from_ref(&row), "t").unwrap_err();
    assert!(err.to_string().contains("app `x`, class `q`: share must be positive"), "{err}");
}

/// The largest demand of a Compass app is the largest its plan serves in full within the classes' SLOs: just
/// above it, the plan serves less than the demand.
#[test]
fn the_largest_demand_of_compass_is_the_largest_it_serves_in_full() {
    let case = Case {
        variants: vec![vec![(90.0, 1.0)], vec![(90.0, 1.0)]],
        profile: vec![(20.0, 20.0), (10.0, 30.0)],
        classes: vec![(400.0, 0.0, 0.5), (300.0, 0.0, 0.5)],
        demand: 10.0,
        slices: 8,
    };
    let problem = case.problem(false, 8);
    let found = jig_planner::max_demand::max_demand(&problem, Features::ALL, 0.01, 30.0).unwrap();
    assert!(found.demand_rps > 1.0 && found.why_none.is_none(), "{found:?}");
    let (at_max, _) = goodput(&problem.clone().with_demand(found.demand_rps, 8));
    assert!(at_max >= found.demand_rps * (1.0 - 1e-3), "{at_max} of {}", found.demand_rps);
    let above = found.demand_rps * 1.05;
    let (served, _) = goodput(&problem.clone().with_demand(above, 8));
    assert!(served < above * (1.0 - 1e-4), "{served} of {above}");
}

/// Tiny cases: 1–2 stages of 1–2 variants, 1–2 classes, 1–4 slices (exhaustive search keeps `cpu:1` at batch 1
/// only: at most four instance types).
fn tiny() -> impl Strategy<Value = Case> {
    cases(2, 20.0..300.0, 1.0..100.0, 1..=4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Compass's plan is the best there is: the most goodput, on the fewest slices for it, as exhaustive search
    /// over the instance counts finds.
    #[test]
    fn compass_plans_as_exhaustive_search_does(c in tiny()) {
        let problem = c.problem_on(false, c.slices, |row| row.segment == "cpu:1" && row.batch == 1);
        let (served, plan) = goodput(&problem);
        let best = jig_planner::exhaustive::compass(&problem, 100_000).expect("a small problem");
        let (best, slices) = (best.goodput_rps, best.slices);
        let tolerance = 1e-5 * best.max(1.0) + 1e-4;
        prop_assert!((served - best).abs() <= tolerance, "Compass {served}, exhaustive {best}");
        if best > tolerance {
            prop_assert_eq!(plan.slices_used, slices, "the fewest slices for {}", best);
        }
    }

    /// A re-plan started from the running plan, after the demand grew or a class's latency SLO moved, finds
    /// what planning afresh finds.
    #[test]
    // (Tiny cases, every segment and batch: a re-plan keeps to the 1 s re-plan budget, which the largest of
    // `case()`, thousands of routes per class in a debug build, would run into.)
    fn a_re_plan_from_the_running_plan_finds_what_a_fresh_one_does(c in tiny(), grow in 0.5f64..1.5, looser in 0.8f64..1.25) {
        let options = SolveOptions::default();
        let running = jig_planner::solve(&c.problem(false, c.slices), Features::ALL, &options).unwrap().assignments;
        let mut changed = c.clone();
        changed.demand *= grow;
        changed.classes[0].0 *= looser;
        let problem = changed.problem(false, c.slices);
        let (fresh, fresh_plan) = goodput(&problem);
        let warm = jig_planner::solve_from(&problem, Features::ALL, &options, &running).expect("a re-plan");
        let served: f64 = warm.classes.iter().map(|k| k.served_rps).sum();
        prop_assert!((served - fresh).abs() <= 1e-5 * fresh.max(1.0) + 1e-4, "warm {served}, fresh {fresh}");
        let slices: u32 = warm.assignments.iter().map(|a| a.instances * problem.segments[a.segment].slices).sum();
        prop_assert_eq!(slices, fresh_plan.slices_used);
        prop_assert!(jig_planner::compass::check(&problem, &warm).is_empty());
    }
}
