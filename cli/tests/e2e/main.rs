//! End to end: the `jig` binary (which cargo builds before these tests) run as a user runs it, with gateways,
//! nodes and etcd as real processes on loopback, real bundles, models and HTTP. The helpers are
//! `jig-test-support`'s.

mod cli;
mod cluster;
mod compass_search;
mod gateway;
mod gpu_machine;
mod gpu_refused;
mod https;
mod new;
mod node;
mod paper_apps;
mod partition;
mod reproductions;
mod sign_reader;
mod ui;
mod worker;

/// The support crate finds the binary cargo built for these tests.
#[test]
fn the_support_crate_runs_the_jig_cargo_built() {
    assert_eq!(jig_test_support::jig_path(), std::path::Path::new(env!("CARGO_BIN_EXE_jig")));
}
