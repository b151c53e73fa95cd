//! # jig-client
//!
//! The caller's side of jig's HTTP API:
//!
//! * [`Client`]: the client of the `jig` commands that talk to a gateway (`deploy`, `apps`, `status`,
//!   `invoke`, `delete`).
//! * [`load`]: load generators (closed loop for the most a server sustains, open loop for latency under a
//!   rate or a trace), for `jig bench` and the benchmarks.

#![deny(missing_docs)]

mod http;
pub mod load;

pub use http::{Answer, BadAnswer, Client, Unreachable};
