//! The reservation tables: per [`Resource`] (an instance, a node's uplink or downlink), the sorted, disjoint
//! intervals booked on it. Booking a path ([`Scheduler::reserve`]), finding the earliest free slot, feedback
//! from the nodes ([`Scheduler::correct`]) and pruning what ended.

use std::fmt;
use std::time::Duration;

use super::error::ReserveError;
use super::probe::{Path, Transfer};
use super::scheduler::Scheduler;
use crate::Time;

/// What a reservation table is kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// An instance, by id.
    Instance(usize),
    /// A node's outgoing link, by node.
    Uplink(usize),
    /// A node's incoming link, by node.
    Downlink(usize),
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Instance(id) => write!(f, "instance {id}"),
            Resource::Uplink(node) => write!(f, "node {node}'s uplink"),
            Resource::Downlink(node) => write!(f, "node {node}'s downlink"),
        }
    }
}

/// A booked interval, `[start, end)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Busy<T> {
    /// The start it was booked at: its name for feedback, even after an overrun pushed it back.
    pub(super) booked: T,
    pub(super) start: T,
    pub(super) end: T,
}

impl<T: Time> Scheduler<T> {
    /// The intervals booked on `resource`, `[start, end)`, in order.
    pub fn reserved(&self, resource: Resource) -> impl Iterator<Item = (T, T)> + '_ {
        self.tables.get(&resource).into_iter().flatten().map(|b| (b.start, b.end))
    }

    /// Book `path`'s transfers and runs. A path probed before another booking took part of it is refused.
    pub fn reserve(&mut self, path: &Path<T>) -> Result<(), ReserveError> {
        let bookings = bookings(path);
        for (i, &(resource, start, end)) in bookings.iter().enumerate() {
            let clash = |&(r, s, e): &(Resource, T, T)| r == resource && s < end && start < e;
            if self.overlaps(resource, start, end) || bookings[..i].iter().any(clash) {
                return Err(ReserveError::Taken { resource });
            }
        }
        self.book(bookings);
        Ok(())
    }

    /// Feedback: the use of `resource` booked to start at `booked` (a hop's or transfer's `start`) actually ended
    /// at `actual_end`. An early end frees the rest of the booking; a late one pushes back the later bookings on
    /// `resource` that it now overlaps. False when no such booking is left (it was pruned, or never made).
    pub fn correct(&mut self, resource: Resource, booked: T, actual_end: T) -> bool {
        let Some(table) = self.tables.get_mut(&resource) else { return false };
        let Some(i) = table.iter().position(|b| b.booked == booked) else { return false };
        if actual_end <= table[i].start {
            table.remove(i);
            return true;
        }
        table[i].end = actual_end;
        for k in i + 1..table.len() {
            let free = table[k - 1].end;
            if table[k].start >= free {
                break;
            }
            let length = table[k].end.since(table[k].start);
            table[k].start = free;
            table[k].end = free.after(length);
        }
        true
    }

    /// Forget the bookings that ended by `now`: no probe from `now` on can meet them.
    pub fn prune(&mut self, now: T) {
        self.tables.retain(|_, table| {
            // Disjoint and sorted by start, so sorted by end too.
            let ended = table.partition_point(|b| b.end <= now);
            table.drain(..ended);
            !table.is_empty()
        });
    }

    /// earliestSlot(): the earliest time from `from` at which all of `resources` are free for `length`.
    pub(super) fn earliest(&self, resources: &[Resource], from: T, length: Duration) -> T {
        let mut at = from;
        'search: loop {
            for resource in resources {
                let Some(table) = self.tables.get(resource) else { continue };
                let next = table.partition_point(|b| b.end <= at);
                if let Some(b) = table.get(next)
                    && b.start < at.after(length)
                {
                    at = b.end;
                    continue 'search;
                }
            }
            return at;
        }
    }

    fn overlaps(&self, resource: Resource, start: T, end: T) -> bool {
        let Some(table) = self.tables.get(&resource) else { return false };
        table.get(table.partition_point(|b| b.end <= start)).is_some_and(|b| b.start < end)
    }

    pub(super) fn book(&mut self, bookings: Vec<(Resource, T, T)>) {
        for (resource, start, end) in bookings {
            let table = self.tables.entry(resource).or_default();
            let at = table.partition_point(|b| b.start < start);
            table.insert(at, Busy { booked: start, start, end });
        }
    }
}

/// The intervals a path books: links for its transfers, instances for its runs; nothing for what takes no time.
pub(super) fn bookings<T: Time>(path: &Path<T>) -> Vec<(Resource, T, T)> {
    let mut out = Vec::with_capacity(3 * path.hops.len());
    for hop in &path.hops {
        if let Some(Transfer { start, end, links: Some((from, to)) }) = hop.transfer
            && start < end
        {
            out.push((Resource::Uplink(from), start, end));
            out.push((Resource::Downlink(to), start, end));
        }
        if hop.start < hop.end {
            out.push((Resource::Instance(hop.instance), hop.start, hop.end));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reserve::decide::Decision;
    use crate::reserve::probe::Hop;
    use crate::reserve::testing::*;

    #[test]
    fn feedback_frees_an_early_end_and_pushes_back_what_an_overrun_delays() {
        let mut s = scheduler(vec![pipeline("p", 1, vec![stage(&[0], &[10])])]);
        for _ in 0..3 {
            dispatched(s.decide(ms(0), 1, ms(100)));
        }
        let instance = Resource::Instance(0);
        assert_eq!(reserved(&s, instance), vec![(0, 10), (10, 20), (20, 30)]);
        assert!(s.correct(instance, ms(20), ms(24)));
        assert_eq!(s.probe(0, 1, ms(0)).unwrap().hops[0].start, ms(24), "the early end is free");
        assert!(s.correct(instance, ms(0), ms(15)));
        assert_eq!(reserved(&s, instance), vec![(0, 15), (15, 25), (25, 29)]);
        // A pushed booking keeps the start it was booked at as its name.
        assert!(s.correct(instance, ms(10), ms(27)));
        assert_eq!(reserved(&s, instance), vec![(0, 15), (15, 27), (27, 31)]);
        assert!(!s.correct(instance, ms(3), ms(5)), "no booking started at 3");
        assert!(!s.correct(Resource::Uplink(0), ms(0), ms(5)), "nothing booked on the link");
        // Done before its (pushed) start: the booking goes.
        assert!(s.correct(instance, ms(20), ms(26)));
        assert_eq!(reserved(&s, instance), vec![(0, 15), (15, 27)]);
    }

    #[test]
    fn ended_bookings_are_pruned_and_an_empty_queue_is_idle() {
        let mut s = scheduler(vec![pipeline("p", 1, vec![stage(&[0], &[10])])]);
        dispatched(s.decide(ms(0), 1, ms(100)));
        dispatched(s.decide(ms(0), 1, ms(100)));
        assert_eq!(s.decide(ms(15), 0, ms(100)), Decision::Idle);
        assert_eq!(reserved(&s, Resource::Instance(0)), vec![(10, 20)]);
        s.prune(ms(20));
        assert!(s.tables.is_empty(), "{:?}", s.tables);
    }

    #[test]
    fn reserve_refuses_a_path_another_booking_overtook() {
        let mut s = scheduler(vec![pipeline("p", 1, vec![stage(&[0], &[10])])]);
        let (a, b) = (s.probe(0, 1, ms(0)).unwrap(), s.probe(0, 1, ms(5)).unwrap());
        s.reserve(&a).unwrap();
        let error = s.reserve(&b).unwrap_err();
        assert_eq!(error, ReserveError::Taken { resource: Resource::Instance(0) });
        assert!(error.to_string().contains("probe again"), "{error}");
        // A path that overlaps itself books nothing.
        let hop = |start, end| Hop { instance: 5, transfer: None, start: ms(start), end: ms(end) };
        let twice = Path { pipeline: 0, batch: 1, hops: vec![hop(0, 10), hop(5, 15)], finish: ms(15), wait: ms(0) };
        assert_eq!(s.reserve(&twice), Err(ReserveError::Taken { resource: Resource::Instance(5) }));
        assert_eq!(s.reserved(Resource::Instance(5)).count(), 0);
    }
}
