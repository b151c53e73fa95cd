//! `jig plan`: the command-line entry, for the `jig` binary to mount as a subcommand.
//!
//! ```text
//! jig plan SPEC.toml --profiles profiles.csv [--features A+S+T] [--demand RPS] [--slices N] [--json]
//! jig plan --app traffic [--slices 28] [--demand 100] [--features all|unopt|A+S|…] [--each]
//! jig plan --max-demand [--app traffic|social|ar|all] [--slices 840]
//! ```

use std::path::PathBuf;

use anyhow::{Context, bail};

use jig_planner::max_demand;
use jig_planner::milp::SolveOptions;
use jig_planner::model::{Features, PlanSpec};
use jig_planner::problem::Problem;
use jig_planner::profile;
use jig_sim::apps::PaperApp;

#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// Planning spec (TOML, or JSON when named `*.json`): graph, variants, segment types, SLOs, slices, demand.
    /// A bundle directory instead: planned as `jig deploy` plans it, on this machine's cores (or --slices),
    /// with its profiles.csv (or --profiles). A deployed app's name instead (no such file, no --profiles): its
    /// plan, from the gateway.
    pub spec: Option<PathBuf>,
    /// Profile table (the CSV `jig profile` writes); required with SPEC.
    #[arg(long)]
    pub profiles: Option<PathBuf>,
    /// One of the paper's applications (social, traffic, ar; `all` with --max-demand) instead of SPEC, with
    /// analytic profiles unless --profiles is given.
    #[arg(long)]
    pub app: Option<String>,
    /// Configuration space: any of A, S, T joined by `+`, `unopt` or `all`.
    #[arg(long, default_value = "all")]
    pub features: String,
    /// Plan in each of the eight A/S/T spaces.
    #[arg(long)]
    pub each: bool,
    /// Override the available slices (S_avail); --app defaults to 28, --max-demand to 840.
    #[arg(long)]
    pub slices: Option<u32>,
    /// Override the demand: recent rate in req/s (the 5% slack is added).
    #[arg(long)]
    pub demand: Option<f64>,
    /// Find by bisection the largest demand each of the eight spaces serves, beside the paper's Figure 3.
    #[arg(long)]
    pub max_demand: bool,
    /// Solver time limit per solve, seconds; the best plan found by then is returned.
    #[arg(long, default_value_t = 30.0)]
    pub time_limit: f64,
    /// Print plans as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Run `jig plan`; returns what to print.
pub fn run(args: &PlanArgs) -> anyhow::Result<String> {
    args.check()?;
    if args.max_demand {
        return run_max_demand(args);
    }
    let source = Source { spec: &args.spec, profiles: &args.profiles, app: &args.app, slices: args.slices };
    let problem = source.problem(args.demand, (28, 50.0), "give a spec file, --app NAME, or --max-demand")?;
    plan_problem(args, &problem)
}

impl PlanArgs {
    /// Refuse option values no plan can be made with.
    pub fn check(&self) -> anyhow::Result<()> {
        if !(self.time_limit.is_finite() && self.time_limit > 0.0) {
            bail!("--time-limit must be a positive number of seconds");
        }
        if let Some(d) = self.demand
            && !(d.is_finite() && d >= 0.0)
        {
            bail!("--demand must be a non-negative rate");
        }
        Ok(())
    }
}

/// Plan `problem` as `args` say (spaces, time limit, JSON); returns what to print.
pub fn plan_problem(args: &PlanArgs, problem: &Problem) -> anyhow::Result<String> {
    let spaces = if args.each { Features::combinations().to_vec() } else { vec![parse_features(&args.features)?] };
    let options = SolveOptions { time_limit_s: args.time_limit, ..SolveOptions::default() };
    let mut out = String::new();
    let mut plans = Vec::new();
    for f in spaces {
        match jig_planner::plan(problem, f, &options) {
            Ok(plan) if args.json => plans.push(serde_json::to_value(&plan)?),
            Ok(plan) => out.push_str(&plan.to_text()),
            Err(e) if args.each => out.push_str(&format!("[{f}] {e}\n")),
            Err(e) => return Err(e.into()),
        }
    }
    if args.json {
        out = serde_json::to_string_pretty(&plans)?;
    }
    Ok(out)
}

fn run_max_demand(args: &PlanArgs) -> anyhow::Result<String> {
    let apps = match args.app.as_deref() {
        None | Some("all") => PaperApp::ALL.to_vec(),
        Some(a) => vec![PaperApp::parse(a).map_err(anyhow::Error::msg)?],
    };
    let slices = args.slices.unwrap_or(840);
    let mut out = String::new();
    for app in apps {
        let problem = paper_problem(app, args.profiles.as_ref(), slices, 1.0)?;
        let (_, table) = max_demand::table(&problem, 0.01, args.time_limit)?;
        out.push_str(&table);
        out.push('\n');
    }
    Ok(out)
}

fn parse_features(s: &str) -> anyhow::Result<Features> {
    Features::parse(s).map_err(anyhow::Error::msg)
}

fn load_problem(spec: &PlanSpec, profiles: &PathBuf) -> anyhow::Result<Problem> {
    let text = std::fs::read_to_string(profiles).with_context(|| format!("cannot read {}", profiles.display()))?;
    let rows = profile::from_csv(&text).map_err(|e| anyhow::anyhow!("{}: {e}", profiles.display()))?;
    let devices: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.device.as_str()).collect();
    let source = format!("measured, {} ({})", profiles.display(), devices.into_iter().collect::<Vec<_>>().join(", "));
    Ok(Problem::new(spec, &rows, &source)?)
}

/// Where `jig plan` and `jig simulate` take their problem from: a spec file with its profile table, or one of
/// the paper's applications.
struct Source<'a> {
    spec: &'a Option<PathBuf>,
    profiles: &'a Option<PathBuf>,
    app: &'a Option<String>,
    slices: Option<u32>,
}

impl Source<'_> {
    /// The problem, with `demand` (req/s) overriding the spec's windows. A paper app is set up at --slices and
    /// `demand`, each defaulting to its half of `app_defaults`. `missing` says what to give when there is neither.
    fn problem(&self, demand: Option<f64>, app_defaults: (u32, f64), missing: &str) -> anyhow::Result<Problem> {
        match (self.spec, self.app) {
            (Some(_), Some(_)) => bail!("give either a spec file or --app, not both"),
            (Some(path), None) => {
                let mut spec = PlanSpec::from_file(path)?;
                if let Some(d) = demand {
                    spec.demand.windows = vec![d];
                }
                if let Some(s) = self.slices {
                    spec.resources.slices = s;
                }
                let profiles = self
                    .profiles
                    .as_ref()
                    .context("a spec needs --profiles FILE.csv (the table `jig profile` writes)")?;
                load_problem(&spec, profiles)
            }
            (None, Some(app)) => {
                let app = PaperApp::parse(app).map_err(anyhow::Error::msg)?;
                let (slices, rate) = app_defaults;
                paper_problem(app, self.profiles.as_ref(), self.slices.unwrap_or(slices), demand.unwrap_or(rate))
            }
            (None, None) => bail!("{missing}"),
        }
    }
}

/// A paper app at `slices` and `demand`, with measured profiles when --profiles is given.
fn paper_problem(app: PaperApp, profiles: Option<&PathBuf>, slices: u32, demand: f64) -> anyhow::Result<Problem> {
    match profiles {
        Some(path) => load_problem(&app.spec(slices, demand), path),
        None => Ok(app.problem(slices, demand)?),
    }
}

/// `jig simulate`: the discrete-event simulation of `jig_sim::simulate`.
///
/// ```text
/// jig simulate --app traffic [--slices 840] [--features all] [--compare] [--trace day.csv | --bins 288]
///              [--peak RPS] [--sample 20000] [--seed 1] [--csv out.csv] [--plot out.svg] [--json]
/// jig simulate SPEC.toml --profiles profiles.csv --trace day.csv [...]
/// jig simulate BUNDLE_DIR --trace day.csv [--demand RPS]   (mounted by the `jig` binary)
/// ```
#[derive(Debug, Clone, clap::Args)]
pub struct SimulateArgs {
    /// Planning spec (as for `jig plan`), or a bundle directory with its `profiles.csv` (planned as `jig deploy`
    /// plans it, on this machine's cores or --slices); or --app.
    pub spec: Option<PathBuf>,
    /// Profile table for SPEC (or measured profiles for --app).
    #[arg(long)]
    pub profiles: Option<PathBuf>,
    /// One of the paper's applications: social, traffic or ar.
    #[arg(long)]
    pub app: Option<String>,
    /// Slices available (S_avail); 840 with --app (120 H100s), the spec's otherwise.
    #[arg(long)]
    pub slices: Option<u32>,
    /// Configuration space: any of A, S, T joined by `+`, `unopt` or `all`.
    #[arg(long, default_value = "all")]
    pub features: String,
    /// Simulate A+S+T, S+T, A+T and A+S on the same trace (the paper's Figure 4).
    #[arg(long)]
    pub compare: bool,
    /// Demand trace (CSV `start_s,rps`, as `jig trace` writes); a generated day when absent.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Bins of the generated day.
    #[arg(long, default_value_t = 288)]
    pub bins: usize,
    /// Scale the trace so its busiest bin has this rate; by default, the largest demand A+S+T serves on the
    /// slices, less the controller's 5% slack (a generated day only, or a given trace when set).
    #[arg(long)]
    pub peak: Option<f64>,
    /// Time each task spends on a request besides its model (glue, HTTP), ms; the profile tables measure only
    /// the models. On CPU segments it also holds the instance, whose cores the glue shares.
    #[arg(long, default_value_t = 0.0)]
    pub overhead_ms: f64,
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
}

/// Run `jig simulate` on a spec or --app; returns what to print.
pub fn simulate(args: &SimulateArgs) -> anyhow::Result<String> {
    let source = Source { spec: &args.spec, profiles: &args.profiles, app: &args.app, slices: args.slices };
    // The plan's demand comes from the trace (or --demand), not the problem's.
    let problem = source.problem(None, (840, 1.0), "give a spec file or --app NAME")?;
    simulate_problem(args, &problem)
}

/// Run `jig simulate` on `problem` (from a spec, --app, or a bundle).
pub fn simulate_problem(args: &SimulateArgs, problem: &Problem) -> anyhow::Result<String> {
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
        vec![parse_features(&args.features)?]
    };
    let solve = SolveOptions { time_limit_s: args.time_limit, mip_rel_gap: 0.01, ..SolveOptions::default() };
    let servable = || -> anyhow::Result<f64> {
        let max = max_demand::max_demand(problem, Features::ALL, 0.01, args.time_limit)?.demand_rps;
        Ok(max / (1.0 + jig_planner::model::DemandSpec::DEFAULT_SLACK))
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
    let mut runs = Vec::new();
    for features in spaces {
        eprintln!("jig simulate: {} in {features}, {} bins …", problem.app, trace.rates.len());
        let options = SimOptions {
            features,
            solve,
            sample_requests: args.sample,
            overhead_ms: args.overhead_ms,
            fixed_demand: args.demand.map(|d| d * (1.0 + jig_planner::model::DemandSpec::DEFAULT_SLACK)),
            seed: args.seed,
            ..SimOptions::default()
        };
        runs.push(simulate(problem, &trace, &options)?);
    }
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
    Ok(jig_sim::simulate::summary(&runs, &trace))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{PlanArgs, run};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: PlanArgs,
    }

    fn cli(args: &[&str]) -> anyhow::Result<String> {
        run(&Cli::try_parse_from(std::iter::once("plan").chain(args.iter().copied()))?.args)
    }

    #[test]
    fn the_cli_plans_an_app_and_rejects_nonsense() {
        let out = cli(&["--app", "ar", "--demand", "20", "--features", "A+S+T"]).unwrap();
        assert!(out.contains("plan for `ar-assistant` [A+S+T]") && out.contains("placement:"), "{out}");
        let json = cli(&["--app", "social", "--demand", "20", "--json"]).unwrap();
        assert!(json.trim_start().starts_with('['), "{json}");
        let each = cli(&["--app", "traffic", "--demand", "20", "--each"]).unwrap();
        assert!(each.contains("[Unopt]") || each.contains("plan for `traffic-analysis` [Unopt]"), "{each}");
        assert!(cli(&["--app", "nope"]).unwrap_err().to_string().contains("unknown app"));
        assert!(cli(&["--app", "ar", "--features", "X"]).unwrap_err().to_string().contains("unknown feature"));
        assert!(cli(&[]).is_err());
    }

    /// `cargo test -p jig --release --bin jig -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn max_demand_table() {
        println!("{}", cli(&["--max-demand", "--app", "all"]).unwrap());
    }
}
