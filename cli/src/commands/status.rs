//! `jig status APP`: a deployed app's tasks, bundle, deployment and demand; `jig status`: the gateway's
//! devices, and what the apps leave free.

use std::process::ExitCode;

use bytes::Bytes;
use hyper::Method;
use jig_api::{AppStatus, GpuStatus, MachineStatus};

use crate::gateway::{GatewayArgs, app_name, call, failed, print_body};

/// Show a deployed app: its tasks, bundle and deployment (instances per model slot, and where each runs);
/// without an app, the devices the gateway's model instances may use and what no app holds.
#[derive(clap::Args, Debug)]
pub struct StatusCommand {
    /// The deployed app's name (as `jig deploy` printed it); without it, the machine's devices.
    app: Option<String>,
    #[command(flatten)]
    target: GatewayArgs,
}

impl StatusCommand {
    /// Show the app, or the machine.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match &self.app {
            Some(app) => status(app, self.target),
            None => machine(self.target),
        }
    }
}

/// Show the gateway's devices and what is free.
fn machine(target: GatewayArgs) -> anyhow::Result<ExitCode> {
    match call(&target, Method::GET, "/v1/devices", &[], Bytes::new())? {
        Err(failure) => Ok(failed(failure)),
        Ok(answer) if target.json => print_body(&answer).map(|()| ExitCode::SUCCESS),
        Ok(answer) => {
            let m: MachineStatus = answer.parse()?;
            if let Some(c) = &m.cluster {
                println!("replica    {}{}", c.replica, if c.leader { " (leader: runs the controller)" } else { "" });
            }
            if m.nodes.is_empty() {
                print_devices(&m.cores, &m.free_cores, &m.gpus, "");
            }
            for node in &m.nodes {
                println!("node {} ({})", node.name, node.addr);
                print_devices(&node.cores, &node.free_cores, &node.gpus, "  ");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One machine's cores and GPUs, each line indented by `indent`.
fn print_devices(cores: &[u32], free: &[u32], gpus: &[GpuStatus], indent: &str) {
    println!("{indent}cores      {} of {} free {}", free.len(), cores.len(), ranges(free));
    if gpus.is_empty() {
        println!("{indent}gpus       none (CPU segments only)");
    }
    for g in gpus {
        println!("{indent}gpu {}      {} ({}, {} MiB)", g.index, g.name, g.uuid, g.memory_mib);
        if g.mig_enabled {
            println!("{indent}  MIG      {}; free: {}", g.mig_instances.join(" "), g.free_mig_instances.join(" "));
        } else {
            println!("{indent}  MPS      {}% free", g.free_mps_percent);
        }
    }
}

/// `0-3,6`: core numbers as ranges.
fn ranges(cores: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cores.len() {
        let mut j = i;
        while j + 1 < cores.len() && cores[j + 1] == cores[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", cores[i], cores[j]) } else { cores[i].to_string() });
        i = j + 1;
    }
    if out.is_empty() { String::new() } else { format!("({})", out.join(",")) }
}

/// Show `app` as the gateway at `target` has it (also `jig plan APP`).
pub fn status(app: &str, target: GatewayArgs) -> anyhow::Result<ExitCode> {
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

/// The app's bundle, tasks, deployment and demand, indented under its name.
pub fn print_status(status: &AppStatus) {
    let print_demand = || {
        if let Some(predicted) = status.predicted_rps {
            let windows: Vec<String> = status.demand_windows.iter().map(|r| format!("{r:.1}")).collect();
            println!(
                "  demand     {predicted:.1} req/s predicted from windows [{}]; {} re-plan(s)",
                windows.join(", "),
                status.replans
            );
        }
        if let Some(kept) = &status.replan_kept {
            println!("  re-plan    {kept}");
        }
    };
    let deployed = std::time::UNIX_EPOCH + std::time::Duration::from_secs(status.deployed_at);
    println!("  bundle     {}, deployed {}", status.bundle, httpdate::fmt_http_date(deployed));
    println!("  tasks      {}", status.tasks.join(" → "));
    if let Some(ms) = status.slo_latency_ms {
        println!("  slo        {ms} ms");
    }
    let deployment = &status.deployment;
    println!("  deployment {}", deployment.source);
    if let (Some(rps), Some(accuracy)) = (deployment.demand_rps, deployment.accuracy) {
        let capacity = deployment.capacity_rps.map(|c| format!(" (serves up to {c:.1})")).unwrap_or_default();
        println!("    for {rps:.1} req/s{capacity}, accuracy {:.1}% of the best", accuracy * 100.0);
    }
    let pipelined = |slot: &str| deployment.pipelines.iter().any(|p| p.pools.iter().any(|q| q.slot == slot));
    for i in &deployment.instances {
        let latency = if pipelined(&i.slot) {
            format!(", p95 {:.0} ms a batch, run as the pipelines' head books them", i.latency_ms)
        } else if i.latency_ms > 0.0 {
            format!(
                ", p95 {:.0} ms a batch, waits ≤ {:.0} ms, drops under {:.0} ms left or after {:.0} ms waiting",
                i.latency_ms, i.wait_ms, i.drop_budget_ms, i.stale_ms
            )
        } else if i.drop_budget_ms > 0.0 {
            format!(", drops under {:.0} ms left", i.drop_budget_ms)
        } else {
            String::new()
        };
        let places: Vec<String> = i.places.iter().map(place).collect();
        let at = if places.is_empty() { String::new() } else { format!(" at {}", places.join("; ")) };
        println!("    {} × {}/{} on {} (batch ≤ {}{latency}){at}", i.count, i.slot, i.variant, i.segment, i.max_batch);
    }
    for c in &deployment.classes {
        println!(
            "  class      {} (SLO {:.0} ms): serves {:.1} of {:.1} req/s planned",
            c.class, c.latency_ms, c.served_rps, c.demand_rps
        );
        for r in &c.routes {
            let steps: Vec<String> = r
                .steps
                .iter()
                .map(|s| format!("{}/{} on {} batch {}", s.slot, s.variant, s.segment, s.max_batch))
                .collect();
            println!("    {:.1} req/s → {}", r.rate_rps, steps.join(" → "));
        }
    }
    for (k, p) in deployment.pipelines.iter().enumerate() {
        let pools: Vec<String> =
            p.pools.iter().map(|q| format!("{} × {}/{} on {}", q.members, q.slot, q.variant, q.segment)).collect();
        println!("  pipeline   {k} at batch {}, {:.1} req/s: {}", p.batch, p.rate_rps, pools.join(" → "));
    }
    for f in &deployment.factors {
        let observed = status.observed_factors.iter().find(|o| o.from == f.from && o.to == f.to);
        let seen = match observed.and_then(|o| o.factor.map(|v| (v, o.samples))) {
            Some((v, n)) => format!(", observed {v:.2} over {n} invocations"),
            None => String::new(),
        };
        println!("  factor     {} → {}: planned {:.2}{seen}", f.from, f.to, f.factor);
    }
    for o in &status.observed_latencies {
        let profiled = match (o.profiled_p50_ms, o.profiled_ms) {
            (Some(p50), Some(p95)) => format!("profiled p50 {p50:.1} ms, p95 {p95:.1} ms; "),
            (None, Some(p95)) => format!("profiled p95 {p95:.1} ms; "),
            _ => String::new(),
        };
        let refined = deployment
            .refined
            .iter()
            .find(|r| (&r.slot, &r.variant, &r.segment) == (&o.slot, &o.variant, &o.segment))
            .and_then(jig_app::deployment::refinement)
            .map(|scale| {
                format!(
                    "; planned with its rows' p50 × {:.2}, p95 × {:.2}, throughput ÷ {:.2}",
                    scale.p50, scale.p95, scale.mean
                )
            })
            .unwrap_or_default();
        let cpu = o.cpu_mean_ms.map(|cpu| format!(" ({cpu:.1} ms of CPU)")).unwrap_or_default();
        let host = o.host_cpu_ms.map(|ms| format!(", {ms:.1} ms of host CPU a batch")).unwrap_or_default();
        println!(
            "  latency    {}/{} on {} batch {}: {profiled}observed p50 {:.1} ms, mean {:.1} ms{cpu}, p95 {:.1} ms \
             over {} batches{host}{refined}",
            o.slot, o.variant, o.segment, o.batch, o.p50_ms, o.mean_ms, o.p95_ms, o.batches
        );
    }
    // Plans follow a group far from its profile (within `MAX_REFINEMENT`), but a fresh profile is better.
    let far: Vec<String> = jig_app::deployment::far_from_profile(&deployment.refined)
        .into_iter()
        .map(|(r, scale)| format!("{}/{} on {} costs {scale:.1}× its profile", r.slot, r.variant, r.segment))
        .collect();
    if !far.is_empty() {
        println!(
            "  profile    {}: was it measured on another machine? `jig profile BUNDLE` measures this one",
            far.join(", ")
        );
    }
    for g in &status.observed_glue {
        println!("  glue       {}: {:.1} ms an invocation over {}", g.task, g.mean_ms, g.invocations);
    }
    if status.observed_unpinned_ms > 0.0 {
        let per_request = match status.answered {
            0 => String::new(),
            n => format!(", {:.1} ms a request over {n}", status.observed_unpinned_ms / n as f64),
        };
        println!("  unpinned   {:.0} ms of CPU by instances on shared cores{per_request}", status.observed_unpinned_ms);
    }
    if let Some(ms) = deployment.unplanned_cpu_ms {
        println!("  cpu        planned with {ms:.1} ms of CPU a request outside the instances");
    }
    print_demand();
}

/// Where one instance runs: `cores 0-1`, `GPU 1` (an MPS share), `GPU 0 MIG-…` (the MIG instance's UUID), on a
/// node: `node 10.0.0.5:7070 cores 0-1`.
fn place(p: &jig_api::InstancePlace) -> String {
    let on = match (p.gpu, &p.device) {
        (Some(gpu), Some(device)) if device.starts_with("MIG-") => format!("GPU {gpu} {device}"),
        (Some(gpu), _) => format!("GPU {gpu}"),
        _ if p.cores.is_empty() => "unpinned".to_string(),
        _ => format!("cores {}", ranges(&p.cores).trim_matches(|c| c == '(' || c == ')')),
    };
    match &p.node {
        Some(node) => format!("node {node} {on}"),
        None => on,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_numbers_print_as_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3, 6, 8, 9]), "(0-3,6,8-9)");
        assert_eq!(ranges(&[]), "");
        let on =
            |device: &str| jig_api::InstancePlace { gpu: Some(0), device: Some(device.into()), ..Default::default() };
        assert_eq!(place(&on("MIG-5f1c")), "GPU 0 MIG-5f1c");
        assert_eq!(place(&on("GPU-77aa")), "GPU 0");
        assert_eq!(place(&jig_api::InstancePlace { cores: vec![4, 5], ..Default::default() }), "cores 4-5");
        let remote =
            jig_api::InstancePlace { node: Some("10.0.0.5:7070".into()), cores: vec![0], ..Default::default() };
        assert_eq!(place(&remote), "node 10.0.0.5:7070 cores 0");
        let unplanned = jig_api::InstancePlace { node: Some("10.0.0.5:7070".into()), ..Default::default() };
        assert_eq!(place(&unplanned), "node 10.0.0.5:7070 unpinned");
    }
}
