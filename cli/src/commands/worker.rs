//! `jig worker --socket PATH` (hidden): serve one model for the `jig` process listening on PATH. jig starts
//! these itself for GPU segments (`jig_model_host::launch`); they are not run by hand.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Serve one model for the platform in this process (started by jig for GPU segments, not by hand).
#[derive(clap::Args)]
pub struct WorkerCommand {
    /// The parent's Unix socket.
    #[arg(long)]
    socket: PathBuf,
}

impl WorkerCommand {
    /// Serve until the parent goes.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        jig_model_host::worker::serve(&self.socket)
            .map(|()| ExitCode::SUCCESS)
            .with_context(|| format!("worker on {}", self.socket.display()))
    }
}
