//! `jig plan`: the command-line entry, for the `jig` binary to mount as a subcommand.
//!
//! ```text
//! jig plan SPEC.toml --profiles profiles.csv [--features A+S+T] [--demand RPS] [--slices N] [--json]
//! jig plan --app traffic [--slices 28] [--demand 100] [--features all|unopt|A+S|…] [--each]
//! jig plan --max-demand [--app traffic|social|ar|all] [--slices 840]
//! ```

use std::path::PathBuf;

use anyhow::{Context, bail};

use crate::apps::PaperApp;
use crate::max_demand;
use crate::milp::SolveOptions;
use crate::model::{Features, PlanSpec};
use crate::problem::Problem;
use crate::profile;

#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// Planning spec (TOML, or JSON when named `*.json`): graph, variants, segment types, SLOs, slices, demand.
    /// A deployed app's name instead (no such file, no --profiles): its plan, from the gateway.
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
    if !(args.time_limit.is_finite() && args.time_limit > 0.0) {
        bail!("--time-limit must be a positive number of seconds");
    }
    if let Some(d) = args.demand
        && !(d.is_finite() && d >= 0.0)
    {
        bail!("--demand must be a non-negative rate");
    }
    if args.max_demand {
        return run_max_demand(args);
    }
    let problem = match (&args.spec, &args.app) {
        (Some(_), Some(_)) => bail!("give either a spec file or --app, not both"),
        (Some(path), None) => {
            let mut spec = PlanSpec::from_file(path)?;
            if let Some(d) = args.demand {
                spec.demand.windows = vec![d];
            }
            if let Some(s) = args.slices {
                spec.resources.slices = s;
            }
            let profiles =
                args.profiles.as_ref().context("a spec needs --profiles FILE.csv (the table `jig profile` writes)")?;
            load_problem(&spec, profiles)?
        }
        (None, Some(app)) => {
            let app = PaperApp::parse(app).map_err(anyhow::Error::msg)?;
            paper_problem(app, args, args.slices.unwrap_or(28), args.demand.unwrap_or(50.0))?
        }
        (None, None) => bail!("give a spec file, --app NAME, or --max-demand"),
    };
    let spaces = if args.each { Features::combinations().to_vec() } else { vec![parse_features(&args.features)?] };
    let options = SolveOptions { time_limit_s: args.time_limit, ..SolveOptions::default() };
    let mut out = String::new();
    let mut plans = Vec::new();
    for f in spaces {
        match crate::plan(&problem, f, &options) {
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
        let problem = paper_problem(app, args, slices, 1.0)?;
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

/// A paper app at `slices` and `demand`, with measured profiles when --profiles is given.
fn paper_problem(app: PaperApp, args: &PlanArgs, slices: u32, demand: f64) -> anyhow::Result<Problem> {
    match &args.profiles {
        Some(path) => load_problem(&app.spec(slices, demand), path),
        None => Ok(app.problem(slices, demand)?),
    }
}
