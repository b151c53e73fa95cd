//! The query space: the plans of a linear pipeline (one (variant, segment, batch) per stage), the ground truth
//! of a plan for a query (accuracy, latency, cores), and seeded queries that differ but resemble each other.

use crate::error::PlanError;
use crate::problem::Problem;

use super::Rng;

/// One stage's choice: a profiled (variant, segment, batch) of its task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageOption {
    /// The variant's index in its task.
    pub variant: usize,
    /// The segment type's index in the problem.
    pub segment: usize,
    /// The maximum batch size.
    pub batch: u32,
    /// p50 batch latency, ms: what one sample costs the profiler, divided by the batch.
    pub p50_ms: f64,
    /// p95 batch latency L, ms: what a plan's latency counts (2·L per stage, as jig's planners count).
    pub p95_ms: f64,
    /// Throughput of one instance H, req/s.
    pub throughput_rps: f64,
    /// Cores one instance takes (the segment's slices).
    pub cores: f64,
}

/// A stage of the pipeline: a task and every profiled option of it.
#[derive(Debug, Clone)]
pub struct Stage {
    /// The task's name.
    pub task: String,
    /// A(t,v)/A(t,v*) of each variant.
    pub accuracy: Vec<f64>,
    /// F(t,v,next) of each variant: requests to the next stage per request served (1 at the last stage).
    pub factor: Vec<f64>,
    /// The profiled options, in the problem's config order (variant, segment, batch).
    pub options: Vec<StageOption>,
}

/// The plans of a linear pipeline: every combination of one option per stage, numbered in mixed radix.
#[derive(Debug, Clone)]
pub struct Space {
    /// The app's name.
    pub app: String,
    /// The stages, from the root to the sink.
    pub stages: Vec<Stage>,
    /// The largest segment's cores and the largest batch, for the features.
    max_cores: f64,
    max_batch: f64,
}

/// The ground truth of one plan for one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Truth {
    /// Π A(t,v)/A(t,v*), raised to the query's difficulty.
    pub accuracy: f64,
    /// Σ 2·L over the stages, scaled by the query's input size, ms.
    pub latency_ms: f64,
    /// Cores the plan needs for the query's rate (fractional: queries share instances).
    pub cores: f64,
}

/// A query: the pipeline on a data set of its own, with its SLOs and rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The spec's class it was drawn around.
    pub class: String,
    /// Latency SLO, ms.
    pub slo_latency_ms: f64,
    /// Accuracy SLO, a fraction of the best achievable.
    pub slo_accuracy: f64,
    /// Its rate, req/s: its SLO benefit when admitted.
    pub rate_rps: f64,
    /// The exponent on the normalised accuracy: its data set is harder (> 1) or easier (< 1).
    pub difficulty: f64,
    /// The factor on every latency and per-request time: its inputs are larger (> 1) or smaller.
    pub latency_scale: f64,
}

impl Query {
    /// Whether a plan with this truth meets both SLOs.
    pub fn compliant(&self, truth: &Truth) -> bool {
        truth.accuracy >= self.slo_accuracy && truth.latency_ms <= self.slo_latency_ms
    }
}

impl Space {
    /// The space of a linear pipeline's plans: an error, as Compass's planner gives it ([`crate::ipa::chain`]),
    /// when the graph is not one chain, or naming the spec when a task has no profiled configuration.
    pub fn new(problem: &Problem, spec: &str) -> Result<Self, PlanError> {
        let order = &crate::ipa::chain(problem, "Compass")?;
        let mut stages = Vec::with_capacity(order.len());
        for (i, &t) in order.iter().enumerate() {
            let task = &problem.tasks[t];
            let next = order.get(i + 1).copied();
            let options: Vec<StageOption> = problem
                .configs
                .iter()
                .filter(|c| c.task == t && c.throughput_rps > 0.0)
                .map(|c| StageOption {
                    variant: c.variant,
                    segment: c.segment,
                    batch: c.batch,
                    p50_ms: c.p50_ms,
                    p95_ms: c.latency_ms,
                    throughput_rps: c.throughput_rps,
                    cores: f64::from(problem.segments[c.segment].slices),
                })
                .collect();
            if options.is_empty() {
                return Err(PlanError::Input(format!(
                    "{spec}: task `{}` has no profiled configuration; profile it (`jig profile`)",
                    task.name
                )));
            }
            stages.push(Stage {
                task: task.name.clone(),
                accuracy: (0..task.variants.len()).map(|v| task.normalised_accuracy(v)).collect(),
                factor: (0..task.variants.len()).map(|v| next.map_or(1.0, |n| task.factor(v, n))).collect(),
                options,
            });
        }
        let max_cores = stages.iter().flat_map(|s| &s.options).map(|o| o.cores).fold(1.0, f64::max);
        let max_batch = stages.iter().flat_map(|s| &s.options).map(|o| f64::from(o.batch)).fold(2.0, f64::max);
        Ok(Space { app: problem.app.clone(), stages, max_cores, max_batch })
    }

    /// How many plans there are.
    pub fn len(&self) -> usize {
        self.stages.iter().map(|s| s.options.len()).product()
    }

    /// Whether the space has no plan (never, for a space [`Space::new`] built).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The option index of each stage of plan `id`.
    pub fn decode(&self, id: usize) -> Vec<usize> {
        let mut rest = id;
        self.stages
            .iter()
            .map(|s| {
                let o = rest % s.options.len();
                rest /= s.options.len();
                o
            })
            .collect()
    }

    /// The plan of these option indices.
    pub fn encode(&self, options: &[usize]) -> usize {
        self.stages.iter().zip(options).rev().fold(0, |id, (s, &o)| id * s.options.len() + o)
    }

    /// The features a surrogate sees: per stage, the variant one-hot, the segment's cores and log₂ batch,
    /// each scaled to [0, 1].
    pub fn features(&self, id: usize) -> Vec<f64> {
        let mut x = Vec::new();
        for (stage, o) in self.stages.iter().zip(self.decode(id)) {
            let opt = &stage.options[o];
            x.extend((0..stage.accuracy.len()).map(|v| if v == opt.variant { 1.0 } else { 0.0 }));
            x.push(opt.cores / self.max_cores);
            x.push(f64::from(opt.batch).log2() / self.max_batch.log2());
        }
        x
    }

    /// Plan `id`'s accuracy, latency and cores for `query`.
    pub fn truth(&self, id: usize, query: &Query) -> Truth {
        let (mut accuracy, mut latency_ms, mut cores, mut rate) = (1.0, 0.0, 0.0, query.rate_rps);
        for (stage, o) in self.stages.iter().zip(self.decode(id)) {
            let opt = &stage.options[o];
            accuracy *= stage.accuracy[opt.variant];
            latency_ms += 2.0 * opt.p95_ms * query.latency_scale;
            cores += rate * query.latency_scale / opt.throughput_rps * opt.cores;
            rate *= stage.factor[opt.variant];
        }
        Truth { accuracy: accuracy.powf(query.difficulty), latency_ms, cores }
    }

    /// The plans one step away from `id` (one stage's variant, segment or batch changed to the next one up or
    /// down among that stage's profiled options): VideoStorm's hill-climbing moves.
    pub fn neighbours(&self, id: usize) -> Vec<usize> {
        let options = self.decode(id);
        let mut out = Vec::new();
        for (i, stage) in self.stages.iter().enumerate() {
            let here = stage.options[options[i]];
            for (j, o) in stage.options.iter().enumerate() {
                let one_knob = [o.variant != here.variant, o.segment != here.segment, o.batch != here.batch]
                    .iter()
                    .filter(|&&d| d)
                    .count()
                    == 1;
                if one_knob && Self::adjacent(stage, &here, o) {
                    let mut next = options.clone();
                    next[i] = j;
                    out.push(self.encode(&next));
                }
            }
        }
        out
    }

    /// Whether `o` is the next value up or down of the one knob in which it differs from `here`.
    fn adjacent(stage: &Stage, here: &StageOption, o: &StageOption) -> bool {
        let rank = |vals: &mut Vec<f64>, x: f64| {
            vals.sort_by(f64::total_cmp);
            vals.dedup();
            vals.iter().position(|&v| v == x).unwrap_or(0) as i64
        };
        let same = |a: &StageOption| a.variant == here.variant && a.segment == here.segment;
        if o.batch != here.batch {
            let mut b: Vec<f64> = stage.options.iter().filter(|a| same(a)).map(|a| f64::from(a.batch)).collect();
            let (x, y) = (rank(&mut b, f64::from(here.batch)), rank(&mut b, f64::from(o.batch)));
            return (x - y).abs() == 1;
        }
        if o.segment != here.segment {
            return (o.segment as i64 - here.segment as i64).abs() == 1;
        }
        (o.variant as i64 - here.variant as i64).abs() == 1
    }

    /// The quality-first start: every stage's most accurate variant on its largest segment at its smallest
    /// batch (the lowest-latency, most-resourced plan of the best quality).
    pub fn quality_first(&self) -> usize {
        let options: Vec<usize> = self
            .stages
            .iter()
            .map(|s| {
                let key = |o: &StageOption| (s.accuracy[o.variant], o.cores, -f64::from(o.batch));
                (0..s.options.len())
                    .max_by(|&a, &b| {
                        key(&s.options[a]).partial_cmp(&key(&s.options[b])).unwrap_or(std::cmp::Ordering::Equal)
                    })
                    .unwrap_or(0)
            })
            .collect();
        self.encode(&options)
    }
}

/// `n` seeded queries drawn around the problem's classes (by their shares): each class's latency SLO × U(0.8,
/// 1.2) and accuracy SLO × U(0.97, 1.03) (at most 1), a rate of the problem's demand / n × U(0.5, 1.5), a data
/// set whose difficulty (the exponent on accuracy) is U(0.8, 1.25) and whose inputs scale every latency by
/// U(0.85, 1.15). Fixed before any result was seen: wide enough that queries differ, narrow enough that each
/// resembles the others of its class, which is what Compass's committee reuses.
pub fn queries(problem: &Problem, n: usize, seed: u64) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x5eed_0001);
    (0..n)
        .map(|_| {
            let pick = rng.uniform();
            let mut acc = 0.0;
            let class = problem
                .classes
                .iter()
                .find(|c| {
                    acc += c.share;
                    pick < acc
                })
                .or(problem.classes.last())
                .cloned();
            let (name, latency, accuracy) = class
                .map_or((problem.app.clone(), problem.slo_latency_ms, problem.slo_accuracy), |c| {
                    (c.name, c.slo_latency_ms, c.slo_accuracy)
                });
            Query {
                class: name,
                slo_latency_ms: latency * rng.range(0.8, 1.2),
                slo_accuracy: (accuracy * rng.range(0.97, 1.03)).min(1.0),
                rate_rps: problem.demand_rps / n as f64 * rng.range(0.5, 1.5),
                difficulty: rng.range(0.8, 1.25),
                latency_scale: rng.range(0.85, 1.15),
            }
        })
        .collect()
}
