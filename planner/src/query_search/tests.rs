//! Tests of the searches on the sign reader's measured profiles (a spec of its own here, so that they do not
//! move with the evaluation's spec file).

use super::camo::{self, History};
use super::profiler::{MAX_SAMPLES, MIN_SAMPLES, PLAN_OVERHEAD_S, PROFILER_PARALLEL, Profiler, Sampling};
use super::space::{Query, Space};
use super::{Settings, compare, videostorm, vulcan};
use crate::problem::Problem;
use crate::spec::PlanSpec;

const SPEC: &str = r#"
[app]
name = "sign-reader-test"
planner = "compass"
slo_latency_ms = 750
slo_accuracy = 0.0
classes = [
  { name = "interactive", slo_latency_ms = 250, slo_accuracy = 0.9, share = 0.3 },
  { name = "standard", slo_latency_ms = 750, slo_accuracy = 0.75, share = 0.4 },
  { name = "bulk", slo_latency_ms = 3000, slo_accuracy = 0.5, share = 0.3 },
]
edges = [{ from = "detect", to = "recognize" }, { from = "recognize", to = "speak" }]

[[app.tasks]]
name = "detect"
slot = "det"
variants = [
  { name = "ppocr-v4-det", accuracy = 0.906, factors = { recognize = 1.2 } },
  { name = "ppocr-v4-det-640", accuracy = 0.795, factors = { recognize = 1.2 } },
  { name = "ppocr-v4-det-480", accuracy = 0.786, factors = { recognize = 1.2 } },
  { name = "ppocr-v4-det-int8", accuracy = 0.880, factors = { recognize = 1.2 } },
]

[[app.tasks]]
name = "recognize"
slot = "rec"
variants = [
  { name = "ppocr-v4-rec", accuracy = 0.906, factors = { speak = 1.0 } },
  { name = "ppocr-v4-rec-int8", accuracy = 0.658, factors = { speak = 1.0 } },
]

[[app.tasks]]
name = "speak"
slot = "voice"
variants = [
  { name = "piper-joe-medium", accuracy = 0.953 },
  { name = "piper-joe-medium-int8", accuracy = 0.913 },
]

[[segments]]
name = "cpu:1"

[[segments]]
name = "cpu:2"

[resources]
slices = 8
cores_per_host = 8

[demand]
windows = [60]
"#;

fn problem() -> Problem {
    let spec = PlanSpec::from_toml(SPEC).expect("the test spec parses");
    let rows = crate::profile::from_csv(include_str!("../../../examples/sign-reader/profiles.csv")).expect("profiles");
    Problem::new(&spec, &rows, "test").expect("the sign reader is a valid problem")
}

fn query(latency_ms: f64, accuracy: f64) -> Query {
    Query {
        class: "test".into(),
        slo_latency_ms: latency_ms,
        slo_accuracy: accuracy,
        rate_rps: 2.0,
        difficulty: 1.0,
        latency_scale: 1.0,
    }
}

#[test]
fn the_space_is_every_combination_and_neighbours_change_one_knob_one_step() {
    let space = Space::new(&problem(), "test").expect("a linear pipeline");
    assert_eq!(space.len(), 32 * 16 * 4);
    for id in [0, 1, 777, space.len() - 1] {
        assert_eq!(space.encode(&space.decode(id)), id);
        for n in space.neighbours(id) {
            let changed = space.decode(id).iter().zip(space.decode(n)).filter(|(a, b)| **a != *b).count();
            assert_eq!(changed, 1, "{id} → {n}");
        }
    }
    let q = query(3000.0, 0.5);
    let best = space.truth(space.quality_first(), &q);
    assert!((best.accuracy - 1.0).abs() < 1e-12, "the quality-first plan has the best variants");
}

#[test]
fn the_prefix_cache_charges_only_the_stages_not_yet_run() {
    let space = Space::new(&problem(), "test").expect("a linear pipeline");
    let q = query(3000.0, 0.5);
    let mut cached = Profiler::new(&space, &q, Sampling::Fixed, true, 1e9);
    let mut plain = Profiler::new(&space, &q, Sampling::Fixed, false, 1e9);
    let first = space.encode(&[0, 0, 0]);
    // The same variants in the first two stages; the last stage another variant (options 2, 3: the int8 voice).
    let second = space.encode(&[0, 0, 2]);
    assert_eq!(space.stages[2].options[2].variant, 1);
    let per_sample = |o: &[usize], stages: std::ops::Range<usize>| -> f64 {
        stages.map(|k| space.stages[k].options[o[k]].p50_ms / f64::from(space.stages[k].options[o[k]].batch)).sum()
    };
    let cost = |ms: f64| PLAN_OVERHEAD_S + MAX_SAMPLES * ms / 1e3 / PROFILER_PARALLEL;
    let a = cached.profile(first).expect("profiled");
    assert!((a.cost_s - cost(per_sample(&[0, 0, 0], 0..3))).abs() < 1e-9);
    assert_eq!(cached.uncached_stages(second), 1);
    let b = cached.profile(second).expect("profiled");
    assert!((b.cost_s - cost(per_sample(&[0, 0, 2], 2..3))).abs() < 1e-9, "only the speak stage: {}", b.cost_s);
    // Same variants everywhere, another batch upstream: only the overhead.
    let third = space.encode(&[1, 0, 0]);
    assert_eq!(space.stages[0].options[1].variant, 0);
    assert!((cached.profile(third).expect("profiled").cost_s - PLAN_OVERHEAD_S).abs() < 1e-9);
    // Without the cache, every stage every time.
    plain.profile(first);
    let b2 = plain.profile(second).expect("profiled");
    assert!((b2.cost_s - cost(per_sample(&[0, 0, 2], 0..3))).abs() < 1e-9);
    assert!(plain.simulated_s() > cached.simulated_s());
}

#[test]
fn adaptive_sampling_stops_early_when_the_verdict_is_clear() {
    let space = Space::new(&problem(), "test").expect("a linear pipeline");
    let q = query(3000.0, 0.5);
    let p = Profiler::new(&space, &q, Sampling::Adaptive, false, 1e9);
    let truth = |accuracy: f64, latency_ms: f64| super::space::Truth { accuracy, latency_ms, cores: 1.0 };
    assert_eq!(p.samples(&truth(0.95, 100.0)), MIN_SAMPLES, "far above the SLO");
    assert_eq!(p.samples(&truth(0.5, 100.0)), MAX_SAMPLES, "on the SLO");
    let near = p.samples(&truth(0.6, 100.0));
    assert!(near > MIN_SAMPLES && near < MAX_SAMPLES, "{near}");
    assert_eq!(p.samples(&truth(0.5, 5000.0)), MIN_SAMPLES, "the latency misses: clear at once");
}

#[test]
fn every_search_finds_a_compliant_plan_for_an_easy_query_under_a_generous_deadline() {
    let space = Space::new(&problem(), "test").expect("a linear pipeline");
    let q = query(3000.0, 0.5);
    let outcomes = [
        vulcan::search(&space, &q, 60.0, 1),
        videostorm::search(&space, &q, 60.0, 1),
        camo::search(&space, &q, 60.0, 1, &History::default()),
    ];
    for (name, o) in ["vulcan", "videostorm", "camo"].iter().zip(&outcomes) {
        assert!(!o.compliant.is_empty(), "{name} found no compliant plan");
        assert!(o.compliant.iter().all(|c| q.compliant(&c.truth)));
        assert!(o.first_compliant_s.is_some_and(|t| t <= 60.0 + 1.0));
    }
}

#[test]
fn the_committee_makes_a_later_similar_query_need_fewer_plans_than_a_cold_start() {
    let space = Space::new(&problem(), "test").expect("a linear pipeline");
    // Tight queries: 6 of the 2048 plans meet both SLOs (the best detector on two cores at batch 1, the best
    // recognizer at batch 1 or 2 on two cores, the voice on two cores).
    let earlier: Vec<Query> =
        (0..4).map(|i| Query { latency_scale: 0.95 + 0.03 * f64::from(i), ..query(250.0, 0.9) }).collect();
    // Measured when written: warm 0–2 plans before the first compliant one, cold 7–36, over these six seeds.
    let (mut warm_total, mut cold_total) = (0, 0);
    for seed in 0..6 {
        let mut history = History::default();
        for (i, q) in earlier.iter().enumerate() {
            let o = camo::search(&space, q, 15.0, 100 + seed * 10 + i as u64, &History::default());
            history.remember(&space, &o.observations);
        }
        assert!(!history.is_empty());
        let later = Query { difficulty: 1.05, latency_scale: 1.02, ..query(260.0, 0.9) };
        let feasible = (0..space.len()).filter(|&p| later.compliant(&space.truth(p, &later))).count();
        assert!((1..=12).contains(&feasible), "{feasible} feasible plans");
        let warm = camo::search(&space, &later, 15.0, seed, &history);
        let cold = camo::search(&space, &later, 15.0, seed, &History::default());
        assert!(warm.first_compliant_s.is_some(), "seed {seed}: the warm start found no plan");
        warm_total += camo::plans_to_first_compliant(&warm);
        cold_total += camo::plans_to_first_compliant(&cold);
    }
    assert!(warm_total < cold_total, "warm {warm_total} plans to the first compliant one, cold {cold_total}");
}

#[test]
fn the_comparison_matches_within_the_cores() {
    let settings = Settings { queries: 6, seed: 3, cores: vec![8.0, 4.0], deadlines_s: vec![5.0] };
    let c = compare(&problem(), "test", &settings).expect("compares");
    assert_eq!(c.runs.len(), 4);
    for run in &c.runs {
        assert_eq!(run.outcomes.len(), 6);
        for (cores, m) in &run.matchings {
            assert!(m.cores_used <= cores + 1e-9, "{} uses {} of {cores} cores", run.search.name(), m.cores_used);
        }
    }
    assert!(c.render().contains("Compass/Vulcan"));
}
