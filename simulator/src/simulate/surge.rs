//! Surges within a bin, under a controller: the gateway does not wait for a demand window to close when the load of
//! the last [`Replan::SURGE_S`] seconds is a surge over its plan ([`Replan::surge`]); it re-plans for that load at
//! once, checking each second. The simulator counts a bin's arrivals per whole second (Poisson at the bin's rate,
//! drawn from a stream of their own, or the replayed ones), finds where the controller would re-plan, and switches
//! the bin's plan there: the requests that arrived before run to the end on the plan they came to, the rest on the
//! new one, as a swap runs them (the old copy finishes what it holds). A new plan serves from the controller's next
//! look after the second that showed the surge (a moment of its own in the second after it) plus its solve's time;
//! its instances start at once.

use std::collections::VecDeque;
use std::time::Instant;

use jig_planner::error::PlanError;
use jig_planner::spec::{DemandSpec, Replan};
use jig_policy::rng::SplitMix64;

use super::replan::{Planned, Replanner};

/// The arrivals of the last whole seconds simulated, carried from one bin into the next: a surge's seconds may
/// straddle a bin's start, as the gateway's do a window's close.
#[derive(Debug, Default)]
pub(super) struct Seconds {
    counts: VecDeque<u64>,
}

/// A plan a bin switches to, and when it serves from, seconds into the bin.
#[derive(Debug, Clone)]
pub(super) struct Switch {
    pub(super) at_s: f64,
    pub(super) plan: Planned,
}

/// One bin under a controller.
pub(super) struct Bin<'a> {
    /// The trace's rate in the bin, req/s.
    pub(super) rate: f64,
    /// The bin's replayed arrivals, seconds into it; `None`: Poisson at `rate`.
    pub(super) arrivals: Option<&'a [f64]>,
    /// The bin's simulated seconds: its first, or all of it.
    pub(super) seconds: f64,
    /// The bin's length, seconds.
    pub(super) bin_s: f64,
    /// The demand the plan running at the bin's start was made for, req/s.
    pub(super) planned_rps: f64,
    /// Slices plans may use.
    pub(super) slices: u32,
}

impl Seconds {
    /// The surges of `bin` under `replan`, in order, each with the plan the controller switches to (made for the
    /// surge's load with `slack`, as the gateway plans it), and the seconds spent planning them. The seconds
    /// after the simulated ones show no surge; a bin simulated only in part carries no seconds into the next.
    pub(super) fn surges(
        &mut self,
        replanner: &mut Replanner,
        (replan, slack): (Replan, f64),
        bin: Bin<'_>,
        seed: u64,
    ) -> Result<(Vec<Switch>, f64), PlanError> {
        // A stream of its own: the engine's arrivals and latencies stay those of a bin without surges.
        let mut rng = SplitMix64::new(seed ^ 0x5eed_5e55_0000_0001);
        let whole = bin.seconds.floor().max(0.0) as usize;
        let mut counts = vec![0u64; whole];
        if let Some(times) = bin.arrivals {
            for &t in times.iter().filter(|&&t| t < whole as f64) {
                counts[t as usize] += 1;
            }
        } else if bin.rate > 0.0 {
            let mut t = rng.exponential(1.0 / bin.rate);
            while t < whole as f64 {
                counts[t as usize] += 1;
                t += rng.exponential(1.0 / bin.rate);
            }
        }
        // The gateway compares with what it is planned for, or the last surge's load (until the window closes).
        let mut known = bin.planned_rps;
        let (mut switches, mut solve_s) = (Vec::new(), 0.0);
        for (second, count) in counts.into_iter().enumerate() {
            self.counts.push_back(count);
            if self.counts.len() > Replan::SURGE_S {
                self.counts.pop_front();
            }
            let load = self.counts.iter().sum::<u64>() as f64 / Replan::SURGE_S as f64;
            if self.counts.len() < Replan::SURGE_S || !replan.surge(load, known) {
                continue;
            }
            let started = Instant::now();
            let plan = replanner.plan(DemandSpec { windows: vec![load], slack: Some(slack) }.predict()?, bin.slices)?;
            let solve = started.elapsed().as_secs_f64();
            solve_s += solve;
            known = plan.demand_rps.max(load);
            let at_s = (second + 1) as f64 + rng.uniform() + solve;
            if at_s < bin.bin_s {
                switches.push(Switch { at_s, plan });
            }
        }
        if bin.seconds < bin.bin_s {
            self.counts.clear();
        }
        Ok((switches, solve_s))
    }
}
