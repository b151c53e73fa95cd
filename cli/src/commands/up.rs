//! `jig up` (alias `jig serve`): run a gateway until Ctrl-C or SIGTERM: the embedded default (models on this
//! machine's CPU cores, state in `~/.local/share/jig`, on 127.0.0.1:8080), or with a config file's settings.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use jig_gateway::{Gateway, GatewayConfig};

#[derive(clap::Args, Debug)]
pub struct UpCommand {
    /// The gateway's settings, a TOML file (its keys are in docs/src/reference/configuration.md); flags override it.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Address to listen on (port 0 picks a free port). Default: the config's `listen`, else 127.0.0.1:8080.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Also serve the Open Inference Protocol over gRPC on this address (port 0 picks a free port), for Triton's
    /// and KServe's gRPC clients. Default: the config's `grpc_listen`, else no gRPC.
    #[arg(long)]
    grpc_listen: Option<SocketAddr>,
    /// The state directory: deployed bundles and apps. Default: $XDG_DATA_HOME/jig or ~/.local/share/jig.
    #[arg(long, env = "JIG_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Bearer token for the control API.
    #[arg(long, env = "JIG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// CPU cores model instances may use (default: all).
    #[arg(long)]
    cores: Option<u32>,
    /// GPUs model instances may use, by `nvidia-smi` index, e.g. `0,1`; `none` for CPU only (default: all).
    #[arg(long, value_parser = parse_gpus)]
    gpus: Option<GpuList>,
}

/// `--gpus`: a list of GPU indices, possibly empty.
#[derive(Debug, Clone)]
struct GpuList(Vec<u32>);

fn parse_gpus(text: &str) -> Result<GpuList, String> {
    if text == "none" {
        return Ok(GpuList(Vec::new()));
    }
    let gpus = text.split(',').map(|g| g.trim().parse::<u32>());
    gpus.collect::<Result<_, _>>()
        .map(GpuList)
        .map_err(|_| format!("`{text}`: give GPU indices as `nvidia-smi` numbers them, e.g. `0,1`, or `none`"))
}

impl UpCommand {
    /// Run the gateway until Ctrl-C or SIGTERM.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        serve(self)
    }
}

fn serve(args: UpCommand) -> anyhow::Result<ExitCode> {
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
    if let Some(grpc) = args.grpc_listen {
        config.grpc_listen = Some(grpc);
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
    if let Some(GpuList(gpus)) = args.gpus {
        config.gpus = Some(gpus);
    }
    if config.token.is_none() && !config.listen.ip().is_loopback() {
        tracing::warn!("listening on {} with no token: anyone who can reach it can deploy code", config.listen);
    }
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    tokio.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let grpc = match config.grpc_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr} (gRPC)"))?,
            ),
            None => None,
        };
        let state_dir = config.state_dir.clone();
        let gateway = Gateway::start(config).await?;
        let address = listener.local_addr()?;
        let also = match &grpc {
            Some(grpc) => format!(" and grpc://{}", grpc.local_addr()?),
            None => String::new(),
        };
        // The first line on standard output, for scripts that start a gateway on port 0.
        println!("jig gateway listening on http://{address}{also} (state in {})", state_dir.display());
        std::io::stdout().flush()?;
        // One signal stops both servers.
        let (stop, stopped) = tokio::sync::watch::channel(());
        tokio::spawn(async move {
            shutdown_signal().await;
            let _ = stop.send(());
        });
        let until_stopped = |mut stopped: tokio::sync::watch::Receiver<()>| async move {
            let _ = stopped.changed().await;
        };
        if let Some(grpc) = grpc {
            let (gateway, stopped) = (gateway.clone(), stopped.clone());
            tokio::spawn(async move {
                if let Err(e) = gateway.serve_grpc(grpc, until_stopped(stopped)).await {
                    tracing::error!("the gRPC server stopped: {e:#}");
                }
            });
        }
        gateway.serve(listener, until_stopped(stopped)).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_lists_parse_as_nvidia_smi_indices_or_none() {
        assert_eq!(parse_gpus("0,1").unwrap().0, vec![0, 1]);
        assert_eq!(parse_gpus(" 3 , 1").unwrap().0, vec![3, 1], "spaces around indices are allowed");
        assert_eq!(parse_gpus("2").unwrap().0, vec![2]);
        assert!(parse_gpus("none").unwrap().0.is_empty(), "`none`: CPU only");
        for bad in ["", "0,", "gpu0", "-1", "0;1", "all"] {
            let err = parse_gpus(bad).unwrap_err();
            assert!(err.contains(&format!("`{bad}`")) && err.contains("`none`"), "{bad}: {err}");
        }
    }
}
