//! # jig-synth
//!
//! Synthetic ONNX models for the JigsawServe paper's three applications (social media, traffic analysis, AR
//! assistant): the same architecture families at the same sizes as the paper's models, whose weights cannot
//! be had here, generated deterministically (the same name always gives the same bytes). Their weights are
//! pseudo-random: they serve timing, profiling and planning, never accuracy claims, and every model says so
//! in its metadata (`jig.synthetic`).
//!
//! * [`onnx`]: a minimal writer of the ONNX protobuf format.
//! * [`graph`]: a layer-by-layer builder with deterministic weights.
//! * [`families`]: the architectures.

pub mod families;
pub mod graph;
pub mod onnx;
