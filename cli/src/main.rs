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
//! * `jig new NAME`, `jig build [DIR]` — start a bundle from a template, and build its glue.
//! * `jig node` — serve this machine's segments to gateways (a cluster's node).
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
    if !cli.command.serves() {
        // As other command-line tools: a reader that stops reading (`jig … | head`) ends the command quietly.
        // Rust ignores SIGPIPE, so a closed pipe would otherwise be an error, or a panic inside `println!`.
        // SAFETY: setting a signal's disposition to the default, before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,jig=info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour for a person at a terminal; none in a file or a log collector.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command.run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// The CLI reference is written by hand: every command and flag clap knows must be in it.
    #[test]
    fn every_command_and_flag_is_in_the_cli_reference() {
        let reference = include_str!("../../docs/src/reference/cli.md");
        let mut missing = Vec::new();
        for command in super::Cli::command().get_subcommands().filter(|c| !c.is_hide_set()) {
            let name = command.get_name();
            if !reference.contains(&format!("## `jig {name}`")) {
                missing.push(format!("section `jig {name}`"));
            }
            for flag in command.get_arguments().filter(|a| !a.is_hide_set()).filter_map(|a| a.get_long()) {
                if !reference.contains(&format!("--{flag}")) {
                    missing.push(format!("`jig {name} --{flag}`"));
                }
            }
        }
        assert!(missing.is_empty(), "docs/src/reference/cli.md lacks: {}", missing.join(", "));
    }
}
