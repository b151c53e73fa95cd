//! `jig simulate`: the discrete-event simulation of an app's plans under a day of demand (`jig_sim::simulate`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use jig_planner::SolveOptions;
use jig_planner::max_demand;
use jig_planner::problem::Problem;
use jig_planner::spec::Features;

use jig_app::deployment::{MIN_FACTOR_SAMPLES, Observations};
use jig_sim::simulate::Controller;

use crate::problem::{PlanningArgs, Source, parse_features, read_status};

/// Simulate an app's plans under a day of demand, re-planning every bin (the paper's Figure 4), with the
/// runtime's batching, early drops and routing on simulated time.
///
/// ```text
/// jig simulate --app traffic [--slices 28] [--features all] [--compare] [--trace day.csv | --bins 288]
///              [--peak RPS] [--sample 20000] [--seed 1] [--csv out.csv] [--plot out.svg] [--json]
/// jig simulate SPEC.toml --profiles profiles.csv --trace day.csv [...]
/// jig simulate BUNDLE_DIR --trace day.csv [--demand RPS | --replan-threshold 0.2] [--observed status.json]
///              [--arrivals requests.csv]                            (mounted by the `jig` binary)
/// jig simulate PPIPE_SPEC.toml [--seed 1]          PPipe, NP and DART-r: the load each serves at 99% in time
/// jig simulate GPULET_SPEC.toml [--seed 1]         gpu-lets and SBP: the rates each fits, its schedule served
/// jig simulate SPEC.toml --profiles profiles.csv --searches [--queries 30] [--seed 1] [--cores C]
///                                                   Compass's CAMO against Vulcan and VideoStorm, 5 s and 15 s
/// ```
#[derive(Debug, Clone, clap::Args)]
pub struct SimulateCommand {
    #[command(flatten)]
    pub planning: PlanningArgs,
    /// Simulate A+S+T, S+T, A+T and A+S on the same trace (the paper's Figure 4).
    #[arg(long)]
    pub compare: bool,
    /// Demand trace (CSV `start_s,rps`, as `jig trace` writes); a generated day when absent.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Replay these arrival times instead of drawing Poisson arrivals at each bin's rate: the `sent_s` column of a
    /// CSV, seconds from the trace's start, as `jig bench --trace … --csv` records the requests it sent. Each bin
    /// then runs whole, and a measured run and its simulation see the same requests. Needs --trace.
    #[arg(long, requires = "trace", conflicts_with = "peak")]
    pub arrivals: Option<PathBuf>,
    /// Bins of the generated day.
    #[arg(long, default_value_t = 288)]
    pub bins: usize,
    /// Scale the trace so its busiest bin has this rate; by default, the largest demand A+S+T serves on the
    /// slices, less the controller's 5% slack (a generated day only, or a given trace when set).
    #[arg(long)]
    pub peak: Option<f64>,
    /// Time each task spends on a request besides its model (glue, HTTP), ms; the profile tables measure only
    /// the models. It runs on a free CPU core, or, when every core is busy, slows the CPU instances running.
    #[arg(long, default_value_t = 0.0)]
    pub overhead_ms: f64,
    /// Time of each communication hop, ms: a request takes one into each task, and its deadline grows by the
    /// app's depth in hops, as the paper adds them to the SLO (§4.4); 10 with --app, 0 otherwise.
    #[arg(long)]
    pub hop_ms: Option<f64>,
    /// How long beyond its wait bound L̂ a request may wait at a task without being picked up before it is
    /// dropped as stale, ms: with --app the paper's (§4.4: 20, the AR assistant 40); otherwise the spec's
    /// `staleness_ms`, or the task's share of the SLO on its tightest path.
    #[arg(long)]
    pub staleness_ms: Option<f64>,
    /// Plan a bundle with what its deployed app observed: this file holds `jig status APP --json` (factors,
    /// glue times and batch latencies, used as the app's controller re-plans with them).
    #[arg(long)]
    pub observed: Option<PathBuf>,
    /// Re-plan only when the gateway's controller would, with this `replan_threshold` (the gateway's default
    /// is 0.2): when the predicted demand moves by more than this share of the planned one, or more than 1% of
    /// a bin's requests violate their SLO, and within a bin for a surge (the last 3 s over the plan by more
    /// than this share and than chance). With --observed, the trace starts where the deployed app's controller
    /// stood: its demand windows, and its plan's demand. By default every bin is re-planned (§4.2).
    #[arg(long, conflicts_with = "demand")]
    pub replan_threshold: Option<f64>,
    /// Root requests simulated per bin (more when ten latency SLOs of the bin hold more; fewer when the bin does).
    #[arg(long, default_value_t = 20_000)]
    pub sample: usize,
    /// Plan once for this demand (req/s; the 5% slack is added, as for a deploy) and keep that plan through
    /// the trace, instead of re-planning every bin.
    #[arg(long)]
    pub demand: Option<f64>,
    /// Seed of arrivals, latencies and the generated day.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Solver time limit per re-plan, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
    /// Write every bin as CSV (with a `features` column) to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write an SVG plot of slices, accuracy drop and violations per bin to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print the bins as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Node failures: the slices split evenly among this many nodes, one failing every --failure-every-s from
    /// then on and back when the next fails; a failure costs its bin the failed node's share of the running
    /// plan, and the bins after it are planned within the nodes up. The summary reports the violations of the
    /// bins a node was lost in.
    #[arg(long, value_name = "NODES")]
    pub node_failures: Option<u32>,
    /// With --node-failures, seconds between failures.
    #[arg(long, default_value_t = 3600.0, requires = "node_failures")]
    pub failure_every_s: f64,
    /// With a `[gpulet]` spec, gpu-lets' periodic re-scheduling instead (its §5 and Figure 14): 30 minutes of
    /// two waves of load (up to twice the spec's rates and back, then three times), re-scheduled every 20 s from
    /// an EWMA of the rates seen, beside the schedule for the spec's rates kept throughout.
    #[arg(long)]
    pub adapt: bool,
    /// With a `[gpulet]` spec, the paper's schedulability study instead (its Figure 15): every
    /// combination of these rates (req/s, comma-separated) over the spec's models, and how many of them each
    /// scheduler fits on the GPUs, beside the exhaustive `ideal` scheduler's.
    #[arg(long, value_delimiter = ',', num_args = 1.., conflicts_with = "adapt")]
    pub rate_levels: Option<Vec<f64>>,
    /// Compass's per-query searches against its baselines instead, on a linear pipeline's spec with --profiles
    /// (`jig_planner::query_search`): --queries seeded queries drawn around the spec's classes, each searched
    /// by Vulcan-style Bayesian optimisation, VideoStorm-style hill climbing and Compass's CAMO under 5 s and
    /// 15 s planning deadlines (simulated profiling time plus the search's measured CPU time), the compliant
    /// plans each found matched by Compass's greedy scheduler; prints per search and deadline the SLO goodput
    /// (req/s and queries admitted), planning time, time to the first compliant plan, plans profiled and the
    /// goodput ratios, beside CAMO on the baselines' profiler (the paper's "w/o SLO Profiler" ablation) and an
    /// oracle that knows every plan. --seed seeds the queries and the searches.
    #[arg(long, conflicts_with_all = ["adapt", "rate_levels", "compare"])]
    pub searches: bool,
    /// With --searches, how many queries.
    #[arg(long, default_value_t = 30, requires = "searches")]
    pub queries: usize,
    /// With --searches, the cores the scheduler matches the plans onto; the spec's slices and half of them
    /// (each a row of goodput) when absent.
    #[arg(long, requires = "searches")]
    pub cores: Option<u32>,
}

impl SimulateCommand {
    /// gpu-lets against SBP on a `[gpulet]` spec: the largest multiple of the rates each plans on the GPUs, the
    /// largest whose plan serves 99% of requests within their SLOs (30 s of Poisson arrivals, slowed as measured
    /// interference predicts when the spec has it: the paper's metric), and each one's plan for the spec's rates
    /// served: the share of requests that missed their SLO.
    fn simulate_gpulet(&self, spec: &std::path::Path) -> anyhow::Result<String> {
        use jig_planner::gpulet::{GpuletProblem, Scheduler, max_scale};
        use jig_sim::gpulet::{Served, serve_measured};
        use std::fmt::Write as _;
        let (problem, _) = GpuletProblem::from_spec_file(spec)?;
        let total: f64 = problem.models.iter().map(|m| m.rate_rps).sum();
        let mut out = format!("{} models, {:.1} req/s, on {} GPUs\n", problem.models.len(), total, problem.gpus);
        if let Some(i) = &problem.interference {
            let _ = writeln!(
                out,
                "interference: slowdown = {:.3}·l2 {:+.3}·l2' {:+.3}·dram {:+.3}·dram' {:+.3}, fitted to {} co-runs (mean \
                 error {:.1} points); every schedule is served with it",
                i.model.coefficients[0],
                i.model.coefficients[1],
                i.model.coefficients[2],
                i.model.coefficients[3],
                i.model.coefficients[4],
                i.samples,
                100.0 * i.fit_error
            );
        }
        let _ = writeln!(
            out,
            "{:<10} {:>14} {:>14} {:>13} {:>12}",
            "scheduler", "plans (req/s)", "serves (req/s)", "GPUs at rate", "violations"
        );
        for scheduler in Scheduler::all(&problem) {
            let fits = max_scale(&problem, |q| scheduler.schedule(q)) * total;
            let holds = jig_sim::gpulet::max_served_scale(&problem, |q| scheduler.schedule(q), 30.0, self.seed, 0.01);
            let served = match scheduler.schedule(&problem) {
                Ok(plan) if plan.gpus_used <= problem.gpus => {
                    let served = Served::total(&serve_measured(&problem, &plan, 30.0, self.seed));
                    (plan.gpus_used.to_string(), format!("{:.2}%", 100.0 * served.violation_rate()))
                }
                Ok(plan) => (format!("{} (too many)", plan.gpus_used), "-".into()),
                Err(_) => ("-".into(), "-".into()),
            };
            let _ = writeln!(
                out,
                "{:<10} {:>14.1} {:>14.1} {:>13} {:>12}",
                scheduler.name(),
                fits,
                holds * total,
                served.0,
                served.1
            );
        }
        Ok(out)
    }

    /// `--rate-levels` on a `[gpulet]` spec: how many of the rate combinations each scheduler fits, and where
    /// each differs from the exhaustive `ideal` scheduler.
    fn schedulability_gpulet(&self, spec: &std::path::Path, levels: &[f64]) -> anyhow::Result<String> {
        use jig_planner::gpulet::{GpuletProblem, Scheduler};
        use std::fmt::Write as _;
        if levels.iter().any(|l| !(l.is_finite() && *l >= 0.0)) {
            bail!("--rate-levels: each level is a rate in req/s, 0 or more: {levels:?}");
        }
        let (problem, _) = GpuletProblem::from_spec_file(spec)?;
        let count = (levels.len() as u64).checked_pow(problem.models.len() as u32).filter(|&n| n <= 100_000);
        let Some(count) = count else {
            bail!(
                "--rate-levels: {} levels over {} models are more than 100 000 scenarios; give fewer levels",
                levels.len(),
                problem.models.len()
            );
        };
        let schedulers = Scheduler::all(&problem);
        let Some(ideal) = schedulers.iter().position(|&s| s == Scheduler::Ideal) else {
            bail!(
                "--rate-levels compares with the exhaustive `ideal` scheduler, which searches at most {} GPUs; the spec \
                 has {}",
                jig_planner::gpulet::IDEAL_GPUS,
                problem.gpus
            );
        };
        let progress = crate::progress::Steps::new("scenarios", count);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let scenarios =
            jig_sim::gpulet::schedulability(&problem, levels, &schedulers, threads, &|| progress.advance(1));
        progress.finish();
        let levels_text: Vec<String> = levels.iter().map(|l| format!("{l}")).collect();
        let mut out = format!(
            "{} scenarios: each of the {} models at {} req/s (not all at 0), on {} GPUs\n",
            scenarios.len(),
            problem.models.len(),
            levels_text.join(", "),
            problem.gpus
        );
        let _ = writeln!(
            out,
            "{:<10} {:>12} {:>22} {:>22}",
            "scheduler", "schedulable", "ideal's, not this", "this, not ideal's"
        );
        for (i, scheduler) in schedulers.iter().enumerate() {
            let (mut fits, mut missed, mut beyond) = (0, 0, 0);
            for s in &scenarios {
                fits += u64::from(s.schedulable[i]);
                missed += u64::from(s.schedulable[ideal] && !s.schedulable[i]);
                beyond += u64::from(s.schedulable[i] && !s.schedulable[ideal]);
            }
            let _ = writeln!(out, "{:<10} {:>12} {:>22} {:>22}", scheduler.name(), fits, missed, beyond);
        }
        Ok(out)
    }

    /// `--adapt` on a `[gpulet]` spec: its scheduler re-scheduling every 20 s through two waves of load, per
    /// minute, beside the first schedule kept (an EWMA that never moves).
    fn adapt_gpulet(&self, spec: &std::path::Path) -> anyhow::Result<String> {
        use jig_planner::gpulet::GpuletProblem;
        use jig_sim::gpulet::{Period, adapt};
        use std::fmt::Write as _;
        let (problem, scheduler) = GpuletProblem::from_spec_file(spec)?;
        // The paper's Figure 14: a wave up to twice the rates and back over the first 600 s, a higher one (three
        // times) from 900 s to 1500 s.
        let wave = |t: f64| {
            let bump = |from: f64, to: f64, peak: f64| {
                if (from..to).contains(&t) {
                    (peak - 1.0) * (std::f64::consts::PI * (t - from) / (to - from)).sin()
                } else {
                    0.0
                }
            };
            1.0 + bump(0.0, 600.0, 2.0) + bump(900.0, 1500.0, 3.0)
        };
        let run = |alpha: f64| adapt(&problem, |q| scheduler.schedule(q), wave, 1800.0, 20.0, alpha, 1.3, self.seed);
        let (adaptive, fixed) = (run(0.7), run(0.0));
        let missed = |ps: &[Period]| {
            100.0 * ps.iter().map(|p| p.violated).sum::<u64>() as f64
                / ps.iter().map(|p| p.arrived).sum::<u64>().max(1) as f64
        };
        let mut out = format!(
            "{}: {} models re-scheduled every 20 s (EWMA 0.7 on the newest period, 30% headroom) through two waves of \
             load on {} GPUs\n{:>6} {:>10} {:>12} {:>11} {:>16}\n",
            scheduler.name(),
            problem.models.len(),
            problem.gpus,
            "minute",
            "req/s",
            "gpu-lets (%)",
            "violations",
            "fixed violations"
        );
        for (minute, (a, f)) in adaptive.chunks(3).zip(fixed.chunks(3)).enumerate() {
            let rate = a.iter().map(|p| p.arrived_rps).sum::<f64>() / a.len() as f64;
            let share = a.iter().map(|p| p.gpulet_sum).max().unwrap_or(0);
            let _ = writeln!(out, "{minute:>6} {rate:>10.1} {share:>12} {:>10.2}% {:>15.2}%", missed(a), missed(f));
        }
        let rescheduled = adaptive.iter().filter(|p| p.rescheduled).count();
        let _ = writeln!(
            out,
            "violations {:.2}% re-scheduled ({rescheduled} schedules), {:.2}% with the first schedule kept",
            missed(&adaptive),
            missed(&fixed)
        );
        Ok(out)
    }

    /// PPipe's comparison on a `[ppipe]` spec (§7.2): each scheme's plan run by PPipe's data plane under 30 s
    /// of Poisson arrivals, and the largest load it serves with 99% of requests in time, as a share of PPipe's
    /// plan (the paper's load factor) and in requests per second.
    fn simulate_ppipe(&self, spec: &std::path::Path) -> anyhow::Result<String> {
        use jig_planner::ppipe::{PpipeProblem, Scheme, solve};
        use std::fmt::Write as _;
        let problem = PpipeProblem::from_spec_file(spec)?;
        let options = SolveOptions { time_limit_s: self.time_limit, ..SolveOptions::default() };
        let mut out = format!(
            "model {}: the largest load served with 99% of requests within {:.0} ms (30 s of Poisson arrivals)\n\
             {:<8} {:>14} {:>14} {:>12}\n",
            problem.model.name, problem.slo_ms, "scheme", "planned req/s", "served req/s", "load factor"
        );
        let mut reference = None;
        for scheme in [Scheme::PPipe, Scheme::NoPartitioning, Scheme::DartR] {
            let p = PpipeProblem { scheme, ..problem.clone() };
            match solve(&p, &options) {
                Ok(plan) => {
                    let served = jig_sim::ppipe::max_load_factor(&p, &plan, 30.0, self.seed) * plan.throughput_rps;
                    let base = *reference.get_or_insert(plan.throughput_rps);
                    let _ = writeln!(
                        out,
                        "{:<8} {:>14.1} {:>14.1} {:>12.2}",
                        scheme.name(),
                        plan.throughput_rps,
                        served,
                        served / base
                    );
                }
                Err(e) => {
                    let _ = writeln!(out, "{:<8} {e}", scheme.name());
                }
            }
        }
        Ok(out)
    }

    /// `--searches`: Compass's CAMO against Vulcan and VideoStorm on the spec's pipeline (`query_search`).
    fn simulate_searches(&self) -> anyhow::Result<String> {
        use jig_planner::query_search::{DEADLINES_S, Settings, compare};
        let spec = self.planning.spec.as_deref().context("--searches needs a spec file (and --profiles FILE.csv)")?;
        let source = Source::resolve(Some(spec), None, self.planning.profiles.as_deref(), false, "give a spec file")?;
        if !matches!(source, Source::Spec { .. }) {
            bail!("--searches reads a planning spec file with --profiles, not {}", spec.display());
        }
        let problem = source.problem(self.planning.slices, None, (28, 1.0), None)?;
        let cores = match self.cores {
            Some(0) => bail!("--cores must be at least 1"),
            Some(c) => vec![f64::from(c)],
            None => vec![f64::from(problem.slices), f64::from(problem.slices.div_ceil(2))],
        };
        let settings = Settings { queries: self.queries, seed: self.seed, cores, deadlines_s: DEADLINES_S.to_vec() };
        let comparison = compare(&problem, &spec.display().to_string(), &settings)?;
        Ok(comparison.render())
    }

    /// Simulate and print the summary (or the bins as JSON).
    pub fn run(self) -> anyhow::Result<ExitCode> {
        if self.searches {
            print!("{}", self.simulate_searches()?);
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(spec) = self.planning.spec.as_deref().filter(|s| jig_planner::ppipe::PpipeProblem::is_spec(s)) {
            print!("{}", self.simulate_ppipe(spec)?);
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(spec) = self.planning.spec.as_deref().filter(|s| jig_planner::gpulet::GpuletProblem::is_spec(s)) {
            let out = match (&self.rate_levels, self.adapt) {
                (Some(levels), _) => self.schedulability_gpulet(spec, levels)?,
                (None, true) => self.adapt_gpulet(spec)?,
                (None, false) => self.simulate_gpulet(spec)?,
            };
            print!("{out}");
            return Ok(ExitCode::SUCCESS);
        }
        if self.adapt {
            bail!("--adapt re-schedules gpu-lets: give a spec file with a `[gpulet]` table");
        }
        if self.rate_levels.is_some() {
            bail!("--rate-levels is gpu-lets' schedulability study: give a spec file with a `[gpulet]` table");
        }
        let (target, app, profiles) =
            (self.planning.spec.as_deref(), self.planning.app.as_deref(), self.planning.profiles.as_deref());
        let source =
            Source::resolve(target, app, profiles, false, "give a spec file, a bundle directory or --app NAME")?;
        // The plan's demand comes from the trace (or --demand), not the problem's.
        let status = self.observed.as_deref().map(read_status).transpose()?;
        let observed = status.as_ref().map(Observations::from_status);
        let mut problem = source.problem(self.planning.slices, None, (28, 1.0), observed.as_ref())?;
        if let Some(planner) = self.planning.planner {
            problem.strategy = planner;
        }
        if let Some(staleness) = self.staleness_ms {
            if !(staleness.is_finite() && staleness > 0.0) {
                bail!("--staleness-ms must be a positive number of milliseconds");
            }
            problem.staleness_ms = Some(staleness);
        }
        // The paper adds ~10 ms per communication hop (§4.4); a bundle's --overhead-ms is measured instead.
        let hop_ms = self.hop_ms.unwrap_or(if matches!(source, Source::Paper { .. }) { 10.0 } else { 0.0 });
        if !(hop_ms.is_finite() && hop_ms >= 0.0) {
            bail!("--hop-ms must be a non-negative number of milliseconds");
        }
        let controller = match self.replan_threshold {
            Some(threshold) if !(threshold.is_finite() && threshold >= 0.0) => {
                bail!("--replan-threshold must be a non-negative share, such as 0.2")
            }
            Some(threshold) => Some(Controller {
                replan: jig_planner::spec::Replan { threshold },
                windows: status.as_ref().map(|s| s.demand_windows.clone()).unwrap_or_default(),
                planned_for: status.as_ref().and_then(|s| s.deployment.demand_rps),
            }),
            None => None,
        };
        // Each model task's observed glue, which the simulator runs beside its model as deployments do.
        let glue_ms: Vec<f64> = problem
            .tasks
            .iter()
            .map(|task| {
                observed
                    .iter()
                    .flat_map(|o| &o.glue)
                    .find(|g| g.task == task.name && g.invocations >= MIN_FACTOR_SAMPLES)
                    .map_or(0.0, |g| g.mean_ms.max(0.0))
            })
            .collect();
        print!("{}", simulate_problem(&self, &problem, controller, (hop_ms, glue_ms))?);
        Ok(ExitCode::SUCCESS)
    }
}

/// Run `jig simulate` on `problem` (from a spec, --app, or a bundle).
fn simulate_problem(
    args: &SimulateCommand,
    problem: &Problem,
    controller: Option<Controller>,
    (hop_ms, glue_ms): (f64, Vec<f64>),
) -> anyhow::Result<String> {
    use jig_sim::simulate::{SimOptions, simulate};
    use jig_sim::trace::Trace;

    if !(args.time_limit.is_finite() && args.time_limit > 0.0) || args.sample == 0 {
        bail!("--time-limit must be a positive number of seconds and --sample at least 1");
    }
    if !(args.overhead_ms.is_finite() && args.overhead_ms >= 0.0) {
        bail!("--overhead-ms must be a non-negative number of milliseconds");
    }
    if args.peak.is_some_and(|p| !(p.is_finite() && p > 0.0))
        || args.demand.is_some_and(|d| !(d.is_finite() && d > 0.0))
    {
        bail!("--peak and --demand must be positive rates");
    }
    let spaces = if args.compare {
        ["all", "S+T", "A+T", "A+S"].iter().map(|f| parse_features(f)).collect::<anyhow::Result<Vec<_>>>()?
    } else {
        vec![parse_features(&args.planning.features)?]
    };
    let spaces: Vec<Features> = spaces
        .into_iter()
        .map(|f| f.with_uninformed(args.planning.uninformed).with_weighting(args.planning.weighting))
        .collect();
    let solve = SolveOptions { time_limit_s: args.time_limit, mip_rel_gap: 0.01, ..SolveOptions::default() };
    let servable = || -> anyhow::Result<f64> {
        let max = max_demand::max_demand(problem, Features::ALL, 0.01, args.time_limit)?.demand_rps;
        Ok(max / (1.0 + jig_planner::spec::DemandSpec::DEFAULT_SLACK))
    };
    let trace = match &args.trace {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let trace = Trace::from_csv(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            match args.peak {
                Some(peak) if trace.peak() > 0.0 => {
                    let scale = peak / trace.peak();
                    Trace { rates: trace.rates.iter().map(|r| r * scale).collect(), ..trace }
                }
                _ => trace,
            }
        }
        None => {
            if args.bins == 0 || args.bins > 86_400 {
                bail!("--bins must be between 1 and 86400");
            }
            let peak = match args.peak {
                Some(p) => p,
                None => servable()?,
            };
            Trace::diurnal(peak, args.bins, args.seed)
        }
    };
    let arrivals = match &args.arrivals {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            Some(jig_sim::trace::arrivals_from_csv(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    // The spaces are independent: each simulates on its own thread (the bins of one space follow each other,
    // each planned from what the last one observed).
    let simulate_space = |features: Features| {
        // JigsawServe's switches mean nothing to the other strategies.
        let space = match problem.strategy {
            jig_planner::Strategy::Jigsaw => format!("{features} (jigsaw)"),
            other => other.to_string(),
        };
        eprintln!("jig simulate: {} in {space}, {} bins …", problem.app, trace.rates.len());
        let options = SimOptions {
            features,
            solve,
            sample_requests: args.sample,
            overhead_ms: args.overhead_ms,
            glue_ms: glue_ms.clone(),
            hop_ms,
            fixed_demand: args.demand.map(|d| d * (1.0 + jig_planner::spec::DemandSpec::DEFAULT_SLACK)),
            controller: controller.clone(),
            seed: args.seed,
            arrivals: arrivals.clone(),
            node_failures: args
                .node_failures
                .map(|nodes| jig_sim::simulate::NodeFailures { nodes, every_s: args.failure_every_s }),
            ..SimOptions::default()
        };
        simulate(problem, &trace, &options)
    };
    let runs: Vec<_> = std::thread::scope(|scope| {
        let threads: Vec<_> = spaces.into_iter().map(|f| scope.spawn(move || simulate_space(f))).collect();
        threads.into_iter().map(|t| t.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect::<Result<_, _>>()
    })?;
    if let Some(path) = &args.csv {
        let mut csv = String::new();
        for (i, run) in runs.iter().enumerate() {
            for (j, line) in run.to_csv().lines().enumerate() {
                if j == 0 && i == 0 {
                    csv.push_str(&format!("features,{line}\n"));
                } else if j > 0 {
                    csv.push_str(&format!("{},{line}\n", run.features));
                }
            }
        }
        std::fs::write(path, csv).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, jig_sim::simulate::svg(&runs, &trace))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        return Ok(serde_json::to_string_pretty(&runs)?);
    }
    let mut out = jig_sim::simulate::summary(&runs, &trace);
    if let Some(first) = runs.first() {
        out.push('\n');
        out.push_str(&jig_sim::simulate::configurations(first));
    }
    Ok(out)
}
