//! `jig plan`: plan a function graph with the JigsawServe MILP (see `jig_planner`).
//!
//! ```text
//! jig plan SPEC.toml --profiles profiles.csv [--features A+S+T] [--demand RPS] [--slices N] [--json]
//! jig plan BUNDLE_DIR [--slices CORES] [--demand RPS]        as `jig deploy` plans it
//! jig plan APP                                               a deployed app's plan, from the gateway
//! jig plan --app traffic [--slices 28] [--demand 100] [--features all|unopt|A+S|…] [--each]
//! jig plan --max-demand [--app traffic|social|ar|all] [--slices 840]   the paper's Figure 3
//! jig plan … --mig-config FILE                               also write the plan's MIG layout (nvidia-mig-parted)
//! jig plan PPIPE_SPEC.toml [--each]                          PPipe's pooled pipelines (a `[ppipe]` spec)
//! jig plan GPULET_SPEC.toml [--each]                         gpu-lets' GPU shares (a `[gpulet]` spec)
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use jig_planner::mig_parted::{config_name, mig_parted_config};
use jig_planner::problem::Problem;
use jig_planner::spec::Features;
use jig_planner::{Plan, SolveOptions, max_demand};
use jig_policy::mig::{GPU_80GB, GPUS_WITH_LAYOUTS, GpuModel};
use jig_sim::apps::PaperApp;

use crate::commands::status::status;
use crate::gateway::GatewayArgs;
use crate::input::write_file;
use crate::problem::{MigInstances, PlanningArgs, Source, bundle_problem, paper_problem, parse_features};

/// Plan a function graph: variants, segments, batch sizes and instance counts that meet its latency and
/// accuracy objectives at the lowest cost (the JigsawServe MILP), placed onto GPUs and cores.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanCommand {
    #[command(flatten)]
    pub planning: PlanningArgs,
    /// Plan in each of the eight A/S/T spaces.
    #[arg(long)]
    pub each: bool,
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
    /// Also write the plan's MIG layout per GPU to FILE, as an `nvidia-mig-parted` config named `jig-APP`
    /// (GPUs the plan shares through MPS get MIG disabled). jig changes no MIG settings itself: apply it with
    /// `sudo nvidia-mig-parted apply -f FILE -c jig-APP`, or through the GPU operator's MIG manager (the
    /// file's header says how). One plan only: not with --each, --max-demand or a deployed app.
    #[arg(long, value_name = "FILE")]
    pub mig_config: Option<PathBuf>,
    /// The GPU model --mig-config writes for, as `nvidia-smi` names it (e.g. `NVIDIA H200`, `NVIDIA
    /// A100-SXM4-40GB`): the file names the instances as that model does. The 80 GB H100's names by default.
    #[arg(long, value_name = "NAME", requires = "mig_config")]
    pub gpu: Option<String>,
}

impl PlanCommand {
    /// Plan, and print the plan (or show a deployed app's).
    pub fn run(self) -> anyhow::Result<ExitCode> {
        if !self.max_demand
            && let Source::Deployed(app) = self.source()?
        {
            if self.mig_config.is_some() {
                bail!("--mig-config needs a plan made here: give the app's bundle directory instead of `{app}`");
            }
            return status(&app, GatewayArgs::from_env(self.json));
        }
        print!("{}", self.plan()?);
        Ok(ExitCode::SUCCESS)
    }

    fn source(&self) -> anyhow::Result<Source> {
        let missing = "give a spec file, a bundle directory, --app NAME, or --max-demand";
        Source::resolve(
            self.planning.spec.as_deref(),
            self.planning.app.as_deref(),
            self.planning.profiles.as_deref(),
            !self.each,
            missing,
        )
    }

    /// What `jig plan` prints.
    fn plan(&self) -> anyhow::Result<String> {
        self.check()?;
        if let Some(spec) = self.planning.spec.as_deref().filter(|s| jig_planner::ppipe::PpipeProblem::is_spec(s)) {
            return plan_ppipe(self, spec);
        }
        if let Some(spec) = self.planning.spec.as_deref().filter(|s| jig_planner::gpulet::GpuletProblem::is_spec(s)) {
            return plan_gpulet(self, spec);
        }
        if self.max_demand {
            return run_max_demand(self);
        }
        let mut problem = match self.source()? {
            // The layout to write is the one the plan wants, whatever MIG instances exist now.
            Source::Bundle { dir, profiles } if self.mig_config.is_some() => {
                let any = MigInstances::AnyLayout;
                bundle_problem(&dir, profiles.as_deref(), self.planning.slices, self.demand, Default::default(), any)?
            }
            source => source.problem(self.planning.slices, self.demand, (28, 50.0), None)?,
        };
        if let Some(planner) = self.planning.planner {
            problem.strategy = planner;
        }
        plan_problem(self, &problem)
    }

    /// Refuse option values no plan can be made with.
    fn check(&self) -> anyhow::Result<()> {
        if !(self.time_limit.is_finite() && self.time_limit > 0.0) {
            bail!("--time-limit must be a positive number of seconds");
        }
        if let Some(d) = self.demand
            && !(d.is_finite() && d >= 0.0)
        {
            bail!("--demand must be a non-negative rate");
        }
        if self.max_demand && self.planning.planner.is_some_and(|p| p != jig_planner::Strategy::Jigsaw) {
            bail!("--max-demand compares JigsawServe's A/S/T spaces: drop --planner");
        }
        if self.mig_config.is_some() && (self.each || self.max_demand) {
            bail!("--mig-config writes one plan's MIG layout: drop --each and --max-demand");
        }
        Ok(())
    }
}

/// Plan `problem` as `args` say (spaces, time limit, JSON); returns what to print.
fn plan_problem(args: &PlanCommand, problem: &Problem) -> anyhow::Result<String> {
    let spaces =
        if args.each { Features::combinations().to_vec() } else { vec![parse_features(&args.planning.features)?] };
    let spaces =
        spaces.into_iter().map(|f| f.with_uninformed(args.planning.uninformed).with_weighting(args.planning.weighting));
    let options = SolveOptions { time_limit_s: args.time_limit, ..SolveOptions::default() };
    let mut out = String::new();
    let mut plans = Vec::new();
    for f in spaces {
        let planned = jig_planner::plan(problem, f, &options);
        if let (Ok(plan), Some(file)) = (&planned, &args.mig_config) {
            write_mig_config(plan, file, args.gpu.as_deref())?;
        }
        match planned {
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

/// Plan a PPipe spec: its scheme, or with --each PPipe, NP and DART-r.
fn plan_ppipe(args: &PlanCommand, spec: &Path) -> anyhow::Result<String> {
    use jig_planner::ppipe::{PpipeProblem, Scheme, solve};
    let problem = PpipeProblem::from_spec_file(spec)?;
    let schemes =
        if args.each { vec![Scheme::PPipe, Scheme::NoPartitioning, Scheme::DartR] } else { vec![problem.scheme] };
    let options = SolveOptions { time_limit_s: args.time_limit, ..SolveOptions::default() };
    let mut out = String::new();
    let mut plans = Vec::new();
    for scheme in schemes {
        let p = PpipeProblem { scheme, ..problem.clone() };
        match solve(&p, &options) {
            Ok(plan) if args.json => plans.push(serde_json::json!({ "scheme": scheme.name(), "plan": plan })),
            Ok(plan) => out.push_str(&plan.to_text(&p)),
            Err(e) if args.each => out.push_str(&format!("[{}] {e}\n", scheme.name())),
            Err(e) => return Err(e.into()),
        }
    }
    if args.json {
        out = serde_json::to_string_pretty(&plans)?;
    }
    Ok(out)
}

/// Schedule a gpu-lets spec: its scheduler, or with --each every one it can run (`gpulet+int` with measured
/// interference).
fn plan_gpulet(args: &PlanCommand, spec: &Path) -> anyhow::Result<String> {
    use jig_planner::gpulet::{GpuletProblem, Scheduler};
    let (problem, scheduler) = GpuletProblem::from_spec_file(spec)?;
    let schedulers = if args.each { Scheduler::all(&problem) } else { vec![scheduler] };
    let mut out = String::new();
    for scheduler in schedulers {
        match scheduler.schedule(&problem) {
            Ok(plan) if plan.gpus_used > problem.gpus => out.push_str(&format!(
                "[{}] needs {} GPUs, more than the {} there are\n",
                scheduler.name(),
                plan.gpus_used,
                problem.gpus
            )),
            Ok(plan) => out.push_str(&plan.to_text(&problem, scheduler)),
            Err(e) if args.each => out.push_str(&format!("[{}] {e}\n", scheduler.name())),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// Write `plan`'s MIG layout to `file` and say on stderr (stdout may be JSON) where, and how to apply it.
fn write_mig_config(plan: &Plan, file: &Path, gpu: Option<&str>) -> anyhow::Result<()> {
    let model = match gpu {
        None => &GPU_80GB,
        Some(gpu) => GpuModel::of(gpu).with_context(|| {
            format!("--gpu: jig does not know the MIG profiles of `{gpu}`; it knows {GPUS_WITH_LAYOUTS}")
        })?,
    };
    let name = config_name(&plan.app);
    let yaml = mig_parted_config(&plan.placement, &name, model).context("--mig-config")?;
    write_file(file, yaml.as_bytes())?;
    let f = file.display();
    eprintln!("wrote the plan's MIG layout to {f}; apply it with: sudo nvidia-mig-parted apply -f {f} -c {name}");
    Ok(())
}

fn run_max_demand(args: &PlanCommand) -> anyhow::Result<String> {
    let apps = match args.planning.app.as_deref() {
        None | Some("all") => PaperApp::ALL.to_vec(),
        Some(a) => vec![PaperApp::parse(a)?],
    };
    let slices = args.planning.slices.unwrap_or(840);
    let mut out = String::new();
    for app in apps {
        let problem = paper_problem(app, args.planning.profiles.as_deref(), slices, 1.0)?;
        let (_, table) =
            max_demand::table(&problem, (args.planning.uninformed, args.planning.weighting), 0.01, args.time_limit)?;
        out.push_str(&table);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::PlanCommand;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: PlanCommand,
    }

    fn cli(args: &[&str]) -> anyhow::Result<String> {
        Cli::try_parse_from(std::iter::once("plan").chain(args.iter().copied()))?.args.plan()
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
        let strong = cli(&["--app", "traffic", "--demand", "20", "--features", "A+S", "--uninformed", "strong"]);
        assert!(strong.unwrap().contains("[A+S (strong)]"));
        let bad = Cli::try_parse_from(["plan", "--app", "ar", "--uninformed", "loose"]).err().unwrap().to_string();
        assert!(bad.contains("expected paper or strong"), "{bad}");
        assert!(cli(&["--app", "ar", "--features", "X"]).unwrap_err().to_string().contains("unknown feature"));
        assert!(cli(&[]).is_err());
    }

    #[test]
    fn mig_config_writes_one_plans_layout() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mig.yaml");
        let path = file.to_str().unwrap();
        let out = cli(&["--app", "traffic", "--demand", "20", "--mig-config", path]).unwrap();
        assert!(out.contains("placement:"), "{out}");
        let yaml = std::fs::read_to_string(&file).unwrap();
        assert!(yaml.contains("version: v1\nmig-configs:\n  \"jig-traffic-analysis\":\n"), "{yaml}");
        assert!(yaml.contains("mig-enabled: true") && yaml.contains("\"1g.10gb\""), "{yaml}");
        // For an H200, in its names; a model jig does not know is refused by name.
        cli(&["--app", "traffic", "--demand", "20", "--mig-config", path, "--gpu", "NVIDIA H200"]).unwrap();
        let h200 = std::fs::read_to_string(&file).unwrap();
        assert!(h200.contains("\"1g.18gb\"") && !h200.contains("10gb"), "{h200}");
        let a30 = cli(&["--app", "traffic", "--demand", "20", "--mig-config", path, "--gpu", "NVIDIA A30"]);
        let a30 = a30.unwrap_err().to_string();
        assert!(a30.contains("`NVIDIA A30`") && a30.contains("the H200"), "{a30}");
        let each = cli(&["--app", "traffic", "--each", "--mig-config", path]).unwrap_err();
        assert!(each.to_string().contains("--mig-config"), "{each}");
    }

    #[test]
    fn a_paper_app_plans_over_the_segments_a_measured_table_holds() {
        let table = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/evaluation/measured/traffic-h100-mps.csv");
        let out = cli(&["--app", "traffic", "--demand", "2000", "--profiles", table]).unwrap();
        assert!(out.contains("measured, ") && out.contains("mps:"), "MPS shares, as measured: {out}");
        assert!(!out.contains("mig:"), "{out}");
        let social = cli(&["--app", "social", "--demand", "20", "--profiles", table]).unwrap_err().to_string();
        assert!(social.contains("classify"), "a task the table does not measure is named: {social}");
    }

    /// `cargo test -p jig --release --bin jig -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn max_demand_table() {
        println!("{}", cli(&["--max-demand", "--app", "all"]).unwrap());
    }
}
