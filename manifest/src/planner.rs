//! What a bundle tells the planner beyond its graph: the strategy it names (one of [`PLANNERS`]), IPA's settings
//! ([`IpaSettings`], `[ipa]`) and Compass's query classes ([`QueryClass`], `classes`).

use serde::{Deserialize, Serialize};

/// The planner strategies a bundle's `planner` may name: those of `jig_planner::Strategy`.
pub const PLANNERS: [&str; 5] = ["jigsaw", "ipa", "compass", "gpulet", "ppipe"];

/// IPA's objective weights and baselines (`[ipa]`); each absent key keeps the planner's default (the paper's).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpaSettings {
    /// α, the weight of the pipeline's accuracy in percent of its best (PAS).
    pub alpha: Option<f64>,
    /// β, the cost of one core.
    pub beta: Option<f64>,
    /// δ, the cost of one request of batch size.
    pub delta: Option<f64>,
    /// The req/s one replica must sustain at batch 1 on its base core allocation.
    pub threshold_rps: Option<f64>,
    /// Which variants a stage may run: one of [`IPA_VARIANTS`].
    pub variants: Option<String>,
    /// Replicas of every stage, fixed (RIM); 0 or absent: chosen by the planner.
    pub replicas: Option<u32>,
    /// IPA's adaptation interval, seconds: how often the gateway predicts the app's load and re-plans it when
    /// the prediction moved ([`IpaSettings::INTERVAL_S`] when absent).
    pub interval_s: Option<f64>,
}

impl IpaSettings {
    /// IPA's adaptation interval by default, seconds (the paper's).
    pub const INTERVAL_S: f64 = 10.0;
    /// The longest adaptation interval, seconds: the load history the gateway keeps per second.
    pub const MAX_INTERVAL_S: f64 = 120.0;

    /// The adaptation interval.
    pub fn interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.interval_s.unwrap_or(Self::INTERVAL_S))
    }
}

/// What `[ipa] variants` may say: any variant (IPA), each stage's least accurate (FA2-low) or most accurate
/// (FA2-high).
pub const IPA_VARIANTS: [&str; 3] = ["switch", "lightest", "heaviest"];

/// A query class of a Compass app: its own latency and accuracy objectives, and its share of the demand.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryClass {
    /// Its name, as requests give it (`jig-class`).
    pub name: String,
    /// Its end-to-end latency objective, ms: the deadline of its requests that name none.
    pub latency_ms: u64,
    /// Its accuracy objective, a fraction of the best achievable (0 to 1].
    pub accuracy: f64,
    /// Its share of the app's demand (the shares are normalised to sum to 1).
    pub share: f64,
}
