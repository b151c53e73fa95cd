//! What the scheduler is given: pooled pipelines ([`Pipeline`]), cut into stages ([`Stage`]) each served by a
//! pool of instances ([`Instance`]), with a latency per batch size ([`per_batch`] makes one from a profile), and
//! what a stage lacks to run a batch of a given size.

use std::time::Duration;

/// An instance of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    /// Its id in the reservation tables: one id in several pools is one instance, booked once at a time.
    pub id: usize,
    /// The node whose uplink and downlink its transfers use; `None` when its transfers contend for nothing.
    pub node: Option<usize>,
}

impl From<usize> for Instance {
    /// An instance on no node.
    fn from(id: usize) -> Self {
        Instance { id, node: None }
    }
}

/// One partition of a pooled pipeline, and its pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// The instances that run it.
    pub pool: Vec<Instance>,
    /// `latency[b - 1]`: how long a batch of `b` runs on an instance of the pool.
    pub latency: Vec<Duration>,
    /// `transfer[b - 1]`: how long a batch of `b`'s input takes to come from the previous stage; empty when it
    /// takes no time. Empty for the first stage, which has none before it.
    pub transfer: Vec<Duration>,
}

/// A pooled pipeline, as the planner made it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// Its name, for messages.
    pub name: String,
    /// The planned batch size (the MILP's unified `bs_i`): the largest batch it runs.
    pub batch: usize,
    /// Its partitions, in order.
    pub stages: Vec<Stage>,
}

/// A latency per batch size from 1 up to the largest profiled, from a profile of some sizes (`(batch, latency)`,
/// any order): a size not profiled takes the next larger profiled size's latency, which bounds it (a partial
/// batch runs no longer than a full one).
pub fn per_batch(profiled: &[(usize, Duration)]) -> Vec<Duration> {
    let largest = profiled.iter().map(|&(b, _)| b).max().unwrap_or(0);
    (1..=largest)
        .filter_map(|b| profiled.iter().filter(|&&(p, _)| p >= b).min_by_key(|&&(p, _)| p).map(|&(_, l)| l))
        .collect()
}

/// What `stage` (the `k`th) lacks to run a batch of `batch`, if anything.
pub(super) fn missing(stage: &Stage, k: usize, batch: usize) -> Option<String> {
    if stage.latency.len() < batch {
        return Some(format!(
            "no latency for batch {} (profiled up to {}); give one per batch size (`per_batch` fills gaps)",
            batch,
            stage.latency.len()
        ));
    }
    if k > 0 && !stage.transfer.is_empty() && stage.transfer.len() < batch {
        return Some(format!(
            "no transfer latency for batch {} (given up to {}); give one per batch size, or none for no transfer time",
            batch,
            stage.transfer.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reserve::testing::*;

    #[test]
    fn profiles_fill_gaps_from_larger_sizes_and_never_shrink_with_the_batch() {
        assert_eq!(per_batch(&[(4, ms(9)), (1, ms(5)), (2, ms(7))]), vec![ms(5), ms(7), ms(9), ms(9)]);
        assert!(per_batch(&[]).is_empty());
        let s = scheduler(vec![pipeline("noisy", 3, vec![stage(&[0], &[10, 8, 12])])]);
        assert_eq!(s.pipelines()[0].stages[0].latency, vec![ms(10), ms(10), ms(12)]);
        assert_eq!(s.probe(0, 2, ms(0)).unwrap().finish, ms(10));
    }
}
