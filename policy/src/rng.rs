//! jig's one pseudo-random generator: SplitMix64 (Steele, Lea and Flood, 2014), seedable and the same on every
//! platform, so that a seed replays a run exactly. The simulator draws every arrival, latency and fan-out from
//! it, the synthetic models their weights, `jig bench` its Poisson arrivals.
//!
//! Not for secrets: it is fast and statistically sound, not unpredictable. The simulator's figures and the
//! synthetic models' bytes are published: the sequence and the conversions below must never change.

/// SplitMix64: 64 bits of state, one addition and a mix per draw.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The generator that `seed` starts; every seed, zero included, gives a full-period sequence.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 uniform bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1): the top 53 bits, every value a multiple of 2⁻⁵³.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in (0, 1]: what a logarithm may take (`1 − uniform()`, exactly).
    pub fn uniform_nonzero(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// Exponential of mean `mean`, by inversion: the gap between Poisson arrivals at rate `1 / mean`.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * self.uniform_nonzero().ln()
    }

    /// Standard normal (mean 0, deviation 1), by Box–Muller (one of the pair; two uniforms a draw).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform_nonzero(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference sequence (Vigna's `splitmix64.c` from seed 0): published figures and model bytes rest on it.
    #[test]
    fn the_sequence_is_splitmix64s() {
        let mut rng = SplitMix64::new(0);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(first, [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4, 0x06c4_5d18_8009_454f]);
    }

    #[test]
    fn draws_have_their_ranges_and_moments() {
        let mut rng = SplitMix64::new(42);
        let n = 200_000;
        let (mut uniform, mut exponential, mut normal, mut normal_sq) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..n {
            let u = rng.uniform();
            assert!((0.0..1.0).contains(&u));
            let nz = rng.uniform_nonzero();
            assert!(nz > 0.0 && nz <= 1.0);
            uniform += u;
            exponential += rng.exponential(2.0);
            let z = rng.normal();
            normal += z;
            normal_sq += z * z;
        }
        let n = f64::from(n);
        assert!((uniform / n - 0.5).abs() < 0.005, "uniform mean {}", uniform / n);
        assert!((exponential / n - 2.0).abs() < 0.03, "exponential mean {}", exponential / n);
        assert!((normal / n).abs() < 0.01 && (normal_sq / n - 1.0).abs() < 0.02, "normal {normal} {normal_sq}");
    }

    #[test]
    fn a_seed_replays_its_sequence() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        assert_ne!(SplitMix64::new(7).next_u64(), SplitMix64::new(8).next_u64());
    }
}
