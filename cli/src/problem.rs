//! What `jig plan` and `jig simulate` plan, resolved once from the command line: a spec file, a bundle
//! directory, one of the paper's applications, or (for `jig plan`) a deployed app.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use jig_app::deployment::Observations;
use jig_planner::problem::Problem;
use jig_planner::profile;
use jig_planner::spec::{Features, PlanSpec, SegmentKind, SegmentSpec, Uninformed, Weighting};
use jig_sim::apps::PaperApp;

/// What `jig plan` and `jig simulate` plan, and how: the flags they share.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanningArgs {
    /// What to plan: a planning spec (TOML, or JSON when named `*.json`: graph, variants, segment types, SLOs,
    /// slices, demand) with --profiles; a bundle directory, planned as `jig deploy` plans it, on this
    /// machine's cores (or --slices), with its profiles.csv (or --profiles); or (`jig plan`) a deployed app's
    /// name (no such file, no --profiles): its plan, from the gateway ($JIG_GATEWAY).
    pub spec: Option<PathBuf>,
    /// Profile table (the CSV `jig profile` writes); required with SPEC; with --app, measured profiles
    /// instead of the analytic ones.
    #[arg(long)]
    pub profiles: Option<PathBuf>,
    /// One of the paper's applications (social, traffic, ar; `all` with `jig plan --max-demand`) instead of
    /// SPEC.
    #[arg(long)]
    pub app: Option<String>,
    /// The planner strategy: `jigsaw` (JigsawServe's MILP), `ipa` (IPA's: linear pipelines on CPU cores, one
    /// variant, batch size and replica count per stage), `compass` (Compass's: the spec's query classes over
    /// a linear pipeline, for SLO goodput), `gpulet` (gpu-lets' Algorithm 1: each task's most accurate
    /// variant on MPS shares of whole GPUs) or `ppipe` (PPipe's pooled pipelines over a model cut into a chain
    /// of tasks). Default: the spec's or bundle's `planner`.
    #[arg(long)]
    pub planner: Option<jig_planner::Strategy>,
    /// Configuration space: any of A, S, T joined by `+`, `unopt` or `all` (JigsawServe's switches).
    #[arg(long, default_value = "all")]
    pub features: String,
    /// How spaces without T budget their tasks: `paper`, Appendix B as written (latency split over every type,
    /// and a static accuracy budget per task, accuracy budgeting being part of T), or `strong` (latency split
    /// over the types that fit the SLO, accuracy SLO end-to-end as with T).
    #[arg(long, default_value = "paper", value_parser = Uninformed::parse)]
    pub uninformed: Uninformed,
    /// How eq. (4) and (9)–(10) weight a task's instance types: `served`, by the requests each serves (jig's
    /// reading: F̂ the average factor, Ĥ the routed rate), or `literal`, as the paper prints them (F̂ sums F
    /// over the active types, Ĥ = M·H, requests split by capacity).
    #[arg(long, default_value = "served", value_parser = Weighting::parse)]
    pub weighting: Weighting,
    /// The available slices (S_avail): with --app 28 (the paper's testbed of four H100s; `jig plan
    /// --max-demand` 840), the spec's otherwise.
    #[arg(long)]
    pub slices: Option<u32>,
}

/// Where a planning problem comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A planning spec (TOML or JSON) and its profile table.
    Spec { spec: PathBuf, profiles: Option<PathBuf> },
    /// A bundle directory, planned as `jig deploy` plans it, with its profiles.csv or another table.
    Bundle { dir: PathBuf, profiles: Option<PathBuf> },
    /// One of the paper's applications, with analytic profiles unless a table is given.
    Paper { app: PaperApp, profiles: Option<PathBuf> },
    /// A deployed app, by name: its plan is the gateway's.
    Deployed(String),
}

impl Source {
    /// Resolve the positional argument `target` and `--app`: a directory with a jig.toml is a bundle; a name
    /// that is no file, given alone, is a deployed app (when `deployed` allows one); any other path is a spec.
    /// `missing` says what to give when there is neither.
    pub fn resolve(
        target: Option<&Path>,
        app: Option<&str>,
        profiles: Option<&Path>,
        deployed: bool,
        missing: &str,
    ) -> anyhow::Result<Source> {
        let profiles = profiles.map(Path::to_path_buf);
        match (target, app) {
            (Some(dir), app) if dir.join(jig_manifest::MANIFEST).is_file() => match app {
                Some(app) => bail!("give either a bundle directory ({}) or --app {app}, not both", dir.display()),
                None => Ok(Source::Bundle { dir: dir.to_path_buf(), profiles }),
            },
            (Some(_), Some(_)) => bail!("give either a spec file or --app, not both"),
            (Some(target), None) => {
                let name = target.to_str().filter(|n| jig_manifest::check_name("app", n).is_ok());
                match name {
                    Some(name) if deployed && profiles.is_none() && !target.exists() => {
                        Ok(Source::Deployed(name.to_string()))
                    }
                    _ => Ok(Source::Spec { spec: target.to_path_buf(), profiles }),
                }
            }
            (None, Some(app)) => Ok(Source::Paper { app: PaperApp::parse(app)?, profiles }),
            (None, None) => bail!("{missing}"),
        }
    }

    /// The problem, with `slices` and `demand` (req/s) overriding the source's own: a spec's, a bundle's
    /// (this machine's cores, the manifest's demand) or a paper app's (`app_defaults`). `observed` (a bundle
    /// only) is what a deployed app of it observed, planned with as its controller would.
    pub fn problem(
        &self,
        slices: Option<u32>,
        demand: Option<f64>,
        app_defaults: (u32, f64),
        observed: Option<&Observations>,
    ) -> anyhow::Result<Problem> {
        if observed.is_some() && !matches!(self, Source::Bundle { .. }) {
            bail!("--observed plans a bundle as its deployed app saw it: give a bundle directory");
        }
        match self {
            Source::Spec { spec, profiles } => {
                let mut spec = PlanSpec::from_file(spec)?;
                if let Some(d) = demand {
                    spec.demand.windows = vec![d];
                }
                if let Some(s) = slices {
                    spec.resources.slices = s;
                }
                let profiles =
                    profiles.as_deref().context("a spec needs --profiles FILE.csv (the table `jig profile` writes)")?;
                load_problem(&spec, profiles)
            }
            Source::Bundle { dir, profiles } => {
                let observed = observed.cloned().unwrap_or_default();
                bundle_problem(dir, profiles.as_deref(), slices, demand, observed, MigInstances::Existing)
            }
            Source::Paper { app, profiles } => {
                let (default_slices, default_demand) = app_defaults;
                paper_problem(
                    *app,
                    profiles.as_deref(),
                    slices.unwrap_or(default_slices),
                    demand.unwrap_or(default_demand),
                )
            }
            Source::Deployed(app) => bail!("`{app}` is a deployed app, not a file: only `jig plan {app}` shows it"),
        }
    }
}

/// A configuration space from `--features`.
pub fn parse_features(s: &str) -> anyhow::Result<Features> {
    Ok(Features::parse(s)?)
}

fn read_profiles(profiles: &Path) -> anyhow::Result<Vec<profile::ProfileRow>> {
    let text = std::fs::read_to_string(profiles).with_context(|| format!("cannot read {}", profiles.display()))?;
    profile::from_csv(&text).map_err(|e| anyhow::anyhow!("{}: {e}", profiles.display()))
}

fn load_problem(spec: &PlanSpec, profiles: &Path) -> anyhow::Result<Problem> {
    problem_with(spec, &read_profiles(profiles)?, profiles)
}

fn problem_with(spec: &PlanSpec, rows: &[profile::ProfileRow], profiles: &Path) -> anyhow::Result<Problem> {
    let devices: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.device.as_str()).collect();
    let source = format!("measured, {} ({})", profiles.display(), devices.into_iter().collect::<Vec<_>>().join(", "));
    Ok(Problem::new(spec, rows, &source)?)
}

/// A paper app at `slices` and `demand`, with measured profiles when a table is given: planned over the
/// segment types the table measures (the analytic model's are MIG instances; a measured table may hold MPS
/// shares).
pub fn paper_problem(app: PaperApp, profiles: Option<&Path>, slices: u32, demand: f64) -> anyhow::Result<Problem> {
    let Some(path) = profiles else { return Ok(app.problem(slices, demand)?) };
    let rows = read_profiles(path)?;
    let mut spec = app.spec(slices, demand);
    let mut kinds: Vec<String> = Vec::new();
    for row in &rows {
        let kind = SegmentKind::parse(&row.segment).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if !kinds.contains(&kind.name()) {
            kinds.push(kind.name());
        }
    }
    spec.segments = kinds.into_iter().map(|name| SegmentSpec { name, slices: None }).collect();
    problem_with(&spec, &rows, path)
}

/// Which MIG instances a bundle's plan may use on this machine's GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigInstances {
    /// Those that exist, as a deployment does.
    Existing,
    /// Any layout of each GPU: the plan whose layout `--mig-config` writes.
    AnyLayout,
}

/// The planning problem of the bundle in `dir` as a deployment sees it: its profile table (or `profiles`),
/// `cores` CPU cores (default: this machine's; more than it has plans a larger one) and this machine's GPUs
/// with their `mig` instances, `demand` req/s (default: the manifest's), refined by what a deployed app
/// `observed`.
pub fn bundle_problem(
    dir: &Path,
    profiles: Option<&Path>,
    cores: Option<u32>,
    demand: Option<f64>,
    observed: Observations,
    mig: MigInstances,
) -> anyhow::Result<jig_planner::Problem> {
    let bundle = crate::input::open_bundle(dir)?;
    let profiles = profiles.map(Path::to_path_buf).or_else(|| bundle.profiles_path()).with_context(|| {
        format!("{}: no profiles.csv to plan with; run `jig profile {}` first", dir.display(), dir.display())
    })?;
    let devices = jig_model_host::device::Devices::discover();
    let mut capacity = jig_app::deployment::Capacity::of(&devices, devices.cpu_cores.len() as u32, None);
    // --slices asks "what if the machine had N cores", so it may exceed the cores this one has.
    if let Some(n) = cores {
        capacity.machines[0].cores = (0..n).collect();
    }
    if mig == MigInstances::AnyLayout {
        capacity = capacity.with_any_mig_layout();
    }
    let demand = demand.unwrap_or(bundle.manifest.demand.rps);
    jig_app::deployment::problem(&bundle, &profiles, &[demand], &capacity, &observed)
        .map(|(problem, _)| problem)
        .map_err(|e| anyhow::anyhow!("app `{}`: {e}", bundle.manifest.name))
}

/// A deployed app's state as `jig status APP --json` wrote it to `path`.
pub fn read_status(path: &Path) -> anyhow::Result<jig_api::AppStatus> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not the output of `jig status APP --json`", path.display()))
}
