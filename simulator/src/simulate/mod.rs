//! `jig simulate`: a discrete-event simulation of an application's plans under a demand trace, for clusters
//! larger than any machine here (JigsawServe §4–5, Figure 4).
//!
//! Per bin of the trace: predict the demand from the last five bins ([`DemandSpec::predict`]), re-plan with the
//! MILP (every bin, as the paper's evaluation does, or when the gateway's controller would: [`Controller`]),
//! and run the bin's requests through the plan's instances.
//! Requests arrive as a Poisson process at the bin's rate and are admitted as a deployment admits them (no
//! more at once than the plan's capacity completes within the SLO; the rest refused); each instance batches
//! and drops with [`jig_policy::Queue`] and each task routes with [`jig_policy::WeightedRoundRobin`] weighted
//! by the planned rates, the same code the runtime runs (a PPipe plan's requests are booked along its pooled
//! pipelines by `jig_policy::reserve` instead, as its deployments book them: [`run_plan`]). A batch of `n` rows takes a latency drawn from a
//! log-normal whose median and 95th percentile are the profile's p50 and p95 at that batch size (interpolated
//! between profiled sizes); an instance on `mig:…:K` runs K batches at once. Time outside the models
//! (`overhead_ms` and `glue_ms`: glue, HTTP) delays each request at each task and takes a CPU core: one
//! nothing runs on, or, when every core is busy, the least-queued CPU instance's, whose next batch takes that
//! much longer (the OS shares a busy machine's cores). A finished request fans out to each successor task
//! ⌊F⌋ or ⌈F⌉ times, F the variant's multiplicative factor (⌈F⌉ with probability F − ⌊F⌋). When no plan in the configuration space meets the predicted demand, the bin
//! runs the plan for the largest demand the space can serve, as the paper's baselines do (§5).
//!
//! What each bin reports:
//!
//! * **slices** the plan uses;
//! * **violations**: requests at the sink tasks that finished after the root request's deadline (the latency
//!   SLO), plus, for every request dropped early, the sink requests it would have led to (its variant's factors
//!   times the plan's mean downstream factors), as §4.5 counts them, over all sink requests;
//! * **accuracy drop**: 1 − A_obj of what was served: per path, the mean over its sink requests served of the
//!   product of the normalised accuracies A(t,v)/A(t,v*) of the variants along the way, weighted by the path
//!   weights g_p (eq. 9–10);
//! * p50 and p99 of the end-to-end latency of the root requests served in full.
//!
//! A bin of a large cluster holds millions of requests; each bin simulates its first `sample_requests`, but at
//! least ten latency SLOs of it (or the whole bin, when shorter): an overload of 10% has pushed waits past the
//! SLO by then, so a plan that cannot keep up shows its violations.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Duration;

use jig_policy::{BatchPolicy, Queue, Request, Time as _, WeightedRoundRobin};
use serde::Serialize;

use crate::trace::Trace;
use jig_planner::compass::ClassPlan;
use jig_planner::error::PlanError;
use jig_planner::evaluate::Assignment;
use jig_planner::max_demand::max_demand;
use jig_planner::milp::SolveOptions;
use jig_planner::milp::Solved;
use jig_planner::ppipe::app::PipelinePlan;
use jig_planner::problem::Problem;
use jig_planner::spec::{DemandSpec, Features, Replan, SegmentKind};
use jig_planner::{solve, solve_from};
use jig_policy::reserve::{Decision, Path, Pipeline, Resource, Scheduler, Stage, per_batch};

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
    /// busy, the least-queued CPU instance's (its next batch takes longer).
    pub overhead_ms: f64,
    /// Glue time of each task (by index into the problem's tasks) that the problem's CPU rows carry, ms
    /// (`jig_app::deployment::charge_glue`, so that plans hold it): instances serve in the rows' time less it,
    /// and it runs as `overhead_ms` does. Empty: none.
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

/// One bin's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BinReport {
    /// When the bin starts, seconds into the trace.
    pub start_s: f64,
    /// The trace's rate in the bin, req/s.
    pub rate_rps: f64,
    /// The rate the bin's plan was made for, req/s.
    pub planned_rps: f64,
    /// Slices the plan uses.
    pub slices: u32,
    /// False when no plan met the predicted demand and the plan for the largest serviceable demand ran.
    pub replanned: bool,
    /// Whether a node failed at the bin's start ([`NodeFailures`]): it ran the plan before it, less the node.
    pub node_lost: bool,
    /// Seconds spent planning the bin (about 0 under `fixed_demand`, whose plan is made once before the trace).
    pub solve_s: f64,
    /// Root requests simulated.
    pub requests: u64,
    /// Sink requests, served or dropped (a dropped request counts the sink requests it would have led to).
    pub sink_requests: f64,
    /// Sink requests late or dropped.
    pub violations: f64,
    /// `violations / sink_requests`.
    pub violation_rate: f64,
    /// 1 − A_obj of the sink requests served ([`BinRun::accuracy`]).
    pub accuracy_drop: f64,
    /// Median end-to-end latency of root requests served in full, ms.
    pub p50_ms: f64,
    /// 99th percentile of the same, ms.
    pub p99_ms: f64,
    /// The plan that ran: its instances by task, variant and segment type.
    pub instances: Vec<Instances>,
    /// For a plan with query classes (Compass's): each class's root requests and those answered in full within
    /// its SLO; empty otherwise.
    pub classes: Vec<ClassOutcome>,
}

/// One query class's requests in a bin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassOutcome {
    /// The class.
    pub class: String,
    /// Its root requests simulated.
    pub requests: u64,
    /// Those answered in full within its SLO.
    pub within_slo: u64,
}

/// Instances of one variant of a task on one segment type, in a bin's plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instances {
    /// The task.
    pub task: String,
    /// The model variant.
    pub variant: String,
    /// The segment type, e.g. `mig:1g.10gb:2`.
    pub segment: String,
    /// How many.
    pub count: u32,
}

/// A simulated trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Simulation {
    /// The app simulated.
    pub app: String,
    /// The configuration space, e.g. `A+S+T`, or the planner when it is not JigsawServe (`ipa`).
    pub features: String,
    /// S_avail: GPU slices (or CPU cores) the plans could use.
    pub slices_available: u32,
    /// β of objective (14) the plans were made with.
    pub beta: f64,
    /// Each bin's outcome, in trace order.
    pub bins: Vec<BinReport>,
    /// p50 and p99 of the end-to-end latency over the whole trace (each bin weighted by its real number of
    /// requests), ms.
    pub p50_ms: f64,
    /// The whole trace's p99, ms (see `p50_ms`).
    pub p99_ms: f64,
    /// Why the space serves no demand at all (it then runs no instances and refuses every request).
    pub serves_nothing: Option<String>,
}

impl Simulation {
    /// Mean slices over the bins.
    pub fn mean_slices(&self) -> f64 {
        self.bins.iter().map(|b| f64::from(b.slices)).sum::<f64>() / self.bins.len().max(1) as f64
    }

    /// Violations over the day, each bin weighted by its real number of requests (its rate).
    pub fn violation_rate(&self) -> f64 {
        let total: f64 = self.bins.iter().map(|b| b.rate_rps).sum();
        self.bins.iter().map(|b| b.violation_rate * b.rate_rps).sum::<f64>() / total.max(f64::MIN_POSITIVE)
    }

    /// Each query class's SLO goodput over the day: the share of its requests answered in full within its SLO,
    /// each bin weighted by its rate; empty without classes.
    pub fn class_goodput(&self) -> Vec<(String, f64)> {
        let names: Vec<&String> = self.bins.iter().flat_map(|b| b.classes.iter().map(|c| &c.class)).collect();
        let mut unique: Vec<&String> = Vec::new();
        names.into_iter().for_each(|n| {
            if !unique.contains(&n) {
                unique.push(n)
            }
        });
        unique
            .into_iter()
            .map(|name| {
                let (mut good, mut weight) = (0.0, 0.0);
                for b in &self.bins {
                    if let Some(c) = b.classes.iter().find(|c| &c.class == name).filter(|c| c.requests > 0) {
                        good += b.rate_rps * c.within_slo as f64 / c.requests as f64;
                        weight += b.rate_rps;
                    }
                }
                (name.clone(), if weight > 0.0 { good / weight } else { 0.0 })
            })
            .collect()
    }

    /// Accuracy drop over the day, weighted by rate.
    pub fn accuracy_drop(&self) -> f64 {
        let total: f64 = self.bins.iter().map(|b| b.rate_rps).sum();
        self.bins.iter().map(|b| b.accuracy_drop * b.rate_rps).sum::<f64>() / total.max(f64::MIN_POSITIVE)
    }

    /// The bins as CSV.
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "start_s,rate_rps,planned_rps,slices,replanned,solve_s,requests,violation_rate,accuracy_drop,p50_ms,p99_ms,plan\n",
        );
        for b in &self.bins {
            let plan: Vec<String> =
                b.instances.iter().map(|i| format!("{}/{}/{}*{}", i.task, i.variant, i.segment, i.count)).collect();
            out.push_str(&format!(
                "{},{:.3},{:.3},{},{},{:.3},{},{:.6},{:.6},{:.2},{:.2},{}\n",
                b.start_s,
                b.rate_rps,
                b.planned_rps,
                b.slices,
                b.replanned,
                b.solve_s,
                b.requests,
                b.violation_rate,
                b.accuracy_drop,
                b.p50_ms,
                b.p99_ms,
                plan.join(" ")
            ));
        }
        out
    }
}

/// Latency SLOs each bin runs at least, so that overloads show.
const OVERLOAD_SLOS: f64 = 10.0;

/// Simulate `problem`'s application under `trace`, re-planning every bin.
pub fn simulate(problem: &Problem, trace: &Trace, options: &SimOptions) -> Result<Simulation, PlanError> {
    if problem.tasks.len() > 64 {
        return Err(PlanError::Input(format!(
            "app `{}` has {} tasks; the simulator takes at most 64",
            problem.app,
            problem.tasks.len()
        )));
    }
    let mut bins = Vec::with_capacity(trace.rates.len());
    // Up to 1000 evenly spaced order statistics of each bin's latencies, weighted by the requests they stand for.
    let mut latencies: Vec<(f64, f64)> = Vec::new();
    let mut observed: Vec<f64> = Vec::new();
    let slo_s = problem.slo_latency_ms / 1000.0;
    if let Some(f) = options.node_failures
        && (f.nodes < 2 || f.every_s <= 0.0 || options.fixed_demand.is_some() || options.controller.is_some())
    {
        return Err(PlanError::Input(format!(
            "node failures need at least 2 nodes ({}), a positive interval ({} s), and plans made every bin (not a \
             fixed demand or a controller)",
            f.nodes, f.every_s
        )));
    }
    let mut replanner =
        Replanner { problem, options, largest: Default::default(), last: Vec::new(), serves_nothing: None };
    let fixed = options.fixed_demand.map(|demand| replanner.plan(demand, problem.slices)).transpose()?;
    // The plan of the bin before (what a node's failure cuts down) under node failures.
    let mut previous: Option<Planned> = None;
    // The plan running (under a controller) and the share of the last bin's sink requests that violated.
    let mut running: Option<Planned> = None;
    let mut violation_share = 0.0;
    for (i, &rate) in trace.rates.iter().enumerate() {
        let started = std::time::Instant::now();
        let before = options.controller.as_ref().map_or(&[][..], |c| &c.windows[..]);
        // Before any history, plan for the bin's own rate, as a deploy with `[demand] rps` does.
        let windows = if before.is_empty() && observed.is_empty() { vec![rate] } else { [before, &observed].concat() };
        let predicted = DemandSpec { windows, slack: Some(options.slack) }.predict()?;
        // Nodes: whether one is down in this bin, and whether it failed at the bin's start.
        let start_s = trace.bin_s * i as f64;
        let (down, node_lost) = options.node_failures.map_or((false, false), |f| {
            (start_s >= f.every_s, start_s >= f.every_s && start_s % f.every_s < trace.bin_s)
        });
        let slices_up = match options.node_failures {
            Some(f) if down => problem.slices - problem.slices / f.nodes,
            _ => problem.slices,
        };
        let plan = match (&fixed, &options.controller, &previous) {
            (Some(plan), _, _) => plan.clone(),
            // A node failed at this bin's start: the plan before it runs on, without the node's instances (its
            // pipelines keep the members left).
            (None, None, Some(before)) if node_lost => {
                let f = options.node_failures.expect("node failures");
                let spread = if start_s >= 2.0 * f.every_s { f.nodes - 1 } else { f.nodes };
                let kept = before
                    .assignments
                    .iter()
                    .map(|a| Assignment {
                        instances: a.instances - (f64::from(a.instances) / f64::from(spread)).round() as u32,
                        ..*a
                    })
                    .filter(|a| a.instances > 0)
                    .collect();
                Planned { assignments: kept, ..before.clone() }
            }
            (None, None, _) => replanner.plan(predicted, slices_up)?,
            (None, Some(controller), _) => {
                let plan = match running.take() {
                    None => replanner.plan(controller.planned_for.unwrap_or(predicted), problem.slices)?,
                    Some(plan) if controller.replan.due(plan.demand_rps, predicted, violation_share) => {
                        replanner.plan(predicted, problem.slices)?
                    }
                    Some(plan) => plan,
                };
                running = Some(plan.clone());
                plan
            }
        };
        if options.node_failures.is_some() {
            previous = Some(plan.clone());
        }
        let Planned { assignments, classes, pipelines, demand_rps: planned_rps, replanned } = plan;
        let solve_s = started.elapsed().as_secs_f64();
        let sampled = (options.sample_requests as f64 / rate.max(f64::MIN_POSITIVE)).max(OVERLOAD_SLOS * slo_s);
        let seconds = trace.bin_s.min(sampled);
        let seed = options.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(i as u64);
        let outside = Outside { overhead_ms: options.overhead_ms, glue_ms: &options.glue_ms, hop_ms: options.hop_ms };
        let run = run_plan(problem, &assignments, (&classes, &pipelines), (rate, seconds), &outside, seed);
        observed.push(if seconds > 0.0 { run.requests as f64 / seconds } else { rate });
        violation_share = if run.units > 0.0 { run.violations / run.units } else { 0.0 };
        let slices = assignments.iter().map(|a| a.instances * problem.segments[a.segment].slices).sum();
        let kept = run.latencies_ms.len().min(1000);
        for k in 0..kept {
            let index = k * run.latencies_ms.len() / kept;
            latencies.push((run.latencies_ms[index], rate * trace.bin_s / kept as f64));
        }
        bins.push(BinReport {
            start_s,
            rate_rps: rate,
            planned_rps,
            slices,
            replanned,
            node_lost,
            solve_s,
            requests: run.requests,
            sink_requests: run.units,
            violations: run.violations,
            violation_rate: if run.units > 0.0 { run.violations / run.units } else { 0.0 },
            accuracy_drop: 1.0 - run.accuracy(problem),
            p50_ms: quantile(&run.latencies_ms, 0.50),
            p99_ms: quantile(&run.latencies_ms, 0.99),
            classes: classes
                .iter()
                .zip(&run.classes)
                .map(|(c, &(requests, within_slo))| ClassOutcome { class: c.class.clone(), requests, within_slo })
                .collect(),
            instances: assignments
                .iter()
                .map(|a| Instances {
                    task: problem.tasks[a.task].name.clone(),
                    variant: problem.tasks[a.task].variants[a.variant].name.clone(),
                    segment: problem.segments[a.segment].name.clone(),
                    count: a.instances,
                })
                .collect(),
        });
    }
    latencies.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = latencies.iter().map(|l| l.1).sum();
    let weighted = |q: f64| {
        let mut seen = 0.0;
        latencies.iter().find(|l| {
            seen += l.1;
            seen >= q * total
        })
    };
    Ok(Simulation {
        app: problem.app.clone(),
        // IPA reads none of JigsawServe's A/S/T switches: its runs are labelled by the planner.
        features: match problem.strategy {
            jig_planner::Strategy::Jigsaw => options.features.to_string(),
            other => other.to_string(),
        },
        slices_available: problem.slices,
        beta: problem.objective.beta,
        bins,
        p50_ms: weighted(0.50).map_or(0.0, |l| l.0),
        p99_ms: weighted(0.99).map_or(0.0, |l| l.0),
        serves_nothing: replanner.serves_nothing,
    })
}

/// The runs side by side: over the whole trace, its busiest fifth of bins and its quietest fifth.
pub fn summary(runs: &[Simulation], trace: &Trace) -> String {
    let Some(first) = runs.first() else { return String::new() };
    let mut order: Vec<usize> = (0..trace.rates.len()).collect();
    order.sort_by(|&a, &b| trace.rates[b].total_cmp(&trace.rates[a]));
    let fifth = (order.len() / 5).max(1);
    let (busy, quiet) = (&order[..fifth.min(order.len())], &order[order.len().saturating_sub(fifth)..]);
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    let of = |run: &Simulation, bins: &[usize]| {
        let pick: Vec<&BinReport> = bins.iter().map(|&i| &run.bins[i]).collect();
        let rate: f64 = pick.iter().map(|b| b.rate_rps).sum::<f64>().max(f64::MIN_POSITIVE);
        let slices = pick.iter().map(|b| f64::from(b.slices)).sum::<f64>() / pick.len() as f64;
        let violations = pick.iter().map(|b| b.violation_rate * b.rate_rps).sum::<f64>() / rate;
        (slices / f64::from(run.slices_available.max(1)), violations)
    };
    let mut out = format!(
        "{} on {} slices, β {:.4}: {} bins of {:.0} s, peak {:.1} req/s (each bin simulated for its first --sample requests, at least ten SLOs)\n\n",
        first.app,
        first.slices_available,
        first.beta,
        trace.rates.len(),
        trace.bin_s,
        trace.peak()
    );
    out.push_str(&format!(
        "{:<13} {:>8} {:>9} {:>11} {:>9} {:>9}   {:>13} {:>11}   {:>14} {:>12}   {:>10} {:>8}\n",
        "space",
        "slices",
        "acc drop",
        "violations",
        "p50 ms",
        "p99 ms",
        "busy: slices",
        "violations",
        "quiet: slices",
        "violations",
        "fallbacks",
        "solve s"
    ));
    for run in runs {
        let (busy_slices, busy_violations) = of(run, busy);
        let (quiet_slices, quiet_violations) = of(run, quiet);
        let fallbacks = run.bins.iter().filter(|b| !b.replanned).count();
        let solve = run.bins.iter().map(|b| b.solve_s).sum::<f64>() / run.bins.len().max(1) as f64;
        out.push_str(&format!(
            "{:<13} {:>8} {:>9} {:>11} {:>9.1} {:>9.1}   {:>13} {:>11}   {:>14} {:>12}   {:>10} {:>8.2}\n",
            run.features,
            pct(run.mean_slices() / f64::from(run.slices_available.max(1))),
            pct(run.accuracy_drop()),
            pct(run.violation_rate()),
            run.p50_ms,
            run.p99_ms,
            pct(busy_slices),
            pct(busy_violations),
            pct(quiet_slices),
            pct(quiet_violations),
            fallbacks,
            solve
        ));
    }
    for run in runs {
        let classes: Vec<String> =
            run.class_goodput().iter().map(|(class, good)| format!("{class} {}", pct(*good))).collect();
        if !classes.is_empty() {
            out.push_str(&format!(
                "{}: requests answered within their class's SLO: {}\n",
                run.features,
                classes.join(", ")
            ));
        }
    }
    for run in runs {
        let (lost, kept): (Vec<&BinReport>, Vec<&BinReport>) = run.bins.iter().partition(|b| b.node_lost);
        if !lost.is_empty() {
            let rate = |bins: &[&BinReport]| {
                let sink: f64 = bins.iter().map(|b| b.sink_requests).sum();
                if sink > 0.0 { bins.iter().map(|b| b.violations).sum::<f64>() / sink } else { 0.0 }
            };
            out.push_str(&format!(
                "{}: a node lost in {} bin{}: violations {} there (the plan before, less the node), {} in the others\n",
                run.features,
                lost.len(),
                if lost.len() == 1 { "" } else { "s" },
                pct(rate(&lost)),
                pct(rate(&kept))
            ));
        }
    }
    for run in runs {
        if let Some(why) = &run.serves_nothing {
            out.push_str(&format!("{} serves no demand (every request refused): {why}\n", run.features));
        }
    }
    let paper_app = crate::apps::PaperApp::ALL.iter().any(|a| a.name() == first.app);
    if paper_app {
        out.push_str(
            "\npaper (Figure 4, 4 H100s = 28 slices, measured traces): A+S+T uses 43.3% of the slices on average over the three apps with < 0.6% \
             violations;\nS+T and A+T exceed 10% violations and use over 2x its slices in at least one app; A+S reaches \
             6.7% violations and 33% more slices.\n",
        );
    }
    out
}

/// What a run's plans chose over the trace, as the paper's Figure 5 counts it: for each task, the share of its
/// instances (summed over the bins) of each model variant and of each segment type, most used first.
pub fn configurations(run: &Simulation) -> String {
    let mut tasks: Vec<&str> = Vec::new();
    let mut tally: BTreeMap<(&str, bool, &str), u64> = BTreeMap::new();
    for i in run.bins.iter().flat_map(|b| &b.instances) {
        if !tasks.contains(&i.task.as_str()) {
            tasks.push(&i.task);
        }
        *tally.entry((i.task.as_str(), false, i.variant.as_str())).or_default() += u64::from(i.count);
        *tally.entry((i.task.as_str(), true, i.segment.as_str())).or_default() += u64::from(i.count);
    }
    let mut out = format!("what {} chose over the trace (share of each task's instances, Figure 5):\n", run.features);
    for task in tasks {
        for segments in [false, true] {
            let mut shares: Vec<(&str, u64)> =
                tally.iter().filter(|((t, s, _), _)| *t == task && *s == segments).map(|(k, &n)| (k.2, n)).collect();
            let total: u64 = shares.iter().map(|s| s.1).sum();
            shares.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let listed: Vec<String> =
                shares.iter().map(|(name, n)| format!("{name} {:.0}%", 100.0 * *n as f64 / total as f64)).collect();
            let what = if segments { "segments" } else { "variants" };
            out.push_str(&format!("  {task:<10} {what:<9} {}\n", listed.join(", ")));
        }
    }
    out
}

/// An SVG with one panel per metric (demand; slices used; accuracy drop; violations, capped at 50% as in the
/// paper) over the bins, one line per run.
pub fn svg(runs: &[Simulation], trace: &Trace) -> String {
    const COLOURS: [&str; 4] = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"];
    let (width, panel, left, top) = (900.0, 150.0, 70.0, 30.0);
    let bins = trace.rates.len().max(2);
    let x = |i: usize| left + (width - left - 20.0) * i as f64 / (bins - 1) as f64;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" font-family=\"sans-serif\" \
         font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        top + 4.0 * (panel + 30.0) + 20.0
    );
    let app = runs.first().map_or("", |r| r.app.as_str());
    out.push_str(&format!("<text x=\"{left}\" y=\"18\">jig simulate: {app}</text>\n"));
    let mut legend = left + 250.0;
    for (k, run) in runs.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        out.push_str(&format!("<text x=\"{legend}\" y=\"18\" fill=\"{colour}\">{}</text>\n", run.features));
        legend += 70.0;
    }
    type Metric = fn(&Simulation, usize) -> f64;
    let panels: [(&str, f64, Metric); 3] = [
        ("slices used (%)", 100.0, |r, i| 100.0 * f64::from(r.bins[i].slices) / f64::from(r.slices_available.max(1))),
        ("accuracy drop (%)", 0.0, |r, i| 100.0 * r.bins[i].accuracy_drop),
        ("SLO violations (%, capped at 50)", 50.0, |r, i| (100.0 * r.bins[i].violation_rate).min(50.0)),
    ];
    let axis = |out: &mut String, p: usize, label: &str, max: f64| {
        let y0 = top + p as f64 * (panel + 30.0);
        out.push_str(&format!(
            "<text x=\"{left}\" y=\"{}\">{label}</text>\n<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
             <text x=\"5\" y=\"{}\">{max:.3}</text><text x=\"5\" y=\"{}\">0</text>\n",
            y0 + 12.0,
            y0 + panel,
            width - 20.0,
            y0 + panel,
            y0 + 30.0,
            y0 + panel
        ));
        y0
    };
    let line = |values: &[f64], y0: f64, max: f64, colour: &str| {
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y0 + panel - (panel - 20.0) * (v / max.max(1e-9)).min(1.0)))
            .collect();
        format!("<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.2\" points=\"{}\"/>\n", points.join(" "))
    };
    let peak = trace.peak();
    let y0 = axis(&mut out, 0, "demand (req/s)", peak);
    out.push_str(&line(&trace.rates, y0, peak, "black"));
    for (p, (label, fixed, value)) in panels.iter().enumerate() {
        let series: Vec<Vec<f64>> = runs.iter().map(|r| (0..r.bins.len()).map(|i| value(r, i)).collect()).collect();
        let max = if *fixed > 0.0 { *fixed } else { series.iter().flatten().copied().fold(0.0, f64::max).max(1.0) };
        let y0 = axis(&mut out, p + 1, label, max);
        for (k, values) in series.iter().enumerate() {
            out.push_str(&line(values, y0, max, COLOURS[k % COLOURS.len()]));
        }
    }
    out.push_str("</svg>\n");
    out
}

/// A plan as a bin runs it.
#[derive(Debug, Clone)]
struct Planned {
    /// Its instances.
    assignments: Vec<Assignment>,
    /// Its query classes' routes (Compass's plans).
    classes: Vec<ClassPlan>,
    /// Its pooled pipelines (PPipe's plans).
    pipelines: Vec<PipelinePlan>,
    /// The demand it was made for.
    demand_rps: f64,
    /// Whether it meets the demand predicted.
    replanned: bool,
}

/// Plans per bin, falling back to the plan for the largest serviceable demand when none meets the prediction.
struct Replanner<'a> {
    problem: &'a Problem,
    options: &'a SimOptions,
    /// Per slice budget, the plan for the largest demand it serves, once a plan fell short.
    largest: std::collections::BTreeMap<u32, Planned>,
    /// The last plan that met its demand: the next solve starts from it, as the controller's re-plans do.
    last: Vec<Assignment>,
    /// Why the space serves no demand at all, once a fallback found that.
    serves_nothing: Option<String>,
}

impl Replanner<'_> {
    /// The plan's instances, its query classes' routes (Compass's plans), the demand it was made for, and
    /// whether it meets `demand`.
    fn plan(&mut self, demand: f64, slices: u32) -> Result<Planned, PlanError> {
        let (problem, options) = (self.problem, self.options);
        let at = |demand: f64| problem.clone().with_demand(demand, slices);
        match solve_from(&at(demand), options.features, &options.solve, &self.last) {
            Ok(solved) => {
                self.last.clone_from(&solved.assignments);
                let Solved { assignments, classes, pipelines, .. } = solved;
                Ok(Planned { assignments, classes, pipelines, demand_rps: demand, replanned: true })
            }
            Err(PlanError::Infeasible(_) | PlanError::TimeLimit(_)) => {
                if !self.largest.contains_key(&slices) {
                    let within = at(problem.demand_rps);
                    let found = max_demand(&within, options.features, 0.01, options.solve.time_limit_s)?;
                    let max = found.demand_rps;
                    // A space that serves nothing runs no instances, and every request is refused.
                    let (assignments, pipelines) = if max <= 0.0 {
                        self.serves_nothing = Some(found.why_none.unwrap_or_else(|| "no plan at any demand".into()));
                        (Vec::new(), Vec::new())
                    } else {
                        let solved = solve(&at(max), options.features, &options.solve)?;
                        (solved.assignments, solved.pipelines)
                    };
                    let largest =
                        Planned { assignments, classes: Vec::new(), pipelines, demand_rps: max, replanned: false };
                    self.largest.insert(slices, largest);
                }
                Ok(self.largest[&slices].clone())
            }
            Err(e) => Err(e),
        }
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// What one bin's run measured.
#[derive(Debug, Default)]
pub struct BinRun {
    /// Root requests simulated.
    pub requests: u64,
    /// Sink requests, served or dropped (dropped ones counted by the sink requests they would have led to).
    pub units: f64,
    /// Sink requests late or dropped.
    pub violations: f64,
    /// Sink requests served.
    pub served: u64,
    /// Per path of the problem: the sink requests served along it and the sum of their normalised accuracies
    /// (the product of A(t,v)/A(t,v*) along the way: 1 for the best variants).
    pub paths: Vec<(u64, f64)>,
    /// End-to-end latencies of root requests served in full, sorted, ms.
    pub latencies_ms: Vec<f64>,
    /// Per query class of the plan (in its order): root requests, and those answered in full within the SLO.
    pub classes: Vec<(u64, u64)>,
}

impl BinRun {
    /// The normalised accuracy A_obj the bin served: each path's mean over its sink requests, weighted by the
    /// path weights g_p (eq. 9–10), over the paths that served any; 1 when none did.
    pub fn accuracy(&self, problem: &Problem) -> f64 {
        let (mut sum, mut weight) = (0.0, 0.0);
        for (path, &(served, accuracy)) in problem.paths.iter().zip(&self.paths) {
            if served > 0 {
                sum += path.weight * accuracy / served as f64;
                weight += path.weight;
            }
        }
        if weight > 0.0 { sum / weight } else { 1.0 }
    }
}

/// Tasks as bits of a mask (the simulator takes apps of at most 64 tasks: [`simulate`] checks).
fn task_bits(tasks: &[usize]) -> u64 {
    tasks.iter().fold(0, |bits, &t| bits | 1u64.checked_shl(t as u32).unwrap_or(0))
}

/// A request queued at an instance.
#[derive(Debug, Clone, Copy)]
struct Job {
    root: usize,
    enqueued: Duration,
    deadline: Duration,
    /// Product of the normalised accuracies of the variants so far.
    accuracy: f64,
    /// The tasks it went through, one bit each: at a sink, the path it took.
    tasks: u64,
    /// Whether its time outside the model at this task runs on a core of its own (else on a busy instance's).
    own_core: bool,
    /// The route of its query class it runs on ([`Sim::class_routes`]), or [`NO_ROUTE`].
    route: u32,
    /// The batch booked for it at the pipelines' head ([`Head::bookings`]), or [`NO_ROUTE`].
    booking: u32,
}

/// A request of no query class's route: each task routes it over all its instances.
const NO_ROUTE: u32 = u32::MAX;

impl Request<Duration> for Job {
    fn rows(&self) -> u64 {
        1
    }
    fn enqueued(&self) -> Duration {
        self.enqueued
    }
    fn deadline(&self) -> Duration {
        self.deadline
    }
}

struct Instance {
    task: usize,
    variant: usize,
    segment: usize,
    batch: u32,
    /// (batch, p50 ms, p95 ms) profiled for this variant on this segment type, by batch.
    profile: Vec<(u32, f64, f64)>,
    /// Batches it runs at once: the MPS processes of a GPU segment, 1 on CPU cores.
    servers: usize,
    /// A CPU segment: the machine's cores are the instances', so glue time is taken from them.
    on_cpu: bool,
    /// The CPU cores it holds (0 on a GPU).
    cores: u32,
    /// Time outside the models that found no free core and runs on this instance's: its next batch takes it.
    debt_ms: f64,
    busy: usize,
    queue: Queue<Job, Duration>,
    /// The pending wake-up for a batch that waits for company.
    timer: Option<Duration>,
    /// Batches booked on it by the pipelines' head, each run alone, in order, before anything queued.
    booked: VecDeque<Vec<Job>>,
}

/// PPipe's data plane over a plan's pooled pipelines, as `jig_app`'s deployments run it.
struct Head {
    scheduler: Scheduler<Duration>,
    /// The requests waiting for a batch, oldest first.
    queue: VecDeque<Job>,
    /// The simulated instance of each of the scheduler's.
    instances: Vec<usize>,
    /// The pending wake-up of its wait rule.
    timer: Option<Duration>,
    /// Each booked batch, by the `booking` its members carry.
    bookings: Vec<Booking>,
}

/// A batch booked at the head: its path, and per stage the members still to come and those there.
type Booking = (Path<Duration>, Vec<(usize, Vec<Job>)>);

enum Event {
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
struct Agenda {
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
    fn push_in_order(&mut self, at: Duration, event: Event) {
        if self.in_order.back().is_some_and(|&(last, _, _)| at < last) {
            return self.push(at, event);
        }
        self.seq += 1;
        self.in_order.push_back((at, self.seq, event));
    }

    fn push(&mut self, at: Duration, event: Event) {
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

    fn pop(&mut self) -> Option<(Duration, Event)> {
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

/// SplitMix64: a small, seedable source of uniform numbers, the same on every platform.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(crate) fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (1.0 - self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// z of the 95th percentile of the standard normal.
const Z95: f64 = 1.644_853_6;

struct Sim<'a> {
    problem: &'a Problem,
    rng: Rng,
    /// Time outside the model at each task: overhead and glue.
    outside_ms: Vec<f64>,
    hop: Duration,
    /// CPU cores the machine has (a core no instance is running a batch on runs the time outside the models).
    cores: u32,
    /// Requests running their time outside the model on a core of their own.
    outside_running: u32,
    now: Duration,
    events: Agenda,
    instances: Vec<Instance>,
    /// Per task: its instances and the router over them.
    routes: Vec<(Vec<usize>, WeightedRoundRobin)>,
    /// Per route of a query class: per task, the instances of the route's type and the router over them.
    class_routes: Vec<Vec<(Vec<usize>, WeightedRoundRobin)>>,
    /// Per query class: its cumulative share of the demand, its latency SLO, and its routes (indices into
    /// `class_routes`) with the router over them.
    classes: Vec<(f64, Duration, Vec<u32>, WeightedRoundRobin)>,
    /// Per task and variant: the sink requests one request there leads to on average under the plan.
    sinks_below: Vec<Vec<f64>>,
    /// Per root request: arrival, jobs still in flight, whether any part was dropped or late, last finish.
    roots: Vec<(Duration, u32, bool, Duration)>,
    /// Per root request: its query class (an index into `classes`), or [`NO_ROUTE`].
    root_class: Vec<u32>,
    /// Root requests in progress, and how many may be at once: as a deployment admits (`jig_app::App::admit`),
    /// what the plan's capacity completes within the SLO (Little's law); more are refused at once.
    in_progress: u32,
    admit_limit: u32,
    /// PPipe's head, for a plan of pooled pipelines.
    head: Option<Head>,
    run: BinRun,
}

/// Time a request spends outside the models ([`SimOptions`]'s fields of the same names).
#[derive(Debug, Clone, Copy, Default)]
pub struct Outside<'a> {
    /// [`SimOptions::overhead_ms`].
    pub overhead_ms: f64,
    /// [`SimOptions::glue_ms`].
    pub glue_ms: &'a [f64],
    /// [`SimOptions::hop_ms`].
    pub hop_ms: f64,
}

/// Run `seconds` of Poisson arrivals at `rate` through the instances of `assignments`, with the time
/// `outside` the models.
pub fn run_bin(
    problem: &Problem,
    assignments: &[Assignment],
    (rate, seconds): (f64, f64),
    outside: &Outside,
    seed: u64,
) -> BinRun {
    run_plan(problem, assignments, (&[], &[]), (rate, seconds), outside, seed)
}

/// [`run_bin`] for a plan with query classes (Compass's) or pooled pipelines (PPipe's), as deployments route
/// them (`jig_app`). With classes, each root request is of a class drawn by the classes' shares, has the class's
/// latency SLO, and runs on one of the class's routes, picked in proportion to their rates. With pipelines, the
/// chain's first task queues requests at a head that books each batch along a pipeline (PPipe's data plane,
/// `jig_policy::reserve`) and every later task runs the booked batch, as one, on the instance booked for it.
pub fn run_plan(
    problem: &Problem,
    assignments: &[Assignment],
    (classes, pipelines): (&[ClassPlan], &[PipelinePlan]),
    (rate, seconds): (f64, f64),
    outside: &Outside,
    seed: u64,
) -> BinRun {
    let mut sim = Sim::for_plan(problem, assignments, (classes, pipelines), outside, seed);
    sim.run_arrivals(rate, Duration::from_secs_f64(seconds.max(0.0)));
    let mut run = sim.run;
    run.latencies_ms.sort_by(f64::total_cmp);
    run
}

impl<'a> Sim<'a> {
    /// A simulation of a plan ([`run_plan`]'s arguments).
    fn for_plan(
        problem: &'a Problem,
        assignments: &[Assignment],
        (classes, pipelines): (&[ClassPlan], &[PipelinePlan]),
        outside: &Outside,
        seed: u64,
    ) -> Self {
        let glue = |t: usize| outside.glue_ms.get(t).copied().unwrap_or(0.0).max(0.0);
        let mut sim = Sim::new(problem, assignments, &glue, seed);
        sim.route_classes(classes);
        sim.outside_ms = (0..problem.tasks.len()).map(|t| outside.overhead_ms.max(0.0) + glue(t)).collect();
        sim.hop = Duration::from_secs_f64(outside.hop_ms.max(0.0) / 1000.0);
        sim.book_pipelines(pipelines);
        sim
    }

    /// Poisson arrivals at `rate` until `end`, and everything they lead to.
    fn run_arrivals(&mut self, rate: f64, end: Duration) {
        if rate > 0.0 {
            let first = Duration::from_secs_f64(self.rng.exponential(1.0 / rate));
            self.schedule(first, Event::Root);
        }
        while let Some((at, event)) = self.events.pop() {
            self.now = at;
            match event {
                Event::Root => {
                    if at < end {
                        self.root_arrives();
                        let next = at + Duration::from_secs_f64(self.rng.exponential(1.0 / rate));
                        self.schedule(next, Event::Root);
                    }
                }
                Event::Arrive { task, job } => self.arrive(task, job),
                Event::Queue { task, job } => self.queue(task, job),
                Event::Start { instance } => {
                    if self.instances[instance].timer == Some(at) {
                        self.instances[instance].timer = None;
                        self.start_batches(instance, false);
                    }
                }
                Event::Done { instance, batch } => self.done(instance, batch),
                Event::Decide => {
                    if self.head.as_ref().is_some_and(|h| h.timer == Some(at)) {
                        self.head.as_mut().expect("a head").timer = None;
                        self.decide();
                    }
                }
            }
        }
    }

    /// `glue(t)`: the glue time task t's CPU rows carry, taken out of its CPU instances' batches.
    fn new(problem: &'a Problem, assignments: &[Assignment], glue: &dyn Fn(usize) -> f64, seed: u64) -> Self {
        let n = problem.tasks.len();
        // As deployments batch and drop: the plan's strategy's policy per task (`jig_planner::runtime_policies`).
        let policies = jig_planner::runtime_policies(problem, assignments);
        let ms = |ms: f64| Duration::from_secs_f64(ms / 1000.0);
        let mut instances = Vec::new();
        let mut routes: Vec<(Vec<usize>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); n];
        for a in assignments {
            let on_cpu = matches!(problem.segments[a.segment].kind, SegmentKind::Cpu { .. });
            let carried = |batch: u32| if on_cpu { f64::from(batch) * glue(a.task) } else { 0.0 };
            let mut profile: Vec<(u32, f64, f64)> = Vec::new();
            for c in
                problem.configs.iter().filter(|c| c.task == a.task && c.variant == a.variant && c.segment == a.segment)
            {
                let glue = carried(c.batch);
                profile.push((c.batch, (c.p50_ms - glue).max(0.0), (c.latency_ms - glue).max(0.0)));
            }
            profile.sort_by_key(|p| p.0);
            let servers = match problem.segments[a.segment].kind {
                SegmentKind::Mig { mps, .. } => usize::from(mps.max(1)),
                _ => 1,
            };
            let p = policies[a.task];
            let policy = BatchPolicy::planned(u64::from(a.batch), ms(p.wait_ms), ms(p.drop_budget_ms), ms(p.stale_ms));
            for _ in 0..a.instances {
                routes[a.task].0.push(instances.len());
                routes[a.task].1.push(a.rate_rps / f64::from(a.instances.max(1)));
                instances.push(Instance {
                    task: a.task,
                    variant: a.variant,
                    segment: a.segment,
                    batch: a.batch,
                    profile: profile.clone(),
                    servers,
                    on_cpu,
                    debt_ms: 0.0,
                    cores: match problem.segments[a.segment].kind {
                        SegmentKind::Cpu { cores } => cores,
                        _ => 0,
                    },
                    busy: 0,
                    queue: Queue::new(policy),
                    timer: None,
                    booked: VecDeque::new(),
                });
            }
        }
        // Sink requests below each (task, variant), from the sinks up.
        let mut sinks_below = vec![Vec::new(); n];
        for &t in problem.topo.iter().rev() {
            let task = &problem.tasks[t];
            sinks_below[t] = (0..task.variants.len())
                .map(|v| {
                    if task.succs.is_empty() {
                        return 1.0;
                    }
                    task.succs
                        .iter()
                        .map(|&s| {
                            let (sum, rate) = assignments.iter().filter(|a| a.task == s).fold((0.0, 0.0), |acc, a| {
                                (acc.0 + a.rate_rps * sinks_below[s][a.variant], acc.1 + a.rate_rps)
                            });
                            let mean = if rate > 0.0 { sum / rate } else { 1.0 };
                            task.factor(v, s) * mean
                        })
                        .sum()
                })
                .collect();
        }
        // The plan's capacity at the roots: its demand scaled by the task with the least head-room (instances'
        // profiled throughput over the rate planned for the task), as `jig_app::deployment` computes it.
        let mut served = vec![(0.0f64, 0.0f64); n]; // (throughput of the instances, planned rate) per task
        for a in assignments {
            let config = problem
                .configs
                .iter()
                .find(|c| (c.task, c.variant, c.segment, c.batch) == (a.task, a.variant, a.segment, a.batch));
            served[a.task].0 += config.map_or(0.0, |c| c.throughput_rps) * f64::from(a.instances);
            served[a.task].1 += a.rate_rps;
        }
        let headroom =
            served.iter().filter(|(_, rate)| *rate > 0.0).map(|(h, rate)| h / rate).fold(f64::INFINITY, f64::min);
        // Every request reaches every root task: the planned demand is what one of them is planned to serve.
        let planned = (0..n).filter(|&t| problem.is_root(t)).map(|t| served[t].1).fold(0.0, f64::max);
        let capacity = if headroom.is_finite() { planned * headroom } else { 0.0 };
        let admit_limit = (capacity * problem.slo_latency_ms / 1000.0).ceil().clamp(1.0, f64::from(u32::MAX)) as u32;
        Sim {
            problem,
            rng: Rng(seed),
            outside_ms: vec![0.0; n],
            hop: Duration::ZERO,
            cores: problem.cpu_cores.unwrap_or(problem.slices),
            outside_running: 0,
            now: Duration::ZERO,
            events: Agenda::default(),
            instances,
            routes: routes.into_iter().map(|(ids, weights)| (ids, WeightedRoundRobin::new(weights))).collect(),
            class_routes: Vec::new(),
            classes: Vec::new(),
            sinks_below,
            roots: Vec::new(),
            root_class: Vec::new(),
            in_progress: 0,
            admit_limit,
            head: None,
            run: BinRun { paths: vec![(0, 0.0); problem.paths.len()], ..BinRun::default() },
        }
    }

    fn schedule(&mut self, at: Duration, event: Event) {
        self.events.push(at, event);
    }

    /// Route requests by the query classes of `classes` (a Compass plan; none: by task alone).
    fn route_classes(&mut self, classes: &[ClassPlan]) {
        let mut cumulative = 0.0;
        for plan in classes {
            let Some(class) = self.problem.classes.iter().find(|c| c.name == plan.class) else { continue };
            cumulative += class.share;
            let mut routes = Vec::with_capacity(plan.routes.len());
            for route in &plan.routes {
                let mut by_task: Vec<(Vec<usize>, WeightedRoundRobin)> =
                    (0..self.problem.tasks.len()).map(|_| (Vec::new(), WeightedRoundRobin::new([]))).collect();
                for &(t, v, s, b) in &route.types {
                    let ids: Vec<usize> = (0..self.instances.len())
                        .filter(|&i| {
                            let inst = &self.instances[i];
                            (inst.task, inst.variant, inst.segment, inst.batch) == (t, v, s, b)
                        })
                        .collect();
                    let router = WeightedRoundRobin::new(ids.iter().map(|_| 1.0));
                    by_task[t] = (ids, router);
                }
                routes.push(self.class_routes.len() as u32);
                self.class_routes.push(by_task);
            }
            let pick = WeightedRoundRobin::new(plan.routes.iter().map(|r| r.rate_rps));
            let latency = Duration::from_secs_f64(class.slo_latency_ms / 1000.0);
            self.classes.push((cumulative, latency, routes, pick));
        }
        self.run.classes = vec![(0, 0); self.classes.len()];
    }

    fn root_arrives(&mut self) {
        let root = self.roots.len();
        let depth = self.problem.paths.iter().map(|p| p.tasks.len()).max().unwrap_or(0) as u32;
        // Of a query class, by the classes' shares, with its SLO and one of its routes; else the app's SLO.
        let (mut slo, mut route, mut of_class) =
            (Duration::from_secs_f64(self.problem.slo_latency_ms / 1000.0), NO_ROUTE, NO_ROUTE);
        if let Some(&(total, ..)) = self.classes.last() {
            let draw = self.rng.uniform() * total;
            let i = self.classes.iter().position(|c| draw < c.0).unwrap_or(self.classes.len() - 1);
            let class = &mut self.classes[i];
            slo = class.1;
            route = class.3.pick().map_or(NO_ROUTE, |i| class.2[i]);
            of_class = i as u32;
            self.run.classes[i].0 += 1;
        }
        self.root_class.push(of_class);
        let deadline = self.now + slo + self.hop * depth;
        self.roots.push((self.now, 0, false, self.now));
        self.run.requests += 1;
        if self.in_progress >= self.admit_limit {
            // Refused at admission: a violation, counted by the sink requests it would have led to.
            let units: f64 = (0..self.problem.tasks.len())
                .filter(|&t| self.problem.is_root(t))
                .map(|t| self.sinks_below[t].iter().copied().fold(0.0, f64::max))
                .sum();
            self.run.units += units;
            self.run.violations += units;
            return;
        }
        self.in_progress += 1;
        let job = Job {
            root,
            enqueued: self.now,
            deadline,
            accuracy: 1.0,
            tasks: 0,
            own_core: false,
            route,
            booking: NO_ROUTE,
        };
        for t in (0..self.problem.tasks.len()).filter(|&t| self.problem.is_root(t)) {
            self.roots[root].1 += 1;
            self.arrive(t, job);
        }
    }

    /// A request reaches task `task` (after its hop): its glue runs, then it queues for the model. The glue takes
    /// a core nothing runs on, or, when there is none, time from the CPU instance with the least work queued
    /// (the OS scheduler shares a busy machine's cores; that instance's next batch takes that much longer).
    fn arrive(&mut self, task: usize, job: Job) {
        let outside_ms = self.outside_ms[task];
        // Time outside the models takes a free core, or else lengthens the least-queued CPU instance's next batch
        // (with none, there is nothing to place: most requests of a large GPU plan, so skip the scans).
        let mut own_core = false;
        if outside_ms > 0.0 {
            let running: u32 = self.instances.iter().filter(|i| i.busy > 0).map(|i| i.cores).sum();
            own_core = running + self.outside_running < self.cores;
            if own_core {
                self.outside_running += 1;
            } else if let Some(shared) =
                self.instances.iter_mut().filter(|i| i.on_cpu).min_by_key(|i| (i.queue.len(), i.busy))
            {
                shared.debt_ms += outside_ms;
            }
        }
        let job = Job { tasks: job.tasks | task_bits(&[task]), own_core, ..job };
        let delay = self.hop + Duration::from_secs_f64(outside_ms / 1000.0);
        if delay.is_zero() {
            self.queue(task, job);
        } else {
            // Delays into a task are mostly the hop alone, so these come due about in the order they are made.
            self.events.push_in_order(self.now + delay, Event::Queue { task, job });
        }
    }

    /// A request calls task `task`'s model: route it, queue it, maybe start a batch.
    fn queue(&mut self, task: usize, job: Job) {
        if job.own_core {
            self.outside_running -= 1;
        }
        let job = Job { enqueued: self.now, ..job };
        if self.head.is_some() {
            if task == 0 {
                self.head.as_mut().expect("a head").queue.push_back(job);
                return self.decide();
            }
            if job.booking != NO_ROUTE {
                return self.gather(task, job);
            }
        }
        // On its class's route where the route names this task's type; else over all the task's instances.
        let (ids, route) = match job.route {
            r if r != NO_ROUTE && !self.class_routes[r as usize][task].0.is_empty() => {
                &mut self.class_routes[r as usize][task]
            }
            _ => &mut self.routes[task],
        };
        let Some(pick) = route.pick() else {
            // The plan has no instance for this task: the request is lost.
            self.dropped(task, None, job);
            return;
        };
        let instance = ids[pick];
        if self.instances[instance].queue.policy().refuse(self.now, job.deadline).is_some() {
            let variant = self.instances[instance].variant;
            self.dropped(task, Some(variant), job);
            return;
        }
        self.instances[instance].queue.push(job);
        self.start_batches(instance, false);
    }

    fn start_batches(&mut self, instance: usize, after_batch: bool) {
        while self.instances[instance].busy < self.instances[instance].servers {
            if let Some(batch) = self.instances[instance].booked.pop_front() {
                let charged = std::mem::take(&mut self.instances[instance].debt_ms);
                let latency = self.batch_latency(instance, batch.len(), charged);
                self.instances[instance].busy += 1;
                self.schedule(self.now + latency, Event::Done { instance, batch });
                continue;
            }
            let inst = &mut self.instances[instance];
            let Some(start) = inst.queue.start_at(self.now, after_batch) else { return };
            if start > self.now {
                if inst.timer.is_none_or(|t| start < t) {
                    inst.timer = Some(start);
                    self.schedule(start, Event::Start { instance });
                }
                return;
            }
            let hopeless = inst.queue.drop_hopeless(self.now);
            let (task, variant) = (inst.task, inst.variant);
            for (job, _) in hopeless {
                self.dropped(task, Some(variant), job);
            }
            let batch = self.instances[instance].queue.take_batch();
            if batch.is_empty() {
                return;
            }
            let charged = std::mem::take(&mut self.instances[instance].debt_ms);
            let latency = self.batch_latency(instance, batch.len(), charged);
            self.instances[instance].busy += 1;
            self.schedule(self.now + latency, Event::Done { instance, batch });
        }
    }

    /// A latency for a batch of `rows`: log-normal with the profile's p50 and p95, interpolated in the batch size.
    fn batch_latency(&mut self, instance: usize, rows: usize, charged_ms: f64) -> Duration {
        let profile = &self.instances[instance].profile;
        let rows = rows as f64;
        let upper = profile.iter().position(|p| f64::from(p.0) >= rows).unwrap_or(profile.len() - 1);
        let (p50, p95) = if upper == 0 || f64::from(profile[upper].0) < rows {
            (profile[upper].1, profile[upper].2)
        } else {
            let (lo, hi) = (profile[upper - 1], profile[upper]);
            let w = (rows - f64::from(lo.0)) / f64::from(hi.0 - lo.0);
            (lo.1 + w * (hi.1 - lo.1), lo.2 + w * (hi.2 - lo.2))
        };
        let sigma = if p95 > p50 && p50 > 0.0 { (p95 / p50).ln() / Z95 } else { 0.0 };
        let ms = p50 * (sigma * self.rng.normal()).exp();
        // Time outside the model that found no free core ran on this instance's.
        let glue_ms = if self.instances[instance].on_cpu { charged_ms } else { 0.0 };
        Duration::from_secs_f64((ms + glue_ms).max(0.0) / 1000.0)
    }

    fn done(&mut self, instance: usize, batch: Vec<Job>) {
        let (task, variant) = (self.instances[instance].task, self.instances[instance].variant);
        self.instances[instance].busy -= 1;
        // Feedback: a booked batch's actual end corrects its booking.
        if let (Some(head), Some(b)) = (&mut self.head, batch.first().map(|j| j.booking).filter(|&b| b != NO_ROUTE)) {
            let hop = head.bookings[b as usize].0.hops[task];
            head.scheduler.correct(Resource::Instance(hop.instance), hop.start, self.now);
        }
        let problem = self.problem;
        let accuracy = problem.tasks[task].normalised_accuracy(variant);
        for job in batch {
            let job = Job { accuracy: job.accuracy * accuracy, ..job };
            let succs = &problem.tasks[task].succs;
            if succs.is_empty() {
                let late = self.now > job.deadline;
                self.run.units += 1.0;
                self.run.served += 1;
                if let Some(p) = problem.paths.iter().position(|p| task_bits(&p.tasks) == job.tasks) {
                    self.run.paths[p].0 += 1;
                    self.run.paths[p].1 += job.accuracy;
                }
                if late {
                    self.run.violations += 1.0;
                }
                let root = &mut self.roots[job.root];
                root.2 |= late;
                root.3 = root.3.max(self.now);
            }
            for (i, &s) in succs.iter().enumerate() {
                let factor = problem.tasks[task].variants[variant].factors[i];
                let whole = factor.floor();
                let copies = whole as u32 + u32::from(self.rng.uniform() < factor - whole);
                self.roots[job.root].1 += copies;
                for _ in 0..copies {
                    self.schedule(self.now, Event::Arrive { task: s, job });
                }
            }
            self.finish_part(job.root);
        }
        self.start_batches(instance, true);
        if self.head.is_some() {
            self.decide();
        }
    }

    /// Serve `pipelines` (a PPipe plan's) through a head, their pools' members taken from the plan's instances
    /// of each type in turn; a pipeline left without a member at some task (a lost node's) is left out, and with
    /// none left the instances serve by their own queues.
    fn book_pipelines(&mut self, pipelines: &[PipelinePlan]) {
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
    fn decide(&mut self) {
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
    fn gather(&mut self, task: usize, job: Job) {
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

    /// A request dropped at `task` (on an instance of `variant`, if it got that far).
    fn dropped(&mut self, task: usize, variant: Option<usize>, job: Job) {
        let below = &self.sinks_below[task];
        let units = match variant {
            Some(v) => below[v],
            None => below.iter().copied().fold(0.0, f64::max),
        };
        self.run.units += units;
        self.run.violations += units;
        self.roots[job.root].2 = true;
        self.finish_part(job.root);
    }

    /// One job of a root request is over; when it was the last, record the request.
    fn finish_part(&mut self, root: usize) {
        let (arrived, in_flight, failed, last) = &mut self.roots[root];
        *in_flight -= 1;
        if *in_flight == 0 {
            self.in_progress -= 1;
            if !*failed {
                self.run.latencies_ms.push(last.since(*arrived).as_secs_f64() * 1000.0);
                if let Some(class) = self.run.classes.get_mut(self.root_class[root] as usize) {
                    class.1 += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::PaperApp;

    #[test]
    fn configurations_count_each_tasks_instances_over_the_bins() {
        let instances = |task: &str, variant: &str, segment: &str, count| Instances {
            task: task.into(),
            variant: variant.into(),
            segment: segment.into(),
            count,
        };
        let bin = |plan: Vec<Instances>| BinReport {
            start_s: 0.0,
            rate_rps: 1.0,
            planned_rps: 1.0,
            slices: 0,
            replanned: true,
            node_lost: false,
            solve_s: 0.0,
            requests: 0,
            sink_requests: 0.0,
            violations: 0.0,
            violation_rate: 0.0,
            accuracy_drop: 0.0,
            p50_ms: 0.0,
            p99_ms: 0.0,
            instances: plan,
            classes: Vec::new(),
        };
        let run = Simulation {
            app: "a".into(),
            features: "A+S+T".into(),
            slices_available: 28,
            beta: 0.035,
            bins: vec![
                bin(vec![
                    instances("detect", "yolov5l", "mig:1g.10gb:2", 3),
                    instances("car", "b0", "mig:1g.10gb:1", 1),
                ]),
                bin(vec![instances("detect", "yolov5x", "mig:2g.20gb:1", 1)]),
            ],
            p50_ms: 0.0,
            p99_ms: 0.0,
            serves_nothing: None,
        };
        let table = configurations(&run);
        assert!(table.contains("detect     variants  yolov5l 75%, yolov5x 25%"), "{table}");
        assert!(table.contains("detect     segments  mig:1g.10gb:2 75%, mig:2g.20gb:1 25%"), "{table}");
        assert!(table.contains("car        variants  b0 100%"), "{table}");
        assert!(
            run.to_csv().lines().nth(1).unwrap().ends_with(",detect/yolov5l/mig:1g.10gb:2*3 car/b0/mig:1g.10gb:1*1")
        );
    }

    /// A `mig:…:K` instance is K processes serving together, as the profiler measures it and the app runs it:
    /// at a rate two processes keep up with, read as one process its queue would grow.
    #[test]
    fn a_mig_instance_of_k_processes_serves_as_k_servers() {
        let spec = jig_planner::PlanSpec::from_toml(
            "[app]\nname = \"k\"\nslo_latency_ms = 100\nslo_accuracy = 0.5\n\
             [[app.tasks]]\nname = \"t\"\nvariants = [{ name = \"v\", accuracy = 1 }]\n\
             [[segments]]\nname = \"mig:1g.10gb:2\"\n\
             [resources]\nslices = 7\n[demand]\nwindows = [150]\n",
        )
        .unwrap();
        // Each process takes 10 ms a request: the instance, two of them, serves 200 req/s.
        let rows =
            "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\nt,v,mig:1g.10gb:2,1,10,10,200,test\n";
        let problem = jig_planner::Problem::new(&spec, &jig_planner::profile::from_csv(rows).unwrap(), "test").unwrap();
        let plan = [Assignment { task: 0, variant: 0, segment: 0, batch: 1, instances: 1, rate_rps: 150.0 }];
        let violated = |problem: &jig_planner::Problem| {
            let run = run_bin(problem, &plan, (150.0, 20.0), &Outside::default(), 7);
            run.violations / run.units
        };
        assert!(violated(&problem) < 0.01, "two processes keep up with 150 req/s: {}", violated(&problem));
        let mut alone = problem.clone();
        alone.segments[0].kind = SegmentKind::parse("mig:1g.10gb:1").unwrap();
        assert!(violated(&alone) > 0.2, "one process cannot: {}", violated(&alone));
    }

    #[test]
    fn a_plan_at_its_demand_serves_within_the_slo_and_overload_violates() {
        let problem = PaperApp::TrafficAnalysis.problem(28, 200.0).unwrap();
        let options = SolveOptions::default();
        let solved = solve(&problem, Features::ALL, &options).unwrap();
        let run = run_bin(&problem, &solved.assignments, (200.0, 20.0), &Outside::default(), 7);
        assert!(run.requests > 3000, "{}", run.requests);
        assert!(run.units > run.requests as f64, "each frame leads to about 2.5 car and person requests");
        assert!(run.violations / run.units < 0.01, "{} of {}", run.violations, run.units);
        let p99 = quantile(&run.latencies_ms, 0.99);
        assert!(p99 > 0.0 && p99 <= problem.slo_latency_ms, "p99 {p99} ms");
        // Three times the demand the plan was made for: queues grow and requests miss their deadline.
        let over = run_bin(&problem, &solved.assignments, (600.0, 20.0), &Outside::default(), 7);
        // Glue time adds to every task on the way.
        let slow = run_bin(
            &problem,
            &solved.assignments,
            (20.0, 20.0),
            &Outside { overhead_ms: 50.0, ..Outside::default() },
            7,
        );
        let fast = run_bin(&problem, &solved.assignments, (20.0, 20.0), &Outside::default(), 7);
        let (p50_slow, p50_fast) = (quantile(&slow.latencies_ms, 0.5), quantile(&fast.latencies_ms, 0.5));
        assert!((p50_slow - p50_fast - 100.0).abs() < 20.0, "{p50_slow} vs {p50_fast}: two tasks × 50 ms");
        // A hop into each task adds its time, and the deadline grows by the deepest path's hops.
        let hops =
            run_bin(&problem, &solved.assignments, (20.0, 20.0), &Outside { hop_ms: 10.0, ..Outside::default() }, 7);
        let p50_hops = quantile(&hops.latencies_ms, 0.5);
        // (About 20 ms: some of it overlaps time the requests would have waited for a batch, and the hops move
        // arrivals, so the company an instance expects, and waits for, moves too.)
        assert!(p50_hops > p50_fast + 5.0 && p50_hops <= p50_fast + 30.0, "{p50_hops} vs {p50_fast}: two hops × 10 ms");
        assert!(hops.violations / hops.units < 0.01, "{} of {}", hops.violations, hops.units);
        // The accuracy served is the plan's A_obj, each path weighted by g_p.
        let planned = jig_planner::evaluate::evaluate(&problem, &solved.assignments).accuracy;
        assert!((run.accuracy(&problem) - planned).abs() < 0.01, "{} vs {planned}", run.accuracy(&problem));
        assert!(run.paths.iter().filter(|p| p.0 > 0).count() >= 2, "both paths served: {:?}", run.paths);
        assert!(over.violations / over.units > 0.2, "{} of {}", over.violations, over.units);
        // Admission refuses what the plan cannot serve, so the rest is still served within the SLO: at three
        // times the demand, at least as many sink requests in time as at the demand.
        let good = |r: &BinRun| r.units - r.violations;
        assert!(good(&over) >= 0.9 * good(&run), "{} in time at 3×, {} at 1×", good(&over), good(&run));
    }

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
        sim.run_arrivals(100.0, Duration::from_secs(30));
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
        assert!(within >= 0.95 * over.latencies_ms.len() as f64, "p99 {} ms", quantile(&over.latencies_ms, 0.99));
    }

    /// A Compass plan of two classes over one task: `fast` (60 ms) only the fast variant meets, `best` (the most
    /// accurate) only the accurate one. Routed by class, every request meets its SLO and half are served at full
    /// accuracy; routed by task alone under the same deadlines, the `fast` requests that land on the slow
    /// variant miss theirs.
    #[test]
    fn a_compass_plan_routes_each_class_on_its_own_routes() {
        let spec = jig_planner::spec::PlanSpec::from_toml(
            r#"
            [app]
            name = "classes"
            slo_latency_ms = 2000
            slo_accuracy = 0.5
            planner = "compass"
            classes = [
              { name = "fast", slo_latency_ms = 60, slo_accuracy = 0.5, share = 0.5 },
              { name = "best", slo_latency_ms = 2000, slo_accuracy = 1.0, share = 0.5 },
            ]
            [[app.tasks]]
            name = "t"
            variants = [{ name = "fast", accuracy = 0.7 }, { name = "accurate", accuracy = 0.9 }]
            [[segments]]
            name = "cpu:1"
            [resources]
            slices = 8
            [demand]
            windows = [20]
            "#,
        )
        .unwrap();
        use jig_planner::profile::ProfileRow;
        let row = |variant: &str, ms: f64, rps: f64| ProfileRow {
            slot: "t".into(),
            variant: variant.into(),
            segment: "cpu:1".into(),
            batch: 1,
            p50_ms: ms,
            p95_ms: ms,
            throughput_rps: rps,
            device: "test".into(),
        };
        let rows = [row("fast", 2.0, 500.0), row("accurate", 70.0, 14.0)];
        let problem = Problem::new(&spec, &rows, "test").unwrap();
        let solved = jig_planner::solve(&problem, Features::ALL, &SolveOptions::default()).unwrap();
        assert_eq!(solved.classes.len(), 2, "{solved:?}");
        let classes = (&solved.classes[..], &[][..]);
        let routed = run_plan(&problem, &solved.assignments, classes, (20.0, 60.0), &Outside::default(), 5);
        assert!(routed.violations / routed.units < 0.01, "{} of {}", routed.violations, routed.units);
        let accuracy = routed.accuracy(&problem);
        assert!((accuracy - (0.5 + 0.5 * 0.7 / 0.9)).abs() < 0.03, "half at 1, half at 0.78: {accuracy}");
        let [(fast, fast_good), (best, best_good)] = routed.classes[..] else { panic!("{:?}", routed.classes) };
        assert!(fast + best == routed.requests && fast.abs_diff(best) < routed.requests / 5, "{:?}", routed.classes);
        assert!(fast_good + 5 >= fast && best_good + 5 >= best, "each class within its SLO: {:?}", routed.classes);
        // By task alone, at the tight class's deadline: the requests routed to `accurate` (70 ms) miss 60 ms.
        let mut tight = problem.clone();
        tight.slo_latency_ms = 60.0;
        let unrouted = run_bin(&tight, &solved.assignments, (20.0, 60.0), &Outside::default(), 5);
        assert!(unrouted.violations / unrouted.units > 0.3, "{} of {}", unrouted.violations, unrouted.units);
    }

    #[test]
    fn glue_takes_a_free_core_or_else_its_instances_time() {
        let spec = jig_planner::spec::PlanSpec::from_toml(
            r#"
            [app]
            name = "one"
            slo_latency_ms = 200
            slo_accuracy = 0.9
            [[app.tasks]]
            name = "t"
            variants = [{ name = "v", accuracy = 1 }]
            [[segments]]
            name = "cpu:1"
            [resources]
            slices = 2
            [demand]
            windows = [60]
            "#,
        )
        .unwrap();
        use jig_planner::profile::ProfileRow;
        let row = |segment: &str| ProfileRow {
            slot: "t".into(),
            variant: "v".into(),
            segment: segment.into(),
            batch: 1,
            p50_ms: 10.0,
            p95_ms: 10.0,
            throughput_rps: 100.0,
            device: "test".into(),
        };
        // A machine of one core, and one of two where the second runs no instance.
        let one_core = Problem::new(&spec, &[row("cpu:1")], "test").unwrap().with_demand(60.0, 1);
        let problem = one_core.clone().with_demand(60.0, 2);
        let plan = [Assignment { task: 0, variant: 0, segment: 0, batch: 1, instances: 1, rate_rps: 60.0 }];
        let glue = Outside { overhead_ms: 10.0, ..Outside::default() };
        let rate = |r: &BinRun| r.violations / r.units;
        // 10 ms of model and 10 ms of glue on one core: 60 req/s is 120% of what the core does.
        let alone = run_bin(&one_core, &plan, (60.0, 30.0), &Outside::default(), 3);
        let with_glue = run_bin(&one_core, &plan, (60.0, 30.0), &glue, 3);
        assert!(rate(&alone) < 0.01, "{} of {}", alone.violations, alone.units);
        assert!(rate(&with_glue) > 0.1, "{} of {}", with_glue.violations, with_glue.units);
        // With a second core, the glue runs there: it delays each request but leaves the model its core.
        let spare = run_bin(&problem, &plan, (60.0, 30.0), &glue, 3);
        assert!(
            rate(&spare) < 0.05 && rate(&spare) < rate(&with_glue) / 3.0,
            "{} of {}",
            spare.violations,
            spare.units
        );
        let p50 = |r: &BinRun| quantile(&r.latencies_ms, 0.5);
        assert!(p50(&spare) >= p50(&alone) + 9.0, "{} vs {}", p50(&spare), p50(&alone));
        // Glue the rows carry (as plans charge it) is taken out of the model's time, and runs as glue.
        let charged = Problem::new(&spec, &[ProfileRow { p50_ms: 20.0, p95_ms: 20.0, ..row("cpu:1") }], "test")
            .unwrap()
            .with_demand(60.0, 2);
        let carried = run_bin(&charged, &plan, (60.0, 30.0), &Outside { glue_ms: &[10.0], ..Outside::default() }, 3);
        let (r, p) = ((rate(&carried), rate(&spare)), (p50(&carried), p50(&spare)));
        assert!((r.0 - r.1).abs() < 0.01 && (p.0 - p.1).abs() < 3.0, "violations {r:?}, p50 {p:?}");
    }

    #[test]
    fn a_day_replans_every_bin_and_follows_the_demand() {
        let problem = PaperApp::SocialMedia.problem(28, 1.0).unwrap();
        let trace = Trace { bin_s: 300.0, rates: vec![50.0, 50.0, 200.0, 200.0, 200.0, 200.0, 200.0, 200.0] };
        let options = SimOptions { sample_requests: 2000, ..SimOptions::default() };
        let sim = simulate(&problem, &trace, &options).unwrap();
        assert_eq!(sim.bins.len(), 8);
        assert!(sim.bins.iter().all(|b| b.replanned));
        // The jump is planned for from the mean of the last five bins: it overloads until they all saw it.
        let (jump, settled) = (&sim.bins[2], &sim.bins[7]);
        assert!((settled.planned_rps - 210.0).abs() < 5.0, "{settled:?}");
        assert!(settled.slices > sim.bins[0].slices, "{:?}", sim.bins);
        assert!(jump.violation_rate > 0.5, "{jump:?}");
        assert!(settled.violation_rate < 0.01, "{settled:?}");
        assert!(sim.violation_rate() > settled.violation_rate);
        // A deployment planned once for 50 req/s keeps its plan and stays overloaded.
        let fixed = SimOptions { fixed_demand: Some(52.5), ..options };
        let sim = simulate(&problem, &trace, &fixed).unwrap();
        assert!(sim.bins.iter().all(|b| b.slices == sim.bins[0].slices && b.planned_rps == 52.5));
        assert!(sim.bins[7].violation_rate > 0.5, "{:?}", sim.bins[7]);
    }

    #[test]
    fn a_space_that_serves_nothing_refuses_every_request_and_says_why() {
        // Three tasks cannot share one slice.
        let problem = PaperApp::ArAssistant.problem(1, 1.0).unwrap();
        let trace = Trace { bin_s: 300.0, rates: vec![5.0, 5.0] };
        let sim = simulate(&problem, &trace, &SimOptions { sample_requests: 100, ..SimOptions::default() }).unwrap();
        assert!(sim.bins.iter().all(|b| b.slices == 0 && !b.replanned && b.violation_rate == 1.0), "{:?}", sim.bins);
        let why = sim.serves_nothing.as_deref().expect("a reason");
        assert!(why.contains("slice"), "{why}");
        assert!(summary(&[sim], &trace).contains("A+S+T serves no demand (every request refused): "));
    }

    #[test]
    fn under_a_controller_a_plan_is_kept_until_the_demand_moves_or_violations_rise() {
        let problem = PaperApp::SocialMedia.problem(28, 1.0).unwrap();
        let trace = Trace { bin_s: 300.0, rates: vec![50.0, 52.0, 55.0, 200.0, 200.0] };
        let controller =
            Controller { replan: Replan { threshold: 0.2 }, windows: vec![50.0, 50.0], planned_for: Some(60.0) };
        let options = SimOptions { sample_requests: 2000, controller: Some(controller), ..SimOptions::default() };
        let sim = simulate(&problem, &trace, &options).unwrap();
        // Predictions within 20% of 60 req/s keep the plan made for the running deployment's demand.
        assert!(sim.bins[..4].iter().all(|b| b.planned_rps == 60.0), "{:?}", sim.bins);
        // The jump overloads bin 3; its violations (and the moved prediction) re-plan bin 4.
        assert!(sim.bins[3].violation_rate > 0.01, "{:?}", sim.bins[3]);
        assert!(sim.bins[4].planned_rps > 60.0 * 1.2, "{:?}", sim.bins[4]);
        assert!(sim.bins[4].slices > sim.bins[0].slices, "{:?}", sim.bins);
    }

    #[test]
    fn a_lost_node_costs_its_bin_and_the_next_plans_within_the_nodes_up() {
        let problem = PaperApp::SocialMedia.problem(12, 1.0).unwrap();
        // Twelve 5-minute bins at a steady rate that needs most of the 12 slices; four nodes of 3, one lost every
        // 20 minutes from the 20th.
        let trace = Trace { bin_s: 300.0, rates: vec![200.0; 12] };
        let failing = NodeFailures { nodes: 4, every_s: 1200.0 };
        let options = SimOptions { sample_requests: 2000, node_failures: Some(failing), ..SimOptions::default() };
        let sim = simulate(&problem, &trace, &options).unwrap();
        let lost: Vec<usize> = sim.bins.iter().enumerate().filter(|(_, b)| b.node_lost).map(|(i, _)| i).collect();
        assert_eq!(lost, [4, 8], "a node fails at 20 and 40 minutes");
        // The failure's bin runs the plan before it less a node's share; the next is planned within 21 slices.
        assert!(sim.bins[4].slices < sim.bins[3].slices, "{:?}", sim.bins);
        assert!(sim.bins[5..].iter().all(|b| b.slices <= 9), "{:?}", sim.bins);
        assert!(sim.bins[..4].iter().any(|b| b.slices > 9), "more than 9 slices were used before: {:?}", sim.bins);
        assert!(sim.bins[4].violation_rate > sim.bins[3].violation_rate, "{:?}", sim.bins);
        // Failures need plans made every bin.
        let fixed = SimOptions { fixed_demand: Some(200.0), ..options };
        assert!(simulate(&problem, &trace, &fixed).unwrap_err().to_string().contains("plans made every bin"));
    }
}
