//! `jig run FUNCTION.wasm [INPUT]`: invoke a glue function once, locally, and print what it returned and
//! emitted. The input is a file (`-` or nothing for standard input); `--meta JSON` wraps it in the envelope
//! framing of `jig_wire::envelope` (body, JSON metadata, u32 length) for functions such as `crop`;
//! `--model SLOT=MODEL.onnx` serves a model slot with an ONNX model on this machine's CPU cores.
//!
//! Exit status: 0 on success, 1 when the function failed, 2 when it could not be loaded or the command line
//! is wrong.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use jig_app::ModelSlots;
use jig_model_host::instance::InstanceConfig;
use jig_model_host::launch::{Launcher, Placement};
use jig_model_host::pool::Pool;
use jig_model_host::segment::Segment;
use jig_runtime::{FunctionLimits, FunctionOptions, Outcome, Runtime, RuntimeConfig};
use jig_wire::Envelope;

use crate::input::{parse_config, read_input, safe_stem, write_file};

/// Invoke a glue function (a .wasm component) once and print its output and emitted payloads.
#[derive(clap::Args)]
pub struct RunCommand {
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
    /// Deadline for the invocation, in milliseconds (default: the runtime's, 30 s).
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Memory limit of the function, in MiB (default: the runtime's, 128 MiB).
    #[arg(long)]
    memory_mib: Option<usize>,
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

impl RunCommand {
    /// Load the function, invoke it once, report.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        run(self)
    }
}

fn run(args: RunCommand) -> anyhow::Result<ExitCode> {
    let mut payload = read_input(&args.input)?;
    if let Some(meta) = &args.meta {
        let meta: serde_json::Value = serde_json::from_str(meta).context("--meta is not valid JSON")?;
        payload = Envelope { meta, body: payload }.encode();
    }
    let config = parse_config(&args.config)?;
    let name = args.component.file_stem().and_then(|s| s.to_str()).unwrap_or("function").to_string();
    // A function run alone gets the limits a bundle's task gets by default, unless the flags say otherwise.
    let default = FunctionLimits::default();
    let limits = FunctionLimits {
        memory: args.memory_mib.map_or(default.memory, |mib| mib << 20),
        timeout: args.timeout_ms.map_or(default.timeout, Duration::from_millis),
        ..default
    };
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(args.cache_dir.clone().unwrap_or_else(jig_gateway::default_cache_dir)),
        max_invocations: 16,
        max_memory: limits.memory.max(default.memory),
        ..RuntimeConfig::default()
    })?;
    let timeout = limits.timeout;
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

/// The metadata and body of `payload`, if it is an envelope with a JSON object as metadata.
fn split_envelope(payload: &[u8]) -> Option<(serde_json::Value, Vec<u8>)> {
    let Envelope { meta, body } = Envelope::<serde_json::Value>::decode(payload.to_vec()).ok()?;
    meta.is_object().then_some((meta, body))
}

fn report(name: &str, outcome: &Outcome, elapsed: Duration, args: &RunCommand) -> anyhow::Result<()> {
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
            // The port name comes from the guest.
            let port = safe_stem(&emission.port);
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
