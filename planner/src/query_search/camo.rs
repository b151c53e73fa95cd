//! Compass's per-query search (§4.1, Algorithm 1; notes §3.3–3.5, §3.8): CAMO with its SLO profiler.
//!
//! * Two surrogates, accuracy f_a and ln latency f_l ([`Gp`]), fitted to the latest [`TRAIN_CAP`] plans;
//! * the acquisition U(p) = Pr[f_a(p) ≥ A_slo] · Pr[f_l(p) ≤ L_slo] / C(p), with C(p) the predicted profiling
//!   cost: [`PLAN_OVERHEAD_S`] + [`MIN_SAMPLES`] × the predicted per-sample time (half the predicted latency)
//!   × the share of stages the prefix cache does not hold / [`PROFILER_PARALLEL`], over [`CANDIDATES`] random
//!   unprofiled plans;
//! * the warm start: a committee of the latest [`HISTORY`] queries' surrogates (their predictions of every
//!   plan, taken when their search ended), each weighted by 1 / (0.05 + its mean error on this query's profiled
//!   plans), votes with its weighted mean utility; the query's own CAMO takes over once its one-step-ahead
//!   error over the last 3 plans is below the committee's, and keeps it ("self-terminating transfer"). With no
//!   history, [`INIT_RANDOM`] random plans start it, as Vulcan's;
//! * the profiler with adaptive sampling and the prefix cache ([`Sampling::Adaptive`]);
//! * resource trimming (`ParetoOptimize`): from each compliant plan, one stage at a time to one core fewer or
//!   the next larger batch with the same variants (the profile cached, so only the overhead is paid), kept when
//!   it still meets the SLOs on fewer cores, until no step helps.
//!
//! The error of a prediction is |Δ accuracy| / 0.1 + |Δ ln latency| / 0.25: in units of ten points of
//! accuracy and about a quarter of the latency, the margins an SLO verdict turns on.

use std::collections::VecDeque;

use super::gp::{Gp, normal_cdf};
use super::profiler::{MIN_SAMPLES, Observation, PLAN_OVERHEAD_S, PROFILER_PARALLEL, Profiler, Sampling};
use super::space::{Query, Space, StageOption};
use super::{CANDIDATES, INIT_RANDOM, Rng, SearchOutcome, TRAIN_CAP, candidates, random_unseen};

/// How many past queries' surrogates the committee holds (the paper's default: "a dozen").
pub const HISTORY: usize = 12;

/// One past query's surrogates: the predicted (mean, sd) of every plan's accuracy and ln latency.
#[derive(Debug, Clone)]
pub struct Member {
    accuracy: Vec<(f64, f64)>,
    latency: Vec<(f64, f64)>,
}

/// The history pool of past queries' surrogates.
#[derive(Debug, Clone, Default)]
pub struct History {
    members: VecDeque<Member>,
}

impl History {
    /// Add the surrogates of a finished search (nothing when it profiled fewer than two plans).
    pub fn remember(&mut self, space: &Space, observations: &[Observation]) {
        let Some(s) = Surrogates::fit(space, observations) else { return };
        let predict = |plan: usize| s.predict(&space.features(plan));
        let (accuracy, latency) = (0..space.len()).map(predict).unzip();
        self.members.push_back(Member { accuracy, latency });
        if self.members.len() > HISTORY {
            self.members.pop_front();
        }
    }

    /// How many members the pool holds.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// A query's own accuracy and latency surrogates.
struct Surrogates {
    accuracy: Gp,
    latency: Gp,
}

/// A prediction: ((accuracy mean, sd), (ln latency mean, sd)).
type Prediction = ((f64, f64), (f64, f64));

impl Surrogates {
    fn fit(space: &Space, observations: &[Observation]) -> Option<Surrogates> {
        if observations.len() < 2 {
            return None;
        }
        let recent = &observations[observations.len().saturating_sub(TRAIN_CAP)..];
        let xs: Vec<Vec<f64>> = recent.iter().map(|o| space.features(o.plan)).collect();
        let acc: Vec<f64> = recent.iter().map(|o| o.truth.accuracy).collect();
        let lat: Vec<f64> = recent.iter().map(|o| o.truth.latency_ms.ln()).collect();
        Some(Surrogates { accuracy: Gp::fit(xs.clone(), &acc)?, latency: Gp::fit(xs, &lat)? })
    }

    fn predict(&self, x: &[f64]) -> ((f64, f64), (f64, f64)) {
        (self.accuracy.predict(x), self.latency.predict(x))
    }
}

/// The error of a prediction against what was measured.
fn error(prediction: Prediction, o: &Observation) -> f64 {
    let ((a, _), (l, _)) = prediction;
    (a - o.truth.accuracy).abs() / 0.1 + (l - o.truth.latency_ms.ln()).abs() / 0.25
}

/// CAMO's acquisition of `plan` from a prediction.
fn acquisition(space: &Space, query: &Query, profiler: &Profiler, plan: usize, prediction: Prediction) -> f64 {
    let ((a, sa), (l, sl)) = prediction;
    let feasible = normal_cdf((a - query.slo_accuracy) / sa.max(1e-9))
        * normal_cdf((query.slo_latency_ms.ln() - l) / sl.max(1e-9));
    let uncached = profiler.uncached_stages(plan) as f64 / space.stages.len() as f64;
    let cost = PLAN_OVERHEAD_S + MIN_SAMPLES * l.exp() / 2.0 / 1e3 * uncached / PROFILER_PARALLEL;
    feasible / cost
}

/// The committee: members' weights from their errors on this query's profiled plans.
struct Committee<'h> {
    history: &'h History,
    weights: Vec<f64>,
}

impl<'h> Committee<'h> {
    fn new(history: &'h History, observations: &[Observation]) -> Self {
        let weights = history
            .members
            .iter()
            .map(|m| {
                let errors: Vec<f64> =
                    observations.iter().map(|o| error((m.accuracy[o.plan], m.latency[o.plan]), o)).collect();
                let mean = if errors.is_empty() { 0.0 } else { errors.iter().sum::<f64>() / errors.len() as f64 };
                1.0 / (0.05 + mean)
            })
            .collect();
        Committee { history, weights }
    }

    /// The weighted mean of the members' predictions of `plan`.
    fn predict(&self, plan: usize) -> Prediction {
        let total: f64 = self.weights.iter().sum();
        let mut p = ((0.0, 0.0), (0.0, 0.0));
        for (m, w) in self.history.members.iter().zip(&self.weights) {
            let share = w / total;
            let ((a, sa), (l, sl)) = (m.accuracy[plan], m.latency[plan]);
            p = ((p.0.0 + share * a, p.0.1 + share * sa), (p.1.0 + share * l, p.1.1 + share * sl));
        }
        p
    }

    /// The weighted vote: the members' weighted mean acquisition of `plan`.
    fn vote(&self, space: &Space, query: &Query, profiler: &Profiler, plan: usize) -> f64 {
        let total: f64 = self.weights.iter().sum();
        self.history
            .members
            .iter()
            .zip(&self.weights)
            .map(|(m, w)| w / total * acquisition(space, query, profiler, plan, (m.accuracy[plan], m.latency[plan])))
            .sum()
    }
}

/// The state of one query's CAMO search.
struct Camo<'a> {
    space: &'a Space,
    query: &'a Query,
    profiler: Profiler<'a>,
    rng: Rng,
    /// One-step-ahead errors (own, committee) of the plans both predicted.
    errors: Vec<(f64, f64)>,
    mature: bool,
}

/// Search `query`'s plans until `deadline_s` on the planning clock, warm-started by `history` (leave it empty
/// for a cold start); the caller adds this search's surrogates to the history afterwards.
pub fn search(space: &Space, query: &Query, deadline_s: f64, seed: u64, history: &History) -> SearchOutcome {
    search_profiled(space, query, (deadline_s, seed), history, (Sampling::Adaptive, true))
}

/// [`search`] with another profiler, (sampling, prefix cache): `(Sampling::Fixed, false)` is the baselines'
/// profiler, the paper's "w/o SLO Profiler" ablation (§6.3), which tells the search's gain from the profiler's.
pub fn search_profiled(
    space: &Space,
    query: &Query,
    (deadline_s, seed): (f64, u64),
    history: &History,
    (sampling, prefix_cache): (Sampling, bool),
) -> SearchOutcome {
    let profiler = Profiler::new(space, query, sampling, prefix_cache, deadline_s);
    let mut camo = Camo { space, query, profiler, rng: Rng::new(seed), errors: Vec::new(), mature: false };
    while !camo.profiler.expired() && camo.profiler.observations.len() < space.len() {
        let own = Surrogates::fit(space, &camo.profiler.observations);
        let committee = (!history.is_empty()).then(|| Committee::new(history, &camo.profiler.observations));
        let Some(plan) = camo.propose(own.as_ref(), committee.as_ref()) else { break };
        let own_prediction = own.as_ref().map(|s| s.predict(&space.features(plan)));
        let committee_prediction = committee.as_ref().map(|c| c.predict(plan));
        let Some(o) = camo.profiler.profile(plan) else {
            if camo.profiler.expired() {
                break;
            }
            continue;
        };
        if let (Some(mine), Some(theirs)) = (own_prediction, committee_prediction) {
            camo.errors.push((error(mine, &o), error(theirs, &o)));
            let last: Vec<_> = camo.errors.iter().rev().take(3).collect();
            let (mine, theirs): (f64, f64) = last.iter().fold((0.0, 0.0), |s, e| (s.0 + e.0, s.1 + e.1));
            camo.mature |= last.len() == 3 && mine < theirs;
        }
        if o.compliant {
            camo.trim(o);
        }
    }
    SearchOutcome::from(camo.profiler)
}

impl Camo<'_> {
    /// Algorithm 1's `Propose`: the `committee`'s vote (where there is history) while the query's own CAMO is
    /// immature, its own argmax after.
    fn propose(&mut self, own: Option<&Surrogates>, committee: Option<&Committee>) -> Option<usize> {
        let (space, query) = (self.space, self.query);
        let pool = candidates(space, &self.profiler, &mut self.rng, CANDIDATES);
        let best = |scores: Vec<(f64, usize)>| scores.into_iter().max_by(|a, b| a.0.total_cmp(&b.0)).map(|(_, p)| p);
        let own_turn = self.mature && own.is_some();
        if let Some(committee) = committee.filter(|_| !own_turn) {
            return best(pool.into_iter().map(|p| (committee.vote(space, query, &self.profiler, p), p)).collect());
        }
        match own {
            Some(s) if self.profiler.observations.len() >= INIT_RANDOM => best(
                pool.into_iter()
                    .map(|p| (acquisition(space, query, &self.profiler, p, s.predict(&space.features(p))), p))
                    .collect(),
            ),
            _ => random_unseen(space, &self.profiler, &mut self.rng),
        }
    }

    /// `ParetoOptimize`: trim a compliant plan's resources one stage and one step at a time while it stays
    /// compliant on fewer cores.
    fn trim(&mut self, start: Observation) {
        let mut here = start;
        loop {
            let options = self.space.decode(here.plan);
            let mut next = None;
            'stages: for (i, stage) in self.space.stages.iter().enumerate() {
                let now = stage.options[options[i]];
                let same = |o: &&StageOption| o.variant == now.variant;
                let options_of = || stage.options.iter().enumerate().filter(|(_, o)| same(o));
                // The nearest step of each kind: one core fewer at the same batch, the next batch on as many.
                let fewer = options_of()
                    .filter(|(_, o)| o.batch == now.batch && o.cores < now.cores)
                    .max_by(|a, b| a.1.cores.total_cmp(&b.1.cores));
                let larger = options_of()
                    .filter(|(_, o)| o.cores == now.cores && o.batch > now.batch)
                    .min_by_key(|(_, o)| o.batch);
                for (j, _) in [fewer, larger].into_iter().flatten() {
                    let mut trimmed = options.clone();
                    trimmed[i] = j;
                    let plan = self.space.encode(&trimmed);
                    if self.profiler.seen(plan) {
                        continue;
                    }
                    let Some(o) = self.profiler.profile(plan) else { return };
                    if o.compliant && o.truth.cores < here.truth.cores {
                        next = Some(o);
                        break 'stages;
                    }
                }
            }
            match next {
                Some(o) => here = o,
                None => return,
            }
        }
    }
}

/// The plans CAMO profiled before its first compliant plan (all of them when it found none): what the
/// committee's warm start saves.
pub fn plans_to_first_compliant(outcome: &SearchOutcome) -> usize {
    outcome.profiled_before_first.unwrap_or(outcome.profiled)
}
