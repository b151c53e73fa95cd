//! How a simulation runs: its settings ([`SimOptions`]), the nodes that fail under it ([`NodeFailures`]) and the
//! deployed app's controller it can stand in for ([`Controller`]). Plain data, kept apart from the code that reads it.

use jig_planner::SolveOptions;
use jig_planner::spec::{DemandSpec, Features, Replan};

/// How to simulate.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// The configuration space plans are made in.
    pub features: Features,
    /// Solver settings of each re-plan.
    pub solve: SolveOptions,
    /// Root requests simulated per bin at most.
    pub sample_requests: usize,
    /// Time each task spends on a request outside its model (glue, HTTP), ms: the profile tables measure only
    /// the models. It delays the request and takes a CPU core: one nothing runs on, or, when every core is
    /// busy, a share of each running CPU instance's (their next batches take longer).
    pub overhead_ms: f64,
    /// Glue time of each task (by index into the problem's tasks) on top of `overhead_ms`, ms (a deployment's
    /// observed glue): it runs as `overhead_ms` does. Empty: none.
    pub glue_ms: Vec<f64>,
    /// Time of each communication hop, ms (the paper's ~10 ms, §4.4): a request takes one hop into each task,
    /// and its deadline is the latency SLO plus a hop for each task of the app's deepest path, as the paper adds
    /// them to the SLO by the app's depth.
    pub hop_ms: f64,
    /// Head-room on the predicted demand (the controller's 5%).
    pub slack: f64,
    /// Plan once, for this demand (req/s, after slack), and keep that plan for the whole trace, as a deployment
    /// that is not re-planned; `None` re-plans every bin.
    pub fixed_demand: Option<f64>,
    /// Re-plan only when a deployed app's controller would ([`Controller`]); `None` re-plans every bin, as the
    /// paper's evaluation does (§4.2).
    pub controller: Option<Controller>,
    /// Seed of the arrivals and latencies.
    pub seed: u64,
    /// Replay these root requests' arrival times (seconds from the trace's start, in order: a measured run's,
    /// `jig bench --csv`'s `sent_s`) instead of drawing Poisson arrivals at each bin's rate; each bin then runs
    /// whole. `None`: Poisson.
    pub arrivals: Option<Vec<f64>>,
    /// Nodes failing one at a time; `None`: none fail.
    pub node_failures: Option<NodeFailures>,
}

/// The cluster's slices split evenly among `nodes` nodes, one of which fails every `every_s` seconds from
/// `every_s` on and comes back when the next fails (one node always down from then on). A failure lands at the
/// start of a bin and is seen at the next: that bin runs the plan before it less the lost node's share of its
/// instances (each assignment loses its count over the nodes it was spread on, rounded to the nearest); the
/// bins after it are planned within the slices of the nodes up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeFailures {
    /// Nodes the slices are split among (at least 2).
    pub nodes: u32,
    /// Seconds between failures.
    pub every_s: f64,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            features: Features::ALL,
            // Re-planning runs every bin: a 1% gap and a few seconds are what a controller can afford.
            solve: SolveOptions { time_limit_s: 10.0, mip_rel_gap: 0.01, ..SolveOptions::default() },
            sample_requests: 20_000,
            overhead_ms: 0.0,
            glue_ms: Vec::new(),
            hop_ms: 0.0,
            slack: DemandSpec::DEFAULT_SLACK,
            fixed_demand: None,
            controller: None,
            seed: 1,
            arrivals: None,
            node_failures: None,
        }
    }
}

/// How a deployed app's controller re-plans, and where it stands when the trace starts: for comparing the
/// simulator with a running deployment (`jig simulate --replan-threshold … --observed STATUS.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct Controller {
    /// When it re-plans.
    pub replan: Replan,
    /// Demand windows it measured before the trace (req/s, oldest first); each bin of the trace follows as one.
    pub windows: Vec<f64>,
    /// The demand the running plan was made for (after slack); `None` plans the first bin for its prediction.
    pub planned_for: Option<f64>,
}
