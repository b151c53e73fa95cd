//! `jig delete APP`: remove a deployed app.

use std::process::ExitCode;

use bytes::Bytes;
use hyper::Method;

use crate::gateway::{GatewayArgs, app_name, call, failed, print_body};

/// Remove a deployed app.
#[derive(clap::Args, Debug)]
pub struct DeleteCommand {
    /// The deployed app's name, as `jig deploy` printed it.
    app: String,
    #[command(flatten)]
    target: GatewayArgs,
}

impl DeleteCommand {
    /// Remove the app.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        delete(&self.app, self.target)
    }
}

fn delete(app: &str, target: GatewayArgs) -> anyhow::Result<ExitCode> {
    let app = app_name(app)?;
    match call(&target, Method::DELETE, &format!("/v1/apps/{app}"), &[], Bytes::new())? {
        Err(failure) => Ok(failed(failure)),
        Ok(answer) if target.json => print_body(&answer).map(|()| ExitCode::SUCCESS),
        Ok(_) => {
            println!("deleted {app}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
