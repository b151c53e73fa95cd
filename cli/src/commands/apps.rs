//! `jig apps`: the deployed apps.

use std::process::ExitCode;

use bytes::Bytes;
use hyper::Method;
use jig_api::AppList;

use crate::gateway::{GatewayArgs, call, failed, print_body};

/// List the deployed apps.
#[derive(clap::Args, Debug)]
pub struct AppsCommand {
    #[command(flatten)]
    target: GatewayArgs,
}

impl AppsCommand {
    /// List the apps, one line each.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        apps(self.target)
    }
}

fn apps(target: GatewayArgs) -> anyhow::Result<ExitCode> {
    match call(&target, Method::GET, "/v1/apps", &[], Bytes::new())? {
        Err(failure) => Ok(failed(failure)),
        Ok(answer) if target.json => print_body(&answer).map(|()| ExitCode::SUCCESS),
        Ok(answer) => {
            let list: AppList = answer.parse()?;
            if list.apps.is_empty() {
                println!("no apps deployed; deploy one with `jig deploy DIR`");
            }
            for app in list.apps {
                println!(
                    "{:<24} {} task(s), bundle {}",
                    app.name,
                    app.tasks.len(),
                    app.bundle.get(..12).unwrap_or(&app.bundle)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
