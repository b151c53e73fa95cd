//! `jig deploy DIR`: check and pack a bundle here, upload it, print the app's deployment.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bytes::Bytes;
use hyper::Method;
use jig_api::AppStatus;

use sha2::{Digest, Sha256};

use crate::commands::status::print_status;
use crate::gateway::{Failure, GatewayArgs, bytes, call, call_with_progress, failed, print_body};
use crate::input::open_bundle;
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
    let bundle = open_bundle(&args.bundle)?;
    let archive = jig_manifest::pack(&bundle).with_context(|| format!("bundle {}", args.bundle.display()))?;
    let name = bundle.manifest.name;
    // The gateway names a bundle by the SHA-256 of these bytes: how to tell, when its answer is lost, whether it
    // applied this one.
    let sha256 = hex::encode(Sha256::digest(&archive));
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
        Err(Failure::Unreachable(cut)) => {
            eprintln!("deploy: no answer from {} ({}); asking it what `{name}` runs now", cut.url, cut.detail);
            Ok(after_a_lost_answer(&args.target, &name, &sha256))
        }
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

/// The upload or the gateway's answer was cut (a gateway that died mid-deploy, a network that broke): the
/// gateway applies a deploy whole or not at all, but may have applied this one before its answer was lost. Ask
/// it which bundle app `name` runs now, and say.
fn after_a_lost_answer(target: &GatewayArgs, name: &str, sha256: &str) -> ExitCode {
    let short = &sha256[..12];
    match call(target, Method::GET, &format!("/v1/apps/{name}"), &[], Bytes::new()) {
        Ok(Ok(answer)) => match answer.parse::<AppStatus>() {
            Ok(status) if status.bundle == sha256 => {
                eprintln!("deploy: the gateway applied it all the same: `{name}` runs bundle {short}");
                print_status(&status);
                ExitCode::SUCCESS
            }
            Ok(status) => {
                let kept = &status.bundle[..12.min(status.bundle.len())];
                eprintln!("deploy: not applied: `{name}` still runs bundle {kept}, not {short}; deploy again");
                ExitCode::from(3)
            }
            Err(e) => {
                eprintln!(
                    "deploy: cannot read what `{name}` runs now ({e}): `jig status {name}` shows bundle {short} if the deploy was applied"
                );
                ExitCode::from(3)
            }
        },
        Ok(Err(Failure::Refused(answer))) if answer.status == hyper::StatusCode::NOT_FOUND => {
            eprintln!("deploy: not applied: the gateway has no app `{name}`; deploy again");
            ExitCode::from(3)
        }
        _ => {
            eprintln!(
                "deploy: the gateway does not answer now; once it does, `jig status {name}` shows bundle {short} if \
                 the deploy was applied (a gateway applies a deploy whole or not at all)"
            );
            ExitCode::from(3)
        }
    }
}
