//! jig's pseudo-random generators, in one place: [`SplitMix64`] (Steele, Lea and Flood, 2014), seedable and the
//! same on every platform, so that a seed replays a run exactly. The simulator draws every arrival, latency and
//! fan-out from it, the synthetic models their weights, `jig bench` its Poisson arrivals. [`XorShift64`] is
//! kept for one use only, the noise of the generated diurnal days (`jig trace`): the published reproductions
//! rest on those days; new code takes SplitMix64.
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

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform in 0..n (0 when n is 0): the next 64 bits modulo n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Shuffle `items` in place (Fisher–Yates, from the last item down).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
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

/// Marsaglia's xorshift64 (shifts 13, 7, 17) from a seed spread by the golden ratio: the noise of the generated
/// diurnal days (`jig_sim::trace`), whose sequence the published reproductions rest on. Use [`SplitMix64`]
/// elsewhere.
#[derive(Debug, Clone)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// The generator `seed` starts (never the all-zero state).
    pub fn new(seed: u64) -> Self {
        XorShift64 { state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1 }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// Uniform in [-1, 1): the top 53 bits, scaled.
    pub fn signed_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The diurnal days' noise: the first draws from seed 1 (`jig trace`'s default), which they rest on.
    #[test]
    fn the_days_noise_is_xorshift64s() {
        let mut rng = XorShift64::new(1);
        let first: Vec<u64> = (0..2).map(|_| rng.next_u64()).collect();
        let mut state = 0x9e37_79b9_7f4a_7c15u64 | 1;
        let mut expect = Vec::new();
        for _ in 0..2 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            expect.push(state);
        }
        assert_eq!(first, expect);
    }

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
