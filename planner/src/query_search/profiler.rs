//! The simulated SLO profiler (Compass §4.2) and the planning clock.
//!
//! Profiling a plan runs n samples through it; each sample costs each stage it runs the stage's measured time
//! per request in the plan's configuration, p50(t,v,s,b)/b × the query's input scale, and the samples run on
//! [`PROFILER_PARALLEL`] replicas at once. The verdict and the measured accuracy, latency and cores come back
//! after that simulated time plus [`PLAN_OVERHEAD_S`]. Two of Compass's profiler techniques are switches:
//!
//! * **adaptive sampling** (§4.2, notes §3.6): each sample is a Bernoulli trial of the plan's accuracy p, and the
//!   one-sided test stops when |p − A_slo| ≥ z₀.₉₉·σ/√n, σ = √(p(1−p)): n = ⌈(z₀.₉₉·σ/gap)²⌉ clamped to
//!   [[`MIN_SAMPLES`], [`MAX_SAMPLES`]] (the expected stopping point, not a random one); a plan whose latency
//!   misses its SLO is clear at the minimum. Without it, every plan takes [`MAX_SAMPLES`] (the paper's fixed
//!   baseline: the adaptive counts' P99);
//! * **dependency-shared (prefix) profiling** (§4.2, notes §3.7): a stage whose variant and every upstream
//!   stage's variant were already run in this query's session has its outputs cached and costs nothing (its
//!   latency in another segment or batch comes from the latency model, the profile table, as Compass's
//!   Appendix D estimates it); the cache lives for one query's search.
//!
//! The clock is this simulated time plus the measured wall time of the search's own computation (surrogate
//! fits, acquisition), read from a monotonic clock since the search started.

use std::collections::HashSet;
use std::time::Instant;

use super::space::{Query, Space, Truth};

/// The fewest samples the t-test stops at (the paper: 50, for the central limit theorem).
pub const MIN_SAMPLES: f64 = 50.0;
/// The most samples, and what fixed sampling takes for every plan: the paper's P99 of its adaptive counts on
/// speech recognition (356, Appendix A.4), the fixed-sampling baseline it compares against.
pub const MAX_SAMPLES: f64 = 356.0;
/// z of a one-sided 99% confidence (the paper's example target), the normal limit of Student's t at n ≥ 50.
pub const Z_99: f64 = 2.326;
/// Replicas of the plan that profile samples in parallel: twice the spec's eight serving cores, for a profiling
/// pool apart from serving, as the paper profiles on its cloud tier.
pub const PROFILER_PARALLEL: f64 = 16.0;
/// Fixed time of one profiling run besides its samples, s: configuring the replicas and collecting the verdict.
pub const PLAN_OVERHEAD_S: f64 = 0.1;

/// How many samples a plan's accuracy takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// [`MAX_SAMPLES`] for every plan (Vulcan's and VideoStorm's profilers).
    Fixed,
    /// Stop when the SLO verdict is 99% certain (Compass).
    Adaptive,
}

/// What profiling one plan measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// The plan.
    pub plan: usize,
    /// Its measured accuracy, latency and cores.
    pub truth: Truth,
    /// Whether it meets both SLOs.
    pub compliant: bool,
    /// Simulated seconds it took to profile.
    pub cost_s: f64,
}

/// A profiler for one query's search, with its clock, its deadline and its prefix cache.
#[derive(Debug)]
pub struct Profiler<'a> {
    space: &'a Space,
    query: &'a Query,
    sampling: Sampling,
    prefix_cache: bool,
    cache: HashSet<Vec<usize>>,
    profiled: HashSet<usize>,
    simulated_s: f64,
    started: Instant,
    deadline_s: f64,
    /// Every plan profiled, in order.
    pub observations: Vec<Observation>,
    /// The clock when the first compliant plan came back.
    pub first_compliant_s: Option<f64>,
}

impl<'a> Profiler<'a> {
    /// A profiler for `query` whose clock starts now and stops at `deadline_s`.
    pub fn new(space: &'a Space, query: &'a Query, sampling: Sampling, prefix_cache: bool, deadline_s: f64) -> Self {
        Profiler {
            space,
            query,
            sampling,
            prefix_cache,
            cache: HashSet::new(),
            profiled: HashSet::new(),
            simulated_s: 0.0,
            started: Instant::now(),
            deadline_s,
            observations: Vec::new(),
            first_compliant_s: None,
        }
    }

    /// Simulated profiling time plus the search's measured computation, s.
    pub fn now_s(&self) -> f64 {
        self.simulated_s + self.started.elapsed().as_secs_f64()
    }

    /// Simulated profiling time so far, s.
    pub fn simulated_s(&self) -> f64 {
        self.simulated_s
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        self.now_s() >= self.deadline_s
    }

    /// Whether `plan` was profiled already.
    pub fn seen(&self, plan: usize) -> bool {
        self.profiled.contains(&plan)
    }

    /// How many of `plan`'s stages profiling it would run (the rest hit the prefix cache).
    pub fn uncached_stages(&self, plan: usize) -> usize {
        let variants = self.variants(plan);
        (0..variants.len()).filter(|&k| !self.cached(&variants, k)).count()
    }

    /// Whether stage `k` of a plan of these `variants` has its outputs cached: its variant and every upstream
    /// stage's ran already in this query's session.
    fn cached(&self, variants: &[usize], k: usize) -> bool {
        self.prefix_cache && self.cache.contains(&variants[..=k])
    }

    fn variants(&self, plan: usize) -> Vec<usize> {
        let options = self.space.decode(plan);
        self.space.stages.iter().zip(options).map(|(s, o)| s.options[o].variant).collect()
    }

    /// The samples a plan with this truth takes.
    pub fn samples(&self, truth: &Truth) -> f64 {
        match self.sampling {
            Sampling::Fixed => MAX_SAMPLES,
            Sampling::Adaptive if truth.latency_ms > self.query.slo_latency_ms => MIN_SAMPLES,
            Sampling::Adaptive => {
                let p = truth.accuracy.clamp(0.0, 1.0);
                let (sigma, gap) = ((p * (1.0 - p)).sqrt(), (p - self.query.slo_accuracy).abs());
                if gap <= 0.0 {
                    return MAX_SAMPLES;
                }
                ((Z_99 * sigma / gap).powi(2)).ceil().clamp(MIN_SAMPLES, MAX_SAMPLES)
            }
        }
    }

    /// The simulated seconds profiling `plan`, whose truth is `truth`, takes now, with what the cache holds.
    fn cost_s(&self, plan: usize, truth: &Truth) -> f64 {
        let n = self.samples(truth);
        let variants = self.variants(plan);
        let options = self.space.decode(plan);
        let per_sample_ms: f64 = (self.space.stages.iter().zip(&options).enumerate())
            .filter(|&(k, _)| !self.cached(&variants, k))
            .map(|(_, (s, &o))| s.options[o].p50_ms / f64::from(s.options[o].batch) * self.query.latency_scale)
            .sum();
        PLAN_OVERHEAD_S + n * per_sample_ms / 1e3 / PROFILER_PARALLEL
    }

    /// Profile `plan`: `None` when its result would come back after the deadline (the clock then stands at
    /// the deadline) or it was profiled already.
    pub fn profile(&mut self, plan: usize) -> Option<Observation> {
        if self.seen(plan) {
            return None;
        }
        let truth = self.space.truth(plan, self.query);
        let cost_s = self.cost_s(plan, &truth);
        if self.now_s() + cost_s > self.deadline_s {
            self.simulated_s += (self.deadline_s - self.now_s()).max(0.0);
            return None;
        }
        self.simulated_s += cost_s;
        self.profiled.insert(plan);
        if self.prefix_cache {
            let variants = self.variants(plan);
            for k in 1..=variants.len() {
                self.cache.insert(variants[..k].to_vec());
            }
        }
        let compliant = self.query.compliant(&truth);
        if compliant && self.first_compliant_s.is_none() {
            self.first_compliant_s = Some(self.now_s());
        }
        let observation = Observation { plan, truth, compliant, cost_s };
        self.observations.push(observation);
        Some(observation)
    }
}
