//! Vulcan-style search (Zhang et al., NSDI 2024, as Compass §6.1 runs it): Bayesian optimisation of one
//! aggregate utility ([`utility`]) over a query's plans, one query at a time: no reuse across queries, its own
//! profiler (fixed sampling, no prefix cache).
//!
//! [`INIT_RANDOM`] random plans, then each step fits a GP ([`Gp`]) to the utilities of the latest
//! [`TRAIN_CAP`] profiled plans and profiles the candidate of highest expected improvement (ξ = [`EI_XI`])
//! among [`CANDIDATES`] random unprofiled plans.

use super::gp::{Gp, normal_cdf, normal_pdf};
use super::profiler::{Profiler, Sampling};
use super::space::{Query, Space};
use super::{CANDIDATES, INIT_RANDOM, Rng, SearchOutcome, TRAIN_CAP, candidates, random_unseen, utility};

/// Expected improvement's exploration margin, in utility units (the utility spans [0, 3]).
pub const EI_XI: f64 = 0.01;

/// Search `query`'s plans until `deadline_s` on the planning clock.
pub fn search(space: &Space, query: &Query, deadline_s: f64, seed: u64) -> SearchOutcome {
    let mut profiler = Profiler::new(space, query, Sampling::Fixed, false, deadline_s);
    let mut rng = Rng::new(seed);
    let (mut xs, mut ys): (Vec<Vec<f64>>, Vec<f64>) = (Vec::new(), Vec::new());
    while !profiler.expired() && profiler.observations.len() < space.len() {
        let next = if xs.len() < INIT_RANDOM {
            random_unseen(space, &profiler, &mut rng)
        } else {
            propose(space, &profiler, &mut rng, &xs, &ys)
        };
        let Some(plan) = next else { break };
        match profiler.profile(plan) {
            Some(o) => {
                xs.push(space.features(plan));
                ys.push(utility(query, &o.truth));
            }
            None if profiler.expired() => break,
            None => {}
        }
    }
    SearchOutcome::from(profiler)
}

/// The candidate of highest expected improvement over the best utility seen.
fn propose(space: &Space, profiler: &Profiler, rng: &mut Rng, xs: &[Vec<f64>], ys: &[f64]) -> Option<usize> {
    let from = xs.len().saturating_sub(TRAIN_CAP);
    let best = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let Some(gp) = Gp::fit(xs[from..].to_vec(), &ys[from..]) else {
        return random_unseen(space, profiler, rng);
    };
    let ei = |plan: usize| {
        let (mu, sd) = gp.predict(&space.features(plan));
        let z = (mu - best - EI_XI) / sd;
        (mu - best - EI_XI) * normal_cdf(z) + sd * normal_pdf(z)
    };
    candidates(space, profiler, rng, CANDIDATES)
        .into_iter()
        .map(|p| (ei(p), p))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, p)| p)
}
