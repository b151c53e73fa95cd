//! The engine's clock: the events a simulation schedules ([`Event`]) and the agenda that returns them in time
//! order ([`Agenda`]), built for the millions of events in a large cluster's bin.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use super::state::Job;

/// What happens next in a simulation, and to what.
pub(super) enum Event {
    Root,
    /// A request reaches a task, and its model queue `overhead` later.
    Arrive {
        task: usize,
        job: Job,
    },
    Queue {
        task: usize,
        job: Job,
    },
    Start {
        instance: usize,
    },
    Done {
        instance: usize,
        batch: Vec<Job>,
    },
    /// The pipelines' head decides again (its wait rule's moment).
    Decide,
}

/// Events in time order, ties in the order they were scheduled. The heap holds only (time, sequence, slot) and
/// the events wait in a slab: a request's event is large, and moving it at every step of the heap's sifts
/// was most of a large simulation's time. Events scheduled a fixed delay ahead (a request's hop into a task)
/// come due in the order they were scheduled, so they wait in a queue of their own instead of the heap.
#[derive(Default)]
pub(super) struct Agenda {
    order: BinaryHeap<Reverse<(Duration, u64, u32)>>,
    slab: Vec<Option<Event>>,
    free: Vec<u32>,
    seq: u64,
    /// Events scheduled [`Agenda::push_in_order`], by time and sequence both ascending.
    in_order: VecDeque<(Duration, u64, Event)>,
}

impl Agenda {
    /// Schedule `event` at `at`, in the queue when it is due no earlier than the queue's last (a fixed delay
    /// ahead), else in the heap.
    pub(super) fn push_in_order(&mut self, at: Duration, event: Event) {
        if self.in_order.back().is_some_and(|&(last, _, _)| at < last) {
            return self.push(at, event);
        }
        self.seq += 1;
        self.in_order.push_back((at, self.seq, event));
    }

    pub(super) fn push(&mut self, at: Duration, event: Event) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slab[slot as usize] = Some(event);
                slot
            }
            None => {
                self.slab.push(Some(event));
                (self.slab.len() - 1) as u32
            }
        };
        self.order.push(Reverse((at, self.seq, slot)));
    }

    pub(super) fn pop(&mut self) -> Option<(Duration, Event)> {
        let queued = self.in_order.front().map(|&(at, seq, _)| (at, seq));
        let heaped = self.order.peek().map(|Reverse((at, seq, _))| (*at, *seq));
        if queued.is_some_and(|q| heaped.is_none_or(|h| q < h)) {
            return self.in_order.pop_front().map(|(at, _, event)| (at, event));
        }
        let Reverse((at, _, slot)) = self.order.pop()?;
        self.free.push(slot);
        Some((at, self.slab[slot as usize].take().expect("a scheduled slot holds its event")))
    }
}
