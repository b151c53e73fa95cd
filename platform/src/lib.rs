//! # jig-platform
//!
//! The `jig` binary and the pieces it composes:
//!
//! * [`runtime`]: runs glue functions — sandboxed WebAssembly components — per request, with memory and
//!   deadline limits, and serves their host calls (`infer`, `emit`, configuration, deadline, logging).
//! * [`slots`]: a function's model slots served by model instances (`jig-gpu-host`), the `infer` of the
//!   main path.
//! * [`bundle`]: bundles, their `jig.toml` manifest, and how they are packed for upload.
//! * [`deployment`]: which model instances serve an app, chosen by the planner (`jig-planner`).
//! * [`app`]: a deployed app running — its functions, model instances and the graph executor.
//! * [`gateway`]: HTTP — invocations, the control API, `/metrics` ([`metrics`]) — over the apps kept in
//!   the state directory ([`store`]).
//! * [`client`]: the HTTP client of the `jig` commands that talk to a gateway; [`load`]: a load generator.
//! * [`cli`]: the `jig` command line.
//!
//! Model execution lives in `jig-gpu-host` and planning in `jig-planner`.

pub mod app;
pub mod bundle;
pub mod cli;
pub mod client;
pub mod deployment;
pub mod gateway;
pub mod load;
pub mod metrics;
pub mod runtime;
pub mod slots;
pub mod store;
