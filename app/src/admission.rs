//! How many requests a planned app holds at once, learned from how they end.
//!
//! The plan says how many requests the deployment completes within the SLO (capacity × SLO, Little's law):
//! the *ceiling*. Under sustained overload that many in progress means each admitted request waits most of its
//! SLO, and the machine's real service rate (a little under or over the profile's) decides whether it makes it.
//! So the limit adapts to outcomes, additive increase and multiplicative decrease as TCP does: a request that
//! misses its deadline (late, or dropped early) cuts the limit by a quarter, at most once per [`CUT_EVERY`] since a
//! cut shows only once the queue has drained to it; a request answered in time while others were being refused
//! raises it by 1/limit, about one a limit's worth of answers. It stays between a quarter of the ceiling, which
//! keeps batches full, and the ceiling.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The least time between two cuts of the limit.
pub const CUT_EVERY: Duration = Duration::from_secs(1);

/// The share of the limit a miss cuts. A tenth converged too slowly from a plan made before anything was observed:
/// at twice what an AMD EPYC VM served, the first 30 s after a deploy answered 0.63–0.67 of it in time (a quarter:
/// 0.74–0.80), and under the same load kept on, 0.94–0.99 (a quarter: 1.05–1.06).
const CUT: f64 = 0.25;

/// An app's admission limit and the requests it holds.
#[derive(Debug)]
pub struct Admission {
    ceiling: u32,
    floor: u32,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    limit: f64,
    held: u32,
    /// A request was refused since the limit last rose: the limit binds, so raising it admits more.
    refused: bool,
    last_cut: Option<Instant>,
}

/// One admitted request, held until it drops.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
}

impl Admission {
    /// Admission for a plan that completes `ceiling` requests within the SLO, starting at the ceiling.
    pub fn new(ceiling: u32) -> Arc<Admission> {
        Admission::starting_at(ceiling, f64::from(ceiling))
    }

    /// Admission with the ceiling of a new plan, going on from what `previous` learned: the same share of
    /// its ceiling.
    pub fn after(previous: &Admission, ceiling: u32) -> Arc<Admission> {
        let share = previous.limit_f64() / f64::from(previous.ceiling.max(1));
        Admission::starting_at(ceiling, share * f64::from(ceiling))
    }

    fn starting_at(ceiling: u32, limit: f64) -> Arc<Admission> {
        let ceiling = ceiling.max(1);
        let floor = ceiling.div_ceil(4);
        let limit = limit.clamp(f64::from(floor), f64::from(ceiling));
        Arc::new(Admission {
            ceiling,
            floor,
            state: Mutex::new(State { limit, held: 0, refused: false, last_cut: None }),
        })
    }

    /// The most it ever admits at once: the plan's capacity × SLO.
    pub fn ceiling(&self) -> u32 {
        self.ceiling
    }

    /// How many it admits at once now.
    pub fn limit(&self) -> u32 {
        self.limit_f64() as u32
    }

    fn limit_f64(&self) -> f64 {
        self.state().limit
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hold one more request, or `None` when the limit's worth are held.
    pub fn try_admit(self: &Arc<Self>) -> Option<Ticket> {
        let mut state = self.state();
        if f64::from(state.held) + 1.0 > state.limit {
            state.refused = true;
            return None;
        }
        state.held += 1;
        Some(Ticket { admission: self.clone() })
    }

    fn settle(&self, in_time: bool, now: Instant) {
        let mut state = self.state();
        if in_time {
            if state.refused {
                state.limit = (state.limit + 1.0 / state.limit).min(f64::from(self.ceiling));
                state.refused = false;
            }
        } else if state.last_cut.is_none_or(|at| now.duration_since(at) >= CUT_EVERY) {
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
        self.admission.settle(in_time, Instant::now());
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.admission.state();
        state.held = state.held.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(admission: &Arc<Admission>) -> Vec<Ticket> {
        std::iter::from_fn(|| admission.try_admit()).collect()
    }

    #[test]
    fn it_admits_up_to_the_limit_and_again_once_a_request_ends() {
        let admission = Admission::new(8);
        let mut held = hold(&admission);
        assert_eq!(held.len(), 8);
        assert!(admission.try_admit().is_none());
        held.pop();
        assert!(admission.try_admit().is_some());
    }

    #[test]
    fn misses_cut_the_limit_once_a_second_down_to_a_quarter_of_the_ceiling() {
        let admission = Admission::new(40);
        let start = Instant::now();
        admission.settle(false, start);
        assert_eq!(admission.limit(), 30);
        admission.settle(false, start + Duration::from_millis(500));
        assert_eq!(admission.limit(), 30, "a second cut within CUT_EVERY");
        for s in 1..100 {
            admission.settle(false, start + Duration::from_secs(s));
        }
        assert_eq!(admission.limit(), 10);
        assert_eq!(hold(&admission).len(), 10);
    }

    #[test]
    fn answers_in_time_raise_the_limit_only_while_it_binds_and_never_past_the_ceiling() {
        let admission = Admission::new(20);
        for s in 0..5 {
            admission.settle(false, Instant::now() + Duration::from_secs(s));
        }
        let cut = admission.limit_f64();
        admission.settle(true, Instant::now());
        assert_eq!(admission.limit_f64(), cut, "nothing was refused: the limit does not bind");
        let held = hold(&admission);
        assert!(admission.try_admit().is_none());
        admission.settle(true, Instant::now());
        assert!((admission.limit_f64() - (cut + 1.0 / cut)).abs() < 1e-9);
        drop(held);
        for _ in 0..10_000 {
            let held = hold(&admission);
            assert!(admission.try_admit().is_none());
            admission.settle(true, Instant::now());
            drop(held);
        }
        assert_eq!(admission.limit(), 20);
    }

    #[test]
    fn a_new_plan_keeps_the_share_of_its_ceiling_that_was_learned() {
        let admission = Admission::new(40);
        admission.settle(false, Instant::now());
        let next = Admission::after(&admission, 80);
        assert_eq!(next.ceiling(), 80);
        assert_eq!(next.limit(), 60);
    }
}
