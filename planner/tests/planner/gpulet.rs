//! gpu-lets (`jig_planner::gpulet`): the elastic partitioning of Algorithm 1 and its baseline, Nexus's squishy bin
//! packing, on hand-made latency tables shaped as the paper's Figure 3 (a small batch barely faster on a larger
//! share, a large one much faster).

use std::collections::BTreeMap;

use jig_planner::PlanError;
use jig_planner::gpulet::{
    GpuletModel, GpuletPlan, GpuletProblem, elastic, ideal, knee, max_scale, no_interference, squishy,
};

const SIZES: [u32; 6] = [20, 40, 50, 60, 80, 100];
const BATCHES: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// A model whose batch takes `fixed + per_item · b / share` ms: `fixed` a share does not shorten.
fn model(name: &str, rate: f64, fixed: f64, per_item: f64) -> GpuletModel {
    let mut latency_ms = BTreeMap::new();
    for size in SIZES {
        for b in BATCHES {
            latency_ms.insert((size, b), fixed + per_item * f64::from(b) * 100.0 / f64::from(size));
        }
    }
    // SLO: twice the whole GPU's latency at batch 32, the paper's rule.
    let slo_ms = 2.0 * latency_ms[&(100, 32)];
    GpuletModel { name: name.into(), rate_rps: rate, slo_ms, latency_ms }
}

/// Two light models and two heavy ones, as the paper's mixes.
fn paper_mix() -> Vec<GpuletModel> {
    vec![
        model("le", 100.0, 1.5, 0.01),
        model("goo", 100.0, 3.0, 0.08),
        model("res", 100.0, 4.0, 0.5),
        model("vgg", 50.0, 6.0, 0.9),
    ]
}

fn problem(models: Vec<GpuletModel>, gpus: u32) -> GpuletProblem {
    GpuletProblem { models, gpus, splits: vec![20, 40, 50], interference: None }
}

#[test]
fn a_model_whose_small_batches_waste_a_gpu_gets_a_share_of_one() {
    // Mostly fixed time: a fifth of the GPU serves it almost as fast as all of it.
    let p = problem(vec![model("light", 50.0, 4.0, 0.05)], 1);
    assert!(knee(&p, 0) < 100, "the knee is a share: {}", knee(&p, 0));
    let plan = elastic(&p, &no_interference).unwrap();
    assert_eq!(plan.gpulets.len(), 1);
    assert!(plan.gpulets[0].size < 100, "{plan:?}");
    let served: f64 = plan.gpulets.iter().flat_map(|g| &g.loads).map(|l| l.rate_rps).sum();
    assert!((served - 50.0).abs() < 1e-6, "{plan:?}");
    let nexus = squishy(&p).unwrap();
    assert_eq!(nexus.gpulets[0].size, 100, "Nexus holds whole GPUs");
}

#[test]
fn models_with_room_to_spare_share_a_gpu_let_in_a_duty_cycle() {
    let p = problem(vec![model("a", 20.0, 2.0, 0.2), model("b", 20.0, 2.0, 0.2)], 1);
    let plan = elastic(&p, &no_interference).unwrap();
    let shared = plan.gpulets.iter().find(|g| g.loads.len() == 2).unwrap_or_else(|| panic!("{plan:?}"));
    // The duty cycle holds: the batches fit it, and a request's wait plus its batch meets the SLO.
    let busy: f64 =
        shared.loads.iter().map(|l| p.models[l.model].latency_ms[&(shared.size, l.batch.next_power_of_two())]).sum();
    assert!(busy <= shared.duty_ms + 1e-9, "{shared:?}");
    for l in &shared.loads {
        assert!(f64::from(l.batch) >= l.rate_rps * shared.duty_ms / 1e3 - 1e-9, "each cycle batches its arrivals");
        let ms = p.models[l.model].latency_ms[&(shared.size, l.batch.next_power_of_two())];
        assert!(shared.duty_ms + ms <= p.models[l.model].slo_ms + 1e-9);
    }
}

#[test]
fn spatial_sharing_serves_more_than_whole_gpus_on_the_same_gpus() {
    // SBP gives each model of the mix a GPU of its own (their SLOs are too tight to share one in a duty cycle).
    let p = problem(paper_mix(), 4);
    let (gpulets, nexus) = (max_scale(&p, |q| elastic(q, &no_interference)), max_scale(&p, squishy));
    assert!(nexus > 0.0 && gpulets > 1.2 * nexus, "gpu-lets ×{gpulets:.2} against SBP ×{nexus:.2}");
    // At its largest scale, its plan holds: within the GPUs, every model's whole rate, every duty cycle.
    let scaled = p.scaled(gpulets);
    assert_holds(&scaled, &elastic(&scaled, &no_interference).unwrap(), |_, _| 0.0);
}

#[test]
fn a_rate_no_gpu_let_can_serve_is_named() {
    let p = problem(vec![model("vgg", 1e6, 6.0, 0.9)], 1);
    match elastic(&p, &no_interference) {
        Err(PlanError::Infeasible(why)) => assert!(why.contains("model `vgg`") && why.contains("1 GPUs"), "{why}"),
        other => panic!("{other:?}"),
    }
    let plan = squishy(&p).unwrap();
    assert!(plan.gpus_used > 1, "SBP says how many GPUs it would take: {}", plan.gpus_used);
}

/// The interference model fitted to co-locations generated from known coefficients, with noise: it finds them,
/// predicts held-out pairs as closely as the noise allows, and refuses samples that cannot determine it.
#[test]
fn the_interference_model_is_fitted_by_least_squares() {
    use jig_planner::interference::{InterferenceModel, Sample, Utilisation};
    let truth = [0.10, 0.25, 0.05, 0.30, 0.01];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut samples: Vec<Sample> = (0..2500)
        .map(|_| {
            let (this, other) =
                (Utilisation { l2: uniform(), dram: uniform() }, Utilisation { l2: uniform(), dram: uniform() });
            let exact =
                truth[0] * this.l2 + truth[1] * other.l2 + truth[2] * this.dram + truth[3] * other.dram + truth[4];
            Sample { this, other, slowdown: exact + 0.02 * (uniform() - 0.5) }
        })
        .collect();
    // The paper's split: 1750 to fit, 750 to check.
    let held_out = samples.split_off(1750);
    let model = InterferenceModel::fit(&samples).unwrap();
    for (got, want) in model.coefficients.iter().zip(truth) {
        assert!((got - want).abs() < 0.005, "{:?} against {truth:?}", model.coefficients);
    }
    let mut errors: Vec<f64> = held_out.iter().map(|s| (model.predict(s.this, s.other) - s.slowdown).abs()).collect();
    errors.sort_by(f64::total_cmp);
    assert!(errors[errors.len() * 9 / 10] < 0.011, "90th percentile {}", errors[errors.len() * 9 / 10]);

    let alike = vec![held_out[0]; 10];
    let e = InterferenceModel::fit(&alike).unwrap_err().to_string();
    assert!(e.contains("do not determine the interference model"), "{e}");
}

/// With interference (a fifth slower beside any neighbour), Algorithm 1 plans more conservatively: it fits less
/// than without.
#[test]
fn interference_makes_the_schedule_more_conservative() {
    let models = vec![model("le", 100.0, 1.5, 0.01), model("res", 100.0, 4.0, 0.5), model("vgg", 50.0, 6.0, 0.9)];
    let p = problem(models, 2);
    let slowed = |_: usize, _: u32, neighbour: Option<(usize, u32)>| if neighbour.is_some() { 0.2 } else { 0.0 };
    let (plain, careful) = (max_scale(&p, |q| elastic(q, &no_interference)), max_scale(&p, |q| elastic(q, &slowed)));
    assert!(careful < plain && careful > 0.0, "with interference ×{careful:.2}, without ×{plain:.2}");
}

#[test]
fn measured_interference_is_read_fitted_and_its_gaps_named() {
    use jig_planner::interference::MeasuredInterference;
    let dir = tempfile::tempdir().unwrap();
    let util = dir.path().join("util.csv");
    let pairs = dir.path().join("pairs.csv");
    let u = [("a", 0.1, 0.05), ("b", 0.3, 0.2), ("c", 0.2, 0.4), ("d", 0.5, 0.1)];
    let rows: Vec<String> = u.iter().map(|(m, l2, dram)| format!("{m},8,{l2},{dram}")).collect();
    std::fs::write(&util, format!("model,batch,l2,dram\n{}\n", rows.join("\n"))).unwrap();
    // Slowdowns from a known model, over every ordered pair: the fit recovers it.
    let truth =
        |this: (f64, f64), other: (f64, f64)| 0.2 * this.0 + 0.5 * other.0 + 0.1 * this.1 + 0.3 * other.1 + 0.02;
    let mut lines = vec!["# measured\nmodel,neighbour,segment,batch,solo_ms,corun_ms,slowdown".to_string()];
    for (m, l2, dram) in u {
        for (n, l2n, dramn) in u {
            lines.push(format!("{m},{n},mps:0:50,8,1,1,{}", truth((l2, dram), (l2n, dramn))));
        }
    }
    std::fs::write(&pairs, lines.join("\n")).unwrap();
    let i = MeasuredInterference::read(&util, &pairs, &["b", "d"]).unwrap();
    assert_eq!(i.samples, 16);
    assert!(i.fit_error < 1e-9, "{i:?}");
    let expected = truth((0.3, 0.2), (0.5, 0.1));
    assert!((i.slowdown(0, Some((1, 50))) - expected).abs() < 1e-9, "{i:?}");
    assert_eq!(i.slowdown(0, None), 0.0, "a free other half does not slow it");
    // A model of the spec, or a pair's, without a utilisation row is named with the table to measure it into.
    let err = MeasuredInterference::read(&util, &pairs, &["b", "e"]).unwrap_err().to_string();
    assert!(err.contains("model `e`") && err.contains("util.csv"), "{err}");
    std::fs::write(&pairs, format!("{}\nx,a,mps:0:50,8,1,1,0.1\n", lines.join("\n"))).unwrap();
    let err = MeasuredInterference::read(&util, &pairs, &["a"]).unwrap_err().to_string();
    assert!(err.contains("model `x`") && err.contains("pairs.csv"), "{err}");
}

#[test]
fn gpulet_int_needs_measured_interference() {
    use jig_planner::gpulet::Scheduler;
    let p = problem(vec![model("a", 50.0, 4.0, 0.05)], 1);
    assert_eq!(Scheduler::all(&p), vec![Scheduler::Gpulet, Scheduler::Sbp, Scheduler::Ideal]);
    let many = GpuletProblem { gpus: jig_planner::gpulet::IDEAL_GPUS + 1, ..p.clone() };
    assert_eq!(Scheduler::all(&many), vec![Scheduler::Gpulet, Scheduler::Sbp], "the search is for a few GPUs");
    let err = Scheduler::GpuletInt.schedule(&p).unwrap_err().to_string();
    assert!(err.contains("utilisation") && err.contains("interference"), "{err}");
}

/// Every model's whole rate is served, no GPU is given out beyond itself, and every gpu-let's duty cycle holds
/// with its models slowed as `slowdown` (model, gpu-let, neighbour) says.
fn assert_holds(p: &GpuletProblem, plan: &GpuletPlan, slowdown: impl Fn(usize, &jig_planner::gpulet::Gpulet) -> f64) {
    assert!(plan.gpus_used <= p.gpus, "{plan:?}");
    for (i, m) in p.models.iter().enumerate() {
        let served: f64 = plan.gpulets.iter().flat_map(|g| &g.loads).filter(|l| l.model == i).map(|l| l.rate_rps).sum();
        assert!((served - m.rate_rps).abs() < 1e-6 * m.rate_rps, "{}: {served} of {}", m.name, m.rate_rps);
    }
    let mut halves: BTreeMap<u32, u32> = BTreeMap::new();
    for g in &plan.gpulets {
        *halves.entry(g.gpu).or_default() += g.size;
        let mut busy = 0.0;
        for l in &g.loads {
            let model = &p.models[l.model];
            assert!(
                f64::from(l.batch) >= l.rate_rps * g.duty_ms / 1e3 - 1e-9,
                "each cycle batches its arrivals: {g:?}"
            );
            let ms = model.latency(g.size, l.batch).unwrap() * (1.0 + slowdown(l.model, g));
            assert!(g.duty_ms + ms <= model.slo_ms + 1e-9, "{}'s SLO: {g:?}", model.name);
            busy += ms;
        }
        assert!(busy <= g.duty_ms + 1e-9, "the batches fit the cycle: {g:?}");
    }
    assert!(halves.values().all(|&total| total <= 100), "{halves:?}");
}

/// The paper's "ideal" scheduler searches every layout and assignment that Algorithm 1 picks one of: it fits at
/// least as much, with and without interference, its plans hold, and past its largest rate it names why.
#[test]
fn the_exhaustive_scheduler_fits_at_least_what_algorithm_1_does() {
    // The paper's mix, and a mix with models alike but for their names (as its game's LeNets), which the search
    // takes in one order only.
    let alike = (1..=4).map(|i| model(&format!("le{i}"), 300.0, 1.0, 0.05)).chain([model("res", 100.0, 4.0, 0.5)]);
    let alike: Vec<GpuletModel> = alike.collect();
    for p in [problem(paper_mix(), 3), problem(alike.clone(), 3)] {
        holds_past_algorithm_1(&p);
    }
    // On one GPU no multiple of the rates fits (two halves at most; no half runs the four LeNets' batches of one,
    // or one of them and the ResNet's, in a cycle within the LeNets' SLO): the largest multiple is 0.
    let two = problem(alike, 1);
    assert_eq!(max_scale(&two, |q| ideal(q, &no_interference)), 0.0);
    assert_eq!(max_scale(&two, |q| elastic(q, &no_interference)), 0.0);
}

fn holds_past_algorithm_1(p: &GpuletProblem) {
    let gpus = p.gpus;
    // A fifth slower beside any neighbour.
    let slowed = |_: usize, _: u32, neighbour: Option<(usize, u32)>| if neighbour.is_some() { 0.2 } else { 0.0 };
    for (what, intf) in
        [("without", &no_interference as &dyn Fn(usize, u32, Option<(usize, u32)>) -> f64), ("with", &slowed)]
    {
        let (best, greedy, nexus) =
            (max_scale(p, |q| ideal(q, intf)), max_scale(p, |q| elastic(q, intf)), max_scale(p, squishy));
        assert!(
            best > 0.0 && best >= 0.999 * greedy && best >= 0.999 * nexus,
            "{what} interference: ideal ×{best:.2}, gpulet ×{greedy:.2}, SBP ×{nexus:.2}"
        );
        let scaled = p.scaled(best);
        let plan = ideal(&scaled, intf).unwrap();
        assert_holds(&scaled, &plan, |m, g| {
            let beside = plan
                .gpulets
                .iter()
                .find(|o| o.gpu == g.gpu && !std::ptr::eq(*o, g))
                .map(|o| (o.loads[0].model, o.size));
            intf(m, g.size, beside)
        });
        match ideal(&p.scaled(best * 1.01), intf) {
            Err(PlanError::Infeasible(why)) => {
                assert!(why.contains(&format!("no way of cutting {gpus} GPUs")), "{why}")
            }
            other => panic!("{what} interference, past the largest rate: {other:?}"),
        }
    }
}
