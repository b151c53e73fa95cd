//! The discrete-event engine that runs one bin of a plan ([`run_bin`], [`run_plan`]): [`Arrivals`] through
//! the plan's instances, admitted as a deployment admits them, routed, batched and dropped by `jig_policy`'s code,
//! with log-normal batch latencies and the time spent outside the models. [`BinRun`] is what it measures.

use std::collections::VecDeque;
use std::time::Duration;

use jig_planner::problem::Problem;
use jig_planner::solution::Assignment;
use jig_planner::solution::ClassPlan;
use jig_planner::solution::PipelinePlan;
use jig_planner::spec::SegmentKind;
use jig_policy::reserve::Resource;
use jig_policy::rng::SplitMix64;
use jig_policy::{BatchPolicy, Queue, Time as _, WeightedRoundRobin};

use super::agenda::{Agenda, Event};
use super::report::BinRun;
use super::state::{Head, Instance, Job, NO_ROUTE, task_bits};

/// z of the 95th percentile of the standard normal.
const Z95: f64 = 1.644_853_6;

/// One bin's simulation of a plan: its clock and events, its instances and routers, and what it measured.
pub(super) struct Sim<'a> {
    pub(super) problem: &'a Problem,
    rng: SplitMix64,
    /// Time outside the model at each task: overhead and glue.
    pub(super) outside_ms: Vec<f64>,
    pub(super) hop: Duration,
    /// CPU cores the machine has (a core no instance is running a batch on runs the time outside the models).
    cores: u32,
    /// Requests running their time outside the model on a core of their own.
    outside_running: u32,
    pub(super) now: Duration,
    events: Agenda,
    pub(super) instances: Vec<Instance>,
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
    pub(super) head: Option<Head>,
    pub(super) run: BinRun,
}

/// Time a request spends outside the models ([`SimOptions`](super::SimOptions)'s fields of the same names).
#[derive(Debug, Clone, Copy, Default)]
pub struct Outside<'a> {
    /// [`SimOptions::overhead_ms`](super::SimOptions::overhead_ms).
    pub overhead_ms: f64,
    /// [`SimOptions::glue_ms`](super::SimOptions::glue_ms).
    pub glue_ms: &'a [f64],
    /// [`SimOptions::hop_ms`](super::SimOptions::hop_ms).
    pub hop_ms: f64,
}

/// The root requests a run sends: Poisson arrivals, or given times (a measured run's, replayed).
#[derive(Debug, Clone, Copy)]
pub enum Arrivals<'a> {
    /// Poisson arrivals; `(rate, seconds)` converts to this.
    Poisson {
        /// Mean arrivals a second.
        rate: f64,
        /// How long they arrive for.
        seconds: f64,
    },
    /// One arrival at each of these times, seconds from the run's start, in order.
    At(&'a [f64]),
}

impl From<(f64, f64)> for Arrivals<'_> {
    fn from((rate, seconds): (f64, f64)) -> Self {
        Arrivals::Poisson { rate, seconds }
    }
}

/// Run `arrivals` (`(rate, seconds)`: Poisson) through the instances of `assignments`, with the time `outside`
/// the models.
pub fn run_bin<'a>(
    problem: &Problem,
    assignments: &[Assignment],
    arrivals: impl Into<Arrivals<'a>>,
    outside: &Outside,
    seed: u64,
) -> BinRun {
    run_plan(problem, assignments, (&[], &[]), arrivals, outside, seed)
}

/// [`run_bin`] for a plan with query classes (Compass's) or pooled pipelines (PPipe's), as deployments route
/// them (`jig_app`). With classes, each root request is of a class drawn by the classes' shares, has the class's
/// latency SLO, and runs on one of the class's routes, picked in proportion to their rates. With pipelines, the
/// chain's first task queues requests at a head that books each batch along a pipeline (PPipe's data plane,
/// `jig_policy::reserve`) and every later task runs the booked batch, as one, on the instance booked for it.
pub fn run_plan<'a>(
    problem: &Problem,
    assignments: &[Assignment],
    (classes, pipelines): (&[ClassPlan], &[PipelinePlan]),
    arrivals: impl Into<Arrivals<'a>>,
    outside: &Outside,
    seed: u64,
) -> BinRun {
    let mut sim = Sim::for_plan(problem, assignments, (classes, pipelines), outside, seed);
    sim.run_arrivals(arrivals.into());
    let mut run = sim.run;
    run.latencies_ms.sort_by(f64::total_cmp);
    run
}

impl<'a> Sim<'a> {
    /// A simulation of a plan ([`run_plan`]'s arguments).
    pub(super) fn for_plan(
        problem: &'a Problem,
        assignments: &[Assignment],
        (classes, pipelines): (&[ClassPlan], &[PipelinePlan]),
        outside: &Outside,
        seed: u64,
    ) -> Self {
        let glue = |t: usize| outside.glue_ms.get(t).copied().unwrap_or(0.0).max(0.0);
        let mut sim = Sim::new(problem, assignments, seed);
        sim.route_classes(classes);
        sim.outside_ms = (0..problem.tasks.len()).map(|t| outside.overhead_ms.max(0.0) + glue(t)).collect();
        sim.hop = Duration::from_secs_f64(outside.hop_ms.max(0.0) / 1000.0);
        sim.book_pipelines(pipelines);
        sim
    }

    /// `arrivals`, and everything they lead to.
    pub(super) fn run_arrivals(&mut self, arrivals: Arrivals) {
        let (rate, end, mut given) = match arrivals {
            Arrivals::Poisson { rate, seconds } => (rate, Duration::from_secs_f64(seconds.max(0.0)), None),
            Arrivals::At(times) => {
                (0.0, Duration::MAX, Some(times.iter().map(|&t| Duration::from_secs_f64(t.max(0.0)))))
            }
        };
        // The next arrival after one at `at`: the next given, or a Poisson gap from the engine's stream.
        let mut next_after = |sim: &mut Self, at: Duration| match &mut given {
            Some(times) => times.next(),
            None => (rate > 0.0).then(|| at + Duration::from_secs_f64(sim.rng.exponential(1.0 / rate))),
        };
        if let Some(first) = next_after(self, Duration::ZERO) {
            self.schedule(first, Event::Root);
        }
        while let Some((at, event)) = self.events.pop() {
            self.now = at;
            match event {
                Event::Root => {
                    if at < end {
                        self.root_arrives();
                        if let Some(next) = next_after(self, at) {
                            self.schedule(next, Event::Root);
                        }
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

    fn new(problem: &'a Problem, assignments: &[Assignment], seed: u64) -> Self {
        let n = problem.tasks.len();
        // As deployments batch and drop: the plan's strategy's policy per task (`jig_planner::runtime_policies`).
        let policies = jig_planner::runtime_policies(problem, assignments);
        let ms = |ms: f64| Duration::from_secs_f64(ms / 1000.0);
        let mut instances = Vec::new();
        let mut routes: Vec<(Vec<usize>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); n];
        for a in assignments {
            let on_cpu = matches!(problem.segments[a.segment].kind, SegmentKind::Cpu { .. });
            let servers = match problem.segments[a.segment].kind {
                SegmentKind::Mig { mps, .. } => usize::from(mps.max(1)),
                _ => 1,
            };
            let mut profile: Vec<(u32, f64, f64, Option<f64>)> = Vec::new();
            for c in
                problem.configs.iter().filter(|c| c.task == a.task && c.variant == a.variant && c.segment == a.segment)
            {
                let mean_ms =
                    (c.throughput_rps > 0.0).then(|| servers as f64 * f64::from(c.batch) * 1000.0 / c.throughput_rps);
                profile.push((c.batch, c.p50_ms, c.latency_ms, mean_ms));
            }
            profile.sort_by_key(|p| p.0);
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
            rng: SplitMix64::new(seed),
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

    pub(super) fn schedule(&mut self, at: Duration, event: Event) {
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
    /// a core nothing runs on, or, when there is none, time from the CPU instances running batches
    /// ([`Sim::share_busy_cores`]).
    fn arrive(&mut self, task: usize, job: Job) {
        let outside_ms = self.outside_ms[task];
        // Time outside the models takes a free core, or else time from the CPU instances running (with none, there
        // is nothing to place: most requests of a large GPU plan, so skip the scans).
        let mut own_core = false;
        if outside_ms > 0.0 {
            let running: u32 = self.instances.iter().filter(|i| i.busy > 0).map(|i| i.cores).sum();
            own_core = running + self.outside_running < self.cores;
            if own_core {
                self.outside_running += 1;
            } else {
                self.share_busy_cores(outside_ms);
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

    /// `ms` of work outside the models on a machine whose cores are all busy: the OS shares them among the
    /// threads that can run, whatever their queues, so each CPU instance running a batch gives up its cores' share
    /// of it (its next batch takes that much longer). With none running (the cores are busy with such work), the
    /// least-queued CPU instance's next batch pays it all.
    fn share_busy_cores(&mut self, ms: f64) {
        let running = |i: &Instance| i.on_cpu && i.busy > 0;
        let cores: u32 = self.instances.iter().filter(|i| running(i)).map(|i| i.cores).sum();
        if cores > 0 {
            for instance in self.instances.iter_mut().filter(|i| running(i)) {
                instance.debt_ms += ms * f64::from(instance.cores) / f64::from(cores);
            }
        } else if let Some(least) =
            self.instances.iter_mut().filter(|i| i.on_cpu).min_by_key(|i| (i.queue.len(), i.busy))
        {
            least.debt_ms += ms;
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

    pub(super) fn start_batches(&mut self, instance: usize, after_batch: bool) {
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

    /// A latency for a batch of `rows`: log-normal with the spread of the profile's p50 and p95 and the mean of
    /// its throughput (the rows a second the plan counts on), interpolated in the batch size; with no throughput,
    /// the p50 is the median. A group whose latencies are not log-normal (refined by what a deployment observed:
    /// recognising a short line and a long one, say, whose p50 is above their mean) so serves as planned.
    fn batch_latency(&mut self, instance: usize, rows: usize, charged_ms: f64) -> Duration {
        let profile = &self.instances[instance].profile;
        let rows = rows as f64;
        let upper = profile.iter().position(|p| f64::from(p.0) >= rows).unwrap_or(profile.len() - 1);
        let (p50, p95, mean) = if upper == 0 || f64::from(profile[upper].0) < rows {
            (profile[upper].1, profile[upper].2, profile[upper].3)
        } else {
            let (lo, hi) = (profile[upper - 1], profile[upper]);
            let w = (rows - f64::from(lo.0)) / f64::from(hi.0 - lo.0);
            let mean = lo.3.zip(hi.3).map(|(lo, hi)| lo + w * (hi - lo));
            (lo.1 + w * (hi.1 - lo.1), lo.2 + w * (hi.2 - lo.2), mean)
        };
        let sigma = if p95 > p50 && p50 > 0.0 { (p95 / p50).ln() / Z95 } else { 0.0 };
        // A log-normal of median m has mean m·e^(σ²/2).
        let median = mean.filter(|&m| m > 0.0).map_or(p50, |m| m / (sigma * sigma / 2.0).exp());
        let ms = median * (sigma * self.rng.normal()).exp();
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

    /// A request dropped at `task` (on an instance of `variant`, if it got that far).
    pub(super) fn dropped(&mut self, task: usize, variant: Option<usize>, job: Job) {
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
mod tests;
