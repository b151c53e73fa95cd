//! The `jig` command line.
//!
//! * `jig up` — the embedded default: a gateway with CPU model execution in this process, state in
//!   `~/.local/share/jig`, listening on 127.0.0.1:8080. `jig serve --config FILE` runs one with settings.
//! * `jig deploy DIR`, `jig apps`, `jig status APP`, `jig invoke APP INPUT`, `jig delete APP`, `jig bench APP
//!   INPUT...` — talk to a gateway (`--gateway URL`, `--token`, `--json`); see [`gateway`] for their exit
//!   statuses.
//! * `jig run FUNCTION.wasm [INPUT]` — invoke a glue function once, locally, and print what it returned and
//!   emitted. The input is a file (`-` or nothing for standard input); `--meta JSON` wraps it in the
//!   envelope framing of `jig_sdk::envelope` (body, JSON metadata, u32 length) for functions such as `crop`.
//!
//!   `--model SLOT=MODEL.onnx` serves a model slot with an ONNX model on this machine's CPU cores.
//! * `jig profile BUNDLE` — measure each model variant of a bundle on segments (CPU cores in this process,
//!   GPU segments in bound worker processes) over batch sizes 1, 2, 4, … and write the profile table (see
//!   `jig_planner::profile`) to BUNDLE/profiles.csv.
//!
//! * `jig plan SPEC.toml --profiles FILE` or `jig plan --app NAME` — plan a function graph with the
//!   JigsawServe MILP (see `jig_planner`); `--max-demand` reproduces the paper's analytical evaluation.
//!   `jig plan APP` shows a deployed app's plan (as `jig status APP`, from `JIG_GATEWAY`).
//!
//! Exit status of `run`, `profile` and `plan`: 0 on success, 1 when the function failed, 2 when it could not
//! be loaded or the command line is wrong.

mod gateway;
mod planner_cli;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use jig_sdk::Envelope;

use jig_model_host::instance::InstanceConfig;
use jig_model_host::launch::{Launcher, Placement};
use jig_model_host::pool::Pool;
use jig_model_host::profile;
use jig_model_host::segment::Segment;
use jig_planner::profile::ProfileRow;

use jig_app::ModelSlots;
use jig_manifest::Bundle;
use jig_runtime::{FunctionLimits, FunctionOptions, Outcome, Runtime, RuntimeConfig};

#[derive(Parser)]
#[command(name = "jig", version, about = "Serve compound inference: graphs of ML tasks with WebAssembly glue")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the embedded default: a gateway with model execution on this machine's CPU cores.
    Up(gateway::ServeArgs),
    /// Run a gateway with the settings of a config file.
    Serve(gateway::ServeArgs),
    /// Check and pack a bundle directory, upload it to the gateway, and print the app's deployment.
    Deploy(gateway::DeployArgs),
    /// List the deployed apps.
    Apps {
        #[command(flatten)]
        target: gateway::Target,
    },
    /// Show a deployed app: its tasks, bundle and deployment (instances per model slot).
    Status {
        app: String,
        #[command(flatten)]
        target: gateway::Target,
    },
    /// Invoke an app over HTTP with a payload and print its outputs.
    Invoke(gateway::InvokeArgs),
    /// Send open-loop Poisson load to an app (at a rate, or following a trace) and report throughput, latency
    /// and SLO violations.
    Bench(gateway::BenchArgs),
    /// Write a day of diurnal demand (CSV `start_s,rps`) for `jig bench --trace`.
    Trace(gateway::TraceArgs),
    /// Remove a deployed app.
    Delete {
        app: String,
        #[command(flatten)]
        target: gateway::Target,
    },
    /// Invoke a glue function (a .wasm component) once and print its output and emitted payloads.
    Run(RunArgs),
    /// Measure each model variant of a bundle on segments over batch sizes 1, 2, 4, … and write the profile
    /// table the planner reads.
    Profile(ProfileArgs),
    /// Plan a function graph: variants, segments, batch sizes and instance counts that meet its latency and
    /// accuracy objectives at the lowest cost (the JigsawServe MILP), placed onto GPUs and cores.
    Plan(planner_cli::PlanArgs),
    /// Simulate an app's plans under a day of demand, re-planning every bin (the paper's Figure 4), with the
    /// runtime's batching, early drops and routing on simulated time.
    Simulate(planner_cli::SimulateArgs),
    /// Serve one model for the platform in this process (started by jig for GPU segments, not by hand).
    #[command(hide = true)]
    Worker {
        /// The parent's Unix socket.
        #[arg(long)]
        socket: PathBuf,
    },
}

#[derive(clap::Args)]
struct ProfileArgs {
    /// The bundle directory (with its jig.toml).
    bundle: PathBuf,
    /// A segment to measure on, e.g. cpu:2, mps:0:30 or mig:0:3g.40gb:2; repeatable. Default: cpu:1, cpu:2,
    /// cpu:4, … up to this machine's cores.
    #[arg(long = "segment", value_name = "SEGMENT")]
    segments: Vec<Segment>,
    /// The largest batch size tried.
    #[arg(long, default_value_t = 128)]
    max_batch: u32,
    /// Timed runs per batch size (after 3 warm-up runs).
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Stop growing the batch once a batch's p95 latency exceeds this many milliseconds.
    #[arg(long, default_value_t = 2000)]
    max_latency_ms: u64,
    /// Where to write the table; default BUNDLE/profiles.csv.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The function's component, built for wasm32-wasip2.
    component: PathBuf,
    /// The payload: a file, or `-` (the default) for standard input.
    #[arg(default_value = "-")]
    input: PathBuf,
    /// Wrap the payload in an envelope with this JSON metadata (for functions such as `crop`).
    #[arg(long, value_name = "JSON")]
    meta: Option<String>,
    /// A configuration value the function reads with `config(key)`; repeatable.
    #[arg(long = "config", short = 'c', value_name = "KEY=VALUE")]
    config: Vec<String>,
    /// Deadline for the invocation, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// Memory limit of the function, in MiB.
    #[arg(long, default_value_t = 128)]
    memory_mib: usize,
    /// Write the output to this file instead of standard output.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Write each emitted payload to DIR/<port>-<n>.bin (an envelope as <port>-<n>.json and its body).
    #[arg(long, value_name = "DIR")]
    emit_dir: Option<PathBuf>,
    /// Serve model slot SLOT with the ONNX model at PATH, in this process on the CPU; repeatable.
    #[arg(long = "model", short = 'm', value_name = "SLOT=PATH")]
    models: Vec<String>,
    /// Where compiled components are cached.
    #[arg(long, env = "JIG_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
}

/// Run the command line; returns the process exit status.
fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,jig=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Up(args) | Command::Serve(args) => gateway::serve(args),
        Command::Deploy(args) => gateway::deploy(args),
        Command::Apps { target } => gateway::apps(target),
        Command::Status { app, target } => gateway::status(&app, target),
        Command::Invoke(args) => gateway::invoke(args),
        Command::Delete { app, target } => gateway::delete(&app, target),
        Command::Bench(args) => gateway::bench(args),
        Command::Trace(args) => gateway::trace(args),
        Command::Run(args) => run(args),
        Command::Profile(args) => profile(args).map(|()| ExitCode::SUCCESS),
        Command::Plan(args) => match deployed_app(&args) {
            // `jig plan APP`: the deployed app's plan, from the gateway (JIG_GATEWAY, JIG_TOKEN).
            Some(app) => gateway::status(&app, gateway::Target::from_env(args.json)),
            None => plan(&args).map(|text| {
                print!("{text}");
                ExitCode::SUCCESS
            }),
        },
        Command::Simulate(args) => simulate(&args).map(|text| {
            print!("{text}");
            ExitCode::SUCCESS
        }),
        Command::Worker { socket } => jig_model_host::worker::serve(&socket)
            .map(|()| ExitCode::SUCCESS)
            .with_context(|| format!("worker on {}", socket.display())),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The app `jig plan NAME` means: a valid app name that is not a file, with no planning options.
fn deployed_app(args: &planner_cli::PlanArgs) -> Option<String> {
    let name = args.spec.as_ref()?.to_str()?;
    let plain = args.profiles.is_none() && args.app.is_none() && !args.max_demand && !args.each;
    (plain && !Path::new(name).exists() && jig_manifest::check_name("app", name).is_ok()).then(|| name.to_string())
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let mut payload = read_input(&args.input)?;
    if let Some(meta) = &args.meta {
        let meta: serde_json::Value = serde_json::from_str(meta).context("--meta is not valid JSON")?;
        payload = Envelope { meta, body: payload }.encode();
    }
    let config = parse_config(&args.config)?;
    let name = args.component.file_stem().and_then(|s| s.to_str()).unwrap_or("function").to_string();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(args.cache_dir.clone().unwrap_or_else(default_cache_dir)),
        max_instances: 16,
        max_memory: args.memory_mib.max(128) << 20,
        ..RuntimeConfig::default()
    })?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let limits = FunctionLimits { memory: args.memory_mib << 20, timeout, ..FunctionLimits::default() };
    let loaded = Instant::now();
    let models = Arc::new(load_models(&name, &args.models)?);
    let function = runtime.load_file(&name, &args.component, FunctionOptions { limits, config, models })?;
    tracing::debug!("loaded {name} in {:?}", loaded.elapsed());

    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let started = Instant::now();
    match tokio.block_on(function.invoke(&payload, Some(started + timeout))) {
        Ok(outcome) => {
            report(&name, &outcome, started.elapsed(), &args)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn profile(args: ProfileArgs) -> anyhow::Result<()> {
    let bundle = Bundle::open(&args.bundle)?;
    let launcher = Launcher::discover();
    let machine_cores = launcher.devices().cpu_cores.clone();
    let segments = if args.segments.is_empty() {
        std::iter::successors(Some(1u32), |n| Some(n * 2))
            .take_while(|&n| n as usize <= machine_cores.len())
            .map(|cores| Segment::Cpu { cores })
            .collect()
    } else {
        args.segments.clone()
    };
    // Measured as served: CPU segments pinned to this machine's first cores, GPU segments in a bound worker.
    let placement = |segment: Segment| Placement {
        cores: match segment {
            Segment::Cpu { cores } => Some(machine_cores.iter().copied().take(cores as usize).collect()),
            _ => None,
        },
        ..Placement::new(segment)
    };
    for segment in &segments {
        launcher.check(&placement(*segment))?;
    }
    let settings = profile::Settings {
        max_batch: args.max_batch,
        runs: args.runs,
        max_latency: Duration::from_millis(args.max_latency_ms),
        ..profile::Settings::default()
    };
    let mut rows = Vec::new();
    for variant in &bundle.manifest.variants {
        for segment in &segments {
            let label = format!("{}/{} on {segment}", variant.slot, variant.name);
            eprintln!("profile: {label}");
            let (shapes, values) = (variant.shapes.clone(), variant.values.clone());
            let samples = move |inputs: &[jig_model_host::onnx::TensorSpec]| -> Vec<profile::SampleInput> {
                inputs
                    .iter()
                    .map(|i| profile::SampleInput {
                        shape: shapes.get(&i.name).cloned(),
                        values: values.get(&i.name).cloned(),
                    })
                    .collect()
            };
            let report = {
                let label = label.clone();
                move |p: &profile::Point| {
                    eprintln!(
                        "profile: {label}: batch {:>3}: p50 {:>8.2} ms, p95 {:>8.2} ms, {:>9.1} rows/s",
                        p.batch,
                        p.p50.as_secs_f64() * 1e3,
                        p.p95.as_secs_f64() * 1e3,
                        p.throughput
                    )
                }
            };
            let (settings, name, placement) = (settings.clone(), variant.name.clone(), placement(*segment));
            let sweep_name = name.clone();
            let (points, stop) = launcher
                .run_on(&label, &name, &bundle.model_path(variant), &placement, move |executor| {
                    profile::sweep(executor, &sweep_name, &samples(executor.inputs()), &settings, report)
                })?
                .map_err(anyhow::Error::msg)?;
            let device = launcher.device_name(&placement);
            match stop {
                Some(profile::Stop::Latency { batch, p95 }) => {
                    eprintln!("profile: {label}: stopped after batch {batch}: p95 {p95:?} exceeds --max-latency-ms")
                }
                Some(profile::Stop::Failed { batch, detail }) => {
                    eprintln!("profile: {label}: stopped at batch {batch}: {detail}")
                }
                None => {}
            }
            rows.extend(points.into_iter().map(|p| ProfileRow {
                slot: variant.slot.clone(),
                variant: variant.name.clone(),
                segment: segment.to_string(),
                batch: p.batch,
                p50_ms: p.p50.as_secs_f64() * 1e3,
                p95_ms: p.p95.as_secs_f64() * 1e3,
                throughput_rps: p.throughput,
                device: device.clone(),
            }));
        }
    }
    let output = args.output.unwrap_or_else(|| bundle.dir.join("profiles.csv"));
    std::fs::write(&output, jig_planner::profile::to_csv(&rows))
        .with_context(|| format!("writing the profile table to {}", output.display()))?;
    eprintln!("profile: wrote {} rows to {}", rows.len(), output.display());
    Ok(())
}

/// One CPU instance per `SLOT=PATH`, using every core, started as a deployment starts them.
fn load_models(function: &str, specs: &[String]) -> anyhow::Result<ModelSlots> {
    let mut slots = ModelSlots::new();
    let launcher = Launcher::discover();
    let cores = launcher.devices().cpu_cores.len().max(1) as u32;
    for spec in specs {
        let Some((slot, path)) = spec.split_once('=') else {
            bail!("--model `{spec}`: write SLOT=PATH, e.g. --model voice=models/voice.onnx");
        };
        let config = InstanceConfig::new(format!("{function}/{slot}@cpu:{cores}#0"));
        let placement = Placement::new(Segment::Cpu { cores });
        let instance = launcher.start_instance(config, slot, Path::new(path), placement)?;
        slots.insert(slot, Arc::new(Pool::new(vec![(Arc::new(instance), 1.0)])));
    }
    Ok(slots)
}

fn read_input(path: &Path) -> anyhow::Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).context("reading the payload from standard input")?;
        Ok(buf)
    } else {
        std::fs::read(path).with_context(|| format!("reading the payload from {}", path.display()))
    }
}

/// The metadata and body of `payload`, if it is an envelope with a JSON object as metadata.
fn split_envelope(payload: &[u8]) -> Option<(serde_json::Value, Vec<u8>)> {
    let Envelope { meta, body } = Envelope::<serde_json::Value>::decode(payload.to_vec()).ok()?;
    meta.is_object().then_some((meta, body))
}

fn parse_config(pairs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("--config {pair:?} is not KEY=VALUE"),
        })
        .collect()
}

fn default_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("jig/components")
}

fn report(name: &str, outcome: &Outcome, elapsed: Duration, args: &RunArgs) -> anyhow::Result<()> {
    eprintln!("{name}: ok in {:.1} ms, {} payload(s) emitted", elapsed.as_secs_f64() * 1e3, outcome.emitted.len());
    if let Some(dir) = &args.emit_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for (i, emission) in outcome.emitted.iter().enumerate() {
        let envelope = split_envelope(&emission.payload);
        let what = match &envelope {
            Some((meta, body)) => format!("{meta} + {} bytes", body.len()),
            None => match std::str::from_utf8(&emission.payload) {
                Ok(text) if text.len() <= 200 => text.to_string(),
                _ => format!("{} bytes", emission.payload.len()),
            },
        };
        eprintln!("  emit[{i}] -> {}: {what}", emission.port);
        if let Some(dir) = &args.emit_dir {
            // An envelope is written as its metadata and its body; a PNG body gets its extension.
            // The port name comes from the guest: keep it to characters that cannot leave `dir`.
            let port: String = emission
                .port
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
                .collect();
            let stem = dir.join(format!("{port}-{i}"));
            match &envelope {
                Some((meta, body)) => {
                    let ext = if body.starts_with(b"\x89PNG") { "png" } else { "bin" };
                    write_file(&stem.with_extension("json"), meta.to_string().as_bytes())?;
                    write_file(&stem.with_extension(ext), body)?;
                }
                None => write_file(&stem.with_extension("bin"), &emission.payload)?,
            }
        }
    }
    match &args.output {
        Some(path) => write_file(path, &outcome.output)?,
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&outcome.output)?;
            if std::str::from_utf8(&outcome.output).is_ok() {
                writeln!(stdout)?;
            }
        }
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// `jig plan`: a bundle directory is planned as `jig deploy` plans it; anything else is the planner's.
fn plan(args: &planner_cli::PlanArgs) -> anyhow::Result<String> {
    let Some(dir) = bundle_dir(&args.spec, &args.app)?.filter(|_| !args.max_demand) else {
        return planner_cli::run(args);
    };
    args.check()?;
    let problem = bundle_problem(dir, args.profiles.as_deref(), args.slices, args.demand)?;
    planner_cli::plan_problem(args, &problem)
}

/// `jig simulate`: a bundle directory is planned as `jig deploy` plans it; anything else is the planner's.
fn simulate(args: &planner_cli::SimulateArgs) -> anyhow::Result<String> {
    let Some(dir) = bundle_dir(&args.spec, &args.app)? else {
        return planner_cli::simulate(args);
    };
    let problem = bundle_problem(dir, None, args.slices, args.demand)?;
    planner_cli::simulate_problem(args, &problem)
}

/// `spec` when it is a bundle directory (one with a jig.toml); an error when `--app` names a paper app too.
fn bundle_dir<'a>(spec: &'a Option<PathBuf>, app: &Option<String>) -> anyhow::Result<Option<&'a Path>> {
    let dir = spec.as_deref().filter(|p| p.join(jig_manifest::MANIFEST).is_file());
    if let (Some(dir), Some(app)) = (dir, app) {
        anyhow::bail!("give either a bundle directory ({}) or --app {app}, not both", dir.display());
    }
    Ok(dir)
}

/// The planning problem of the bundle in `dir` as a deployment sees it: its profile table (or `profiles`),
/// `cores` CPU cores (default: this machine's) and `demand` req/s (default: the manifest's).
fn bundle_problem(
    dir: &Path,
    profiles: Option<&Path>,
    cores: Option<u32>,
    demand: Option<f64>,
) -> anyhow::Result<jig_planner::Problem> {
    let bundle = jig_manifest::Bundle::open(dir)?;
    let profiles = profiles.map(Path::to_path_buf).or_else(|| bundle.profiles_path()).with_context(|| {
        format!("{}: no profiles.csv to plan with; run `jig profile {}` first", dir.display(), dir.display())
    })?;
    let cores = cores.unwrap_or(jig_model_host::device::cpu_cores().len() as u32);
    let demand = demand.unwrap_or(bundle.manifest.demand.rps);
    jig_app::deployment::problem(&bundle, &profiles, &[demand], cores)
        .map_err(|e| anyhow::anyhow!("app `{}`: {e}", bundle.manifest.name))
}
