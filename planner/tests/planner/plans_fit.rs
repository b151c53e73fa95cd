//! Plans fit the GPUs they count (issue 23): on random apps over every MIG profile, each plan the planner
//! returns places on at most S_avail / 7 GPUs, every instance at a valid start slot, and a GPU it fills is
//! priced at the 7 slices it holds.

use jig_planner::placement::Device;
use jig_planner::profile::ProfileRow;
use jig_planner::spec::*;
use jig_planner::{Features, PlanError, Problem, SolveOptions, plan};
use proptest::prelude::*;

const PROFILES: [&str; 6] = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"];

/// A chain of `latencies.len()` tasks of one variant each, profiled on the MIG profiles `profiles` (indices
/// into [`PROFILES`]) at batch 1 with throughput `rate × compute slices` and latency `latency` ms.
fn problem(tasks: &[(Vec<usize>, f64, f64)], slices: u32, demand: f64) -> Problem {
    let names: Vec<String> = (0..tasks.len()).map(|t| format!("t{t}")).collect();
    let mut rows = Vec::new();
    let mut segments: Vec<String> = Vec::new();
    for (t, (profiles, latency, rate)) in tasks.iter().enumerate() {
        for &p in profiles {
            let segment = format!("mig:{}:1", PROFILES[p]);
            let compute = [1.0, 1.0, 2.0, 3.0, 4.0, 7.0][p];
            rows.push(ProfileRow {
                slot: names[t].clone(),
                variant: "v".into(),
                segment: segment.clone(),
                batch: 1,
                p50_ms: *latency,
                p95_ms: *latency,
                throughput_rps: rate * compute,
                device: "test".into(),
                cpu_ms: None,
            });
            if !segments.contains(&segment) {
                segments.push(segment);
            }
        }
    }
    let spec = PlanSpec {
        app: AppSpec {
            name: "fit".into(),
            slo_latency_ms: 1000.0,
            slo_accuracy: 0.5,
            tasks: names
                .iter()
                .map(|n| TaskSpec {
                    name: n.clone(),
                    slot: None,
                    variants: vec![VariantSpec { name: "v".into(), accuracy: 1.0, factors: Default::default() }],
                })
                .collect(),
            edges: names.windows(2).map(|w| EdgeSpec { from: w[0].clone(), to: w[1].clone() }).collect(),
            paths: None,
            planner: Default::default(),
            classes: Vec::new(),
            staleness_ms: None,
        },
        segments: segments.into_iter().map(|name| SegmentSpec { name, slices: None }).collect(),
        resources: Resources { slices, ..Resources::default() },
        demand: DemandSpec { windows: vec![demand], slack: Some(0.0) },
        objective: Objective { alpha: 1.0, beta: 0.035 },
        ipa: Default::default(),
        compass: Default::default(),
        batch_sizes: None,
    };
    Problem::new(&spec, &rows, "test").expect("a valid problem")
}

fn options() -> SolveOptions {
    SolveOptions { time_limit_s: 20.0, ..SolveOptions::default() }
}

/// GPUs used, after checking that no GPU holds overlapping instances, instances off their start slots or
/// more than 7 compute slices.
fn gpus_checked(plan: &jig_planner::Plan) -> Result<u32, TestCaseError> {
    let mut used: std::collections::BTreeMap<u32, ([bool; 8], u32)> = Default::default();
    for placed in &plan.placement.instances {
        let Device::Gpu { gpu, start_slot, profile, .. } = &placed.device else {
            return Err(TestCaseError::fail(format!("{} is not on a GPU: {:?}", placed.label, placed.device)));
        };
        let profile: MigProfile = profile.parse().unwrap();
        prop_assert!(profile.starts().contains(start_slot), "{profile} at slot {start_slot}");
        let (slots, compute) = used.entry(*gpu).or_default();
        for s in *start_slot..start_slot + profile.memory_slots() {
            prop_assert!(!std::mem::replace(&mut slots[s as usize], true), "GPU {gpu} slot {s} twice");
        }
        *compute += profile.compute_slices();
        prop_assert!(*compute <= 7, "GPU {gpu} holds {compute} compute slices");
    }
    Ok(used.len() as u32)
}

#[test]
fn a_gpu_filled_by_a_4g_and_a_3g_instance_is_priced_at_its_seven_slices() {
    // Each task runs only on its profile; two of each at 28 req/s (7 req/s per compute slice).
    let p = problem(&[(vec![4], 20.0, 3.5), (vec![3], 20.0, 4.7)], 14, 28.0);
    let plan = plan(&p, Features::ALL, &options()).expect("two GPUs of 4g.40gb + 3g.40gb fit 14 slices");
    assert_eq!(plan.slices_used, 14, "{}", plan.to_text());
    assert_eq!(gpus_checked(&plan).unwrap(), 2, "{}", plan.to_text());
}

#[test]
fn instances_that_count_few_slices_but_no_layout_holds_are_refused() {
    // Three 4g.40gb take 12 of 14 slices but need three GPUs: no plan.
    let p = problem(&[(vec![4], 20.0, 3.0)], 14, 30.0);
    match plan(&p, Features::ALL, &options()) {
        Err(PlanError::Infeasible(_)) => {}
        other => panic!("three 4g.40gb on two GPUs: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_plan_places_on_the_gpus_it_counts(
        tasks in proptest::collection::vec(
            (proptest::sample::subsequence((0..6).collect::<Vec<usize>>(), 1..=3), 5.0f64..60.0, 2.0f64..12.0),
            1..=3,
        ),
        gpus in 1u32..=4,
        demand in 2.0f64..80.0,
    ) {
        let slices = 7 * gpus;
        let p = problem(&tasks, slices, demand);
        match plan(&p, Features::ALL, &options()) {
            Ok(plan) => {
                prop_assert!(plan.placement.unplaced.is_empty(), "{}", plan.to_text());
                let used = gpus_checked(&plan)?;
                prop_assert!(used <= gpus, "{used} GPUs of {gpus}: {}", plan.to_text());
                prop_assert!(plan.slices_used <= slices, "{}", plan.to_text());
                prop_assert!(plan.slices_used <= 7 * used, "more slices priced than {used} GPUs hold: {}", plan.to_text());
            }
            Err(PlanError::Infeasible(_)) => {}
            Err(e) => prop_assert!(false, "{e}"),
        }
    }
}
