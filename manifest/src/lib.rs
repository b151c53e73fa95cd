//! # jig-manifest
//!
//! Bundles: a directory with a `jig.toml` manifest, the glue components, the models and (optionally) the
//! profile table `profiles.csv` written by `jig profile`.
//!
//! ```toml
//! manifest_version = 1                # optional: the format's version, 1 (the only one so far)
//! name = "sign-reader"                # the app: letters, digits, `-` and `_`, at most 64
//! planner = "jigsaw"                  # optional: the planner strategy, `jigsaw` (default), `ipa` or `compass`
//! classes = [                         # with `compass`: query classes, each with its own objectives and
//!   { name = "fast", latency_ms = 300, accuracy = 0.8, share = 0.5 },   # share of the demand; a request
//!   { name = "best", latency_ms = 2000, accuracy = 1.0, share = 0.5 },  # names its class in `jig-class`
//! ]
//!
//! [ipa]                               # optional, with `ipa`: its objective's weights and baselines
//! alpha = 2.0                         # weight of accuracy (PAS, percent of the best); beta = 1.0 per core
//! variants = "switch"                 # `switch` (IPA), `lightest` (FA2-low) or `heaviest` (FA2-high)
//! replicas = 0                        # fixed replicas per stage (RIM); 0: chosen by the planner
//! interval_s = 10                     # IPA's adaptation interval: how often its load is predicted (1–120 s)
//!
//! [slo]
//! latency_ms = 800                    # end-to-end latency objective; the default deadline of an invocation
//! accuracy = 0.9                      # accuracy objective, as a fraction of the best the variants allow
//!
//! [limits]                            # optional, per app
//! max_inflight = 256                  # requests in progress at once; more get 429
//!
//! [demand]                            # optional
//! rps = 5.0                           # the request rate to plan for until the gateway has measured one
//!
//! [tensors]                           # optional: the app as the v2 model APP (Open Inference Protocol)
//! input = { name = "x", datatype = "FP32", shape = [-1, 3, 48, 320] }   # what its entry takes
//! output = { name = "y", datatype = "FP32", shape = [-1, 40, 6625] }    # what it answers
//!
//! [[tasks]]                           # one per function; the task no edge leads to is the entry
//! name = "detect"
//! glue = "glue/detect.wasm"           # the component, relative to the bundle directory
//! config = { threshold = "0.3" }      # optional: what the glue reads with `config(key)`
//! config_files = { charset = "models/charset.txt" }   # optional: config values read from bundle files
//! limits = { memory_mib = 128, timeout_ms = 30000, concurrency = 64 }   # optional, these are the defaults
//! cpu_ms = 22                         # optional: CPU an invocation costs outside planned models, for the planner
//!
//! [[tasks]]
//! name = "recognize"
//! glue = "glue/recognize.wasm"
//! slot = "rec"                        # the model slot this task's glue calls, for the planner
//!
//! [[edges]]
//! from = "detect.crops"               # TASK.PORT: what `detect` emits on port `crops`…
//! to = "recognize"                    # …becomes one request of `recognize` per payload
//!
//! [[variants]]
//! slot = "rec"                        # the model slot glue calls with `infer`
//! name = "ppocr-v4"                   # the variant
//! model = "models/rec.onnx"           # relative to the bundle directory
//! accuracy = 0.82                     # optional, for the planner
//! factors = { speak = 1.0 }           # optional: requests this variant's task sends each downstream task
//!                                     # per request (1 when absent), for the planner
//! shapes = { x = [3, 48, 320] }       # optional: one item's shape (no batch dimension) per input with
//!                                     # dynamic dimensions, used when profiling
//! values = { lengths = [48] }         # optional: values per input, repeated to fill it, used when
//!                                     # profiling where the values set the work (else a fixed pattern)
//! ```
//!
//! Every path stays inside the bundle: absolute paths and `..` are refused. A bundle travels to the gateway
//! [packed](pack) as a tar archive with entries in a fixed order and no timestamps or owners, so the same
//! bundle always packs to the same bytes (and the same content hash).

#![deny(missing_docs)]

mod archive;
mod bundle;
mod check;
mod error;
mod graph;
mod manifest;
mod planner;
mod tensors;
#[cfg(test)]
mod testing;
mod variant;

pub use archive::{MAX_ENTRIES, pack, unpack};
pub use bundle::{Bundle, MANIFEST, PROFILES};
pub use check::{MAX_EDGES, MAX_TASKS, MAX_VARIANTS, check_name};
pub use error::{InvalidBundle, InvalidName};
pub use graph::{Build, Edge, Task, TaskLimits};
pub use manifest::{AppLimits, Demand, MANIFEST_VERSION, Manifest, Slo};
pub use planner::{IPA_VARIANTS, IpaSettings, PLANNERS, QueryClass};
pub use tensors::{AppTensors, TensorDecl};
pub use variant::Variant;
