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

use onnx::Model;

/// Every model the paper's applications use, by the names the planner's applications give them
/// (`jig_sim::apps`).
pub const MODELS: [&str; 23] = [
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "git-base",
    "git-large",
    "yolov5n",
    "yolov5s",
    "yolov5m",
    "yolov5l",
    "yolov5x",
    "efficientnet-b0",
    "efficientnet-b1",
    "efficientnet-b2",
    "efficientnet-b3",
    "efficientnet-b4",
    "vgg11",
    "vgg13",
    "vgg16",
    "vgg19",
    "glow-tts",
    "vits",
];

/// The model called `name` (one of [`MODELS`]).
pub fn model(name: &str) -> anyhow::Result<Model> {
    let number = |prefix: &str| name.strip_prefix(prefix).and_then(|n| n.parse::<u32>().ok());
    if let Some(depth) = number("resnet") {
        families::resnet(depth)
    } else if let Some(depth) = number("vgg") {
        families::vgg(depth)
    } else if let Some(variant) = number("efficientnet-b") {
        families::efficientnet(variant)
    } else if let Some(size) = name.strip_prefix("yolov5") {
        families::yolov5(size)
    } else if let Some(size) = name.strip_prefix("git-") {
        families::git(size)
    } else if name == "vits" || name == "glow-tts" {
        families::tts(name)
    } else {
        anyhow::bail!("no synthetic model `{name}`; one of: {}", MODELS.join(", "))
    }
}
