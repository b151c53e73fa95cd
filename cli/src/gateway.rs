//! The commands that run a gateway (`jig up`, `jig serve`) and those that talk to one (`jig deploy`, `apps`,
//! `status`, `invoke`, `delete`).
//!
//! Exit status of the talking commands: 0 success; 1 the gateway answered with an error (the invocation
//! failed, the app is unknown, the bundle was refused); 2 a bad command line or a bundle that fails the local
//! check; 3 the gateway could not be reached.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use base64::Engine as _;
use bytes::Bytes;
use hyper::Method;

use jig_api::{AppList, AppStatus, InvokeResponse, TIMEOUT_HEADER};
use jig_client::{Answer, Client, Unreachable};
use jig_gateway::{Gateway, GatewayConfig};

/// Where the talking commands find the gateway.
#[derive(clap::Args, Debug, Clone)]
pub struct Target {
    /// The gateway's URL.
    #[arg(long, env = "JIG_GATEWAY", default_value = "http://127.0.0.1:8080", global = true)]
    gateway: String,
    /// The gateway's bearer token, if it has one.
    #[arg(long, env = "JIG_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// Print the gateway's JSON answer instead of a summary.
    #[arg(long, global = true)]
    json: bool,
}

impl Target {
    /// The gateway of the environment (`JIG_GATEWAY`, `JIG_TOKEN`), for commands without these flags.
    pub fn from_env(json: bool) -> Target {
        Target {
            gateway: std::env::var("JIG_GATEWAY").unwrap_or_else(|_| "http://127.0.0.1:8080".into()),
            token: std::env::var("JIG_TOKEN").ok(),
            json,
        }
    }

    fn client(&self) -> anyhow::Result<Client> {
        Client::new(&self.gateway, self.token.clone())
    }
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The gateway's settings (TOML; see `jig_gateway::GatewayConfig`); flags override it.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Address to listen on, e.g. 127.0.0.1:8080 (port 0 picks a free port).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// The state directory: deployed bundles and apps. Default: $XDG_DATA_HOME/jig or ~/.local/share/jig.
    #[arg(long, env = "JIG_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Bearer token for the control API.
    #[arg(long, env = "JIG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// CPU cores model instances may use (default: all).
    #[arg(long)]
    cores: Option<u32>,
}

/// `jig up` and `jig serve`: run a gateway until Ctrl-C or SIGTERM.
pub fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            toml::from_str::<GatewayConfig>(&text)
                .with_context(|| format!("{} is not a valid gateway config", path.display()))?
        }
        None => GatewayConfig::default(),
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(dir) = args.state_dir {
        config.state_dir = dir;
    }
    if args.token.is_some() {
        config.token = args.token;
    }
    if let Some(cores) = args.cores {
        config.cores = cores;
    }
    if config.token.is_none() && !config.listen.ip().is_loopback() {
        tracing::warn!("listening on {} with no token: anyone who can reach it can deploy code", config.listen);
    }
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    tokio.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let state_dir = config.state_dir.clone();
        let gateway = Gateway::start(config).await?;
        let address = listener.local_addr()?;
        // The first line on standard output, for scripts that start a gateway on port 0.
        println!("jig gateway listening on http://{address} (state in {})", state_dir.display());
        std::io::stdout().flush()?;
        gateway.serve(listener, shutdown_signal()).await;
        eprintln!("jig gateway stopped");
        Ok(ExitCode::SUCCESS)
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// The outcome of a talking command.
enum Failure {
    /// The gateway answered with an error status.
    Refused(Answer),
    Unreachable(Unreachable),
}

fn block_on<T>(future: impl Future<Output = T>) -> anyhow::Result<T> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(future))
}

/// Send one request and sort the answer into success and failure.
fn call(
    target: &Target,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Bytes,
) -> anyhow::Result<Result<Answer, Failure>> {
    call_with_progress(target, method, path, headers, body, None)
}

fn call_with_progress(
    target: &Target,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Bytes,
    progress: Option<Box<dyn FnMut(u64, u64) + Send>>,
) -> anyhow::Result<Result<Answer, Failure>> {
    let client = target.client()?;
    Ok(match block_on(client.send(method, path, headers, body, progress))? {
        Ok(answer) if answer.status.is_success() => Ok(answer),
        Ok(answer) => Err(Failure::Refused(answer)),
        Err(e) => Err(Failure::Unreachable(e)),
    })
}

/// Report a failure and give the exit status.
fn failed(failure: Failure) -> ExitCode {
    match failure {
        Failure::Refused(answer) => {
            eprintln!("error: {} ({})", answer.error_message(), answer.status);
            ExitCode::from(1)
        }
        Failure::Unreachable(e) => {
            eprintln!("error: {e}");
            ExitCode::from(3)
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct DeployArgs {
    /// The bundle directory (with its jig.toml).
    bundle: PathBuf,
    #[command(flatten)]
    target: Target,
}

/// `jig deploy DIR`: check and pack the bundle here, upload it, print the app's status.
pub fn deploy(args: DeployArgs) -> anyhow::Result<ExitCode> {
    let archive = jig_manifest::pack(&args.bundle)?;
    let total = archive.len() as u64;
    eprintln!("deploy: packed {} ({})", args.bundle.display(), bytes(total));
    let mut last = 0u64;
    let progress = Box::new(move |sent: u64, total: u64| {
        if sent == total || sent - last >= 16 << 20 {
            last = sent;
            eprintln!("deploy: uploaded {} of {}", bytes(sent), bytes(total));
        }
    });
    let headers = [("content-type", "application/x-tar".to_string())];
    match call_with_progress(&args.target, Method::POST, "/v1/apps", &headers, archive.into(), Some(progress))? {
        Err(failure) => Ok(failed(failure)),
        Ok(answer) => {
            if args.target.json {
                print_body(&answer)?;
            } else {
                let status: AppStatus = answer.parse()?;
                println!("deployed {}", status.name);
                print_status(&status);
                println!("invoke it: jig invoke {} INPUT", status.name);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `jig apps`.
pub fn apps(target: Target) -> anyhow::Result<ExitCode> {
    match call(&target, Method::GET, "/v1/apps", &[], Bytes::new())? {
        Err(failure) => Ok(failed(failure)),
        Ok(answer) if target.json => print_body(&answer).map(|()| ExitCode::SUCCESS),
        Ok(answer) => {
            let list: AppList = answer.parse()?;
            if list.apps.is_empty() {
                println!("no apps deployed; deploy one with `jig deploy DIR`");
            }
            for app in list.apps {
                println!(
                    "{:<24} {} task(s), bundle {}",
                    app.name,
                    app.tasks.len(),
                    app.bundle.get(..12).unwrap_or(&app.bundle)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// An app name as the gateway accepts it, checked before anything is sent.
fn app_name(app: &str) -> anyhow::Result<&str> {
    jig_manifest::check_name("app name", app).map_err(anyhow::Error::msg)?;
    Ok(app)
}

/// `jig status APP`.
pub fn status(app: &str, target: Target) -> anyhow::Result<ExitCode> {
    let app = app_name(app)?;
    match call(&target, Method::GET, &format!("/v1/apps/{app}"), &[], Bytes::new())? {
        Err(failure) => Ok(failed(failure)),
        Ok(answer) if target.json => print_body(&answer).map(|()| ExitCode::SUCCESS),
        Ok(answer) => {
            let status: AppStatus = answer.parse()?;
            println!("{}", status.name);
            print_status(&status);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `jig delete APP`.
pub fn delete(app: &str, target: Target) -> anyhow::Result<ExitCode> {
    let app = app_name(app)?;
    match call(&target, Method::DELETE, &format!("/v1/apps/{app}"), &[], Bytes::new())? {
        Err(failure) => Ok(failed(failure)),
        Ok(answer) if target.json => print_body(&answer).map(|()| ExitCode::SUCCESS),
        Ok(_) => {
            println!("deleted {app}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct InvokeArgs {
    /// The app.
    app: String,
    /// The payload: a file, or `-` (the default) for standard input.
    #[arg(default_value = "-")]
    input: PathBuf,
    /// Wrap the payload in an envelope with this JSON metadata (for entry functions such as `crop`).
    #[arg(long, value_name = "JSON")]
    meta: Option<String>,
    /// The invocation's timeout in milliseconds; default: the app's latency SLO.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Write each binary output part to DIR/<n>-<task>.bin (`.wav` for WAV audio) instead of summarising it.
    #[arg(long, short = 'o', value_name = "DIR")]
    output_dir: Option<PathBuf>,
    #[command(flatten)]
    target: Target,
}

/// `jig invoke APP INPUT`: print each output part (JSON as is, binary as its size or written to a file).
pub fn invoke(args: InvokeArgs) -> anyhow::Result<ExitCode> {
    app_name(&args.app)?;
    let mut payload = super::read_input(&args.input)?;
    if let Some(meta) = &args.meta {
        let meta: serde_json::Value = serde_json::from_str(meta).context("--meta is not valid JSON")?;
        payload = jig_sdk::Envelope { meta, body: payload }.encode();
    }
    let mut headers = Vec::new();
    if let Some(ms) = args.timeout_ms {
        headers.push((TIMEOUT_HEADER, ms.to_string()));
    }
    let answer =
        match call(&args.target, Method::POST, &format!("/v1/apps/{}/invoke", args.app), &headers, payload.into())? {
            Err(failure) => return Ok(failed(failure)),
            Ok(answer) => answer,
        };
    if args.target.json {
        print_body(&answer)?;
        return Ok(ExitCode::SUCCESS);
    }
    let parts = answer.parse::<InvokeResponse>()?.outputs;
    if let Some(dir) = &args.output_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let timing = answer.headers.get("server-timing").and_then(|v| v.to_str().ok()).unwrap_or("");
    eprintln!("{}: {} output(s) ({timing})", args.app, parts.len());
    for (i, part) in parts.iter().enumerate() {
        let from = match &part.port {
            Some(port) => format!("{}.{port}", part.task),
            None => part.task.clone(),
        };
        // A part is JSON, binary, or both (an envelope's metadata and body).
        let meta = part.json.as_ref().map(|v| v.to_string());
        let Some(data) = &part.base64 else {
            println!("[{i}] {from}: {}", meta.unwrap_or_default());
            continue;
        };
        let data = base64::engine::general_purpose::STANDARD.decode(data).context("a base64 part of the answer")?;
        let meta = meta.map(|m| format!("{m} + ")).unwrap_or_default();
        match &args.output_dir {
            Some(dir) => {
                let ext = match &data {
                    d if d.starts_with(b"RIFF") => "wav",
                    d if d.starts_with(b"\x89PNG") => "png",
                    _ => "bin",
                };
                // The task name comes from the gateway: keep it to characters that cannot leave `dir`.
                let task: String = part
                    .task
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
                    .collect();
                let path = dir.join(format!("{i}-{task}.{ext}"));
                std::fs::write(&path, &data).with_context(|| format!("cannot write {}", path.display()))?;
                println!("[{i}] {from}: {meta}{} written to {}", bytes(data.len() as u64), path.display());
            }
            None => println!(
                "[{i}] {from}: {meta}{} of binary data (write it out with --output-dir)",
                bytes(data.len() as u64)
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_status(status: &AppStatus) {
    let print_demand = || {
        if let Some(predicted) = status.predicted_rps {
            let windows: Vec<String> = status.demand_windows.iter().map(|r| format!("{r:.1}")).collect();
            println!(
                "  demand     {predicted:.1} req/s predicted from windows [{}]; {} re-plan(s)",
                windows.join(", "),
                status.replans
            );
        }
    };
    println!("  bundle     {}", status.bundle);
    println!("  tasks      {}", status.tasks.join(" → "));
    if let Some(ms) = status.slo_latency_ms {
        println!("  slo        {ms} ms");
    }
    let deployment = &status.deployment;
    println!("  deployment {}", deployment.source);
    if let (Some(rps), Some(accuracy)) = (deployment.demand_rps, deployment.accuracy) {
        println!("    for {rps:.1} req/s, accuracy {:.1}% of the best", accuracy * 100.0);
    }
    for i in &deployment.instances {
        let latency = if i.latency_ms > 0.0 { format!(", p95 {:.0} ms a batch", i.latency_ms) } else { String::new() };
        println!("    {} × {}/{} on {} (batch ≤ {}{latency})", i.count, i.slot, i.variant, i.segment, i.max_batch);
    }
    print_demand();
}

fn print_body(answer: &Answer) -> anyhow::Result<()> {
    std::io::stdout().write_all(&answer.body)?;
    Ok(())
}

fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
    } else {
        format!("{:.1} KiB", n as f64 / 1024.0)
    }
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The app.
    app: String,
    /// Request payloads (files), sent in turn.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Mean request rate, requests per second (Poisson arrivals).
    #[arg(long, default_value_t = 1.0)]
    rate: f64,
    /// How long to send, seconds.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Follow this trace's rates instead of --rate and --duration (CSV `start_s,rps`; `jig trace` makes one).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Replay the trace this much faster: each bin lasts its length divided by the factor.
    #[arg(long, default_value_t = 1.0)]
    speedup: f64,
    /// Send at most this many requests.
    #[arg(long, default_value_t = 100_000)]
    requests: usize,
    /// Each request's timeout in milliseconds (`jig-timeout-ms`); default: the app's latency SLO.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Write every request (seconds since the start it was sent, latency in ms, HTTP status) to this CSV file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Draw every request's latency against when it was sent (violations in red) into this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Seed of the arrival times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    target: Target,
}

/// `jig bench APP INPUT...`: open-loop Poisson load against a running gateway; prints throughput, latency
/// quantiles and the SLO-violation rate (every request without a 2xx answer).
pub fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    use jig_client::load::{OpenLoopSummary, Target as LoadTarget, open_loop};
    app_name(&args.app)?;
    let rate_ok = args.rate.is_finite() && args.rate > 0.0;
    let duration_ok = args.duration > 0.0 && args.duration <= 86_400.0;
    let speedup_ok = args.speedup.is_finite() && args.speedup > 0.0;
    if !(rate_ok && duration_ok && speedup_ok) {
        anyhow::bail!("--rate and --speedup must be positive numbers, and --duration a number of seconds up to 86400");
    }
    let (schedule, what) = match &args.trace {
        None => {
            let span = std::time::Duration::from_secs_f64(args.duration);
            (vec![(span, args.rate)], format!("{} req/s (Poisson) for {} s", args.rate, args.duration))
        }
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let trace =
                jig_sim::trace::Trace::from_csv(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let bin = std::time::Duration::from_secs_f64(trace.bin_s / args.speedup);
            let what = format!(
                "trace {} ({} bins, peak {:.1} req/s, each bin {:.1} s)",
                path.display(),
                trace.rates.len(),
                trace.peak(),
                bin.as_secs_f64()
            );
            (trace.rates.iter().map(|&r| (bin, r)).collect(), what)
        }
    };
    let bodies: Vec<Bytes> = args
        .inputs
        .iter()
        .map(|p| std::fs::read(p).map(Bytes::from).with_context(|| format!("cannot read {}", p.display())))
        .collect::<anyhow::Result<_>>()?;
    let client = args.target.client()?;
    // The app must be there (and the gateway up) before the clock starts.
    match block_on(client.send(Method::GET, "/healthz", &[], Bytes::new(), None))? {
        Err(e) => return Ok(failed(Failure::Unreachable(e))),
        Ok(answer) if !answer.status.is_success() => return Ok(failed(Failure::Refused(answer))),
        Ok(_) => {}
    }
    let addr = std::net::ToSocketAddrs::to_socket_addrs(client.authority())
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("cannot resolve {}", client.authority()))?;
    let target = LoadTarget {
        addr,
        method: Method::POST,
        path: format!("{}/v1/apps/{}/invoke", client.prefix(), args.app),
        body: Bytes::new(),
    };
    let mut headers = Vec::new();
    if let Some(ms) = args.timeout_ms {
        headers.push((TIMEOUT_HEADER.to_string(), ms.to_string()));
    }
    if let Some(token) = &args.target.token {
        headers.push(("authorization".to_string(), format!("Bearer {token}")));
    }
    eprintln!("bench: {} at {what} against {}", args.app, client.url());
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let started = std::time::Instant::now();
    let records = tokio.block_on(open_loop(&target, &bodies, &headers, &schedule, args.requests, args.seed));
    let summary = OpenLoopSummary::of(&records, started.elapsed());
    // What served the run: the deployment's accuracy and the cores its instances hold.
    let deployment = match call(&args.target, Method::GET, &format!("/v1/apps/{}", args.app), &[], Bytes::new())? {
        Ok(answer) => answer.parse::<AppStatus>().ok().map(|s| s.deployment),
        Err(_) => None,
    };
    let accuracy_drop = deployment.as_ref().and_then(|d| d.accuracy).map(|a| 1.0 - a);
    let cores_used: u32 =
        deployment.iter().flat_map(|d| &d.instances).map(|i| i.count * i.cpu_cores().unwrap_or(0)).sum();
    if let Some(path) = &args.csv {
        let mut csv = String::from("sent_s,latency_ms,status\n");
        for r in &records {
            csv.push_str(&format!("{:.6},{:.3},{}\n", r.sent.as_secs_f64(), r.latency.as_secs_f64() * 1e3, r.status));
        }
        std::fs::write(path, csv).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        let title = format!("jig bench {}: {what}", args.app);
        std::fs::write(path, jig_client::load::svg(&records, &title))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.target.json {
        let mut json = serde_json::to_value(&summary)?;
        json["accuracy_drop"] = serde_json::json!(accuracy_drop);
        json["cores_used"] = serde_json::json!(cores_used);
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let accuracy = accuracy_drop.map_or_else(|| "unplanned".to_string(), |d| format!("{:.1}%", d * 100.0));
        println!(
            "{}: {} sent, {} ok, {:.1} req/s; latency p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms; \
             SLO violations {} ({:.2}%); accuracy drop {accuracy}; {cores_used} cores",
            args.app,
            summary.sent,
            summary.ok,
            summary.throughput_rps,
            summary.p50_ms,
            summary.p95_ms,
            summary.p99_ms,
            summary.violations,
            summary.violation_rate * 100.0
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// The busiest bin's rate, requests per second (an app's largest serviceable demand).
    #[arg(long)]
    peak: f64,
    /// Bins in the day (288: 5 minutes each).
    #[arg(long, default_value_t = 288)]
    bins: usize,
    /// Seed of the noise.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the trace here instead of standard output.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
}

/// `jig trace --peak RPS`: a day of diurnal demand as CSV (see `jig_sim::trace`).
pub fn trace(args: TraceArgs) -> anyhow::Result<ExitCode> {
    if !(args.peak.is_finite() && args.peak >= 0.0) || args.bins == 0 || args.bins > 86_400 {
        anyhow::bail!("--peak must be a non-negative rate and --bins between 1 and 86400");
    }
    let csv = jig_sim::trace::Trace::diurnal(args.peak, args.bins, args.seed).to_csv();
    match &args.output {
        Some(path) => std::fs::write(path, csv).with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{csv}"),
    }
    Ok(ExitCode::SUCCESS)
}
