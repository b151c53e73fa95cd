//! Why an app could not start ([`StartError`]) and why an invocation failed ([`AppError`]).

use std::path::{Path, PathBuf};

use jig_manifest::InvalidBundle;
use jig_model_host::launch::LaunchError;
use jig_model_host::onnx::ModelError;
use jig_runtime::{InvokeError, LoadError};

/// Why an app could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The bundle is unusable; the message names the file and field.
    #[error(transparent)]
    Bundle(#[from] InvalidBundle),
    /// A task's glue did not load (not a component, or it imports what the host lacks); the message names
    /// the function as `APP/TASK`.
    #[error("{source}")]
    Glue {
        /// The app.
        app: String,
        /// The task whose glue failed.
        task: String,
        /// Why.
        source: LoadError,
    },
    /// The deployment names a variant or segment the bundle or jig does not know (a bug in the planner).
    #[error("app `{app}`: {detail}")]
    Deployment {
        /// The app.
        app: String,
        /// What the deployment names.
        detail: String,
    },
    /// A model instance did not start; the message names the model's file as the bundle does.
    #[error("app `{app}`: {}", within(&source.to_string(), bundle))]
    Model {
        /// The app.
        app: String,
        /// Why.
        source: Box<LaunchError>,
        /// Where the gateway keeps the bundle, which the message leaves out of paths.
        bundle: PathBuf,
    },
}

/// `message` with the paths under `bundle` made relative to it: a client knows its bundle, not the gateway's store.
fn within(message: &str, bundle: &Path) -> String {
    message.replace(&format!("{}/", bundle.display()), "")
}

impl StartError {
    /// Whether the bundle is at fault (its glue, its models, its manifest), not this machine or jig: a deploy
    /// refuses such a bundle (400) and keeps serving the app's previous version.
    pub fn is_bundle_fault(&self) -> bool {
        match self {
            StartError::Bundle(_) | StartError::Glue { .. } => true,
            StartError::Deployment { .. } => false,
            StartError::Model { source, .. } => match source.as_ref() {
                LaunchError::Model(ModelError::Library { .. }) => false,
                LaunchError::Model(_) | LaunchError::Instance(_) => true,
                _ => false,
            },
        }
    }
}

/// Why an app invocation failed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The app already has `limits.max_inflight` requests in progress.
    #[error("app `{app}` is at its limit of {limit} requests in progress; retry later")]
    Busy {
        /// The app.
        app: String,
        /// Its `limits.max_inflight`.
        limit: u32,
    },
    /// The app holds as many requests as its deployment completes within the SLO ([`crate::admission`]).
    #[error(
        "app `{app}` is at its planned capacity ({capacity_rps:.1} req/s, {limit} requests in progress); retry \
         later: the controller re-plans for the demand"
    )]
    OverCapacity {
        /// The app.
        app: String,
        /// The deployment's capacity, req/s.
        capacity_rps: f64,
        /// Requests it admits at once.
        limit: u32,
    },
    /// A task's invocation failed.
    #[error("app `{app}`: {source}")]
    Task {
        /// The app.
        app: String,
        /// How the task failed; it names the function as `APP/TASK`.
        #[source]
        source: InvokeError,
    },
    /// The deadline passed while a task waited for one of its `concurrency` permits.
    #[error(
        "app `{app}`: task `{task}` could not start before the deadline (all {limit} of its `concurrency` permits were busy)"
    )]
    Queued {
        /// The app.
        app: String,
        /// The task that could not start.
        task: String,
        /// Its `concurrency` limit.
        limit: u32,
    },
    /// A task's invocation ended without an outcome (a bug in jig: the runtime catches guest failures).
    #[error("app `{app}`: a task's invocation ended unexpectedly: {detail}")]
    Panicked {
        /// The app.
        app: String,
        /// What the executor reported.
        detail: String,
    },
    /// The request names a query class the app lacks, or names none where the app has classes.
    #[error(
        "app `{app}`: {}",
        match (class, known.is_empty()) {
            (Some(c), true) => format!("has no query classes, yet the request names `{c}`; leave out `jig-class`"),
            (Some(c), false) => format!("has no query class `{c}`; its classes are {known} (`jig-class` header)"),
            (None, _) => format!("serves query classes ({known}): name one in the `jig-class` header"),
        }
    )]
    UnknownClass {
        /// The app.
        app: String,
        /// The class the request named, if any.
        class: Option<String>,
        /// The app's classes, comma-separated.
        known: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_the_bundle_ships_broken_is_its_fault_a_missing_runtime_is_not() {
        let model = |error: ModelError| StartError::Model {
            app: "a".into(),
            source: Box::new(LaunchError::Model(error)),
            bundle: PathBuf::new(),
        };
        let invalid = ModelError::Invalid { model: "m".into(), path: "m.onnx".into(), detail: "garbage".into() };
        assert!(model(invalid).is_bundle_fault());
        // The message names the file as the bundle does, not where the gateway stores it.
        let stored = PathBuf::from("/var/lib/jig/bundles/ab12");
        let invalid = ModelError::Invalid { model: "m".into(), path: stored.join("models/m.onnx"), detail: "x".into() };
        let said = StartError::Model { app: "a".into(), source: Box::new(LaunchError::Model(invalid)), bundle: stored }
            .to_string();
        assert!(said.contains("(models/m.onnx)") && !said.contains("/var/lib"), "{said}");
        assert!(!model(ModelError::Library { detail: "not found".into() }).is_bundle_fault());
        let deployment = StartError::Deployment { app: "a".into(), detail: "no such variant".into() };
        assert!(!deployment.is_bundle_fault());
        assert!(StartError::Bundle(InvalidBundle("bad".into())).is_bundle_fault());
        // A device that is gone is this machine's state, not the bundle's: the deploy is not blamed on it.
        let gone = jig_model_host::device::DeviceError::Gone {
            segment: "mig:0:3g.40gb:1".parse().unwrap(),
            device: "MIG-1".into(),
        };
        let unbound = LaunchError::Bind { instance: "a/s/v@mig:0:3g.40gb:1#0".into(), source: gone };
        assert!(
            !StartError::Model { app: "a".into(), source: Box::new(unbound), bundle: PathBuf::new() }.is_bundle_fault()
        );
    }
}
