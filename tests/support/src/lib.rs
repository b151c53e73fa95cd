//! # jig-test-support
//!
//! What the crates' integration tests share, instead of files included by `#[path]`:
//!
//! * [`bundles`]: the repository's root, the components and models set-up built, bundles to deploy;
//! * [`processes`]: `jig` itself, a gateway, a `jig node` and etcd, each killed when dropped;
//! * [`http`](mod@http): a plain HTTP/1.1 client;
//! * [`certificates`](mod@certificates): a CA and the certificates it signs, for the TLS tests;
//! * [`measure`]: a process's CPU time and page faults so far, and its resident memory;
//! * [`tensors`]: tensors for the generated models.
//!
//! The end-to-end tests that run `jig` are the `jig` package's (`cli/tests/e2e`): cargo builds the binary
//! before them.

pub mod bundles;
pub mod certificates;
pub mod http;
pub mod measure;
pub mod processes;
pub mod tensors;

pub use bundles::{bundle, component, model, probe_app, root};
pub use certificates::certificates;
pub use http::{Reply, http};
pub use measure::{cpu_ticks, minor_faults, resident_bytes};
pub use processes::{Etcd, Gateway, Process, jig, jig_path, start_node, start_node_with_env};
pub use tensors::{f32s, i64s, mixed_two_rows};
