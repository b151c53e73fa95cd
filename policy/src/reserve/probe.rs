//! Probing ([`Scheduler::probe`]): the path, one instance per stage, on which a batch would finish first under
//! the current bookings, found exactly (the earliest finish at every member of each pool), and the [`Path`]
//! with its [`Hop`]s and [`Transfer`]s that it answers.

use std::time::Duration;

use super::error::ReserveError;
use super::pipeline::{Instance, missing};
use super::scheduler::Scheduler;
use super::table::Resource;
use crate::Time;

/// A batch's input on its way from the previous stage's instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer<T> {
    /// When it starts.
    pub start: T,
    /// When it has arrived.
    pub end: T,
    /// The sender's and the receiver's nodes, when it books their links.
    pub links: Option<(usize, usize)>,
}

/// One stage of a path: the transfer into its instance, and its run there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop<T> {
    /// The instance, by id.
    pub instance: usize,
    /// The transfer from the previous hop; `None` for the first.
    pub transfer: Option<Transfer<T>>,
    /// When the batch starts on the instance.
    pub start: T,
    /// When it ends there.
    pub end: T,
}

/// Where and when a batch would run: a probe's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path<T> {
    /// The pipeline, by index.
    pub pipeline: usize,
    /// The batch size.
    pub batch: usize,
    /// One hop per stage.
    pub hops: Vec<Hop<T>>,
    /// When the last stage ends.
    pub finish: T,
    /// How long the batch waits for resources along the way (step 1's measure of a pipeline's load).
    pub wait: Duration,
}

/// The best way found to a pool member (probe's table).
#[derive(Debug, Clone, Copy)]
struct Reach<T> {
    /// The previous stage's member it came from.
    from: usize,
    transfer: Option<Transfer<T>>,
    start: T,
    end: T,
    wait: Duration,
}

impl<T: Time> Scheduler<T> {
    /// The path on which a batch of `batch` given to `pipeline` at `now` would finish first under the
    /// current bookings, booking nothing.
    pub fn probe(&self, pipeline: usize, batch: usize, now: T) -> Result<Path<T>, ReserveError> {
        let Some(p) = self.pipelines.get(pipeline) else {
            let problem = format!("there is no such pipeline; the scheduler has {}", self.pipelines.len());
            return Err(ReserveError::Invalid { pipeline, name: String::new(), stage: None, problem });
        };
        let invalid = |stage, problem: String| ReserveError::Invalid { pipeline, name: p.name.clone(), stage, problem };
        if batch == 0 {
            return Err(invalid(None, "a batch of 0; probe at least 1".into()));
        }
        if let Some((k, problem)) = p.stages.iter().enumerate().find_map(|(k, s)| Some((k, missing(s, k, batch)?))) {
            return Err(invalid(Some(k), problem));
        }
        Ok(self.path(pipeline, batch, now))
    }

    /// probe() on a validated pipeline and batch: per stage, the earliest finish at each member of the pool.
    pub(super) fn path(&self, pipeline: usize, batch: usize, now: T) -> Path<T> {
        let p = &self.pipelines[pipeline];
        let mut reached: Vec<Vec<Reach<T>>> = Vec::with_capacity(p.stages.len());
        for (k, stage) in p.stages.iter().enumerate() {
            let run = stage.latency[batch - 1];
            let send = stage.transfer.get(batch - 1).copied().unwrap_or_default();
            let layer = stage
                .pool
                .iter()
                .map(|&to| {
                    let (from, transfer, ready, wait) = match reached.last() {
                        None => (0, None, now, Duration::ZERO),
                        Some(prev) => {
                            let (from, t, wait) = self.best_sender(&p.stages[k - 1].pool, prev, to, send);
                            (from, Some(t), t.end, wait)
                        }
                    };
                    let start = self.earliest(&[Resource::Instance(to.id)], ready, run);
                    Reach { from, transfer, start, end: start.after(run), wait: wait + start.since(ready) }
                })
                .collect();
            reached.push(layer);
        }
        let last = reached.last().expect("validated: every pipeline has a stage");
        let (mut at, best) = last
            .iter()
            .enumerate()
            .min_by_key(|(_, r)| (r.end, r.wait))
            .expect("validated: every pool has an instance");
        let (finish, wait) = (best.end, best.wait);
        let mut hops = Vec::with_capacity(reached.len());
        for (stage, layer) in p.stages.iter().zip(&reached).rev() {
            let r = layer[at];
            hops.push(Hop { instance: stage.pool[at].id, transfer: r.transfer, start: r.start, end: r.end });
            at = r.from;
        }
        hops.reverse();
        Path { pipeline, batch, hops, finish, wait }
    }

    /// Which member of the previous stage's pool (`senders`, reached as `reached` says) gets a batch's input to
    /// `to` first, then with the least wait: its index, the transfer, and the wait so far.
    fn best_sender(
        &self,
        senders: &[Instance],
        reached: &[Reach<T>],
        to: Instance,
        send: Duration,
    ) -> (usize, Transfer<T>, Duration) {
        let transfers = senders.iter().zip(reached).map(|(sender, r)| {
            // Links are booked only across nodes, and only for a transfer that takes time.
            let links = match (sender.node, to.node) {
                (Some(a), Some(b)) if a != b && !send.is_zero() => Some((a, b)),
                _ => None,
            };
            let start =
                links.map_or(r.end, |(a, b)| self.earliest(&[Resource::Uplink(a), Resource::Downlink(b)], r.end, send));
            (Transfer { start, end: start.after(send), links }, r.wait + start.since(r.end))
        });
        let (i, (transfer, wait)) = transfers
            .enumerate()
            .min_by_key(|(_, (t, wait))| (t.end, *wait))
            .expect("validated: every pool has an instance");
        (i, transfer, wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reserve::pipeline::Pipeline;
    use crate::reserve::testing::*;
    use proptest::prelude::*;

    #[test]
    fn a_busy_instance_sends_the_batch_to_another_of_its_pool() {
        let mut s = scheduler(vec![
            pipeline("two", 1, vec![stage(&[0], &[10]), stage(&[1, 2], &[10])]),
            pipeline("hog", 1, vec![stage(&[1], &[50])]),
        ]);
        let hog = s.probe(1, 1, ms(0)).unwrap();
        s.reserve(&hog).unwrap();
        let path = s.probe(0, 1, ms(0)).unwrap();
        let hops: Vec<(usize, Duration, Duration)> = path.hops.iter().map(|h| (h.instance, h.start, h.end)).collect();
        assert_eq!(hops, vec![(0, ms(0), ms(10)), (2, ms(10), ms(20))]);
        assert_eq!(path.wait, ms(0));
        s.reserve(&path).unwrap();
        // Again: the batch waits 10 ms for instance 0, then 2 (free at 20) still beats 1 (busy until 50).
        let again = s.probe(0, 1, ms(0)).unwrap();
        assert_eq!((again.hops[1].instance, again.finish, again.wait), (2, ms(30), ms(10)));
    }

    #[test]
    fn transfers_book_the_senders_uplink_and_the_receivers_downlink_at_once() {
        // Figure 5: one instance, then a pool of two, each on its own node.
        let mut s = scheduler(vec![
            pipeline("fig5", 1, vec![linked(vec![on(0, 0)], 10, 0), linked(vec![on(1, 1), on(2, 2)], 10, 5)]),
            pipeline("other", 1, vec![linked(vec![on(3, 3)], 10, 0), linked(vec![on(4, 1)], 1, 20)]),
        ]);
        let other = s.probe(1, 1, ms(0)).unwrap();
        s.reserve(&other).unwrap();
        assert_eq!(reserved(&s, Resource::Uplink(3)), vec![(10, 30)]);
        assert_eq!(reserved(&s, Resource::Downlink(1)), vec![(10, 30)]);
        let path = s.probe(0, 1, ms(0)).unwrap();
        // Through node 1 the transfer waits for its downlink until 30 and the batch ends at 45; through 2, at 25.
        assert_eq!(path.hops[1].instance, 2);
        assert_eq!(path.hops[1].transfer, Some(Transfer { start: ms(10), end: ms(15), links: Some((0, 2)) }));
        assert_eq!(path.finish, ms(25));
        s.reserve(&path).unwrap();
        assert_eq!(reserved(&s, Resource::Uplink(0)), vec![(10, 15)]);
        assert_eq!(reserved(&s, Resource::Downlink(2)), vec![(10, 15)]);
        assert_eq!(reserved(&s, Resource::Instance(2)), vec![(15, 25)]);
        // Node 0's uplink is now busy: the next batch's transfer waits for it, and the wait counts.
        let next = s.probe(0, 1, ms(5)).unwrap();
        assert_eq!(next.hops[0].end, ms(20));
        assert_eq!(next.hops[1].transfer.map(|t| t.start), Some(ms(20)));
        assert_eq!(next.wait, ms(5));
    }

    #[test]
    fn transfers_within_a_node_or_without_nodes_book_no_link() {
        let mut s = scheduler(vec![
            pipeline("same node", 1, vec![linked(vec![on(0, 7)], 10, 0), linked(vec![on(1, 7)], 10, 4)]),
            pipeline("no node", 1, vec![linked(vec![2.into()], 10, 0), linked(vec![on(3, 8)], 10, 4)]),
        ]);
        for p in 0..2 {
            let path = s.probe(p, 1, ms(0)).unwrap();
            assert_eq!(path.hops[1].transfer, Some(Transfer { start: ms(10), end: ms(14), links: None }));
            assert_eq!(path.finish, ms(24), "the transfer still takes its time");
            s.reserve(&path).unwrap();
        }
        assert!(s.tables.keys().all(|r| matches!(r, Resource::Instance(_))), "{:?}", s.tables.keys());
    }

    /// A fixed path's finish, transfer by transfer and stage by stage at the earliest free slot: the spec probe
    /// must meet.
    fn finish_along(s: &Scheduler<Duration>, p: &Pipeline, batch: usize, members: &[usize], now: Duration) -> Duration {
        let mut t = now;
        let mut sender: Option<Instance> = None;
        for (stage, &m) in p.stages.iter().zip(members) {
            let to = stage.pool[m];
            if let Some(from) = sender {
                let send = stage.transfer.get(batch - 1).copied().unwrap_or_default();
                if let (Some(a), Some(b)) = (from.node, to.node)
                    && a != b
                    && !send.is_zero()
                {
                    t = s.earliest(&[Resource::Uplink(a), Resource::Downlink(b)], t, send);
                }
                t += send;
            }
            let run = stage.latency[batch - 1];
            t = s.earliest(&[Resource::Instance(to.id)], t, run) + run;
            sender = Some(to);
        }
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn probe_finds_the_earliest_finishing_path(
            pipelines in cluster(),
            events in prop::collection::vec((0u64..=15_000, 1usize..=6), 0..=20),
        ) {
            let mut s = Scheduler::new(pipelines).unwrap();
            let mut now = Duration::ZERO;
            for (dt, pending) in events {
                now += us(dt);
                s.decide(now, pending, now + ms(200));
            }
            for (i, p) in s.pipelines().iter().enumerate() {
                let mut choices = vec![vec![]];
                for stage in &p.stages {
                    choices = choices
                        .into_iter()
                        .flat_map(|c: Vec<usize>| (0..stage.pool.len()).map(move |m| [c.clone(), vec![m]].concat()))
                        .collect();
                }
                for batch in 1..=p.batch {
                    let path = s.probe(i, batch, now).unwrap();
                    let taken: Vec<usize> = path
                        .hops
                        .iter()
                        .zip(&p.stages)
                        .map(|(h, stage)| stage.pool.iter().position(|m| m.id == h.instance).unwrap())
                        .collect();
                    prop_assert_eq!(finish_along(&s, p, batch, &taken, now), path.finish);
                    let best = choices.iter().map(|c| finish_along(&s, p, batch, c, now)).min().unwrap();
                    prop_assert_eq!(path.finish, best);
                }
            }
        }
    }
}
