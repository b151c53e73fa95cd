//! Compass against its real baselines (Compass, PVLDB 2026, §6.1–6.2): per-query plan searches under planning
//! deadlines, each followed by Compass's own multi-query scheduler, simulated on jig's measured profiles. This
//! is not the `compass` planner strategy ([`crate::compass`], an exact MILP over query classes): it reproduces
//! the paper's comparison, whose gain is the search's quality and speed.
//!
//! | Paper (notes `compass.md`) | Here |
//! |---|---|
//! | §2.2 plan space O(K^M·N^M) (notes §3.1) | [`space`]: one (variant, segment, batch) per stage of a linear pipeline; accuracy Π A/A*, latency Σ 2·L, cores for the query's rate |
//! | §6.1 workload: queries with their own SLOs (notes §5.4) | [`space::queries`]: seeded queries around the spec's classes |
//! | §4.2 SLO profiler: adaptive sampling, prefix profiling (notes §3.6–3.7) | [`profiler`]: the simulated clock, its constants |
//! | §4.1 CAMO: two surrogates, Pr·Pr/cost, committee warm start, Algorithm 1 (notes §3.3–3.5, §3.8) | [`camo`], on the GP of [`gp`] |
//! | §6.1 Vulcan: BO of one aggregate utility, single query | [`vulcan`] |
//! | §6.1 VideoStorm: hill climbing over quality and resources | [`videostorm`] |
//! | §4.3 greedy query–plan matching by benefit / resource (notes §3.10) | [`matching`], for all three |
//! | §6.3 ablation "w/o SLO Profiler" (fixed sampling, no prefix cache) | [`camo::search_profiled`], the `CAMO/fixed` row |
//! | §6.1 5 s and 15 s deadlines; §6.2 goodput, time to first plan | [`compare`], `jig simulate SPEC --searches` |
//!
//! What differs from the paper, stated: one tier of CPU cores (the paper's cloud-only case), so the schedule is
//! one pool of cores; accuracy is the spec's per-variant accuracy (raised to a query's difficulty), not
//! measured on a data set; profiling time is simulated from the measured per-request times
//! ([`profiler`]); resource trimming is a greedy step search, not a binary one. Every constant was fixed
//! before any result was seen.

pub mod camo;
pub mod gp;
pub mod matching;
pub mod profiler;
pub mod space;
pub mod videostorm;
pub mod vulcan;

mod report;

pub use report::{Comparison, DEADLINES_S, Run, Search, Settings, compare};

use profiler::{Observation, Profiler};
use space::{Query, Space, Truth};

/// Random plans that start a search without prior (Vulcan, and CAMO with no history).
pub const INIT_RANDOM: usize = 3;
/// The most recent profiled plans a surrogate is fitted to (bounds the search's own CPU time).
pub const TRAIN_CAP: usize = 60;
/// Random unprofiled plans the acquisition is evaluated on each step, for every search alike.
pub const CANDIDATES: usize = 256;

/// The searches' and the queries' randomness: jig's one seedable generator.
pub use jig_policy::rng::SplitMix64 as Rng;

/// Vulcan's and VideoStorm's aggregate utility of a measured plan: min(1, acc / A_slo) + min(1, L_slo / lat),
/// plus 1 / (1 + cores) when both SLOs hold. It is 2 or more exactly when the plan is compliant, and among
/// compliant plans it prefers the one that needs the fewest cores.
pub fn utility(query: &Query, truth: &Truth) -> f64 {
    let accuracy = (truth.accuracy / query.slo_accuracy.max(1e-9)).min(1.0);
    let latency = (query.slo_latency_ms / truth.latency_ms.max(1e-9)).min(1.0);
    let bonus = if query.compliant(truth) { 1.0 / (1.0 + truth.cores) } else { 0.0 };
    accuracy + latency + bonus
}

/// Up to `k` distinct random plans the profiler has not profiled.
pub fn candidates(space: &Space, profiler: &Profiler, rng: &mut Rng, k: usize) -> Vec<usize> {
    let mut out = std::collections::BTreeSet::new();
    for _ in 0..4 * k {
        let plan = rng.below(space.len());
        if !profiler.seen(plan) {
            out.insert(plan);
            if out.len() == k {
                break;
            }
        }
    }
    out.into_iter().collect()
}

/// A random plan the profiler has not profiled; `None` when it has profiled them all.
pub fn random_unseen(space: &Space, profiler: &Profiler, rng: &mut Rng) -> Option<usize> {
    if profiler.observations.len() >= space.len() {
        return None;
    }
    loop {
        let plan = rng.below(space.len());
        if !profiler.seen(plan) {
            return Some(plan);
        }
    }
}

/// What one query's search found by its deadline.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    /// The SLO-compliant plans it profiled, in order.
    pub compliant: Vec<Observation>,
    /// Every plan it profiled, in order.
    pub observations: Vec<Observation>,
    /// How many plans it profiled.
    pub profiled: usize,
    /// Plans profiled before the first compliant one; `None` when it found none.
    pub profiled_before_first: Option<usize>,
    /// The planning clock when the first compliant plan came back, s.
    pub first_compliant_s: Option<f64>,
    /// The planning clock when the search stopped, s: simulated profiling plus measured computation.
    pub planning_s: f64,
    /// The simulated profiling time of that, s.
    pub simulated_s: f64,
}

impl From<Profiler<'_>> for SearchOutcome {
    fn from(profiler: Profiler<'_>) -> Self {
        let (planning_s, simulated_s) = (profiler.now_s(), profiler.simulated_s());
        let observations = profiler.observations;
        SearchOutcome {
            compliant: observations.iter().filter(|o| o.compliant).copied().collect(),
            profiled: observations.len(),
            profiled_before_first: observations.iter().position(|o| o.compliant),
            first_compliant_s: profiler.first_compliant_s,
            planning_s,
            simulated_s,
            observations,
        }
    }
}

#[cfg(test)]
mod tests;
