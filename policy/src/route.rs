//! Routing over a slot's instances in proportion to their planned throughput: smooth weighted round-robin
//! (as in nginx). Each pick adds every instance's weight to its credit, takes the instance with the most
//! credit and charges it the total. Deterministic; every instance's share of picks tracks its weight's share
//! within one round, so no instance waits long for its turn.

/// Smooth weighted round-robin over `len()` instances.
#[derive(Debug, Clone)]
pub struct WeightedRoundRobin {
    weights: Vec<f64>,
    credit: Vec<f64>,
    total: f64,
}

impl WeightedRoundRobin {
    /// Weights that are not positive and finite count as 1.
    pub fn new(weights: impl IntoIterator<Item = f64>) -> Self {
        let weights: Vec<f64> = weights.into_iter().map(|w| if w.is_finite() && w > 0.0 { w } else { 1.0 }).collect();
        let total = weights.iter().sum();
        WeightedRoundRobin { credit: vec![0.0; weights.len()], weights, total }
    }

    /// How many destinations it routes to.
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// Whether it has no destination.
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// The index of the instance the next request goes to; `None` when there are none.
    pub fn pick(&mut self) -> Option<usize> {
        for (c, w) in self.credit.iter_mut().zip(&self.weights) {
            *c += w;
        }
        let (best, _) = self.credit.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))?;
        self.credit[best] -= self.total;
        Some(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_follow_the_weights_evenly_spread() {
        let mut wrr = WeightedRoundRobin::new([5.0, 1.0, 1.0]);
        let picks: Vec<usize> = (0..7).map(|_| wrr.pick().unwrap()).collect();
        assert_eq!(picks.iter().filter(|&&i| i == 0).count(), 5);
        // Smooth: the heavy instance never takes more than three in a row within a round of seven.
        assert_eq!(picks, vec![0, 0, 1, 0, 2, 0, 0]);
        let mut counts = [0usize; 3];
        for _ in 0..7000 {
            counts[wrr.pick().unwrap()] += 1;
        }
        assert_eq!(counts, [5000, 1000, 1000]);
    }

    #[test]
    fn bad_weights_count_as_one_and_an_empty_pool_picks_nothing() {
        let mut wrr = WeightedRoundRobin::new([f64::NAN, -2.0]);
        let picks: Vec<usize> = (0..4).map(|_| wrr.pick().unwrap()).collect();
        assert_eq!(picks, vec![0, 1, 0, 1]);
        assert_eq!(WeightedRoundRobin::new([]).pick(), None);
    }
}
