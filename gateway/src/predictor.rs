//! IPA's load predictor (§4.4): the largest per-second load of the next 20 s, from the per-second load of the
//! last 120 s, by an LSTM run by ONNX Runtime. `scripts/ipa_predictor.py` trains it on generated traces at
//! set-up (`.jig/models/ipa-lstm.onnx`) and measures it against simpler predictors (EVALUATION.md, section 5):
//! SMAPE 9.5% against 9.9% for the largest load of the last 20 s, and short of the actual peak in 29% of
//! windows against 46%. The controller predicts the demand of apps planned by IPA with it.

use std::path::Path;

use jig_model_host::Tensor;
use jig_model_host::onnx::{Model, SessionOptions};

/// Seconds of per-second load the predictor reads.
pub const HISTORY_S: usize = 120;

/// The LSTM, loaded.
pub struct PeakPredictor {
    model: Model,
}

impl PeakPredictor {
    /// Load the model at `path` (one intra-op thread: a prediction is 120 small steps).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let model = Model::load("ipa-lstm", path, &SessionOptions { threads: 1, ..SessionOptions::default() })?;
        let fits = |specs: &[jig_model_host::onnx::TensorSpec]| specs.len() == 1;
        if !fits(model.inputs()) || !fits(model.outputs()) {
            anyhow::bail!("{} is not IPA's load predictor (one input `load`, one output)", path.display());
        }
        Ok(PeakPredictor { model })
    }

    /// The largest per-second load of the next 20 s, from the last [`HISTORY_S`] seconds' loads, oldest first.
    pub fn predict(&self, history: &[f64]) -> anyhow::Result<f64> {
        anyhow::ensure!(history.len() == HISTORY_S, "the predictor reads {HISTORY_S} s of load, not {}", history.len());
        let load: Vec<f32> = history.iter().map(|&r| r as f32).collect();
        let input = Tensor::from_f32(vec![1, HISTORY_S as u64], &load)?;
        let output = self.model.run(&[input])?;
        let peak = output
            .first()
            .filter(|t| t.dtype() == jig_model_host::DType::F32)
            .and_then(|t| t.data().get(..4))
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| anyhow::anyhow!("the predictor returned no f32 value"))?;
        Ok(f64::from(peak).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_predicted_peak_follows_the_load() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.jig/models/ipa-lstm.onnx");
        let predictor = PeakPredictor::load(&path).expect("set-up's predictor: run `make setup`");
        let steady = predictor.predict(&[50.0; HISTORY_S]).unwrap();
        assert!((45.0..=70.0).contains(&steady), "a steady 50 req/s: {steady}");
        let rising: Vec<f64> = (0..HISTORY_S).map(|s| 20.0 + s as f64 * 0.5).collect();
        let peak = predictor.predict(&rising).unwrap();
        assert!(peak > 60.0, "a ramp that ends at 79.5 req/s: {peak}");
        assert!(predictor.predict(&[1.0; 3]).is_err());
    }

    /// A held-out trace, made here rather than by the training script: a rate wandering around `base`, bursts
    /// of twice it for 30–90 s, and arrivals per second drawn around the rate (normal approximation).
    fn held_out(seconds: usize, base: f64, seed: u64) -> Vec<f64> {
        let mut rng = jig_policy::rng::SplitMix64::new(seed);
        let mut burst_until = 0;
        (0..seconds)
            .map(|t| {
                let x = t as f64;
                let mut rate = base * (1.0 + 0.3 * (x / 1300.0).sin() + 0.15 * (x / 410.0 + 1.0).sin());
                if t >= burst_until && rng.uniform() < 1.0 / 900.0 {
                    burst_until = t + 30 + (rng.uniform() * 60.0) as usize;
                }
                if t < burst_until {
                    rate *= 2.0;
                }
                (rate + rate.sqrt() * rng.normal()).round().max(0.0)
            })
            .collect()
    }

    #[test]
    fn on_a_held_out_trace_it_predicts_the_coming_peak_better_than_the_mean() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.jig/models/ipa-lstm.onnx");
        let predictor = PeakPredictor::load(&path).expect("set-up's predictor: run `make setup`");
        let load = held_out(2 * 3600, 40.0, 11);
        let smape = |pairs: &[(f64, f64)]| {
            100.0 * pairs.iter().map(|(p, a)| 2.0 * (p - a).abs() / (p.abs() + a.abs()).max(1e-9)).sum::<f64>()
                / pairs.len() as f64
        };
        let (mut lstm, mut mean) = (Vec::new(), Vec::new());
        for start in (0..load.len() - HISTORY_S - 20).step_by(30) {
            let history = &load[start..start + HISTORY_S];
            let peak = load[start + HISTORY_S..start + HISTORY_S + 20].iter().copied().fold(0.0, f64::max);
            lstm.push((predictor.predict(history).unwrap(), peak));
            mean.push((history[HISTORY_S - 5..].iter().sum::<f64>() / 5.0 * 1.05, peak));
        }
        let (lstm, mean) = (smape(&lstm), smape(&mean));
        assert!(lstm < 15.0, "SMAPE {lstm:.1}% on a held-out trace");
        assert!(lstm < mean, "the LSTM {lstm:.1}% against the mean of the last 5 s {mean:.1}%");
    }
}
