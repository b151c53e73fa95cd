//! `jig deploy DIR`: check and pack a bundle here, upload it, print the app's deployment.

use std::path::PathBuf;
use std::process::ExitCode;

use bytes::Bytes;
use hyper::Method;
use jig_api::AppStatus;

use crate::commands::status::print_status;
use crate::gateway::{GatewayArgs, bytes, call, call_with_progress, failed, print_body};
use crate::progress::Transfer;

#[derive(clap::Args, Debug)]
pub struct DeployCommand {
    /// The bundle directory (with its jig.toml).
    bundle: PathBuf,
    #[command(flatten)]
    target: GatewayArgs,
}

impl DeployCommand {
    /// Check and pack the bundle here, upload it, print the app's status.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        deploy(self)
    }
}

fn deploy(args: DeployCommand) -> anyhow::Result<ExitCode> {
    let archive = jig_manifest::pack(&args.bundle)?;
    // Ask the gateway first whether it takes this token (or any), so a refusal comes before the upload.
    if let Err(failure) = call(&args.target, Method::GET, "/v1/apps", &[], Bytes::new())? {
        return Ok(failed(failure));
    }
    let total = archive.len() as u64;
    eprintln!("deploy: packed {} ({})", args.bundle.display(), bytes(total));
    let mut transfer = Transfer::new("deploy", total);
    let progress = Box::new(move |sent: u64, total: u64| transfer.update(sent, total));
    let headers = [("content-type", "application/x-tar".to_string())];
    match call_with_progress(&args.target, Method::POST, "/v1/apps", &headers, archive.into(), Some(progress))? {
        Err(failure) => Ok(failed(failure)),
        Ok(answer) => {
            if args.target.json {
                print_body(&answer)?;
            } else {
                let status: AppStatus = answer.parse()?;
                println!("deployed {}", status.name);
                print_status(&status);
                println!("invoke it: jig invoke {} INPUT", status.name);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
