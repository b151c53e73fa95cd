//! How many requests a planned app holds at once, learned from how they end and how fast they are answered.
//!
//! The plan says how many requests the deployment completes within the SLO (capacity × SLO, Little's law):
//! the *ceiling*. Under sustained overload that many in progress means each admitted request waits most of its
//! SLO, and the machine's real service rate (under or over the profile's) decides whether it makes it. Two bounds
//! below the ceiling learn that rate:
//!
//! - Once requests queue, the app holds no more than it answers in time in most of the SLO (0.8 of it): Little's
//!   law on the rate observed, the answers in time per second it held requests (a rate of answers per second of
//!   the clock would be the load's, not the app's, below an overload). It answers an overload within the SLO of
//!   its start. Requests queue once the oldest in progress has waited a quarter of the SLO longer than the
//!   quickest answer so far (a request's own time).
//! - The limit adapts to outcomes, additive increase and multiplicative decrease as TCP does: a request that
//!   misses its deadline (late, or dropped early) cuts it by a quarter; a request answered in time while others
//!   were being refused raises it by 1/limit, about one a limit's worth of answers. One overload cuts once, as
//!   TCP's fast recovery halves its window once a window of losses: a miss of a request admitted before the last
//!   cut was admitted under a limit already cut, so it cuts nothing (nor within [`CUT_EVERY`] of the cut).
//!
//! Both stay at or above a quarter of the ceiling, which keeps batches full. A re-plan keeps the requests in
//! progress and what was learned ([`Admission::after`]).

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The least time between two cuts of the limit.
pub const CUT_EVERY: Duration = Duration::from_secs(1);

/// The share of the limit a miss cuts. A tenth converged too slowly from a plan made before anything was observed:
/// at twice what an AMD EPYC VM served, the first 30 s after a deploy answered 0.63–0.67 of it in time (a quarter:
/// 0.74–0.80), and under the same load kept on, 0.94–0.99 (a quarter: 1.05–1.06).
const CUT: f64 = 0.25;

/// Once the oldest request in progress has waited this share of the SLO beyond what the quickest answer took (what
/// a request takes with nothing before it), requests queue: the rate the app answers them in time is then what it
/// serves, and bounds what it holds ([`KEEP_UP`]). Without the quickest answer, an app whose requests take a
/// quarter of its SLO unqueued would look queued with one request in progress, and refuse a burst at idle.
const QUEUED: f64 = 0.25;

/// While requests queue, the app holds at most what it answers in time in this share of the SLO (Little's law on
/// the rate observed, where the ceiling is on the rate planned): a request admitted now waits about that long,
/// and the rest of the SLO is its own service and its variance. This answers an overload within the SLO, where
/// misses answer it only after. 0.6 refused 2–5% of the sign reader's requests at the rate the machine serves,
/// whose Poisson queues reach 4 of its 5 s there.
const KEEP_UP: f64 = 0.8;

/// The span the rate of answers in time is observed over.
const RATE_WINDOW: Duration = Duration::from_secs(2);

/// An app's admission limit and the requests it holds.
#[derive(Debug)]
pub struct Admission {
    ceiling: u32,
    floor: u32,
    slo: Duration,
    /// Shared with the admissions of the app's earlier and later plans: a re-plan's copy serves on the same
    /// machine as the requests its predecessor still holds.
    flow: Arc<Mutex<Flow>>,
    state: Mutex<State>,
}

/// The requests in progress, by when each was admitted, when the last were answered in time, the quickest
/// answer in time, and when the app held requests: since `busy_since` (`None` while it holds none), and in the
/// `busy` spans that ended within the last [`RATE_WINDOW`], oldest first.
#[derive(Debug, Default)]
struct Flow {
    in_progress: BTreeSet<(Instant, u64)>,
    next: u64,
    answered: VecDeque<Instant>,
    answering_since: Option<Instant>,
    quickest: Option<Duration>,
    busy_since: Option<Instant>,
    busy: VecDeque<(Instant, Instant)>,
}

impl Flow {
    /// Answers in time per second the app held requests, over the last [`RATE_WINDOW`] (or since the first
    /// answer); `None` before any. Per second of the clock instead where nothing says when it held them.
    fn answer_rate(&mut self, now: Instant) -> Option<f64> {
        while self.answered.front().is_some_and(|&at| now.saturating_duration_since(at) > RATE_WINDOW) {
            self.answered.pop_front();
        }
        let span = now.saturating_duration_since(self.answering_since?).min(RATE_WINDOW);
        // Spans that ended before the window count nothing; `release` forgets them.
        let from = now.checked_sub(span).unwrap_or(now);
        let open = self.busy_since.map(|since| (since, now));
        let busy: Duration =
            self.busy.iter().chain(&open).map(|&(start, end)| end.saturating_duration_since(start.max(from))).sum();
        let time = if busy.is_zero() { span } else { busy };
        Some(self.answered.len() as f64 / time.as_secs_f64().max(1e-3))
    }

    /// Hold a request admitted as `key`.
    fn hold(&mut self, key: (Instant, u64)) {
        if self.in_progress.is_empty() {
            self.busy_since = Some(key.0);
        }
        self.in_progress.insert(key);
    }

    /// Let go of the request admitted as `key`, at `now`.
    fn release(&mut self, key: &(Instant, u64), now: Instant) {
        self.in_progress.remove(key);
        if self.in_progress.is_empty()
            && let Some(since) = self.busy_since.take()
        {
            self.busy.push_back((since, now));
        }
        while self.busy.front().is_some_and(|&(_, end)| now.saturating_duration_since(end) > RATE_WINDOW) {
            self.busy.pop_front();
        }
    }
}

#[derive(Debug)]
struct State {
    limit: f64,
    /// A request was refused since the limit last rose: the limit binds, so raising it admits more.
    refused: bool,
    last_cut: Option<Instant>,
}

/// One admitted request, held until it drops.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    key: (Instant, u64),
}

impl Admission {
    /// Admission for a plan that completes `ceiling` requests within `slo`, starting at the ceiling.
    pub fn new(ceiling: u32, slo: Duration) -> Arc<Admission> {
        let ceiling = ceiling.max(1);
        let state = State { limit: f64::from(ceiling), refused: false, last_cut: None };
        let floor = ceiling.div_ceil(4);
        Arc::new(Admission { ceiling, floor, slo, flow: Arc::default(), state: Mutex::new(state) })
    }

    /// Admission with the ceiling of a new plan, going on from `previous`: the requests it holds count here, a
    /// miss of one admitted before its last cut cuts nothing, and the limit stays what it learned, within the
    /// new ceiling, or grows with it (the same share of it) when the new plan serves more.
    pub fn after(previous: &Admission, ceiling: u32) -> Arc<Admission> {
        let ceiling = ceiling.max(1);
        let floor = ceiling.div_ceil(4);
        let before = previous.state();
        let share = before.limit / f64::from(previous.ceiling);
        let limit = before.limit.max(share * f64::from(ceiling)).clamp(f64::from(floor), f64::from(ceiling));
        let state = State { limit, ..*before };
        let flow = previous.flow.clone();
        Arc::new(Admission { ceiling, floor, slo: previous.slo, flow, state: Mutex::new(state) })
    }

    /// The most it ever admits at once: the plan's capacity × SLO.
    pub fn ceiling(&self) -> u32 {
        self.ceiling
    }

    /// How many it admits at once now: the limit learned from misses, or while requests queue, what the app
    /// keeps up with if that is less.
    pub fn limit(&self) -> u32 {
        let state = self.state();
        self.keep_up(&mut self.flow(), Instant::now()).unwrap_or(f64::INFINITY).min(state.limit) as u32
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn flow(&self) -> MutexGuard<'_, Flow> {
        self.flow.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// While requests queue, how many the app answers in time in [`KEEP_UP`] of the SLO, and at least the floor.
    fn keep_up(&self, flow: &mut Flow, now: Instant) -> Option<f64> {
        let (oldest, _) = flow.in_progress.first()?;
        let own = flow.quickest.unwrap_or_default().min(self.slo);
        if now.saturating_duration_since(*oldest) <= own + (self.slo - own).mul_f64(QUEUED) {
            return None;
        }
        let rate = flow.answer_rate(now).unwrap_or(0.0);
        Some((rate * self.slo.as_secs_f64() * KEEP_UP).max(f64::from(self.floor)))
    }

    /// Hold one more request, or `None` when the limit's worth are held.
    pub fn try_admit(self: &Arc<Self>) -> Option<Ticket> {
        let now = Instant::now();
        let mut state = self.state();
        let mut flow = self.flow();
        let held = flow.in_progress.len() as f64;
        if held + 1.0 > state.limit {
            state.refused = true;
            return None;
        }
        if self.keep_up(&mut flow, now).is_some_and(|most| held + 1.0 > most) {
            return None;
        }
        let key = (now, flow.next);
        flow.next += 1;
        flow.hold(key);
        Some(Ticket { admission: self.clone(), key })
    }

    fn settle(&self, in_time: bool, admitted: Instant, now: Instant) {
        let mut state = self.state();
        if in_time {
            let mut flow = self.flow();
            flow.answered.push_back(now);
            flow.answering_since.get_or_insert(now);
            let took = now.saturating_duration_since(admitted);
            flow.quickest = Some(flow.quickest.map_or(took, |quickest| quickest.min(took)));
            flow.answer_rate(now); // drops the answers past the window
            if state.refused {
                state.limit = (state.limit + 1.0 / state.limit).min(f64::from(self.ceiling));
                state.refused = false;
            }
        } else if state.last_cut.is_none_or(|at| admitted > at && now.duration_since(at) >= CUT_EVERY) {
            state.limit = (state.limit * (1.0 - CUT)).max(f64::from(self.floor));
            state.last_cut = Some(now);
        }
    }
}

impl Ticket {
    /// Report how the request ended: answered by its deadline (`true`) or missed it, late or dropped early
    /// (`false`). Requests that fail for other reasons (bad input, a failing function) say nothing of load and
    /// are not reported.
    pub fn settle(&self, in_time: bool) {
        self.admission.settle(in_time, self.key.0, Instant::now());
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.flow().release(&self.key, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLO: Duration = Duration::from_secs(5);

    fn hold(admission: &Arc<Admission>) -> Vec<Ticket> {
        std::iter::from_fn(|| admission.try_admit()).collect()
    }

    /// `n` overloads one after another, each a miss of a request admitted after the last one's cut.
    fn overloads(admission: &Admission, n: u64) {
        let start = Instant::now();
        for i in 0..n {
            let admitted = start + Duration::from_secs(2 * i);
            admission.settle(false, admitted, admitted + CUT_EVERY);
        }
    }

    #[test]
    fn it_admits_up_to_the_limit_and_again_once_a_request_ends() {
        let admission = Admission::new(8, SLO);
        let mut held = hold(&admission);
        assert_eq!(held.len(), 8);
        assert!(admission.try_admit().is_none());
        held.pop();
        assert!(admission.try_admit().is_some());
    }

    #[test]
    fn an_overload_cuts_the_limit_by_a_quarter_once() {
        let admission = Admission::new(40, SLO);
        let start = Instant::now();
        admission.settle(false, start, start);
        assert_eq!(admission.limit(), 30);
        let later = start + 3 * CUT_EVERY;
        admission.settle(false, start, later);
        assert_eq!(admission.limit(), 30, "a miss of a request admitted before the cut");
        let admitted = start + CUT_EVERY / 10;
        admission.settle(false, admitted, start + CUT_EVERY / 2);
        assert_eq!(admission.limit(), 30, "a miss within CUT_EVERY of the cut");
        admission.settle(false, admitted, later);
        assert_eq!(admission.limit(), 22, "a miss of a request admitted after the cut");
    }

    #[test]
    fn overloads_cut_the_limit_down_to_a_quarter_of_the_ceiling() {
        let admission = Admission::new(40, SLO);
        overloads(&admission, 100);
        assert_eq!(admission.limit(), 10);
        assert_eq!(hold(&admission).len(), 10);
    }

    #[test]
    fn answers_in_time_raise_the_limit_only_while_it_binds_and_never_past_the_ceiling() {
        let admission = Admission::new(20, SLO);
        overloads(&admission, 5);
        let cut = admission.state().limit;
        let now = Instant::now();
        admission.settle(true, now, now);
        assert_eq!(admission.state().limit, cut, "nothing was refused: the limit does not bind");
        let held = hold(&admission);
        assert!(admission.try_admit().is_none());
        admission.settle(true, now, now);
        assert!((admission.state().limit - (cut + 1.0 / cut)).abs() < 1e-9);
        drop(held);
        for _ in 0..10_000 {
            let held = hold(&admission);
            assert!(admission.try_admit().is_none());
            admission.settle(true, now, now);
            drop(held);
        }
        assert_eq!(admission.limit(), 20);
    }

    #[test]
    fn a_new_plan_keeps_what_was_learned_within_its_ceiling_and_grows_it_with_its_share() {
        let admission = Admission::new(40, SLO);
        overloads(&admission, 1);
        assert_eq!(admission.limit(), 30);
        assert_eq!(Admission::after(&admission, 80).limit(), 60, "the share of a larger ceiling");
        assert_eq!(Admission::after(&admission, 36).limit(), 30, "the limit learned, where the ceiling allows");
        assert_eq!(Admission::after(&admission, 20).limit(), 20, "within the new ceiling");
    }

    #[test]
    fn a_new_plan_counts_the_requests_its_predecessor_holds() {
        let before = Admission::new(10, SLO);
        let mut held = hold(&before);
        held.truncate(6);
        let after = Admission::after(&before, 10);
        assert_eq!(hold(&after).len(), 4, "six are still held");
        drop(held);
        assert_eq!(hold(&after).len(), 10);
    }

    #[test]
    fn a_miss_admitted_before_a_re_plan_s_predecessor_cut_cuts_nothing() {
        let before = Admission::new(40, SLO);
        let admitted = Instant::now();
        before.settle(false, admitted, admitted + CUT_EVERY);
        let after = Admission::after(&before, 40);
        after.settle(false, admitted, admitted + 5 * CUT_EVERY);
        assert_eq!(after.limit(), 30);
    }

    /// A flow with one request in progress admitted `waited` ago, and `answers` answered in time over the last
    /// two seconds, since answers began `since` ago.
    fn queue(admission: &Admission, now: Instant, waited: Duration, answers: u32, since: Duration) {
        let mut flow = admission.flow();
        flow.in_progress.insert((now - waited, 0));
        flow.answered = (0..answers).map(|i| now - RATE_WINDOW * i / answers.max(1)).collect();
        flow.answering_since = Some(now - since);
    }

    #[test]
    fn while_requests_queue_it_holds_what_it_answers_in_time_in_most_of_the_slo() {
        let admission = Admission::new(40, SLO);
        let now = Instant::now();
        queue(&admission, now, SLO / 2, 12, Duration::from_secs(60));
        let most = 12.0 / RATE_WINDOW.as_secs_f64() * 5.0 * KEEP_UP;
        assert!(most < 40.0 && most > 10.0, "between the floor and the ceiling: {most}");
        assert_eq!(admission.keep_up(&mut admission.flow(), now), Some(most));
        assert_eq!(admission.limit(), most as u32);
        assert_eq!(admission.state().limit, 40.0, "the limit learned from misses is its own");
    }

    #[test]
    fn what_it_keeps_up_with_is_no_bound_before_requests_queue_and_never_under_the_floor() {
        let admission = Admission::new(40, SLO);
        let now = Instant::now();
        queue(&admission, now, SLO / 8, 0, Duration::from_secs(60));
        assert_eq!(admission.keep_up(&mut admission.flow(), now), None, "the oldest waited an eighth of the SLO");
        let idle = Admission::new(40, SLO);
        queue(&idle, now, SLO / 2, 0, Duration::from_secs(60));
        assert_eq!(idle.keep_up(&mut idle.flow(), now), Some(10.0), "nothing answered lately: the floor");
    }

    /// An app whose requests take 2 of its 5 s unqueued is not queued while its oldest request has taken 2.1 s: it
    /// admits a burst up to its limit. Past 2 s and a quarter of the other 3, it is.
    #[test]
    fn requests_queue_once_the_oldest_waited_longer_than_the_quickest_answer_took() {
        let admission = Admission::new(40, SLO);
        let start = Instant::now();
        admission.settle(true, start, start + Duration::from_secs(3));
        admission.settle(true, start, start + Duration::from_secs(2));
        admission.settle(false, start, start + Duration::from_secs(1));
        assert_eq!(admission.flow().quickest, Some(Duration::from_secs(2)), "the quickest answer in time");
        let now = Instant::now();
        queue(&admission, now, Duration::from_millis(2100), 0, Duration::from_secs(60));
        assert_eq!(admission.keep_up(&mut admission.flow(), now), None, "one request, on its own time");
        assert_eq!(hold(&admission).len(), 29, "the burst is admitted up to the limit (30 after the miss)");
        let queued = Admission::after(&admission, 40);
        queued.flow().in_progress.insert((now - Duration::from_millis(2800), 9));
        assert_eq!(queued.keep_up(&mut queued.flow(), now), Some(10.0), "2 s and more than 0.75 s of queue");
    }

    #[test]
    fn the_rate_of_answers_is_over_the_time_since_the_first_when_that_is_shorter() {
        let admission = Admission::new(40, SLO);
        let now = Instant::now();
        queue(&admission, now, SLO / 2, 5, Duration::from_millis(500));
        let rate = admission.flow().answer_rate(now).unwrap();
        assert!((rate - 10.0).abs() < 1e-9, "five answers in half a second: {rate}");
    }

    /// Below an overload, answers come at the load's rate: per second of the clock they would bound a queue of a
    /// Poisson burst by the load, and refuse requests the app would answer in time (a 250 ms SLO at 49% of its
    /// capacity refused 1.6%). Per second it held requests, they count what it serves.
    #[test]
    fn the_rate_of_answers_is_per_second_the_app_held_requests() {
        let admission = Admission::new(40, SLO);
        let start = Instant::now();
        // Five requests of 100 ms, one at a time, 400 ms apart.
        for i in 0..5u32 {
            let at = start + Duration::from_millis(400) * i;
            let mut flow = admission.flow();
            flow.hold((at, u64::from(i)));
            flow.release(&(at, u64::from(i)), at + Duration::from_millis(100));
            flow.answered.push_back(at + Duration::from_millis(100));
            flow.answering_since.get_or_insert(start);
        }
        let now = start + Duration::from_millis(1700);
        let rate = admission.flow().answer_rate(now).unwrap();
        assert!((rate - 10.0).abs() < 1e-6, "five answers in half a second held: {rate}");
        // Spans older than the window are forgotten.
        let mut flow = admission.flow();
        flow.release(&(start, 99), now + RATE_WINDOW * 2);
        assert!(flow.busy.is_empty(), "{:?}", flow.busy);
    }
}
