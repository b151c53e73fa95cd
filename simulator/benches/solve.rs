//! Solve time of the full MILP (objective (14), A+S+T) for the paper's three applications at 28 and 840 slices,
//! at half the largest demand each serves there. Prints the median and max of 11 solves with HiGHS random
//! seeds 0–10 (branch-and-bound times vary severalfold between seeds), and each seed's time on stderr.
//! Then a re-plan, as the controller makes one when demand grows: the same problem at 10% more demand,
//! solved from scratch (cold) and from the first plan (warm, `solve_from`), medians of the same 11 seeds.
//!
//! `cargo bench -p jig-sim --bench solve`

use std::time::Instant;

use jig_planner::max_demand::max_demand;
use jig_planner::spec::Features;
use jig_planner::{SolveOptions, solve, solve_from};
use jig_sim::apps::PaperApp;

const RUNS: usize = 11;

fn main() {
    println!("{:<18} {:>7} {:>10} {:>9} {:>12} {:>12}", "app", "slices", "req/s", "types", "median s", "max s");
    // BENCH_APP=traffic and BENCH_SLICES=28 narrow the run; BENCH_GAP sets mip_rel_gap.
    let only_app = std::env::var("BENCH_APP").ok().and_then(|a| PaperApp::parse(&a).ok());
    let only_slices = std::env::var("BENCH_SLICES").ok().and_then(|s| s.parse::<u32>().ok());
    let mut options = SolveOptions::default();
    if let Some(gap) = std::env::var("BENCH_GAP").ok().and_then(|g| g.parse().ok()) {
        options.mip_rel_gap = gap;
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
                let cost = |s: &jig_planner::milp::Solved| {
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
