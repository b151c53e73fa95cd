//! `jig status APP`: a deployed app's tasks, bundle, deployment and demand.

use std::process::ExitCode;

use bytes::Bytes;
use hyper::Method;
use jig_api::AppStatus;

use crate::gateway::{GatewayArgs, app_name, call, failed, print_body};

/// Show a deployed app: its tasks, bundle and deployment (instances per model slot).
#[derive(clap::Args, Debug)]
pub struct StatusCommand {
    /// The app.
    app: String,
    #[command(flatten)]
    target: GatewayArgs,
}

impl StatusCommand {
    /// Show the app.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        status(&self.app, self.target)
    }
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
