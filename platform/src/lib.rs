//! # jig-platform
//!
//! The `jig` binary and the pieces it composes:
//!
//! * [`runtime`]: runs glue functions — sandboxed WebAssembly components — per request, with memory and
//!   deadline limits, and serves their host calls (`infer`, `emit`, configuration, deadline, logging).
//! * [`slots`]: a function's model slots served by model instances (`jig-gpu-host`), the `infer` of the
//!   main path.
//! * [`bundle`]: bundles and their `jig.toml` manifest.
//! * [`cli`]: the `jig` command line.
//!
//! The gateway, control plane, scheduler, controller and store join here as they are built; model execution
//! lives in `jig-gpu-host` and planning in `jig-planner`.

pub mod bundle;
pub mod cli;
pub mod runtime;
pub mod slots;
