//! Routing over a slot's instances in proportion to their planned throughput: smooth weighted round-robin
//! (as in nginx). Each pick adds every instance's weight to its credit, takes the instance with the most
//! credit and charges it the total. Deterministic; every instance's share of picks tracks its weight's share
//! within one round, so no instance waits long for its turn.

/// Smooth weighted round-robin over `len()` instances.
///
/// Instances of equal weight (a plan's instances of one type) form a group, picked in one O(groups) step
/// rather than O(instances): within a group every instance gains the same credit, so the one the plain
/// algorithm takes (the most credit, the lowest index on a tie) is always the group's next in index order, and
/// the group needs only two credits, of the instances it has not yet picked this round and of those it has.
#[derive(Debug, Clone)]
pub struct WeightedRoundRobin {
    groups: Vec<Group>,
    total: f64,
}

/// Instances of one weight.
#[derive(Debug, Clone)]
struct Group {
    weight: f64,
    /// The instances' indices, ascending.
    members: Vec<usize>,
    /// The credit of `members[next..]`; `members[..next]`, picked this round, hold `unpicked − total`.
    unpicked: f64,
    next: usize,
}

impl WeightedRoundRobin {
    /// Weights that are not positive and finite count as 1.
    pub fn new(weights: impl IntoIterator<Item = f64>) -> Self {
        let mut groups: Vec<Group> = Vec::new();
        let mut total = 0.0;
        for (i, w) in weights.into_iter().enumerate() {
            let weight = if w.is_finite() && w > 0.0 { w } else { 1.0 };
            total += weight;
            match groups.iter_mut().find(|g| g.weight == weight) {
                Some(g) => g.members.push(i),
                None => groups.push(Group { weight, members: vec![i], unpicked: 0.0, next: 0 }),
            }
        }
        WeightedRoundRobin { groups, total }
    }

    /// How many destinations it routes to.
    pub fn len(&self) -> usize {
        self.groups.iter().map(|g| g.members.len()).sum()
    }

    /// Whether it has no destination.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The index of the instance the next request goes to; `None` when there are none.
    pub fn pick(&mut self) -> Option<usize> {
        let best = self.next_group()?;
        for g in &mut self.groups {
            g.unpicked += g.weight;
        }
        let g = &mut self.groups[best];
        let picked = g.members[g.next];
        g.next += 1;
        if g.next == g.members.len() {
            // Every member picked this round: all hold the lower credit again.
            g.next = 0;
            g.unpicked -= self.total;
        }
        Some(picked)
    }

    /// The index [`WeightedRoundRobin::pick`] would return next, leaving the rotation as it is.
    pub fn peek(&self) -> Option<usize> {
        self.next_group().map(|g| self.groups[g].members[self.groups[g].next])
    }

    /// The group the next pick takes from: the most credit once every group has gained its weight, the lowest
    /// index on a tie.
    fn next_group(&self) -> Option<usize> {
        (0..self.groups.len()).max_by(|&a, &b| {
            let (ga, gb) = (&self.groups[a], &self.groups[b]);
            let credit = |g: &Group| g.unpicked + g.weight;
            credit(ga).total_cmp(&credit(gb)).then(gb.members[gb.next].cmp(&ga.members[ga.next]))
        })
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
    fn a_peek_names_the_next_pick_and_moves_nothing() {
        let mut wrr = WeightedRoundRobin::new([3.0, 1.0, 1.0, 2.0]);
        for _ in 0..50 {
            let peeked = wrr.peek();
            assert_eq!(wrr.peek(), peeked, "a second peek sees the same");
            assert_eq!(wrr.pick(), peeked);
        }
        assert_eq!(WeightedRoundRobin::new([]).peek(), None);
    }

    /// The plain algorithm, one credit per instance, to check the grouped one against.
    fn plain(weights: &[f64], picks: usize) -> Vec<usize> {
        let total: f64 = weights.iter().sum();
        let mut credit = vec![0.0; weights.len()];
        (0..picks)
            .map(|_| {
                credit.iter_mut().zip(weights).for_each(|(c, w)| *c += w);
                let best = (0..weights.len()).max_by(|&a, &b| credit[a].total_cmp(&credit[b]).then(b.cmp(&a))).unwrap();
                credit[best] -= total;
                best
            })
            .collect()
    }

    #[test]
    fn grouping_equal_weights_picks_as_one_credit_per_instance_does() {
        for weights in [
            vec![3.0, 1.0, 3.0, 1.0, 1.0, 3.0],
            vec![2.0; 9],
            vec![4.0, 4.0, 4.0, 1.5, 1.5, 0.5, 4.0],
            (0..40).map(|i| if i % 3 == 0 { 7.0 } else { 2.0 }).collect(),
        ] {
            let mut wrr = WeightedRoundRobin::new(weights.iter().copied());
            let grouped: Vec<usize> = (0..500).map(|_| wrr.pick().unwrap()).collect();
            assert_eq!(grouped, plain(&weights, 500), "{weights:?}");
        }
    }

    #[test]
    fn bad_weights_count_as_one_and_an_empty_pool_picks_nothing() {
        let mut wrr = WeightedRoundRobin::new([f64::NAN, -2.0]);
        let picks: Vec<usize> = (0..4).map(|_| wrr.pick().unwrap()).collect();
        assert_eq!(picks, vec![0, 1, 0, 1]);
        assert_eq!(WeightedRoundRobin::new([]).pick(), None);
    }
}
