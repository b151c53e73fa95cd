//! `jig trace --peak RPS`: a day of diurnal demand as CSV, for `jig bench --trace` and `jig simulate --trace`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(clap::Args, Debug)]
pub struct TraceCommand {
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

impl TraceCommand {
    /// Write the day (see `jig_sim::trace`).
    pub fn run(self) -> anyhow::Result<ExitCode> {
        trace(self)
    }
}

fn trace(args: TraceCommand) -> anyhow::Result<ExitCode> {
    if !(args.peak.is_finite() && args.peak >= 0.0) || args.bins == 0 || args.bins > 86_400 {
        anyhow::bail!("--peak must be a non-negative rate and --bins between 1 and 86400");
    }
    let csv = jig_sim::trace::Trace::diurnal(args.peak, args.bins, args.seed).to_csv();
    match &args.output {
        Some(path) => {
            std::fs::write(path, csv).with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("trace: wrote {} bins, peak {} req/s, to {}", args.bins, args.peak, path.display());
        }
        None => print!("{csv}"),
    }
    Ok(ExitCode::SUCCESS)
}
