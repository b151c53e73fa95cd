//! Solve time of the full MILP (objective (14), A+S+T) for the paper's three applications at 28 and 840 slices,
//! at half the largest demand each serves there. Prints the median and max of 11 solves with HiGHS random
//! seeds 0–10 (branch-and-bound times vary severalfold between seeds), and each seed's time on stderr.
//! Then a re-plan, as the controller makes one when demand grows: the same problem at 10% more demand,
//! solved from scratch (cold) and from the first plan (warm, `solve_from`), medians of the same 11 seeds.
//!
//! `BENCH_APP=compass` runs Compass instead: against exhaustive search (`jig_planner::exhaustive::compass`) on
//! the sign reader's three query classes (`docs/evaluation/compass/sign-reader.toml`, measured profiles) with one
//! type per variant (`cpu:1`, batch 1), where enumeration ends; the paper's AR assistant on MPS shares of H100s
//! (25/50/100%, batches 1, 4, 16, analytic profiles) with three query classes, together against each alone on
//! 1–4 GPUs and with GPUs to spare (`BENCH_APP=compass-ar` for this part alone); and the sign reader's classes
//! on 6, 8 and 12 cores re-planned at 10% more demand and with one class's latency SLO 10% looser, cold and from
//! the first plan.
//!
//! `BENCH_APP=ppipe` runs PPipe's program (`jig_planner::ppipe`) at the paper's simulated cluster size (HC-L:
//! 25 fast and 75 slow GPUs, shares of 1, 1/2, 1/3 and 1/4, batches 1–16, 10 blocks, up to three partitions)
//! for PPipe, NP and DART-r, on a *synthetic* block profile (the slow class 1.5× slower on the first block and
//! more on each later one, as PPipe §2 describes P4 against L4): the solver's time and the plans' throughput,
//! medians over HiGHS seeds 0–4; then each plan run by PPipe's data plane (`jig_sim::ppipe`, 10 s of Poisson
//! arrivals): the largest load factor it serves with 99% of requests within the SLO. It measures the solver and
//! exercises the simulation; it reproduces nothing.
//!
//! `BENCH_APP=gpulet` runs gpu-lets (`jig_planner::gpulet`) against Nexus's squishy bin packing on the paper's
//! three request scenarios (Table 5: equal, long-only, short-skew) and its game application on 4 GPUs: the largest multiple of the rates
//! each schedules (the paper's maximum schedulable throughput), with the analytic model's H100 latencies on MPS
//! shares of 20–100% (fitted to measured bare ONNX Runtime, `simulator/src/analytic.rs`) for the paper's models
//! or their nearest measured family, without interference.
//!
//! `cargo bench -p jig-sim --bench solve`

use std::time::Instant;

use jig_planner::Problem;
use jig_planner::max_demand::max_demand;
use jig_planner::spec::{Features, PlanSpec};
use jig_planner::{SolveOptions, solve, solve_from};
use jig_sim::apps::PaperApp;

const RUNS: usize = 11;

fn main() {
    println!("{:<18} {:>7} {:>10} {:>9} {:>12} {:>12}", "app", "slices", "req/s", "types", "median s", "max s");
    // BENCH_APP=traffic and BENCH_SLICES=28 narrow the run; BENCH_GAP sets mip_rel_gap.
    let app_named = std::env::var("BENCH_APP").ok();
    let only_app = app_named.as_deref().and_then(|a| PaperApp::parse(a).ok());
    let only_slices = std::env::var("BENCH_SLICES").ok().and_then(|s| s.parse::<u32>().ok());
    let mut options = SolveOptions::default();
    if let Some(gap) = std::env::var("BENCH_GAP").ok().and_then(|g| g.parse().ok()) {
        options.mip_rel_gap = gap;
    }
    match app_named.as_deref() {
        Some("compass") => return compass(options),
        Some("compass-ar") => return compass_ar(options),
        Some("ppipe") => return ppipe(options),
        Some("gpulet") => return gpulet(),
        _ => {}
    }
    for app in PaperApp::ALL.into_iter().filter(|a| only_app.is_none_or(|o| o == *a)) {
        for slices in [28, 840].into_iter().filter(|s| only_slices.is_none_or(|o| o == *s)) {
            let base = app.problem(slices, 1.0).expect("paper app");
            let max = max_demand(&base, Features::ALL, 0.01, 30.0).expect("bisection").demand_rps;
            let problem = base.clone().with_demand(0.5 * max, slices);
            let mut times = Vec::with_capacity(RUNS);
            let mut types = 0;
            for seed in 0..RUNS as u32 {
                let options = SolveOptions { random_seed: seed, ..options };
                let started = Instant::now();
                let solved = solve(&problem, Features::ALL, &options).expect("feasible at half the max");
                times.push(started.elapsed().as_secs_f64());
                types = solved.instance_types;
            }
            let by_seed: Vec<String> = times.iter().map(|t| format!("{t:.2}")).collect();
            eprintln!("{} at {slices} slices, seconds by seed: {}", app.name(), by_seed.join(" "));
            times.sort_by(f64::total_cmp);
            println!(
                "{:<18} {:>7} {:>10.1} {:>9} {:>12.4} {:>12.4}",
                app.name(),
                slices,
                problem.demand_rps,
                types,
                times[RUNS / 2],
                times[RUNS - 1]
            );
            let first = solve(&problem, Features::ALL, &options).expect("feasible at half the max").assignments;
            let grown = base.with_demand(0.55 * max, slices);
            let (mut cold, mut warm) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
            for seed in 0..RUNS as u32 {
                let options = SolveOptions { random_seed: seed, ..options };
                let started = Instant::now();
                let from_scratch = solve(&grown, Features::ALL, &options).expect("feasible at 55% of the max");
                cold.push(started.elapsed().as_secs_f64());
                let started = Instant::now();
                let started_from = solve_from(&grown, Features::ALL, &options, &first).expect("feasible");
                warm.push(started.elapsed().as_secs_f64());
                let cost = |s: &jig_planner::solution::Solved| {
                    s.assignments.iter().map(|a| a.instances * grown.segments[a.segment].slices).sum::<u32>()
                };
                eprintln!(
                    "{} at {slices} slices, re-plan seed {seed}: cold {:.3} s ({} slices), warm {:.3} s ({} slices)",
                    app.name(),
                    cold[cold.len() - 1],
                    cost(&from_scratch),
                    warm[warm.len() - 1],
                    cost(&started_from)
                );
            }
            cold.sort_by(f64::total_cmp);
            warm.sort_by(f64::total_cmp);
            println!(
                "{:<18} {:>7} {:>10.1}   re-plan +10%: cold median {:.4} s, warm median {:.4} s (max {:.4})",
                app.name(),
                slices,
                grown.demand_rps,
                cold[RUNS / 2],
                warm[RUNS / 2],
                warm[RUNS - 1]
            );
        }
    }
}

/// gpu-lets against SBP on the paper's three scenarios (module docs).
fn gpulet() {
    use jig_planner::gpulet::{GpuletModel, GpuletProblem, elastic, max_scale, no_interference, squishy};
    use jig_planner::spec::SegmentKind;
    // The paper's five models (Table 4), each as the nearest family measured on the H100: LeNet as ResNet-18
    // (no smaller model was measured), GoogLeNet as EfficientNet-B0, SSD-MobileNet as YOLOv5s.
    let stand_ins =
        [("le", "resnet18"), ("goo", "efficientnet-b0"), ("res", "resnet50"), ("ssd", "yolov5s"), ("vgg", "vgg16")];
    let model = |(name, family): (&str, &str), rate: f64| {
        let cost = jig_sim::apps::model_cost(family).expect("a measured family");
        let mut latency_ms = std::collections::BTreeMap::new();
        for size in [20u32, 40, 50, 60, 80, 100] {
            for b in [1u32, 2, 4, 8, 16, 32] {
                if let Some((ms, _)) = cost.predict(SegmentKind::Mps { percent: size as u8, processes: 1 }, b) {
                    latency_ms.insert((size, b), ms);
                }
            }
        }
        // The paper's SLO: twice the model's latency on the whole GPU at batch 32.
        let slo_ms = 2.0 * latency_ms[&(100, 32)];
        GpuletModel { name: format!("{name} ({family})"), rate_rps: rate, slo_ms, latency_ms }
    };
    let mut scenarios: Vec<(&str, Vec<GpuletModel>)> = [
        ("equal", [50.0, 50.0, 50.0, 50.0, 50.0]),
        ("long-only", [0.0, 0.0, 100.0, 100.0, 100.0]),
        ("short-skew", [100.0, 100.0, 100.0, 50.0, 50.0]),
    ]
    .into_iter()
    .map(|(name, rates)| {
        (name, stand_ins.iter().zip(rates).filter(|(_, r)| *r > 0.0).map(|(&m, r)| model(m, r)).collect())
    })
    .collect();
    // The game application: six digit recognisers and an image recogniser on every frame, in parallel, all held
    // to the application's SLO, twice its longest model's latency (the paper's rule).
    let mut game: Vec<GpuletModel> = (1..=6).map(|_| model(("le", "resnet18"), 10.0)).collect();
    for (i, m) in game.iter_mut().enumerate() {
        m.name = format!("le{} (resnet18)", i + 1);
    }
    game.push(model(("res", "resnet50"), 10.0));
    let slo = game.iter().map(|m| m.slo_ms).fold(0.0, f64::max);
    game.iter_mut().for_each(|m| m.slo_ms = slo);
    scenarios.push(("game", game));
    println!("\ngpu-lets against squishy bin packing (SBP), 4 GPUs, analytic H100 latencies, no interference");
    println!("{:<12} {:>14} {:>14} {:>8}", "scenario", "SBP req/s", "gpulet req/s", "gain");
    let mut gains = Vec::new();
    for (name, models) in scenarios {
        let total: f64 = models.iter().map(|m| m.rate_rps).sum();
        let p = GpuletProblem { models, gpus: 4, splits: vec![20, 40, 50], interference: None };
        let (sbp, gpulet) = (max_scale(&p, squishy), max_scale(&p, |q| elastic(q, &no_interference)));
        gains.push(gpulet / sbp - 1.0);
        println!("{name:<12} {:>14.0} {:>14.0} {:>7.1}%", sbp * total, gpulet * total, (gpulet / sbp - 1.0) * 100.0);
    }
    let mean = gains.iter().sum::<f64>() / gains.len() as f64;
    println!("mean gain {:.1}% (the paper: +106.0% for gpulet over SBP, over these and the traffic app)", mean * 100.0);
}

/// PPipe's program and data plane at the paper's HC-L size (module docs).
fn ppipe(options: SolveOptions) {
    use jig_planner::ppipe::{BlockedModel, Class, PpipeProblem, Scheme, solve};
    let mut latency_ms = std::collections::HashMap::new();
    for k in 0..2usize {
        for v in [1u32, 2, 3, 4] {
            for b in [1u32, 2, 4, 8, 16] {
                for block in 0..10usize {
                    let base = if k == 0 { 1.0 } else { 1.5 + 0.5 * block as f64 };
                    latency_ms.insert((k, v, b, block), base * f64::from(v).powf(0.8) * f64::from(b).powf(0.7));
                }
            }
        }
    }
    let problem = PpipeProblem {
        model: BlockedModel { name: "synthetic".into(), blocks: 10, latency_ms, output_bytes: vec![200_000; 10] },
        classes: vec![
            Class { name: "fast".into(), units: 25, shares: vec![1, 2, 3, 4] },
            Class { name: "slow".into(), units: 75, shares: vec![1, 2, 3, 4] },
        ],
        slo_ms: 60.0,
        margin: 0.4,
        batches: vec![1, 2, 4, 8, 16],
        max_partitions: 3,
        bandwidth_bytes_per_s: 1.25e9,
        scheme: Scheme::PPipe,
    };
    println!("\nPPipe's program, HC-L size, synthetic block profile; medians over seeds 0-4");
    println!(
        "{:<8} {:>12} {:>10} {:>10} {:>12} {:>9} {:>11} {:>12}",
        "scheme", "req/s", "fast used", "slow used", "median s", "max s", "load 99%", "req/s at 99%"
    );
    for scheme in [Scheme::PPipe, Scheme::NoPartitioning, Scheme::DartR] {
        let p = PpipeProblem { scheme, ..problem.clone() };
        let plans: Vec<_> =
            (0..5).map(|seed| solve(&p, &SolveOptions { random_seed: seed, ..options }).expect("ppipe")).collect();
        let mut times: Vec<f64> = plans.iter().map(|plan| plan.seconds).collect();
        times.sort_by(f64::total_cmp);
        let plan = &plans[0];
        let factor = jig_sim::ppipe::max_load_factor(&p, plan, 10.0, 1);
        println!(
            "{:<8} {:>12.1} {:>10.2} {:>10.2} {:>12.2} {:>9.2} {:>11.2} {:>12.1}",
            format!("{scheme:?}").chars().take(8).collect::<String>(),
            plan.throughput_rps,
            plan.units_used[0],
            plan.units_used[1],
            times[2],
            times[4],
            factor,
            factor * plan.throughput_rps
        );
        for pipeline in &plan.pipelines {
            let parts: Vec<String> = pipeline
                .partitions
                .iter()
                .map(|q| format!("{} × 1/{} {} blocks {:?}", q.count, q.share, p.classes[q.class].name, q.blocks))
                .collect();
            eprintln!(
                "  {scheme:?}: batch {}, {:.1} req/s: {}",
                pipeline.batch,
                pipeline.throughput_rps,
                parts.join(" → ")
            );
        }
    }
}

/// Compass against exhaustive search, on the AR assistant, and its re-plans cold and warm (medians over the
/// same 11 seeds).
fn compass(options: SolveOptions) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let read = |path: &str| std::fs::read_to_string(format!("{root}/{path}")).expect(path);
    let spec = PlanSpec::from_toml(&read("docs/evaluation/compass/sign-reader.toml")).expect("spec");
    let rows = jig_planner::profile::from_csv(&read("examples/sign-reader/profiles.csv")).expect("profiles");
    let problem = |spec: &PlanSpec| Problem::new(spec, &rows, "measured").expect("problem");
    println!("compass against exhaustive search, one type per variant (cpu:1, batch 1): plan, seconds");
    for cores in [4, 6, 8, 10] {
        let mut at = spec.clone();
        at.resources.slices = cores;
        at.segments.retain(|s| s.name == "cpu:1");
        let one: Vec<_> = rows.iter().filter(|r| r.segment == "cpu:1" && r.batch == 1).cloned().collect();
        let small = Problem::new(&at, &one, "measured").expect("problem");
        let started = Instant::now();
        let planned = solve(&small, Features::ALL, &options).expect("compass");
        let compass_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let best = jig_planner::exhaustive::compass(&small, 10_000_000).expect("enumerated");
        let exhaustive_s = started.elapsed().as_secs_f64();
        let served: f64 = planned.classes.iter().map(|c| c.served_rps).sum();
        let used: u32 = planned.assignments.iter().map(|a| a.instances).sum();
        println!(
            "{cores:>3} cores: compass {served:.2} req/s on {used} cores in {compass_s:.3} s; exhaustive {:.2} req/s \
             on {} cores in {exhaustive_s:.2} s ({} count vectors): {:.0}x faster",
            best.goodput_rps,
            best.slices,
            best.plans,
            exhaustive_s / compass_s
        );
    }
    compass_ar(options);
    println!("compass re-plans of the sign reader's classes: median s over {RUNS} seeds (goodput req/s, cores)");
    for cores in [6, 8, 12] {
        let mut at = spec.clone();
        at.resources.slices = cores;
        let first = solve(&problem(&at), Features::ALL, &options).expect("first plan").assignments;
        let mut grown = at.clone();
        grown.demand.windows = vec![1.1 * at.demand.windows[0]];
        let mut looser = at.clone();
        looser.app.classes[0].slo_latency_ms *= 1.1;
        for (change, changed) in [("demand +10%", grown), ("SLO +10%", looser)] {
            let changed = problem(&changed);
            let (mut cold, mut warm) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
            let mut outcome = String::new();
            for seed in 0..RUNS as u32 {
                let options = SolveOptions { random_seed: seed, ..options };
                let started = Instant::now();
                let a = solve(&changed, Features::ALL, &options).expect("cold");
                cold.push(started.elapsed().as_secs_f64());
                let started = Instant::now();
                let b = solve_from(&changed, Features::ALL, &options, &first).expect("warm");
                warm.push(started.elapsed().as_secs_f64());
                let summary = |s: &jig_planner::solution::Solved| {
                    let served: f64 = s.classes.iter().map(|c| c.served_rps).sum();
                    let cores: u32 =
                        s.assignments.iter().map(|a| a.instances * changed.segments[a.segment].slices).sum();
                    format!("{served:.1} req/s, {cores} cores")
                };
                outcome = format!("cold {}, warm {}", summary(&a), summary(&b));
                eprintln!(
                    "compass at {cores} cores, {change}, seed {seed}: cold {:.3} s, warm {:.3} s; {outcome}",
                    cold[cold.len() - 1],
                    warm[warm.len() - 1]
                );
            }
            cold.sort_by(f64::total_cmp);
            warm.sort_by(f64::total_cmp);
            println!(
                "{:>3} cores, {change:<11}: cold {:.4} s, warm {:.4} s (max {:.4}); {outcome}",
                cores,
                cold[RUNS / 2],
                warm[RUNS / 2],
                warm[RUNS - 1]
            );
        }
    }
}

/// The AR assistant's three query classes on MPS shares: goodput together and alone, slices used, plan times.
fn compass_ar(options: SolveOptions) {
    use jig_planner::spec::{ClassSpec, CompassSpec};
    let classes = [("live", 600.0, 0.85, 0.3), ("standard", 1550.0, 0.7, 0.4), ("relaxed", 4000.0, 0.5, 0.3)];
    let problem = |slices: u32, demand: f64, alone: bool| {
        // Shares of a half and a quarter GPU and whole ones, batches 1, 4 and 16: 45 × 18 × 18 routes before the
        // SLOs (the paper's queries have 1K–23K plans each).
        let (mut spec, rows) = PaperApp::ArAssistant.on_mps(&[25, 50, 100], slices, demand);
        spec.batch_sizes = Some(vec![1, 4, 16]);
        spec.app.planner = jig_planner::Strategy::Compass;
        spec.app.classes = (classes.iter())
            .map(|&(name, slo_latency_ms, slo_accuracy, share)| ClassSpec {
                name: name.into(),
                slo_latency_ms,
                slo_accuracy,
                share,
            })
            .collect();
        spec.compass = CompassSpec { alone };
        Problem::new(&spec, &rows, "analytic").expect("problem")
    };
    let demand = max_demand(&problem(28, 1.0, false), Features::ALL, 0.01, 30.0).expect("bisection").demand_rps;
    println!(
        "compass on the AR assistant, MPS shares 25/50/100%, batches 1/4/16, classes live/standard/relaxed, {demand:.0} req/s"
    );
    println!(
        "{:>7} {:>18} {:>12} {:>7} {:>22} {:>22}",
        "slices", "together req/s", "alone req/s", "ratio", "slices together/alone", "seconds together/alone"
    );
    let only = std::env::var("BENCH_SLICES").ok().and_then(|s| s.parse::<u32>().ok());
    for slices in [7, 14, 21, 28, 56, 280].into_iter().filter(|s| only.is_none_or(|o| o == *s)) {
        let run = |alone| {
            let p = problem(slices, demand, alone);
            let started = Instant::now();
            let solved = solve(&p, Features::ALL, &options).expect("compass");
            let seconds = started.elapsed().as_secs_f64();
            let served: f64 = solved.classes.iter().map(|c| c.served_rps).sum();
            let used: u32 = solved.assignments.iter().map(|a| a.instances * p.segments[a.segment].slices).sum();
            (served, used, seconds)
        };
        let (together, alone) = (run(false), run(true));
        println!(
            "{slices:>7} {:>18.1} {:>12.1} {:>7.2} {:>22} {:>22}",
            together.0,
            alone.0,
            together.0 / alone.0.max(1e-9),
            format!("{} / {}", together.1, alone.1),
            format!("{:.3} / {:.3}", together.2, alone.2)
        );
    }
}
