//! Compass's multi-query scheduler (§4.3; notes §3.10), shared by all three searches: greedy query–plan
//! matching. Every (query, compliant plan) pair is ranked by benefit per resource, w_i / cr_ij (the query's
//! rate over the cores the plan needs for it), and admitted in that order when its query has no plan yet and
//! its cores fit in what is left, until the cores run out. Cores are one pool (the paper's cloud-only case,
//! m = 1), counted fractionally: queries share instances of the same configuration, as Compass co-locates.

/// A query's plan offered to the scheduler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// The query's index.
    pub query: usize,
    /// Its SLO benefit w: the query's rate, req/s.
    pub benefit: f64,
    /// The cores the plan needs for the query's rate.
    pub cores: f64,
}

/// What the scheduler admitted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Matching {
    /// Indices into the candidates, one per admitted query, in admission order.
    pub admitted: Vec<usize>,
    /// Σ w of the admitted queries: SLO goodput, req/s.
    pub goodput: f64,
    /// Cores the admitted plans take.
    pub cores_used: f64,
}

/// Greedy matching of `candidates` onto `cores` cores.
pub fn greedy(candidates: &[Candidate], cores: f64) -> Matching {
    let mut order: Vec<usize> = (0..candidates.len()).filter(|&i| candidates[i].cores > 0.0).collect();
    let ratio = |i: usize| candidates[i].benefit / candidates[i].cores;
    order.sort_by(|&a, &b| ratio(b).total_cmp(&ratio(a)).then(candidates[a].query.cmp(&candidates[b].query)));
    let mut scheduled = std::collections::HashSet::new();
    let mut m = Matching::default();
    for i in order {
        let c = candidates[i];
        if scheduled.contains(&c.query) || m.cores_used + c.cores > cores + 1e-9 {
            continue;
        }
        scheduled.insert(c.query);
        m.admitted.push(i);
        m.goodput += c.benefit;
        m.cores_used += c.cores;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query_search::Rng;

    #[test]
    fn it_admits_at_most_one_plan_per_query_within_the_cores() {
        let mut rng = Rng::new(7);
        for _ in 0..200 {
            let candidates: Vec<Candidate> = (0..40)
                .map(|_| Candidate { query: rng.below(10), benefit: rng.range(0.5, 3.0), cores: rng.range(0.05, 3.0) })
                .collect();
            let cores = rng.range(0.5, 8.0);
            let m = greedy(&candidates, cores);
            let mut queries: Vec<usize> = m.admitted.iter().map(|&i| candidates[i].query).collect();
            let n = queries.len();
            queries.sort_unstable();
            queries.dedup();
            assert_eq!(queries.len(), n, "a query admitted twice");
            let used: f64 = m.admitted.iter().map(|&i| candidates[i].cores).sum();
            assert!(used <= cores + 1e-9 && (used - m.cores_used).abs() < 1e-9);
        }
    }

    #[test]
    fn it_takes_the_best_benefit_per_core_first() {
        let c = |query, benefit, cores| Candidate { query, benefit, cores };
        // Query 0's cheap plan first (2/0.5), then query 1's (1/0.5); query 0's dear plan is never needed.
        let m = greedy(&[c(0, 2.0, 3.0), c(0, 2.0, 0.5), c(1, 1.0, 0.5), c(2, 1.0, 4.0)], 2.0);
        assert_eq!(m.admitted, vec![1, 2]);
        assert!((m.goodput - 3.0).abs() < 1e-12);
    }
}
