//! The profiler's measurement: latency and throughput of one model on one segment for batch sizes 1, 2, 4, …
//! (`jig profile` drives it over a bundle's variants and segments and writes the table the planner reads).

use std::time::{Duration, Instant};

use crate::instance::Executor;
use crate::onnx::{ModelError, TensorSpec};
use crate::{DType, Tensor};

/// How far and how long to measure.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The largest batch tried (batches double from 1 up to it).
    pub max_batch: u32,
    /// Untimed runs before measuring each batch size.
    pub warmup: usize,
    /// Timed runs per batch size.
    pub runs: usize,
    /// Stop growing the batch once a batch's p95 latency exceeds this.
    pub max_latency: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { max_batch: 128, warmup: 3, runs: 20, max_latency: Duration::from_secs(2) }
    }
}

/// One measured batch size.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub batch: u32,
    pub p50: Duration,
    pub p95: Duration,
    /// Rows per second, batches run back to back.
    pub throughput: f64,
}

/// Why the batch stopped growing before `max_batch`, if it did.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    Latency { batch: u32, p95: Duration },
    Failed { batch: u32, detail: String },
}

/// Measure model `name` on batches of doubling size, run by `executor` (a model in this process, or a worker
/// process on a GPU segment); `progress` sees each point as it is measured. A failure at batch 1 is an error;
/// a failure at a larger batch (memory running out) ends the sweep there.
pub fn sweep(
    executor: &dyn Executor,
    name: &str,
    shapes: &[Option<Vec<u64>>],
    settings: &Settings,
    mut progress: impl FnMut(&Point),
) -> Result<(Vec<Point>, Option<Stop>), String> {
    let mut points = Vec::new();
    let mut batch = 1u32;
    // A model with an input that has no batch dimension is served one request per batch (see `instance`).
    let max_batch =
        if executor.inputs().iter().all(crate::onnx::TensorSpec::batchable) { settings.max_batch } else { 1 };
    while batch <= max_batch.max(1) {
        let inputs = sample_inputs(name, executor.inputs(), shapes, u64::from(batch)).map_err(|e| e.to_string())?;
        let measured = (0..settings.warmup).try_for_each(|_| executor.execute(&inputs).map(drop)).and_then(|()| {
            let mut times: Vec<Duration> = Vec::with_capacity(settings.runs);
            for _ in 0..settings.runs.max(1) {
                let started = Instant::now();
                executor.execute(&inputs)?;
                times.push(started.elapsed());
            }
            Ok(times)
        });
        let mut times = match measured {
            Ok(times) => times,
            Err(e) if batch == 1 => return Err(e),
            Err(detail) => return Ok((points, Some(Stop::Failed { batch, detail }))),
        };
        times.sort();
        let total: Duration = times.iter().sum();
        let point = Point {
            batch,
            p50: times[times.len() / 2],
            p95: times[((times.len() * 95).div_ceil(100)).saturating_sub(1)],
            throughput: f64::from(batch) * times.len() as f64 / total.as_secs_f64(),
        };
        progress(&point);
        let p95 = point.p95;
        points.push(point);
        if p95 > settings.max_latency && batch < max_batch {
            return Ok((points, Some(Stop::Latency { batch, p95 })));
        }
        batch *= 2;
    }
    Ok((points, None))
}

/// Inputs of `rows` rows for `specs`: dynamic dimensions other than the batch come from `shapes` (one item's
/// shape per input, without the batch dimension), else 1. Values are a fixed pattern.
pub fn sample_inputs(
    model: &str,
    specs: &[TensorSpec],
    shapes: &[Option<Vec<u64>>],
    rows: u64,
) -> Result<Vec<Tensor>, ModelError> {
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let item = shapes.get(i).cloned().flatten();
            let mut shape = Vec::with_capacity(spec.shape.len());
            for (d, dim) in spec.shape.iter().enumerate() {
                shape.push(match (d, dim, &item) {
                    (0, _, _) if spec.batchable() => rows,
                    (_, _, Some(item)) if spec.batchable() => *item.get(d - 1).ok_or_else(|| ModelError::Input {
                        model: model.into(),
                        detail: format!(
                            "the profiling shape {item:?} for input `{}` has too few dimensions",
                            spec.name
                        ),
                    })?,
                    (_, Some(fixed), _) => *fixed,
                    (_, None, _) => 1,
                });
            }
            let count: u64 = shape.iter().product();
            let data: Vec<u8> = match spec.dtype {
                DType::F32 => (0..count).flat_map(|k| ((k % 17) as f32 / 17.0).to_le_bytes()).collect(),
                DType::I64 => (0..count).flat_map(|k| ((k % 7) as i64 + 1).to_le_bytes()).collect(),
                dtype => vec![1; count as usize * dtype.size()],
            };
            Tensor::new(spec.dtype, shape, data)
                .map_err(|e| ModelError::Input { model: model.into(), detail: e.to_string() })
        })
        .collect()
}
