//! gpu-lets' schedules served on simulated time (the paper's §6 check that a schedulable rate holds its SLOs):
//! requests of each model arrive as Poisson processes and go to the model's gpu-lets in proportion to the rate
//! each was given. A gpu-let works whenever requests wait for it: in turn, one batch per model it serves, of the
//! requests waiting for that model — the largest (up to the largest profiled) that still meets the oldest
//! request's deadline, after Nexus's early drop (the oldest requests are dropped while even a batch of the
//! planned size would miss the oldest's deadline, so that an overload is shed instead of served in batches too
//! small to keep up). The plan's duty cycle sizes the gpu-let; serving runs each
//! cycle as soon as the gpu-let is free rather than on a fixed clock, so that a request arriving just after a
//! cycle began does not wait a whole cycle (with cycles as long as the SLO allows, Nexus's choice, a fixed clock
//! misses SLOs at any load: a burst of two where one was planned already overruns). A batch takes its profiled
//! latency at its size (the next larger profiled batch's), slowed as `slowdown` says; a request is late when it
//! finishes after its SLO, and dropped (counted as a violation, as the paper counts them) when it can no longer
//! finish in time.

use std::collections::VecDeque;
use std::time::Duration;

use jig_planner::PlanError;
use jig_planner::gpulet::{GpuletPlan, GpuletProblem, Scheduler, max_scale};
use jig_policy::rng::SplitMix64;

/// What became of one model's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Served {
    /// Arrived.
    pub arrived: u64,
    /// Finished within the SLO.
    pub in_time: u64,
    /// Finished late, or dropped.
    pub violated: u64,
}

impl Served {
    /// Violations over arrivals (0 with none).
    pub fn violation_rate(&self) -> f64 {
        if self.arrived == 0 { 0.0 } else { self.violated as f64 / self.arrived as f64 }
    }

    /// Every model's requests together.
    pub fn total(served: &[Served]) -> Served {
        served.iter().fold(Served::default(), |t, s| Served {
            arrived: t.arrived + s.arrived,
            in_time: t.in_time + s.in_time,
            violated: t.violated + s.violated,
        })
    }
}

/// [`serve`] with each gpu-let slowed as the problem's measured interference predicts (not at all without).
pub fn serve_measured(problem: &GpuletProblem, plan: &GpuletPlan, seconds: f64, seed: u64) -> Vec<Served> {
    let slowdowns = plan.slowdowns(problem);
    serve(problem, plan, seconds, seed, |g| slowdowns[g])
}

/// Serve `plan` for `seconds` of Poisson arrivals at the problem's rates (seeded by `seed`), each gpu-let's
/// batches slowed by `slowdown(gpu-let index)`; per model, what became of its requests.
pub fn serve(
    problem: &GpuletProblem,
    plan: &GpuletPlan,
    seconds: f64,
    seed: u64,
    slowdown: impl Fn(usize) -> f64,
) -> Vec<Served> {
    let mut rng = SplitMix64::new(seed);
    let slo: Vec<Duration> = problem.models.iter().map(|m| Duration::from_secs_f64(m.slo_ms / 1e3)).collect();
    // Each model's gpu-let loads, and their rates: where its requests go.
    let routes: Vec<Vec<(usize, usize, f64)>> = (0..problem.models.len())
        .map(|m| {
            plan.gpulets
                .iter()
                .enumerate()
                .flat_map(|(g, gl)| {
                    gl.loads.iter().enumerate().filter(|(_, l)| l.model == m).map(move |(i, l)| (g, i, l.rate_rps))
                })
                .collect()
        })
        .collect();
    // Arrivals of every model, in time order, sent to a gpu-let load by its share of the model's rate.
    let mut arrivals: Vec<(Duration, usize, usize, usize)> = Vec::new();
    for (m, model) in problem.models.iter().enumerate() {
        let total: f64 = routes[m].iter().map(|r| r.2).sum();
        if model.rate_rps <= 0.0 || total <= 0.0 {
            continue;
        }
        let mut at = 0.0;
        loop {
            at += rng.exponential(1.0 / model.rate_rps);
            if at >= seconds {
                break;
            }
            let mut pick = rng.uniform() * total;
            let &(g, i, _) = routes[m]
                .iter()
                .find(|r| {
                    pick -= r.2;
                    pick <= 0.0
                })
                .unwrap_or(routes[m].last().expect("a routed model"));
            arrivals.push((Duration::from_secs_f64(at), m, g, i));
        }
    }
    arrivals.sort_by_key(|a| a.0);
    let mut served = vec![Served::default(); problem.models.len()];
    for a in &arrivals {
        served[a.1].arrived += 1;
    }
    // Each gpu-let's queues, one per load. The gpu-let works whenever requests wait: in turn, each load runs one
    // batch of what waits for it (a duty cycle, run early when the gpu-let is free).
    for (g, gl) in plan.gpulets.iter().enumerate() {
        let slow = 1.0 + slowdown(g);
        let mut queues: Vec<VecDeque<Duration>> = gl.loads.iter().map(|_| VecDeque::new()).collect();
        let mut mine = arrivals.iter().filter(|a| a.2 == g).peekable();
        let mut at = Duration::ZERO;
        loop {
            while let Some(a) = mine.next_if(|a| a.0 <= at) {
                queues[a.3].push_back(a.0);
            }
            if queues.iter().all(VecDeque::is_empty) {
                match mine.peek() {
                    Some(a) => {
                        at = a.0;
                        continue;
                    }
                    None => break,
                }
            }
            for (i, load) in gl.loads.iter().enumerate() {
                let model = &problem.models[load.model];
                let q = &mut queues[i];
                // Nexus's early drop: the oldest is dropped while a batch of the planned size (or of all that
                // wait, when fewer) would miss its deadline; then the largest batch of what waits (up to the
                // largest profiled) that still makes it.
                let largest = model.largest_batch(gl.size) as usize;
                let took = |n: usize| Some(Duration::from_secs_f64(model.latency(gl.size, n as u32)? * slow / 1e3));
                let mut n = 0;
                let mut ms = Duration::ZERO;
                while let Some(&oldest) = q.front() {
                    let least = q.len().min(load.batch.max(1) as usize).min(largest);
                    let fits = (least..=q.len().min(largest))
                        .rev()
                        .find_map(|k| took(k).filter(|&d| at + d <= oldest + slo[load.model]).map(|d| (k, d)));
                    match fits {
                        Some((k, d)) => {
                            (n, ms) = (k, d);
                            break;
                        }
                        None => {
                            q.pop_front();
                            served[load.model].violated += 1;
                        }
                    }
                }
                if n == 0 {
                    continue;
                }
                let done = at + ms;
                for arrived in q.drain(..n) {
                    if done <= arrived + slo[load.model] {
                        served[load.model].in_time += 1;
                    } else {
                        served[load.model].violated += 1;
                    }
                }
                at = done;
            }
        }
    }
    served
}

/// The paper's measured metric: the largest multiple of the problem's rates at which `schedule`'s plan
/// for them fits the GPUs and, served for `seconds` and slowed as the problem's measured interference predicts,
/// misses the SLO for at most `miss` of the requests: the first that holds from the multiple the scheduler
/// plans for down, in steps of 1% of it.
pub fn max_served_scale(
    p: &GpuletProblem,
    schedule: impl Fn(&GpuletProblem) -> Result<GpuletPlan, PlanError>,
    seconds: f64,
    seed: u64,
    miss: f64,
) -> f64 {
    let holds = |k: f64| {
        let q = p.scaled(k);
        let Ok(plan) = schedule(&q) else { return false };
        if plan.gpus_used > p.gpus {
            return false;
        }
        Served::total(&serve_measured(&q, &plan, seconds, seed)).violation_rate() <= miss
    };
    // Holding is not monotone in the rate (a plan for more may batch better), so scan down from the planned
    // multiple in steps of 1% of it rather than bisect.
    let planned = max_scale(p, &schedule);
    (0..100).map(|i| planned * (1.0 - 0.01 * f64::from(i))).find(|&k| holds(k)).unwrap_or(0.0)
}

/// One scheduling period of [`adapt`].
#[derive(Debug, Clone, PartialEq)]
pub struct Period {
    /// When it began, seconds.
    pub start_s: f64,
    /// Requests per second that arrived, all models.
    pub arrived_rps: f64,
    /// The running schedule's gpu-let sizes added up, percent of a GPU.
    pub gpulet_sum: u32,
    /// Its requests that missed their SLOs (late or dropped), and all of them.
    pub violated: u64,
    /// Arrived.
    pub arrived: u64,
    /// Whether the schedule was made anew for this period.
    pub rescheduled: bool,
}

/// gpu-lets' periodic re-scheduling (§5, Figure 14): each model's rate is the problem's times `load(t)`, and the
/// scheduler, every `period_s`, smooths the rates it saw by an EWMA (`alpha` on the newest period) and
/// re-schedules for them with `headroom` (1.1: 10% more) when the running schedule was planned for less than
/// the smoothed rates or for more than twice them; a rate it cannot schedule keeps the running schedule. Each
/// period is served on its own ([`serve`], queues empty at its start), slowed as the problem's measured
/// interference predicts. The first schedule is for the rates at time 0.
#[allow(clippy::too_many_arguments)]
pub fn adapt(
    p: &GpuletProblem,
    schedule: impl Fn(&GpuletProblem) -> Result<GpuletPlan, PlanError>,
    load: impl Fn(f64) -> f64,
    seconds: f64,
    period_s: f64,
    alpha: f64,
    headroom: f64,
    seed: u64,
) -> Vec<Period> {
    let base: Vec<f64> = p.models.iter().map(|m| m.rate_rps).collect();
    let mut estimate: Vec<f64> = base.iter().map(|r| r * load(0.0)).collect();
    let mut planned: Vec<f64> = estimate.iter().map(|r| r * headroom).collect();
    let mut plan = schedule(&p.with_rates(&planned)).ok();
    let mut periods = Vec::new();
    let mut rescheduled = true;
    for k in 0..(seconds / period_s).ceil() as usize {
        let start_s = k as f64 * period_s;
        let truth = p.with_rates(&base.iter().map(|r| r * load(start_s + period_s / 2.0)).collect::<Vec<_>>());
        let (violated, arrived, seen) = match &plan {
            Some(plan) => {
                let served = serve_measured(&truth, plan, period_s, seed.wrapping_add(k as u64));
                let seen: Vec<f64> = served.iter().map(|s| s.arrived as f64 / period_s).collect();
                let total = Served::total(&served);
                (total.violated, total.arrived, seen)
            }
            // No schedule: every request is dropped, and the rates are still seen.
            None => {
                let seen: Vec<f64> = truth.models.iter().map(|m| m.rate_rps).collect();
                let n = (seen.iter().sum::<f64>() * period_s) as u64;
                (n, n, seen)
            }
        };
        periods.push(Period {
            start_s,
            arrived_rps: arrived as f64 / period_s,
            gpulet_sum: plan.as_ref().map_or(0, |p| p.gpulets.iter().map(|g| g.size).sum()),
            violated,
            arrived,
            rescheduled,
        });
        for (e, s) in estimate.iter_mut().zip(&seen) {
            *e = alpha * s + (1.0 - alpha) * *e;
        }
        let short = estimate.iter().zip(&planned).any(|(e, p)| e > p);
        let wasteful = estimate.iter().zip(&planned).all(|(e, p)| 2.0 * e < *p);
        rescheduled = false;
        if plan.is_none() || short || wasteful {
            let want: Vec<f64> = estimate.iter().map(|r| r * headroom).collect();
            if let Some(next) = schedule(&p.with_rates(&want)).ok().filter(|next| next.gpus_used <= p.gpus) {
                (plan, planned, rescheduled) = (Some(next), want, true);
            }
        }
    }
    periods
}

/// The paper's schedulability study (its Figure 15 compares Algorithm 1 with the exhaustive scheduler on it):
/// every combination of `levels` as the models' rates, all at 0 left out (4 levels over 5 models: its
/// 1 023 scenarios), and for each whether each of `schedulers` fits it on the problem's GPUs. Scenarios are
/// shared among `threads`; `done` is called after each.
pub fn schedulability(
    p: &GpuletProblem,
    levels: &[f64],
    schedulers: &[Scheduler],
    threads: usize,
    done: &(dyn Fn() + Sync),
) -> Vec<Scenario> {
    let n = p.models.len() as u32;
    let count = (levels.len() as u64).saturating_pow(n);
    let rates = |mut k: u64| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let level = levels[(k % levels.len() as u64) as usize];
                k /= levels.len() as u64;
                level
            })
            .collect()
    };
    let next = std::sync::atomic::AtomicU64::new(0);
    let mut scenarios: Vec<(u64, Scenario)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut mine: Vec<(u64, Scenario)> = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if k >= count {
                            return mine;
                        }
                        let rates_rps = rates(k);
                        if rates_rps.iter().all(|&r| r <= 0.0) {
                            continue;
                        }
                        let q = p.with_rates(&rates_rps);
                        let schedulable = schedulers
                            .iter()
                            .map(|s| s.schedule(&q).is_ok_and(|plan| plan.gpus_used <= p.gpus))
                            .collect();
                        mine.push((k, Scenario { rates_rps, schedulable }));
                        done();
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a schedulability worker panicked")).collect()
    });
    scenarios.sort_by_key(|&(k, _)| k);
    scenarios.into_iter().map(|(_, s)| s).collect()
}

/// One scenario of [`schedulability`].
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Each model's rate.
    pub rates_rps: Vec<f64>,
    /// Whether each scheduler fits it, in the order given.
    pub schedulable: Vec<bool>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use jig_planner::gpulet::{GpuletModel, elastic, max_scale, no_interference};

    use super::*;

    /// `models` on `gpus` GPUs split as the paper's pairs, without interference.
    fn problem(models: Vec<GpuletModel>, gpus: u32) -> GpuletProblem {
        GpuletProblem { models, gpus, splits: vec![20, 40, 50], interference: None }
    }

    fn model(name: &str, rate: f64, fixed: f64, per_item: f64) -> GpuletModel {
        let mut latency_ms = BTreeMap::new();
        for size in [20u32, 40, 50, 60, 80, 100] {
            for b in [1u32, 2, 4, 8, 16, 32] {
                latency_ms.insert((size, b), fixed + per_item * f64::from(b) * 100.0 / f64::from(size));
            }
        }
        let slo_ms = 2.0 * latency_ms[&(100, 32)];
        GpuletModel { name: name.into(), rate_rps: rate, slo_ms, latency_ms }
    }

    #[test]
    fn the_schedulability_study_takes_every_combination_of_the_levels_but_all_zero() {
        let p = problem(vec![model("le", 100.0, 1.5, 0.01), model("vgg", 50.0, 6.0, 0.9)], 1);
        let levels = [0.0, 400.0, 4000.0];
        let counted = std::sync::atomic::AtomicU64::new(0);
        let done = || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let scenarios = schedulability(&p, &levels, &[Scheduler::Gpulet, Scheduler::Ideal], 2, &done);
        assert_eq!(scenarios.len(), 8, "{scenarios:?}");
        assert_eq!(counted.into_inner(), 8);
        let mut seen: Vec<Vec<f64>> = scenarios.iter().map(|s| s.rates_rps.clone()).collect();
        seen.dedup();
        assert_eq!(seen.len(), 8, "each combination once: {scenarios:?}");
        assert!(seen.iter().all(|r| r.iter().all(|x| levels.contains(x)) && r.iter().any(|&x| x > 0.0)));
        for s in &scenarios {
            // On one GPU, 4000 req/s of VGG cannot be served; whatever Algorithm 1 fits, the search fits.
            let too_much = s.rates_rps[1] == 4000.0;
            assert!(!too_much || !s.schedulable[1], "{s:?}");
            assert!(!s.schedulable[0] || s.schedulable[1], "{s:?}");
        }
        assert!(scenarios.iter().any(|s| s.schedulable[1]), "{scenarios:?}");
    }

    #[test]
    fn a_schedule_holds_its_slos_below_its_rates_and_breaks_beyond_them() {
        let p = problem(
            vec![model("le", 100.0, 1.5, 0.01), model("res", 100.0, 4.0, 0.5), model("vgg", 50.0, 6.0, 0.9)],
            2,
        );
        let k = max_scale(&p, |q| elastic(q, &no_interference));
        let planned = p.scaled(k);
        let plan = elastic(&planned, &no_interference).unwrap();
        // Half the rates it was planned for: every gpu-let half busy.
        let served = serve(&planned.scaled(0.5), &plan, 20.0, 5, |_| 0.0);
        for (m, s) in planned.models.iter().zip(&served) {
            assert!(s.arrived > 100, "{}: {s:?}", m.name);
            assert_eq!(s.in_time + s.violated, s.arrived, "{}: every request is accounted for", m.name);
            assert!(s.violation_rate() < 0.01, "{}: {s:?} at half its planned rate", m.name);
        }
        // Twice them, or its batches a third slower, and it misses.
        let over = serve(&planned.scaled(2.0), &plan, 20.0, 5, |_| 0.0);
        assert!(over.iter().any(|s| s.violation_rate() > 0.05), "{over:?}");
        let slowed = serve(&planned.scaled(0.5), &plan, 20.0, 5, |_| 0.35);
        assert!(slowed.iter().any(|s| s.violation_rate() > 0.01), "{slowed:?}");
    }

    #[test]
    fn planning_with_interference_serves_more_than_ignoring_it() {
        use jig_planner::gpulet::Scheduler;
        use jig_planner::interference::{InterferenceModel, MeasuredInterference, Utilisation};
        // Every model runs 40% slower beside any other: gpu-lets without interference co-locates them anyway.
        let p = GpuletProblem {
            interference: Some(MeasuredInterference {
                model: InterferenceModel { coefficients: [0.0, 0.0, 0.0, 0.0, 0.4] },
                utilisation: vec![Utilisation { l2: 0.1, dram: 0.1 }; 3],
                fit_error: 0.0,
                samples: 5,
            }),
            ..problem(
                vec![model("le", 100.0, 1.5, 0.01), model("res", 100.0, 4.0, 0.5), model("vgg", 50.0, 6.0, 0.9)],
                2,
            )
        };
        let served = |s: Scheduler| max_served_scale(&p, |q| s.schedule(q), 10.0, 3, 0.01);
        let (blind, aware) = (served(Scheduler::Gpulet), served(Scheduler::GpuletInt));
        assert!(aware > blind, "gpulet+int serves {aware:.2}× the rates, gpulet {blind:.2}×");
        assert!(aware > 0.0);
    }

    #[test]
    fn rescheduling_follows_a_wave_of_load_that_a_fixed_schedule_misses() {
        let p = problem(vec![model("le", 1500.0, 1.5, 0.01), model("res", 600.0, 4.0, 0.5)], 4);
        // Rates rise to three times and back over the run.
        let wave = |t: f64| 1.0 + 2.0 * (std::f64::consts::PI * t / 400.0).sin().max(0.0);
        let adaptive = adapt(&p, |q| elastic(q, &no_interference), wave, 400.0, 20.0, 0.7, 1.2, 9);
        // An EWMA that never moves (alpha 0) never re-schedules: the schedule for the rates at time 0 throughout.
        let fixed = adapt(&p, |q| elastic(q, &no_interference), wave, 400.0, 20.0, 0.0, 1.2, 9);
        let missed = |ps: &[Period]| {
            ps.iter().map(|p| p.violated).sum::<u64>() as f64 / ps.iter().map(|p| p.arrived).sum::<u64>() as f64
        };
        assert_eq!(adaptive.len(), 20);
        assert!(adaptive.iter().filter(|p| p.rescheduled).count() >= 3, "{adaptive:?}");
        let (first, peak) = (adaptive[0].gpulet_sum, adaptive.iter().map(|p| p.gpulet_sum).max().unwrap());
        assert!(peak > first, "more gpu-lets at the peak: {adaptive:?}");
        assert!(adaptive.last().unwrap().gpulet_sum < peak, "and fewer after it: {adaptive:?}");
        assert!(
            missed(&adaptive) < 0.05 && missed(&fixed) > 2.0 * missed(&adaptive),
            "{} {}",
            missed(&adaptive),
            missed(&fixed)
        );
    }
}
