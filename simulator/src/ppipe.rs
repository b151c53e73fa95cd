//! PPipe's evaluation (§7.1–7.2): a plan of pooled pipelines ([`jig_planner::ppipe`]) run by its data plane, the
//! reservation scheduler of `jig_policy::reserve`, under Poisson arrivals; its SLO attainment at a load, and the
//! largest load it serves with 99% of requests within the SLO (the paper's "max load factor", load factor 1
//! being the throughput the plan's program promises).
//!
//! Every virtual GPU of a partition's pool is an instance of its own; a batch runs for its partition's profiled
//! latency at its size (the sum of its blocks'; a size the profile lacks takes the next larger one's), and
//! moves to the next partition in the feature map's transfer time. Links are not contended (no node shares a
//! network link here): the paper's third delay, D3, is left out. What the simulation adds to the program is the
//! data plane's: requests arrive one at a time, batches form as they can, and a request that cannot finish in
//! time is dropped.

use std::collections::VecDeque;
use std::time::Duration;

use jig_planner::ppipe::{PpipePlan, PpipeProblem};
use jig_policy::reserve::{Decision, Instance, Pipeline, Scheduler, Stage, per_batch};
use jig_policy::rng::SplitMix64;

/// What happened to a run's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Attainment {
    /// Requests that arrived.
    pub arrived: u64,
    /// Served within the SLO.
    pub served: u64,
    /// Dropped: no batch could finish them in time (or still queued when the run ended).
    pub dropped: u64,
    /// Served after their deadline (a batch that ran as booked never is; kept as a check).
    pub late: u64,
}

impl Attainment {
    /// The share of arrivals served within the SLO (1 with none).
    pub fn rate(&self) -> f64 {
        if self.arrived == 0 { 1.0 } else { self.served as f64 / self.arrived as f64 }
    }
}

/// The data plane's pipelines for `plan`: each partition's pool, one instance per virtual GPU, with its
/// latency at every batch size up to the pipeline's, and the transfer into it.
pub fn pipelines(problem: &PpipeProblem, plan: &PpipePlan) -> Vec<Pipeline> {
    let ms = |ms: f64| Duration::from_secs_f64(ms / 1e3);
    let mut next_id = 0;
    plan.pipelines
        .iter()
        .enumerate()
        .map(|(i, pipeline)| {
            let sizes: Vec<u32> = problem.batches.iter().copied().filter(|&b| b <= pipeline.batch).collect();
            let stages = pipeline
                .partitions
                .iter()
                .enumerate()
                .map(|(d, part)| {
                    let pool = (0..part.count)
                        .map(|_| {
                            next_id += 1;
                            Instance::from(next_id)
                        })
                        .collect();
                    let latency: Vec<(usize, Duration)> = sizes
                        .iter()
                        .filter_map(|&b| {
                            Some((b as usize, ms(problem.latency(part.class, part.share, b, &part.blocks)?)))
                        })
                        .collect();
                    let transfer: Vec<(usize, Duration)> = match d {
                        0 => vec![],
                        _ => sizes
                            .iter()
                            .map(|&b| (b as usize, ms(problem.transfer_ms(part.blocks.start - 1, b))))
                            .collect(),
                    };
                    Stage { pool, latency: per_batch(&latency), transfer: per_batch(&transfer) }
                })
                .collect();
            Pipeline { name: format!("pipeline {i}"), batch: pipeline.batch as usize, stages }
        })
        .collect()
}

/// Run `plan` for `seconds` of Poisson arrivals at `rate_rps` (seeded by `seed`) and count what became of them.
pub fn attainment(problem: &PpipeProblem, plan: &PpipePlan, rate_rps: f64, seconds: f64, seed: u64) -> Attainment {
    let slo = Duration::from_secs_f64(problem.slo_ms / 1e3);
    let mut scheduler = Scheduler::new(pipelines(problem, plan)).expect("a plan's pipelines are well formed");
    let mut rng = SplitMix64::new(seed);
    let end = Duration::from_secs_f64(seconds);
    let mut next_arrival = Duration::from_secs_f64(rng.exponential(1.0 / rate_rps));
    let mut wake: Option<Duration> = None;
    let mut queue: VecDeque<Duration> = VecDeque::new(); // deadlines, oldest first
    let mut counts = Attainment::default();
    loop {
        let arrival = (next_arrival < end).then_some(next_arrival);
        let Some(now) = [arrival, wake].into_iter().flatten().min() else { break };
        if arrival == Some(now) {
            queue.push_back(now + slo);
            counts.arrived += 1;
            next_arrival = now + Duration::from_secs_f64(rng.exponential(1.0 / rate_rps));
        }
        if wake.is_some_and(|w| w <= now) {
            wake = None;
        }
        loop {
            let oldest = queue.front().copied().unwrap_or(now + slo);
            match scheduler.decide(now, queue.len(), oldest) {
                Decision::Dispatch(path) => {
                    for deadline in queue.drain(..path.batch.min(queue.len())) {
                        if path.finish <= deadline {
                            counts.served += 1;
                        } else {
                            counts.late += 1;
                        }
                    }
                }
                Decision::DropOldest => {
                    queue.pop_front();
                    counts.dropped += 1;
                }
                Decision::Wait { until } => {
                    wake = Some(until.max(now));
                    break;
                }
                Decision::Idle => break,
            }
        }
        if arrival.is_none() && wake.is_none() {
            break;
        }
    }
    counts.dropped += queue.len() as u64;
    counts
}

/// The largest load factor (a share of the plan's throughput, to 0.01, up to 1.5) at which `plan` serves 99%
/// of `seconds` of Poisson arrivals within the SLO.
pub fn max_load_factor(problem: &PpipeProblem, plan: &PpipePlan, seconds: f64, seed: u64) -> f64 {
    let holds = |factor: f64| attainment(problem, plan, factor * plan.throughput_rps, seconds, seed).rate() >= 0.99;
    let (mut low, mut high) = (0.0, 1.5);
    if holds(high) {
        return high;
    }
    while high - low > 0.01 {
        let mid = (low + high) / 2.0;
        if holds(mid) { low = mid } else { high = mid }
    }
    low
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use jig_planner::SolveOptions;
    use jig_planner::ppipe::{BlockedModel, Class, Scheme, solve};

    use super::*;

    /// The bench's shape at a small size: a fast class and a slow one 1.5× slower on the first block and more on
    /// each later one.
    fn problem(scheme: Scheme) -> PpipeProblem {
        let mut latency_ms = HashMap::new();
        for k in 0..2usize {
            for v in [1u32, 2] {
                for b in [1u32, 2, 4, 8] {
                    for block in 0..4usize {
                        let base = if k == 0 { 2.0 } else { 3.0 + 2.0 * block as f64 };
                        latency_ms.insert((k, v, b, block), base * f64::from(v).powf(0.8) * f64::from(b).powf(0.7));
                    }
                }
            }
        }
        PpipeProblem {
            model: BlockedModel { name: "m".into(), blocks: 4, latency_ms, output_bytes: vec![100_000; 4] },
            classes: vec![
                Class { name: "fast".into(), units: 2, shares: vec![1, 2] },
                Class { name: "slow".into(), units: 6, shares: vec![1, 2] },
            ],
            slo_ms: 80.0,
            margin: 0.4,
            batches: vec![1, 2, 4, 8],
            max_partitions: 3,
            bandwidth_bytes_per_s: 1.25e9,
            scheme,
        }
    }

    #[test]
    fn a_plan_serves_its_load_within_the_slo_and_drops_what_it_cannot() {
        let p = problem(Scheme::PPipe);
        let plan = solve(&p, &SolveOptions::default()).unwrap();
        let half = attainment(&p, &plan, 0.5 * plan.throughput_rps, 20.0, 7);
        assert!(half.arrived > 1000 && half.rate() >= 0.99, "{half:?} of {plan:?}");
        assert_eq!(half.late, 0, "a batch runs as booked");
        let double = attainment(&p, &plan, 2.0 * plan.throughput_rps, 20.0, 7);
        assert!(double.rate() < 0.7 && double.dropped > 0, "{double:?}");
        assert_eq!(double.served + double.dropped + double.late, double.arrived);
        // About what the program promised, give or take the batches Poisson arrivals leave unfilled.
        let factor = max_load_factor(&p, &plan, 10.0, 7);
        assert!((0.5..=1.2).contains(&factor), "{factor}");
    }

    #[test]
    fn pooled_pipelines_serve_more_than_whole_models_on_the_same_gpus() {
        let options = SolveOptions::default();
        let served = |scheme| {
            let p = problem(scheme);
            let plan = solve(&p, &options).unwrap();
            max_load_factor(&p, &plan, 10.0, 3) * plan.throughput_rps
        };
        let (ppipe, np) = (served(Scheme::PPipe), served(Scheme::NoPartitioning));
        assert!(ppipe > 1.2 * np, "PPipe {ppipe:.0} req/s against NP {np:.0}");
    }
}
