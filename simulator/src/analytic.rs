//! An analytic model of batch latency and throughput per variant × segment × batch, standing in for measured
//! profile tables where the project has none (the paper's model families have no public weights here).
//!
//! One process running batch `b` on a MIG instance of `c` compute slices takes
//!
//! ```text
//! cpu(b) = t_fixed + t_item · b                    (pre/post-processing, kernel launches: the GPU idles)
//! gpu(b) = w · (b / c + u)                         (w: ms·slice per item at saturation; u: the floor a small
//!                                                   batch pays because it cannot fill the instance)
//! ```
//!
//! With `k` MPS processes on the instance, the others' GPU work fills one's CPU gaps until the GPU saturates:
//!
//! ```text
//! latency(b, c, k) = max(cpu(b) + gpu(b), k · gpu(b)) · (1 + γ · (k − 1))      γ = 0.1 (MPS interference)
//! throughput       = k · b / latency
//! ```
//!
//! and the configuration exists only when `k · (context + weights + activations · b)` fits the instance's memory.
//! A share of `P`% of a whole GPU through MPS (`mps:P`, MIG off) is one process on c = 7·P/100 compute slices
//! with P% of its memory: the mapping the fit below was measured on (14% as 1g, 28% as 2g, … 100% as 7g).
//! Small instances waste less of the floor `u`, MPS hides the CPU share, larger batches amortise both: the
//! shapes that make spatial partitioning pay in the paper. One process alone measures t_fixed + w·u, t_item
//! and w; [`crate::apps`] fits them to bare ONNX Runtime on MPS shares of an H100 for the CNNs and detectors
//! (`docs/evaluation/measured`), and assumes them for GIT and TTS. The split of a batch's fixed time between
//! CPU (t_fixed) and the GPU's floor (u), which only matters for several MPS processes, the MPS interference γ
//! and the memory figures are assumptions: nothing measured co-running processes.

use jig_planner::profile::ProfileRow;
use jig_planner::spec::{MigProfile, SegmentKind};

/// Cost parameters of one model variant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelCost {
    /// Per-batch fixed CPU time, ms.
    pub t_fixed: f64,
    /// Per-item CPU time, ms.
    pub t_item: f64,
    /// GPU ms·slice per item at saturation.
    pub w: f64,
    /// Under-utilisation floor, in items per slice.
    pub u: f64,
    /// Weights, GB.
    pub weights_gb: f64,
    /// Activations per item, GB.
    pub activations_gb: f64,
}

/// CUDA context and runtime per process, GB.
const CONTEXT_GB: f64 = 0.5;
/// Latency growth per extra MPS process.
const MPS_INTERFERENCE: f64 = 0.1;
/// p95 over mean batch latency.
const P95_OVER_P50: f64 = 1.05;

/// What the analytic profile tables name as their device.
pub const DEVICE: &str = "analytic model of an H100 80GB";

impl ModelCost {
    /// Mean batch latency (ms) and throughput (req/s) on `kind`, or `None` when it does not fit in memory.
    pub fn predict(&self, kind: SegmentKind, batch: u32) -> Option<(f64, f64)> {
        let (c, k, memory_gb) = match kind {
            SegmentKind::Mig { profile, mps } => {
                (f64::from(profile.compute_slices()), f64::from(mps), f64::from(profile.memory_gb()))
            }
            SegmentKind::Mps { percent, processes } => {
                let share = f64::from(percent) / 100.0;
                (7.0 * share, f64::from(processes), f64::from(MigProfile::G7_80.memory_gb()) * share)
            }
            SegmentKind::Cpu { .. } => return None,
        };
        let b = f64::from(batch);
        if k * (CONTEXT_GB + self.weights_gb + self.activations_gb * b) > memory_gb {
            return None;
        }
        let cpu = self.t_fixed + self.t_item * b;
        let gpu = self.w * (b / c + self.u);
        let latency = (cpu + gpu).max(k * gpu) * (1.0 + MPS_INTERFERENCE * (k - 1.0));
        Some((latency, k * b / latency * 1000.0))
    }
}

/// The segment types the model covers: every MIG profile with 1–4 MPS processes.
pub fn segment_kinds() -> Vec<SegmentKind> {
    MigProfile::ALL.into_iter().flat_map(|profile| (1..=4).map(move |mps| SegmentKind::Mig { profile, mps })).collect()
}

/// Batch sizes 1, 2, 4 … 128, as in the paper.
pub const BATCH_SIZES: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// Profile rows for `slot`'s `variants` on every segment type and batch size that fits.
pub fn profile_rows(slot: &str, variants: &[(&str, ModelCost)]) -> Vec<ProfileRow> {
    profile_rows_on(slot, variants, &segment_kinds())
}

/// [`profile_rows`] on the segment types `kinds`.
pub fn profile_rows_on(slot: &str, variants: &[(&str, ModelCost)], kinds: &[SegmentKind]) -> Vec<ProfileRow> {
    let mut rows = Vec::new();
    for (name, cost) in variants {
        for &kind in kinds {
            for batch in BATCH_SIZES {
                if let Some((latency, throughput)) = cost.predict(kind, batch) {
                    rows.push(ProfileRow {
                        slot: slot.to_string(),
                        variant: name.to_string(),
                        segment: kind.name(),
                        batch,
                        p50_ms: latency,
                        p95_ms: latency * P95_OVER_P50,
                        throughput_rps: throughput,
                        device: DEVICE.to_string(),
                        cpu_ms: None,
                    });
                }
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESNET50: ModelCost =
        ModelCost { t_fixed: 1.0, t_item: 0.5, w: 2.3, u: 2.0, weights_gb: 0.1, activations_gb: 0.02 };

    /// A share of a whole GPU runs as the MIG instance of as many compute slices (and processes), within its
    /// memory: 100% as 7g.80gb, 57% as 4g within 1%; a share too small for a batch's memory has no row.
    #[test]
    fn an_mps_share_runs_as_the_mig_instance_of_its_compute() {
        let at = |kind, b| RESNET50.predict(kind, b);
        let whole = SegmentKind::Mig { profile: MigProfile::G7_80, mps: 1 };
        assert_eq!(at(SegmentKind::Mps { percent: 100, processes: 1 }, 8), at(whole, 8));
        // Served by four processes, as the whole GPU's MIG instance with four.
        let four = SegmentKind::Mig { profile: MigProfile::G7_80, mps: 4 };
        assert_eq!(at(SegmentKind::Mps { percent: 100, processes: 4 }, 8), at(four, 8));
        let (mps, mig) = (
            at(SegmentKind::Mps { percent: 57, processes: 1 }, 8).unwrap(),
            at(SegmentKind::Mig { profile: MigProfile::G4_40, mps: 1 }, 8).unwrap(),
        );
        assert!((mps.0 / mig.0 - 1.0).abs() < 0.01, "{mps:?} against {mig:?}");
        // 1% of 80 GB is 0.8 GB: the context and weights fit at batch 1, not 128 items of activations.
        assert!(at(SegmentKind::Mps { percent: 1, processes: 1 }, 1).is_some());
        assert!(at(SegmentKind::Mps { percent: 1, processes: 1 }, 128).is_none());
        assert!(at(SegmentKind::Cpu { cores: 4 }, 1).is_none());
    }

    #[test]
    fn small_instances_and_mps_pay_per_slice() {
        let per_slice = |p: MigProfile, k: u8, b: u32| {
            let (_, h) = RESNET50.predict(SegmentKind::Mig { profile: p, mps: k }, b).unwrap();
            h / f64::from(p.compute_slices())
        };
        assert!(per_slice(MigProfile::G1_10, 1, 8) > per_slice(MigProfile::G7_80, 1, 8));
        assert!(per_slice(MigProfile::G1_10, 2, 1) > per_slice(MigProfile::G1_10, 1, 1));
        assert!(per_slice(MigProfile::G7_80, 1, 64) > per_slice(MigProfile::G7_80, 1, 1));
        let huge = ModelCost { weights_gb: 9.6, ..RESNET50 };
        assert!(huge.predict(SegmentKind::Mig { profile: MigProfile::G1_10, mps: 1 }, 1).is_none());
    }
}
