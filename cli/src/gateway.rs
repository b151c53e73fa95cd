//! What the commands that talk to a gateway share (`deploy`, `apps`, `status`, `invoke`, `delete`, `bench`,
//! and `plan APP`): where the gateway is, one call, and how a failure becomes an exit status.
//!
//! Exit status of the talking commands: 0 success; 1 the gateway answered with an error (the invocation
//! failed, the app is unknown, the bundle was refused); 2 a bad command line or a bundle that fails the local
//! check; 3 the gateway could not be reached.

use std::io::Write;
use std::process::ExitCode;

use bytes::Bytes;
use hyper::Method;
use jig_client::{Answer, Client, Unreachable};

/// Where the talking commands find the gateway.
#[derive(clap::Args, Debug, Clone)]
pub struct GatewayArgs {
    /// The gateway's URL: http://HOST:PORT, or https:// (a gateway behind an Ingress or a TLS proxy).
    #[arg(long, env = "JIG_GATEWAY", default_value = "http://127.0.0.1:8080", global = true)]
    gateway: String,
    /// The certificate authority (a PEM file) that signed an https:// gateway's certificate; without it, the
    /// system's.
    #[arg(long, env = "JIG_GATEWAY_CA", global = true)]
    gateway_ca: Option<std::path::PathBuf>,
    /// The gateway's bearer token, if it has one.
    #[arg(long, env = "JIG_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print JSON instead of a summary: the gateway's answer, or `jig bench`'s report.
    #[arg(long, global = true)]
    pub json: bool,
}

impl GatewayArgs {
    /// The gateway of the environment (`JIG_GATEWAY`, `JIG_TOKEN`), for commands without these flags.
    pub fn from_env(json: bool) -> GatewayArgs {
        GatewayArgs {
            gateway: std::env::var("JIG_GATEWAY").unwrap_or_else(|_| "http://127.0.0.1:8080".into()),
            gateway_ca: std::env::var_os("JIG_GATEWAY_CA").map(Into::into),
            token: std::env::var("JIG_TOKEN").ok(),
            json,
        }
    }

    pub fn client(&self) -> anyhow::Result<Client> {
        let client = Client::new(&self.gateway, self.token.clone())?;
        match &self.gateway_ca {
            Some(ca) => client.trusting(ca),
            None => Ok(client),
        }
    }
}

/// The outcome of a talking command.
pub enum Failure {
    /// The gateway answered with an error status.
    Refused(Answer),
    Unreachable(Unreachable),
}

pub fn block_on<T>(future: impl Future<Output = T>) -> anyhow::Result<T> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(future))
}

/// Send one request and sort the answer into success and failure.
pub fn call(
    target: &GatewayArgs,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Bytes,
) -> anyhow::Result<Result<Answer, Failure>> {
    call_with_progress(target, method, path, headers, body, None)
}

pub fn call_with_progress(
    target: &GatewayArgs,
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
pub fn failed(failure: Failure) -> ExitCode {
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

/// An app name as the gateway accepts it, checked before anything is sent.
pub fn app_name(app: &str) -> anyhow::Result<&str> {
    jig_manifest::check_name("app name", app)?;
    Ok(app)
}

/// Print the gateway's answer as it came (`--json`).
pub fn print_body(answer: &Answer) -> anyhow::Result<()> {
    std::io::stdout().write_all(&answer.body)?;
    Ok(())
}

/// A byte count for people: B, KiB or MiB.
pub fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}
