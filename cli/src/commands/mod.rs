//! The `jig` commands, one file each: the command's flags as a `…Command` struct and its `run`.

mod apps;
mod bench;
mod build;
mod delete;
mod deploy;
mod invoke;
mod new;
mod node;
mod plan;
mod profile;
mod run;
mod simulate;
mod status;
mod trace;
mod up;
mod worker;

use std::process::ExitCode;

use clap::Subcommand;

/// Every `jig` command.
#[derive(Subcommand)]
pub enum Command {
    /// Run a gateway: the embedded default (models on this machine's CPU cores, state in
    /// ~/.local/share/jig, on 127.0.0.1:8080), or with the settings of --config FILE.
    #[command(visible_alias = "serve")]
    Up(up::UpCommand),
    /// Start a bundle: a Rust glue crate with native tests and its jig.toml (`--template model`: with a model).
    New(new::NewCommand),
    /// Build each task's glue with the `build` command of its jig.toml, and check the bundle.
    Build(build::BuildCommand),
    /// Check and pack a bundle directory, upload it to the gateway, and print the app's deployment.
    Deploy(deploy::DeployCommand),
    /// List the deployed apps.
    Apps(apps::AppsCommand),
    /// Show a deployed app: its tasks, bundle and deployment (instances per model slot).
    Status(status::StatusCommand),
    /// Invoke an app over HTTP with a payload and print its outputs.
    Invoke(invoke::InvokeCommand),
    /// Send open-loop Poisson load to an app (at a rate, or following a trace) and report throughput, latency
    /// and SLO violations.
    Bench(bench::BenchCommand),
    /// Write a day of diurnal demand (CSV `start_s,rps`) for `jig bench --trace`.
    Trace(trace::TraceCommand),
    /// Remove a deployed app.
    Delete(delete::DeleteCommand),
    /// Invoke a glue function (a .wasm component) once and print its output and emitted payloads.
    Run(run::RunCommand),
    /// Measure each model variant of a bundle on segments over batch sizes 1, 2, 4, … and write the profile
    /// table the planner reads.
    Profile(profile::ProfileCommand),
    /// Plan a function graph: variants, segments, batch sizes and instance counts that meet its latency and
    /// accuracy objectives at the lowest cost (the JigsawServe MILP), placed onto GPUs and cores.
    Plan(plan::PlanCommand),
    /// Simulate an app's plans under a day of demand, re-planning every bin (the paper's Figure 4), with the
    /// runtime's batching, early drops and routing on simulated time.
    Simulate(simulate::SimulateCommand),
    /// Serve this machine's segments (CPU cores, GPU shares) to gateways over TCP: the node role of a cluster.
    Node(node::NodeCommand),
    /// Serve one model for the platform in this process (started by jig for GPU segments, not by hand).
    #[command(hide = true)]
    Worker(worker::WorkerCommand),
}

impl Command {
    /// Whether it serves until stopped (a gateway, a node, a worker): a peer that goes away must not end it.
    pub fn serves(&self) -> bool {
        matches!(self, Command::Up(_) | Command::Node(_) | Command::Worker(_))
    }

    /// Run the command; returns the process exit status.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self {
            Command::Up(c) => c.run(),
            Command::New(c) => c.run(),
            Command::Build(c) => c.run(),
            Command::Deploy(c) => c.run(),
            Command::Apps(c) => c.run(),
            Command::Status(c) => c.run(),
            Command::Invoke(c) => c.run(),
            Command::Bench(c) => c.run(),
            Command::Trace(c) => c.run(),
            Command::Delete(c) => c.run(),
            Command::Run(c) => c.run(),
            Command::Profile(c) => c.run(),
            Command::Plan(c) => c.run(),
            Command::Simulate(c) => c.run(),
            Command::Node(c) => c.run(),
            Command::Worker(c) => c.run(),
        }
    }
}
