//! The one quantile every figure is reported with: the simulator's p50 and p99, `jig bench`'s latencies, a
//! deployed app's observed batch latencies and `jig profile`'s p50 and p95. The planner compares an app's
//! observed p50 with its profiled one: both must be the same statistic.

use std::cmp::Ordering;

/// The `q` quantile (0 to 1) of `sorted` (ascending), by nearest rank on the 0-based index: the element at
/// `round((n − 1)·q)`, halves rounded up, so always a measured value, never an interpolation. The median of an
/// even count is the upper middle one; `q` outside [0, 1] is the minimum or maximum. `None` when `sorted` is
/// empty.
///
/// The simulator's published figures are computed by this rule: changing it moves them.
pub fn quantile<T: Copy + PartialOrd>(sorted: &[T], q: f64) -> Option<T> {
    debug_assert!(
        sorted.windows(2).all(|w| w[0].partial_cmp(&w[1]) != Some(Ordering::Greater)),
        "quantile of an unsorted slice"
    );
    let last = sorted.len().checked_sub(1)?;
    // `as` saturates: a negative or NaN `q` is index 0.
    Some(sorted[((last as f64 * q).round() as usize).min(last)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn nearest_rank_on_the_index() {
        let ten: Vec<u32> = (1..=10).collect();
        assert_eq!(quantile(&ten, 0.5), Some(6), "the upper middle of an even count");
        assert_eq!(quantile(&ten, 0.95), Some(10));
        assert_eq!(quantile(&ten, 0.0), Some(1));
        assert_eq!(quantile(&ten, 1.0), Some(10));
        assert_eq!(quantile(&ten, 2.0), Some(10));
        assert_eq!(quantile(&ten, -1.0), Some(1));
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&hundred, 0.95), Some(95.0));
        assert_eq!(quantile(&hundred, 0.99), Some(99.0));
        assert_eq!(quantile(&[Duration::from_millis(3)], 0.99), Some(Duration::from_millis(3)));
        assert_eq!(quantile::<f64>(&[], 0.5), None);
    }

    /// The median is `sorted[n / 2]` for every count: what the profiler's median was before it used this.
    #[test]
    fn the_median_is_the_element_at_half_the_count() {
        for n in 1..200usize {
            let v: Vec<usize> = (0..n).collect();
            assert_eq!(quantile(&v, 0.5), Some(n / 2), "n = {n}");
        }
    }
}
