//! The `jig` command line: one file per command in [`commands`], each a `…Command` with its flags and `run`.
//!
//! * `jig up` — run a gateway (`jig serve` is the same command).
//! * `jig deploy DIR`, `jig apps`, `jig status APP`, `jig invoke APP INPUT`, `jig delete APP`, `jig bench APP
//!   INPUT...` — talk to a gateway (`--gateway URL`, `--token`, `--json`); see [`gateway`] for their exit
//!   statuses.
//! * `jig run FUNCTION.wasm [INPUT]` — invoke a glue function once, locally.
//! * `jig profile BUNDLE` — measure each model variant of a bundle on segments and write its profile table.
//! * `jig plan …` and `jig simulate …` — plan with the JigsawServe MILP, and simulate plans under a day of
//!   demand; what they plan is resolved once by [`problem::Source`].
//! * `jig trace` — write a day of demand.
//!
//! Exit status of `run`, `profile` and `plan`: 0 on success, 1 when the function failed, 2 when it could not
//! be loaded or the command line is wrong.

mod commands;
mod gateway;
mod input;
mod problem;
mod progress;

use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(name = "jig", version, about = "Serve compound inference: graphs of ML tasks with WebAssembly glue")]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,jig=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command.run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
