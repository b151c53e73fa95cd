//! PPipe's data plane in the engine: a plan's pooled pipelines booked at a head (`jig_policy::reserve`'s
//! scheduler, Algorithm 1), each batch gathered at every later task and run as one on the instance booked for it,
//! as `jig_app`'s deployments run them.

use std::collections::VecDeque;
use std::time::Duration;

use jig_planner::solution::PipelinePlan;
use jig_policy::reserve::{Decision, Pipeline, Scheduler, Stage, per_batch};

use super::agenda::Event;
use super::engine::Sim;
use super::state::{Head, Job};

impl Sim<'_> {
    /// Serve `pipelines` (a PPipe plan's) through a head, their pools' members taken from the plan's instances
    /// of each type in turn; a pipeline left without a member at some task (a lost node's) is left out, and with
    /// none left the instances serve by their own queues.
    pub(super) fn book_pipelines(&mut self, pipelines: &[PipelinePlan]) {
        let problem = self.problem;
        let mut handed_out = vec![false; self.instances.len()];
        let (mut ids, mut planned) = (Vec::new(), Vec::new());
        for (k, pipeline) in pipelines.iter().enumerate() {
            let mut stages = Vec::with_capacity(pipeline.pools.len());
            for (t, &(variant, segment, members)) in pipeline.pools.iter().enumerate() {
                let pool: Vec<usize> = (0..self.instances.len())
                    .filter(|&i| {
                        let inst = &self.instances[i];
                        !handed_out[i]
                            && (inst.task, inst.variant, inst.segment, inst.batch)
                                == (t, variant, segment, pipeline.batch)
                    })
                    .take(members as usize)
                    .collect();
                let latency: Vec<(usize, Duration)> = problem
                    .configs
                    .iter()
                    .filter(|c| (c.task, c.variant, c.segment) == (t, variant, segment) && c.batch <= pipeline.batch)
                    .map(|c| (c.batch as usize, Duration::from_secs_f64(c.latency_ms / 1000.0)))
                    .collect();
                let between = self.hop + Duration::from_secs_f64(self.outside_ms[t] / 1000.0);
                let transfer =
                    if t == 0 || between.is_zero() { Vec::new() } else { vec![between; pipeline.batch as usize] };
                for &i in &pool {
                    handed_out[i] = true;
                }
                let pool = pool
                    .into_iter()
                    .map(|i| {
                        ids.push(i);
                        jig_policy::reserve::Instance::from(ids.len() - 1)
                    })
                    .collect();
                stages.push(Stage { pool, latency: per_batch(&latency), transfer });
            }
            planned.push(Pipeline { name: format!("pipeline {k}"), batch: pipeline.batch as usize, stages });
        }
        planned.retain(|p| p.stages.iter().all(|s| !s.pool.is_empty()));
        if let Ok(scheduler) = Scheduler::new(planned) {
            let head = Head { scheduler, queue: VecDeque::new(), instances: ids, timer: None, bookings: Vec::new() };
            self.head = Some(head);
        }
    }

    /// Algorithm 1 at the head until it waits (`jig_app`'s `pipelines` on simulated time).
    pub(super) fn decide(&mut self) {
        let now = self.now;
        loop {
            let head = self.head.as_mut().expect("a head");
            let Some(oldest) = head.queue.front().map(|j| j.deadline) else { return };
            match head.scheduler.decide(now, head.queue.len(), oldest) {
                Decision::Dispatch(path) => {
                    let b = head.bookings.len() as u32;
                    let members: Vec<Job> =
                        head.queue.drain(..path.batch.min(head.queue.len())).map(|j| Job { booking: b, ..j }).collect();
                    let first = head.instances[path.hops[0].instance];
                    // Every member is at the first stage already.
                    let gathers =
                        (0..path.hops.len()).map(|d| (if d == 0 { 0 } else { members.len() }, Vec::new())).collect();
                    head.bookings.push((path, gathers));
                    self.instances[first].booked.push_back(members);
                    self.start_batches(first, false);
                }
                Decision::DropOldest => {
                    let job = head.queue.pop_front().expect("a request at the head");
                    self.dropped(0, None, job);
                }
                Decision::Wait { until } => {
                    let until = until.max(now);
                    if head.timer.is_none_or(|t| until < t || t < now) {
                        head.timer = Some(until);
                        self.schedule(until, Event::Decide);
                    }
                    return;
                }
                Decision::Idle => return,
            }
        }
    }

    /// A member of a booked batch calls `task`'s model: once every member is there, the batch runs on the
    /// instance booked for it.
    pub(super) fn gather(&mut self, task: usize, job: Job) {
        let head = self.head.as_mut().expect("a head");
        let (path, gathers) = &mut head.bookings[job.booking as usize];
        let (expected, here) = &mut gathers[task];
        here.push(job);
        *expected -= 1;
        if *expected == 0 {
            let batch = std::mem::take(here);
            let instance = head.instances[path.hops[task].instance];
            self.instances[instance].booked.push_back(batch);
            self.start_batches(instance, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::engine::{Outside, run_plan};
    use jig_planner::SolveOptions;
    use jig_planner::problem::Problem;
    use jig_planner::solve;
    use jig_planner::spec::Features;
    use jig_policy::stats::quantile;

    /// A model cut in two (`head → tail`) on four cores, planned by PPipe: requests are booked at the head along
    /// its pooled pipelines and run as booked batches at both tasks, as deployments run them (`jig_app`).
    fn ppipe_problem() -> Problem {
        let spec = jig_planner::PlanSpec::from_toml(
            "[app]\nname = \"cut\"\nslo_latency_ms = 200\nslo_accuracy = 0.5\nplanner = \"ppipe\"\n\
             tasks = [{ name = \"head\", variants = [{ name = \"head\", accuracy = 1 }] }, \
             { name = \"tail\", variants = [{ name = \"tail\", accuracy = 1 }] }]\n\
             edges = [{ from = \"head\", to = \"tail\" }]\n\
             [[segments]]\nname = \"cpu:1\"\n[[segments]]\nname = \"cpu:2\"\n\
             [resources]\nslices = 4\ncpu_cores = 4\n[demand]\nwindows = [100]\n",
        )
        .unwrap();
        let mut rows = Vec::new();
        for (slot, ms) in [("head", 6.0), ("tail", 12.0)] {
            for batch in [1u32, 2, 4, 8] {
                for (segment, ms) in [("cpu:1", 1.8 * ms), ("cpu:2", ms)] {
                    let ms = ms * f64::from(batch).powf(0.7);
                    rows.push(jig_planner::profile::ProfileRow {
                        slot: slot.into(),
                        variant: slot.into(),
                        segment: segment.into(),
                        batch,
                        p50_ms: ms,
                        p95_ms: 1.2 * ms,
                        throughput_rps: f64::from(batch) * 1e3 / ms,
                        device: "test".into(),
                        cpu_ms: None,
                    });
                }
            }
        }
        Problem::new(&spec, &rows, "test").unwrap()
    }

    #[test]
    fn a_ppipe_plan_runs_booked_batches_through_its_pipelines() {
        let problem = ppipe_problem();
        let solved = solve(&problem, Features::ALL, &SolveOptions::default()).unwrap();
        assert!(!solved.pipelines.is_empty());
        let plan = (&[][..], &solved.pipelines[..]);
        let mut sim = Sim::for_plan(&problem, &solved.assignments, plan, &Outside::default(), 11);
        sim.run_arrivals((100.0, 30.0).into());
        let head = sim.head.as_ref().expect("a plan of pooled pipelines has a head");
        assert!(head.bookings.len() > 100, "{} batches booked", head.bookings.len());
        // Every member of every booked batch came to the tail and ran there in the one batch booked.
        for (path, gathers) in &head.bookings {
            assert!(gathers.iter().all(|(left, here)| *left == 0 && here.is_empty()), "{path:?}");
        }
        let batched = head.bookings.iter().filter(|(path, _)| path.batch > 1).count();
        assert!(batched > 0, "requests waited for company");
        let run = &sim.run;
        assert!(run.violations / run.units < 0.02, "{} of {} violated", run.violations, run.units);

        // Three times the plan's load: the head drops what it cannot serve in time, keeps batches large (no
        // collapse into batches of one: `jig_policy::reserve`, overload), and what it books is served in time.
        let over = run_plan(&problem, &solved.assignments, plan, (300.0, 20.0), &Outside::default(), 11);
        assert!(over.violations / over.units > 0.2, "{} of {} violated", over.violations, over.units);
        let goodput = over.latencies_ms.len() as f64 / 20.0;
        assert!(goodput >= 0.8 * solved.pipelines[0].rate_rps, "{goodput} req/s served");
        let within = over.latencies_ms.iter().filter(|&&ms| ms <= 200.0).count() as f64;
        assert!(
            within >= 0.95 * over.latencies_ms.len() as f64,
            "p99 {} ms",
            quantile(&over.latencies_ms, 0.99).unwrap_or_default()
        );
    }
}
