//! `jig bench APP INPUT...`: open-loop load against a running gateway.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bytes::Bytes;
use hyper::Method;
use jig_api::{AppStatus, TIMEOUT_HEADER};

use crate::gateway::{Failure, GatewayArgs, app_name, block_on, call, failed};

#[derive(clap::Args, Debug)]
pub struct BenchCommand {
    /// The deployed app's name, as `jig deploy` printed it.
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
    /// Wrap each payload in an envelope with this JSON metadata, as `jig invoke --meta` does (for entry
    /// functions such as `crop`).
    #[arg(long)]
    meta: Option<String>,
    #[command(flatten)]
    target: GatewayArgs,
}

impl BenchCommand {
    /// Send open-loop Poisson load to the app; print throughput, latency quantiles and the SLO-violation rate
    /// (every request without a 2xx answer).
    pub fn run(self) -> anyhow::Result<ExitCode> {
        bench(self)
    }
}

fn bench(args: BenchCommand) -> anyhow::Result<ExitCode> {
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
    let meta: Option<serde_json::Value> =
        args.meta.as_deref().map(serde_json::from_str).transpose().context("--meta is not valid JSON")?;
    let read = |p: &PathBuf| -> anyhow::Result<Bytes> {
        let body = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
        Ok(match &meta {
            Some(meta) => jig_wire::Envelope { meta: meta.clone(), body }.encode().into(),
            None => body.into(),
        })
    };
    let bodies: Vec<Bytes> = args.inputs.iter().map(read).collect::<anyhow::Result<_>>()?;
    let client = args.target.client()?;
    if client.is_tls() {
        // Its load generator holds many connections open at exact times: TLS in it would measure the handshakes.
        anyhow::bail!(
            "jig bench measures a gateway over plain http:// (on its machine or its network), not through TLS; \
             give the gateway's http:// address"
        );
    }
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
    let cores_used = deployment.as_ref().map_or(0, cores_held);
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

/// The cores a deployment's instances run on: those its pinned instances hold, each once, and at least as many as
/// an unpinned instance's threads, which run on the same cores (a default deployment's, or a slot no task
/// names where no core was spare).
fn cores_held(deployment: &jig_api::Deployment) -> u32 {
    let mut pinned = std::collections::BTreeSet::new();
    let mut unpinned = 0;
    for i in &deployment.instances {
        let cores: Vec<_> = i.places.iter().flat_map(|p| p.cores.iter().map(|&c| (p.node.clone(), c))).collect();
        match i.unpinned_threads() {
            Some(n) => unpinned = unpinned.max(n),
            None => pinned.extend(cores),
        }
    }
    (pinned.len() as u32).max(unpinned)
}
