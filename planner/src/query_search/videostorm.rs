//! VideoStorm-style search (Zhang et al., NSDI 2017, extended with placement as Compass §6.1 runs it): greedy
//! hill climbing over the quality knobs and resources of one query's plan, by the same aggregate utility as
//! Vulcan's ([`utility`]), with its own profiler (fixed sampling, no prefix cache).
//!
//! It starts at the quality-first plan ([`Space::quality_first`]: best variants, most cores, batch 1), profiles
//! the unprofiled neighbours of the current plan ([`Space::neighbours`]: one stage's variant, segment or batch
//! one step up or down) in random order and moves to the first that improves the utility (first-improvement:
//! every neighbour costs a profiling run); at a local optimum it restarts from a random unprofiled plan.

use super::profiler::{Profiler, Sampling};
use super::space::{Query, Space};
use super::{Rng, SearchOutcome, random_unseen, utility};

/// Search `query`'s plans until `deadline_s` on the planning clock.
pub fn search(space: &Space, query: &Query, deadline_s: f64, seed: u64) -> SearchOutcome {
    let mut profiler = Profiler::new(space, query, Sampling::Fixed, false, deadline_s);
    let mut rng = Rng::new(seed);
    let mut current = Some(space.quality_first());
    'climb: while let Some(here) = current.take() {
        let Some(start) = profiler.profile(here) else { break };
        let mut best = (here, utility(query, &start.truth));
        loop {
            let mut moves: Vec<usize> = space.neighbours(best.0).into_iter().filter(|&p| !profiler.seen(p)).collect();
            rng.shuffle(&mut moves);
            let mut improved = false;
            for plan in moves {
                let Some(o) = profiler.profile(plan) else { break 'climb };
                let u = utility(query, &o.truth);
                if u > best.1 {
                    best = (plan, u);
                    improved = true;
                    break;
                }
            }
            if !improved {
                break;
            }
        }
        current = random_unseen(space, &profiler, &mut rng);
    }
    SearchOutcome::from(profiler)
}
