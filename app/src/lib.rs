//! # jig-app
//!
//! A deployed app, running: the bundle's glue loaded into the function runtime (`jig-runtime`), its model
//! slots served by instances (`jig-model-host`) as the planner (`jig-planner`) deployed them, and the graph
//! executor that carries a request from the entry task through `emit`s to the leaves.
//!
//! * [`deployment`]: which model instances serve an app, chosen by the planner from the bundle's profile table.
//! * [`ModelSlots`]: a function's model slots served by instance pools, the `infer` of the main path.
//! * [`App`]: an app running, ready to invoke.
//! * [`admission`]: how many requests a planned app holds at once, learned from how they end.

#![deny(missing_docs)]

pub mod admission;
mod app;
pub mod deployment;
mod error;
mod pipelines;
mod slots;

pub use app::{Admitted, App, DEFAULT_DEADLINE, FACTOR_WINDOWS, ModelHosts, Output, TaskObserver};
pub use deployment::Deployment;
pub use error::{AppError, StartError};
pub use pipelines::{Booked, HeadStats};
pub use slots::ModelSlots;
