//! PPipe's program ([`jig_planner::ppipe`]): on random small clusters (one or two classes of one or two units,
//! whole units and halves) and models of one to three blocks, for PPipe and its baselines NP and DART-r, the
//! MILP's plan serves as much as exhaustive search finds, within the units, each pipeline within the SLO less its
//! margin; NP never cuts a model, DART-r cuts only across two classes with as many units on each side; and bad
//! input is named.

use std::collections::HashMap;

use jig_planner::ppipe::{BlockedModel, Class, PpipeProblem, Scheme, solve};
use jig_planner::{PlanError, SolveOptions, exhaustive};
use proptest::prelude::*;

fn problem(
    blocks: usize,
    classes: Vec<(u32, bool)>,
    latency: &[f64],
    bytes: Vec<u64>,
    slo_ms: f64,
    scheme: Scheme,
) -> PpipeProblem {
    let batches = vec![1, 2, 4];
    let mut latency_ms = HashMap::new();
    let mut at = 0;
    for (k, &(_, halves)) in classes.iter().enumerate() {
        for share in if halves { vec![1, 2] } else { vec![1] } {
            for &batch in &batches {
                for block in 0..blocks {
                    // A half share is slower; a batch costs less than its rows alone.
                    let base = latency[at % latency.len()];
                    at += 1;
                    let ms = base * f64::from(share).powf(0.7) * f64::from(batch).powf(0.6);
                    latency_ms.insert((k, share, batch, block), ms);
                }
            }
        }
    }
    PpipeProblem {
        model: BlockedModel { name: "m".into(), blocks, latency_ms, output_bytes: bytes },
        classes: classes
            .iter()
            .enumerate()
            .map(|(k, &(units, halves))| Class {
                name: format!("c{k}"),
                units,
                shares: if halves { vec![1, 2] } else { vec![1] },
            })
            .collect(),
        slo_ms,
        margin: 0.4,
        batches,
        max_partitions: 3,
        bandwidth_bytes_per_s: 1e9,
        scheme,
    }
}

fn case() -> impl Strategy<Value = PpipeProblem> {
    (
        1usize..=3,
        prop::collection::vec((1u32..=2, any::<bool>()), 1..=2),
        prop::collection::vec(1.0f64..20.0, 48),
        prop::collection::vec(0u64..4_000_000, 3),
        20.0f64..150.0,
        prop::sample::select(vec![Scheme::PPipe, Scheme::NoPartitioning, Scheme::DartR, Scheme::EveryBlock]),
    )
        .prop_map(|(blocks, classes, latency, bytes, slo, scheme)| {
            problem(blocks, classes, &latency, bytes[..blocks].to_vec(), slo, scheme)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn ppipe_plans_serve_as_much_as_exhaustive_search_finds(p in case()) {
        let best = exhaustive::ppipe(&p);
        let plan = match solve(&p, &SolveOptions::default()) {
            Ok(plan) => plan,
            Err(PlanError::Infeasible(why)) => {
                prop_assert_eq!(best, 0.0, "{}", why);
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        };
        prop_assert!(plan.optimal);
        prop_assert!((plan.throughput_rps - best).abs() <= 1e-3 * best.max(1.0), "{} against {}: {:?}", plan.throughput_rps, best, plan);
        for (k, class) in p.classes.iter().enumerate() {
            prop_assert!(plan.units_used[k] <= f64::from(class.units) + 1e-9, "{:?}", plan);
        }
        for pipeline in &plan.pipelines {
            prop_assert!(pipeline.latency_ms <= p.budget_ms() + 1e-9, "{:?}", pipeline);
            let parts = &pipeline.partitions;
            prop_assert_eq!(parts.first().unwrap().blocks.start, 0);
            prop_assert_eq!(parts.last().unwrap().blocks.end, p.model.blocks);
            prop_assert!(parts.windows(2).all(|w| w[0].blocks.end == w[1].blocks.start));
            match p.scheme {
                Scheme::NoPartitioning => prop_assert_eq!(parts.len(), 1),
                Scheme::EveryBlock => prop_assert!(parts.iter().enumerate().all(|(d, q)| q.blocks == (d..d + 1))),
                Scheme::DartR if parts.len() == 2 => {
                    prop_assert!(parts[0].class != parts[1].class && parts[0].count == parts[1].count);
                    prop_assert!(parts.iter().all(|q| q.share == 1));
                }
                _ => prop_assert!(parts.len() <= p.max_partitions),
            }
        }
    }
}

/// Where whole models fit only on the fast class, cutting the model lets the slow class take its early blocks:
/// PPipe serves more than NP on the same units (the paper's premise, §2).
#[test]
fn cutting_a_model_puts_the_slow_class_to_work() {
    // Two blocks; the slow class is 1.5× slower on block 0 but 8× on block 1.
    let mut latency_ms = HashMap::new();
    for (k, block0, block1) in [(0, 10.0, 10.0), (1, 15.0, 80.0)] {
        for &batch in &[1u32, 2, 4] {
            let scale = f64::from(batch).powf(0.6);
            latency_ms.insert((k, 1, batch, 0), block0 * scale);
            latency_ms.insert((k, 1, batch, 1), block1 * scale);
        }
    }
    let classes = vec![
        Class { name: "fast".into(), units: 1, shares: vec![1] },
        Class { name: "slow".into(), units: 3, shares: vec![1] },
    ];
    let model = BlockedModel { name: "cnn".into(), blocks: 2, latency_ms, output_bytes: vec![1_000_000, 4_000] };
    let p = |scheme| PpipeProblem {
        model: model.clone(),
        classes: classes.clone(),
        slo_ms: 100.0,
        margin: 0.4,
        batches: vec![1, 2, 4],
        max_partitions: 2,
        bandwidth_bytes_per_s: 1.25e9,
        scheme,
    };
    let options = SolveOptions::default();
    let (ppipe, np) =
        (solve(&p(Scheme::PPipe), &options).unwrap(), solve(&p(Scheme::NoPartitioning), &options).unwrap());
    assert!(np.units_used[1] == 0.0, "whole models do not fit the slow class's 60 ms: {np:?}");
    assert!(ppipe.units_used[1] > 0.0, "{ppipe:?}");
    assert!(ppipe.throughput_rps > 1.3 * np.throughput_rps, "{ppipe:?} against {np:?}");
    assert_eq!(ppipe.throughput_rps, exhaustive::ppipe(&p(Scheme::PPipe)));
}

#[test]
fn bad_input_is_named() {
    let mut p = problem(2, vec![(1, false)], &[5.0], vec![10, 10], 100.0, Scheme::PPipe);
    p.model.output_bytes.pop();
    let e = solve(&p, &SolveOptions::default()).unwrap_err().to_string();
    assert!(e.contains("model `m`") && e.contains("1 output sizes for 2 blocks"), "{e}");
    let mut p = problem(2, vec![(1, false)], &[5.0], vec![10, 10], 100.0, Scheme::PPipe);
    p.classes[0].shares.clear();
    let e = solve(&p, &SolveOptions::default()).unwrap_err().to_string();
    assert!(e.contains("class `c0` offers no share sizes"), "{e}");
    let p = problem(2, vec![(1, false)], &[50.0], vec![10, 10], 100.0, Scheme::PPipe);
    let e = solve(&p, &SolveOptions::default()).unwrap_err().to_string();
    assert!(e.contains("no pipeline of the classes `c0` meets the 100.0 ms SLO less its 40% margin (60.0 ms)"), "{e}");
    // Each block alone fits, so a cut model is a candidate; the two together do not.
    let p = problem(2, vec![(1, false)], &[40.0], vec![10, 10], 100.0, Scheme::PPipe);
    assert!(matches!(solve(&p, &SolveOptions::default()), Err(PlanError::Infeasible(_))));
}
