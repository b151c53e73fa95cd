//! Algorithm 1 ([`Scheduler::decide`]): for a FIFO queue, pick the pipeline whose planned batch would wait
//! least (step 1), then the largest batch that makes the oldest deadline (step 2), and dispatch, wait for
//! company, or drop the oldest ([`Decision`]).

use std::time::Duration;

use super::probe::Path;
use super::scheduler::Scheduler;
use super::table::bookings;
use crate::Time;

/// How closely the wait rule finds its last moment.
const RESOLUTION: Duration = Duration::from_micros(1);

/// What to do with the queue now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<T> {
    /// Send the oldest `path.batch` requests as one batch along `path`, whose resources are now booked.
    Dispatch(Path<T>),
    /// Too few requests for the batch a pipeline could run: decide again at the next arrival, or at `until`.
    Wait {
        /// The last moment at which the queue still makes the oldest deadline, less the timer slack.
        until: T,
    },
    /// Not even the oldest request alone can finish by its deadline: drop it, then decide again.
    DropOldest,
    /// Nothing is pending.
    Idle,
}

impl<T: Time> Scheduler<T> {
    /// Algorithm 1 for a FIFO queue of `pending` requests whose oldest must finish by `oldest_deadline`. A
    /// dispatched path is booked; the caller takes the oldest `path.batch` requests (or pops the dropped one)
    /// and asks again until told to wait, then again at the next arrival or at the wait's end.
    pub fn decide(&mut self, now: T, pending: usize, oldest_deadline: T) -> Decision<T> {
        self.prune(now);
        if pending == 0 {
            return Decision::Idle;
        }
        // Step 1: the pipelines by how long their planned batch would wait.
        let mut ranked: Vec<Path<T>> =
            (0..self.pipelines.len()).map(|p| self.path(p, self.pipelines[p].batch, now)).collect();
        ranked.sort_by_key(|a| (a.wait, a.finish, a.pipeline));
        for planned in ranked {
            // Step 2: the largest batch that makes the oldest deadline.
            let p = planned.pipeline;
            let batch = self.pipelines[p].batch;
            // Overload (module docs): a batch under half the planned one is booked at once only where nothing waits.
            let worth = |path: &Path<T>| 2 * path.batch >= batch || path.wait.is_zero();
            let fit = std::iter::once(planned)
                .chain((1..batch).rev().map(|b| self.path(p, b, now)))
                .find(|path| path.finish <= oldest_deadline);
            let Some(fit) = fit else { continue };
            if pending >= fit.batch {
                if worth(&fit) {
                    return self.dispatch(fit);
                }
                continue;
            }
            // Too few: wait for company while the whole queue still makes it as one batch.
            let spare = self.latest_start(p, pending, now, oldest_deadline).saturating_sub(self.timer_slack);
            if spare >= RESOLUTION {
                return Decision::Wait { until: now.after(spare) };
            }
            // Finish times are monotone in the batch size, so the smaller queue fits where `fit` does.
            return self.dispatch(self.path(p, pending, now));
        }
        Decision::DropOldest
    }

    fn dispatch(&mut self, path: Path<T>) -> Decision<T> {
        self.book(bookings(&path));
        Decision::Dispatch(path)
    }

    /// How long after `now` a batch of `batch` may start on `pipeline` and still finish by `deadline`, to within
    /// [`RESOLUTION`], given that it fits at `now`: a bisection, as the finish is monotone in the start.
    fn latest_start(&self, pipeline: usize, batch: usize, now: T, deadline: T) -> Duration {
        let fits = |d: Duration| self.path(pipeline, batch, now.after(d)).finish <= deadline;
        let (mut lo, mut hi) = (Duration::ZERO, deadline.since(now));
        if fits(hi) {
            return hi;
        }
        while hi - lo > RESOLUTION {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reserve::probe::Hop;
    use crate::reserve::table::Resource;
    use crate::reserve::testing::*;
    use proptest::prelude::*;

    #[test]
    fn step_one_sends_each_batch_to_the_pipeline_that_would_wait_least() {
        let mut s = scheduler(vec![
            pipeline("slow", 2, vec![stage(&[1], &[20, 30])]),
            pipeline("fast", 2, vec![stage(&[0], &[10, 15])]),
        ]);
        // Both idle: neither waits, so the earlier finish.
        let first = dispatched(s.decide(ms(0), 2, ms(100)));
        assert_eq!((first.pipeline, first.batch, first.finish, first.wait), (1, 2, ms(15), ms(0)));
        // The fast one would now wait 15 ms, the slow one not at all.
        let second = dispatched(s.decide(ms(0), 2, ms(100)));
        assert_eq!((second.pipeline, second.hops[0].start, second.finish), (0, ms(0), ms(30)));
        let third = dispatched(s.decide(ms(0), 2, ms(100)));
        assert_eq!((third.pipeline, third.hops[0].start, third.wait), (1, ms(15), ms(15)));
        assert_eq!(reserved(&s, Resource::Instance(0)), vec![(0, 15), (15, 30)]);
    }

    #[test]
    fn a_smaller_batch_is_chosen_when_the_planned_one_would_miss() {
        let mut s = scheduler(vec![pipeline("p", 4, vec![stage(&[0], &[10, 20, 30, 40])])]);
        let path = dispatched(s.decide(ms(0), 5, ms(25)));
        assert_eq!((path.batch, path.finish), (2, ms(20)));
        // The next batch would queue behind it: only one request still makes 35, and a batch under half the
        // planned one is not booked behind others (overload), so the oldest goes.
        assert_eq!(s.decide(ms(0), 3, ms(35)), Decision::DropOldest);
        // Two make 45: half the planned batch, booked behind.
        let path = dispatched(s.decide(ms(0), 3, ms(45)));
        assert_eq!((path.batch, path.hops[0].start, path.finish), (2, ms(20), ms(40)));
    }

    #[test]
    fn the_oldest_is_dropped_when_not_even_one_request_fits() {
        let mut s = scheduler(vec![pipeline("p", 2, vec![stage(&[0], &[10, 12])])]);
        assert_eq!(s.decide(ms(0), 3, ms(9)), Decision::DropOldest);
        dispatched(s.decide(ms(0), 2, ms(100)));
        // Idle, one request would make 15; but the instance is busy until 12.
        assert_eq!(s.decide(ms(0), 1, ms(15)), Decision::DropOldest);
        let path = dispatched(s.decide(ms(0), 1, ms(22)));
        assert_eq!((path.batch, path.finish), (1, ms(22)));
    }

    #[test]
    fn too_few_requests_wait_until_the_last_moment_the_queue_still_fits() {
        let s = scheduler(vec![pipeline("p", 4, vec![stage(&[0], &[10, 20, 30, 40])])]);
        // Two requests: the planned 4 fits, so wait; two still make 100 if they start by 80.
        let until = waited(s.clone().decide(ms(0), 2, ms(100)));
        assert!(until <= ms(80) && ms(80) - until <= RESOLUTION, "{until:?}");
        let path = dispatched(s.clone().decide(until, 2, ms(100)));
        assert_eq!((path.batch, path.hops[0].start), (2, until));
        assert!(path.finish <= ms(100));
        // A third arrives at 50: four still fit, so wait again, now for three (by 70).
        let until = waited(s.clone().decide(ms(50), 3, ms(100)));
        assert!(ms(70) - until <= RESOLUTION, "{until:?}");
        // At 75 only two fit: they go, and the third stays queued.
        assert_eq!(dispatched(s.clone().decide(ms(75), 3, ms(100))).batch, 2);
    }

    #[test]
    fn waiting_that_cannot_help_dispatches_at_once() {
        let s = scheduler(vec![pipeline("p", 2, vec![stage(&[0], &[10, 11])])]);
        // Two would make 12, but one is queued, and it must start within 2 ms.
        assert!(ms(2) - waited(s.clone().decide(ms(0), 1, ms(12))) <= RESOLUTION);
        let slack = s.clone().with_timer_slack(ms(1));
        assert!(ms(1) - waited(slack.clone().decide(ms(0), 1, ms(12))) <= RESOLUTION);
        // A timer 2 ms late could not wake in time: go now.
        let mut late = s.with_timer_slack(ms(2));
        let path = dispatched(late.decide(ms(0), 1, ms(12)));
        assert_eq!((path.batch, path.hops[0].start, path.finish), (1, ms(0), ms(10)));
    }

    #[test]
    fn a_faster_busier_pipeline_serves_what_the_least_waiting_one_cannot() {
        let mut s = scheduler(vec![
            pipeline("slow", 1, vec![stage(&[0], &[50])]),
            pipeline("fast", 1, vec![stage(&[1], &[10])]),
        ]);
        assert_eq!(dispatched(s.decide(ms(0), 1, ms(100))).pipeline, 1);
        // Step 1 ranks the idle slow one first, but it would finish at 50; the fast one, busy, at 20.
        assert!(s.probe(0, 1, ms(0)).unwrap().wait < s.probe(1, 1, ms(0)).unwrap().wait);
        let path = dispatched(s.decide(ms(0), 1, ms(30)));
        assert_eq!((path.pipeline, path.finish), (1, ms(20)));
    }

    fn shift(t: Duration, by_us: i64) -> Duration {
        if by_us >= 0 { t + us(by_us as u64) } else { t.saturating_sub(us(by_us.unsigned_abs())) }
    }

    fn disjoint(s: &Scheduler<Duration>) -> Result<(), TestCaseError> {
        for (resource, table) in &s.tables {
            prop_assert!(table.iter().all(|b| b.start < b.end), "{}: {:?}", resource, table);
            for w in table.windows(2) {
                prop_assert!(w[0].end <= w[1].start, "{}: {:?} overlaps {:?}", resource, w[0], w[1]);
            }
        }
        Ok(())
    }

    /// A drop of the oldest of `pending`: no batch fits its deadline on any pipeline, or the largest that does is
    /// under half the planned one and would wait behind other bookings (overload).
    fn rightly_dropped(
        s: &Scheduler<Duration>,
        now: Duration,
        pending: usize,
        deadline: Duration,
    ) -> Result<(), TestCaseError> {
        for p in 0..s.pipelines().len() {
            let planned = s.pipelines()[p].batch;
            let probe = |b| s.probe(p, b, now).unwrap();
            if let Some(fit) = (1..=planned).rev().map(probe).find(|f| f.finish <= deadline) {
                let small_behind = fit.batch <= pending && 2 * fit.batch < planned && !fit.wait.is_zero();
                prop_assert!(small_behind, "pipeline {p} fits {fit:?}");
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn dispatches_meet_the_oldest_deadline_and_bookings_never_overlap(
            pipelines in cluster(),
            slack in 0u64..=3_000,
            events in prop::collection::vec(
                (0u64..=15_000, 0usize..=6, -20_000i64..=150_000, 0u8..4, 0usize..64, -5_000i64..=10_000),
                1..=40,
            ),
        ) {
            let mut s = Scheduler::new(pipelines).unwrap().with_timer_slack(us(slack));
            let mut now = Duration::ZERO;
            let mut hops: Vec<Hop<Duration>> = Vec::new();
            for (dt, pending, deadline, kind, pick, delta) in events {
                now += us(dt);
                if kind == 3 {
                    // A report, early or late, of a booked run.
                    if !hops.is_empty() {
                        let hop = hops[pick % hops.len()];
                        s.correct(Resource::Instance(hop.instance), hop.start, shift(hop.end, delta));
                    }
                    disjoint(&s)?;
                    continue;
                }
                let deadline = shift(now, deadline);
                match s.decide(now, pending, deadline) {
                    Decision::Dispatch(path) => {
                        prop_assert!(path.finish <= deadline, "{:?} misses {:?}", path, deadline);
                        let planned = &s.pipelines()[path.pipeline];
                        prop_assert!(path.batch >= 1 && path.batch <= pending && path.batch <= planned.batch);
                        prop_assert_eq!(path.hops.len(), planned.stages.len());
                        let mut ready = now;
                        for (hop, stage) in path.hops.iter().zip(&planned.stages) {
                            prop_assert!(stage.pool.iter().any(|i| i.id == hop.instance));
                            let arrived = hop.transfer.map_or(ready, |t| t.end);
                            prop_assert!(hop.transfer.is_none_or(|t| ready <= t.start) && arrived <= hop.start);
                            let booked = (hop.start, hop.end);
                            prop_assert!(s.reserved(Resource::Instance(hop.instance)).any(|b| b == booked));
                            ready = hop.end;
                        }
                        prop_assert_eq!(ready, path.finish);
                        hops.extend(path.hops);
                    }
                    Decision::Wait { until } => {
                        prop_assert!(now < until && until <= deadline, "{:?} after {:?}", until, deadline);
                        // At that moment, with nothing else booked meanwhile, the queue is still served (unless
                        // only as a small batch behind a backlog: overload).
                        let mut later = s.clone();
                        if later.decide(until, pending, deadline) == Decision::DropOldest {
                            rightly_dropped(&later, until, pending, deadline)?;
                        }
                    }
                    Decision::DropOldest => rightly_dropped(&s, now, pending, deadline)?,
                    Decision::Idle => prop_assert_eq!(pending, 0),
                }
                disjoint(&s)?;
            }
        }
    }
}
