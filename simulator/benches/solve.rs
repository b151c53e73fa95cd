//! Solve time of the full MILP (objective (14), A+S+T) for the paper's three applications at 28 and 840 slices,
//! at half the largest demand each serves there. Prints the median and max of 11 solves with HiGHS random
//! seeds 0–10 (branch-and-bound times vary severalfold between seeds), and each seed's time on stderr.
//!
//! `cargo bench -p jig-sim --bench solve`

use std::time::Instant;

use jig_planner::max_demand::max_demand;
use jig_planner::spec::Features;
use jig_planner::{SolveOptions, solve};
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
            let problem = base.with_demand(0.5 * max, slices);
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
        }
    }
}
