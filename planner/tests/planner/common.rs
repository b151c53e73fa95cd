//! A linear pipeline for the strategies' property tests: stages `a` → `b` → `c`, profiled on 1, 2 and 4 cores
//! at batches 1, 2 and 4.

use jig_planner::profile::ProfileRow;
use jig_planner::spec::{EdgeSpec, SegmentSpec, TaskSpec, VariantSpec};

pub const TASKS: [&str; 3] = ["a", "b", "c"];
pub const CORES: [u32; 3] = [1, 2, 4];
pub const BATCHES: [u32; 3] = [1, 2, 4];

/// The tasks, edges, segments and profile rows of a chain: per stage, per variant, (accuracy, factor to the
/// next stage); `profile` per (stage, variant), stage-major, the batch-1 latency (ms) and throughput (req/s)
/// on one core. More cores run a batch faster (sublinearly); a larger batch takes longer and serves more.
pub fn chain(
    variants: &[Vec<(f64, f64)>],
    profile: &[(f64, f64)],
) -> (Vec<TaskSpec>, Vec<EdgeSpec>, Vec<SegmentSpec>, Vec<ProfileRow>) {
    let n = variants.len();
    let tasks = variants
        .iter()
        .enumerate()
        .map(|(t, vs)| TaskSpec {
            name: TASKS[t].into(),
            slot: None,
            variants: vs
                .iter()
                .enumerate()
                .map(|(v, &(accuracy, factor))| VariantSpec {
                    name: format!("v{v}"),
                    accuracy,
                    factors: (t + 1 < n).then(|| (TASKS[t + 1].to_string(), factor)).into_iter().collect(),
                })
                .collect(),
        })
        .collect();
    let mut rows = Vec::new();
    for (t, vs) in variants.iter().enumerate() {
        for v in 0..vs.len() {
            let (ms, rps) = profile[t * vs.len() + v];
            for cores in CORES {
                for batch in BATCHES {
                    let latency = ms * f64::from(batch).powf(0.8) / f64::from(cores).powf(0.7);
                    rows.push(ProfileRow {
                        slot: TASKS[t].into(),
                        variant: format!("v{v}"),
                        segment: format!("cpu:{cores}"),
                        batch,
                        p50_ms: latency,
                        p95_ms: latency,
                        throughput_rps: rps * f64::from(batch).powf(0.2) * f64::from(cores).powf(0.7),
                        device: "test".into(),
                        cpu_ms: None,
                    });
                }
            }
        }
    }
    let edges = (1..n).map(|t| EdgeSpec { from: TASKS[t - 1].into(), to: TASKS[t].into() }).collect();
    let segments = CORES.iter().map(|c| SegmentSpec { name: format!("cpu:{c}"), slices: None }).collect();
    (tasks, edges, segments, rows)
}
