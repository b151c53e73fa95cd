//! The paper's three applications (§4.1, Figure 2) as planning specs, with analytic profiles: ResNet,
//! YOLOv5, EfficientNet and VGG fitted to measured H100 latencies, GIT and TTS assumed.
//!
//! Variants and accuracies follow Figure 2: ResNet 18/34/50/101/152 (top-1 70, 73, 76, 77, 78), GIT-base/large
//! (13.4, 14.4), YOLOv5 n/s/m/l/x (mAP 28, 37, 45, 49, 51), Glow-TTS/VITS (MOS 3.76, 4.38). Figure 2(b)'s
//! EfficientNet and VGG figures did not survive the paper's text extraction; torchvision's top-1 for
//! EfficientNet-B0…B4 and VGG-11/13/16/19 stand in. Multiplicative factors (detections per image) are
//! assumptions: about 2 cars and 0.5 people per traffic frame, fewer with the smaller detectors; one object per
//! AR frame. SLOs 700/650/1550 ms, SLO_a = 0.9, α = 1, β = 0.035, slack 5% (§4.4).

use std::collections::BTreeMap;

use crate::analytic::{self, ModelCost};
use jig_planner::ParseError;
use jig_planner::profile::ProfileRow;
use jig_planner::spec::{
    AppSpec, DemandSpec, EdgeSpec, Objective, PathSpec, PlanSpec, Resources, SegmentKind, SegmentSpec, TaskSpec,
    VariantSpec,
};

/// One of the paper's three applications (JigsawServe §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaperApp {
    /// Social media: every image classified (ResNet) and captioned (GIT).
    SocialMedia,
    /// Traffic analysis: objects detected (YOLOv5), then cars (EfficientNet) and people (VGG) classified.
    TrafficAnalysis,
    /// AR assistant: objects detected (YOLOv5), the scene captioned (GIT), the caption spoken (text to speech).
    ArAssistant,
}

/// A variant: name, accuracy, cost, factors to downstream tasks.
type VariantDef = (&'static str, f64, ModelCost, &'static [(&'static str, f64)]);

/// A model's latency constants fitted to its measured p50 on MPS shares of an H100, one process alone
/// (`scripts/fit_analytic.py docs/evaluation/measured/h100-mps-paper-models.csv`: median errors 2–9%); its
/// memory (weights, activations per item, GB) stays assumed.
const fn fitted(t_fixed: f64, t_item: f64, w: f64, u: f64, weights_gb: f64, activations_gb: f64) -> ModelCost {
    ModelCost { t_fixed, t_item, w, u, weights_gb, activations_gb }
}

const RESNET: [VariantDef; 5] = [
    ("resnet18", 70.0, fitted(0.171, 0.0, 0.3004, 2.0, 0.05, 0.01), &[]),
    ("resnet34", 73.0, fitted(0.614, 0.0, 0.4395, 2.0, 0.09, 0.01), &[]),
    ("resnet50", 76.0, fitted(0.0, 0.0002, 0.8328, 1.765, 0.10, 0.02), &[]),
    ("resnet101", 77.0, fitted(0.209, 0.0, 1.3034, 2.0, 0.18, 0.02), &[]),
    ("resnet152", 78.0, fitted(0.112, 0.0, 1.8715, 2.0, 0.24, 0.03), &[]),
];

/// GIT and the TTS models were not measured: their constants are assumptions, order-of-magnitude H100 figures
/// (GIT: a 70–120 ms autoregressive decode per batch).
const fn git(t_fixed: f64, w: f64, weights_gb: f64) -> ModelCost {
    ModelCost { t_fixed, t_item: 0.5, w, u: 2.0, weights_gb, activations_gb: 0.3 }
}

const GIT: [VariantDef; 2] = [
    ("git-base", 13.4, git(70.0, 25.0, 0.7), &[("tts", 1.0)]),
    ("git-large", 14.4, git(120.0, 60.0, 1.6), &[("tts", 1.0)]),
];

const YOLO_TRAFFIC: [VariantDef; 5] = [
    ("yolov5n", 28.0, fitted(0.0, 0.0162, 1.251, 0.956, 0.01, 0.08), &[("car", 1.80), ("person", 0.40)]),
    ("yolov5s", 37.0, fitted(0.0, 0.0459, 2.1431, 0.592, 0.03, 0.08), &[("car", 1.85), ("person", 0.45)]),
    ("yolov5m", 45.0, fitted(0.0, 0.0521, 4.7113, 0.481, 0.08, 0.08), &[("car", 1.90), ("person", 0.50)]),
    ("yolov5l", 49.0, fitted(0.0, 0.179, 6.8405, 0.4, 0.18, 0.08), &[("car", 1.95), ("person", 0.50)]),
    ("yolov5x", 51.0, fitted(0.0, 0.2639, 12.1338, 0.336, 0.35, 0.08), &[("car", 2.00), ("person", 0.50)]),
];

const YOLO_AR: [VariantDef; 5] = [
    ("yolov5n", 28.0, fitted(0.0, 0.0162, 1.251, 0.956, 0.01, 0.08), &[("caption", 1.0)]),
    ("yolov5s", 37.0, fitted(0.0, 0.0459, 2.1431, 0.592, 0.03, 0.08), &[("caption", 1.0)]),
    ("yolov5m", 45.0, fitted(0.0, 0.0521, 4.7113, 0.481, 0.08, 0.08), &[("caption", 1.0)]),
    ("yolov5l", 49.0, fitted(0.0, 0.179, 6.8405, 0.4, 0.18, 0.08), &[("caption", 1.0)]),
    ("yolov5x", 51.0, fitted(0.0, 0.2639, 12.1338, 0.336, 0.35, 0.08), &[("caption", 1.0)]),
];

const EFFICIENTNET: [VariantDef; 5] = [
    ("efficientnet-b0", 77.7, fitted(0.616, 0.0084, 0.5255, 2.0, 0.02, 0.02), &[]),
    ("efficientnet-b1", 78.6, fitted(0.56, 0.0056, 0.9007, 2.0, 0.03, 0.02), &[]),
    ("efficientnet-b2", 80.6, fitted(0.0, 0.01, 1.3429, 1.697, 0.04, 0.03), &[]),
    ("efficientnet-b3", 82.0, fitted(0.0, 0.0164, 2.2651, 1.043, 0.05, 0.04), &[]),
    ("efficientnet-b4", 83.4, fitted(0.0, 0.1308, 4.6132, 0.645, 0.08, 0.06), &[]),
];

const VGG: [VariantDef; 4] = [
    ("vgg11", 69.0, fitted(0.0, 0.0, 0.7985, 0.799, 0.5, 0.03), &[]),
    ("vgg13", 69.9, fitted(0.0, 0.0171, 1.2237, 0.532, 0.5, 0.04), &[]),
    ("vgg16", 71.6, fitted(0.0, 0.01, 1.4605, 0.552, 0.55, 0.04), &[]),
    ("vgg19", 72.4, fitted(0.0, 0.0121, 1.6781, 0.572, 0.57, 0.05), &[]),
];

const fn tts(t_fixed: f64, w: f64, weights_gb: f64) -> ModelCost {
    ModelCost { t_fixed, t_item: 1.0, w, u: 1.0, weights_gb, activations_gb: 0.05 }
}

const TTS: [VariantDef; 2] = [("glow-tts", 3.76, tts(8.0, 12.0, 0.1), &[]), ("vits", 4.38, tts(10.0, 20.0, 0.15), &[])];

/// The fitted cost of one of the measured model families by name (`resnet50`, `vgg16`, `yolov5s`,
/// `efficientnet-b0`, …): what other planners' evaluations (gpu-lets) run the paper's families with.
pub fn model_cost(name: &str) -> Option<ModelCost> {
    RESNET.iter().chain(&YOLO_TRAFFIC).chain(&EFFICIENTNET).chain(&VGG).find(|v| v.0 == name).map(|v| v.2)
}

impl PaperApp {
    /// All three.
    pub const ALL: [PaperApp; 3] = [Self::SocialMedia, Self::TrafficAnalysis, Self::ArAssistant];

    /// The app a command line names: `social`, `traffic` or `ar` (or their full names).
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        match s.to_ascii_lowercase().replace(['-', '_', ' '], "").as_str() {
            "social" | "socialmedia" => Ok(Self::SocialMedia),
            "traffic" | "trafficanalysis" => Ok(Self::TrafficAnalysis),
            "ar" | "arassistant" => Ok(Self::ArAssistant),
            _ => Err(ParseError(format!("unknown app `{s}` (expected social, traffic or ar)"))),
        }
    }

    /// Its full name, as plans and reports give it.
    pub fn name(self) -> &'static str {
        match self {
            Self::SocialMedia => "social-media",
            Self::TrafficAnalysis => "traffic-analysis",
            Self::ArAssistant => "ar-assistant",
        }
    }

    /// The paper's staleness (§4.4): 20 ms for social media and traffic analysis, 40 ms for the AR assistant,
    /// "in proportion to their end-to-end latency SLOs".
    pub fn staleness_ms(self) -> f64 {
        match self {
            Self::SocialMedia | Self::TrafficAnalysis => 20.0,
            Self::ArAssistant => 40.0,
        }
    }

    /// (task, slot, variants) in graph order, edges, paths with fractions, latency SLO.
    #[allow(clippy::type_complexity)]
    fn graph(
        self,
    ) -> (
        Vec<(&'static str, &'static [VariantDef])>,
        Vec<(&'static str, &'static str)>,
        Vec<(Vec<&'static str>, f64)>,
        f64,
    ) {
        match self {
            // Every image goes to both models: two one-task paths, equally weighted.
            Self::SocialMedia => (
                vec![("classify", &RESNET[..]), ("caption", &GIT[..])],
                vec![],
                vec![(vec!["classify"], 0.5), (vec!["caption"], 0.5)],
                700.0,
            ),
            // Detections fan out to cars and people, weighted by their expected counts (2 : 0.5).
            Self::TrafficAnalysis => (
                vec![("detect", &YOLO_TRAFFIC[..]), ("car", &EFFICIENTNET[..]), ("person", &VGG[..])],
                vec![("detect", "car"), ("detect", "person")],
                vec![(vec!["detect", "car"], 0.8), (vec!["detect", "person"], 0.2)],
                650.0,
            ),
            Self::ArAssistant => (
                vec![("detect", &YOLO_AR[..]), ("caption", &GIT[..]), ("tts", &TTS[..])],
                vec![("detect", "caption"), ("caption", "tts")],
                vec![(vec!["detect", "caption", "tts"], 1.0)],
                1550.0,
            ),
        }
    }

    /// The planning spec at `slices` and a demand of `demand_rps` (one window, so R = demand × 1.05), with the
    /// paper's β scaled to the slices ([`Objective::scaled_to`]).
    pub fn spec(self, slices: u32, demand_rps: f64) -> PlanSpec {
        let (tasks, edges, paths, slo) = self.graph();
        let is_social = self == Self::SocialMedia;
        PlanSpec {
            app: AppSpec {
                name: self.name().into(),
                slo_latency_ms: slo,
                slo_accuracy: 0.9,
                tasks: tasks
                    .iter()
                    .map(|(name, variants)| TaskSpec {
                        name: name.to_string(),
                        slot: Some(name.to_string()),
                        variants: variants
                            .iter()
                            .map(|(v, acc, _, factors)| VariantSpec {
                                name: v.to_string(),
                                accuracy: *acc,
                                // Social media has no TTS: drop GIT's factor to it.
                                factors: factors
                                    .iter()
                                    .filter(|_| !is_social)
                                    .map(|(t, f)| (t.to_string(), *f))
                                    .collect::<BTreeMap<_, _>>(),
                            })
                            .collect(),
                    })
                    .collect(),
                edges: edges.iter().map(|(a, b)| EdgeSpec { from: a.to_string(), to: b.to_string() }).collect(),
                paths: Some(
                    paths
                        .iter()
                        .map(|(p, f)| PathSpec { tasks: p.iter().map(|s| s.to_string()).collect(), fraction: *f })
                        .collect(),
                ),
                planner: Default::default(),
                classes: Vec::new(),
                staleness_ms: Some(self.staleness_ms()),
            },
            segments: analytic::segment_kinds().iter().map(|k| SegmentSpec { name: k.name(), slices: None }).collect(),
            resources: Resources { slices, ..Resources::default() },
            demand: DemandSpec { windows: vec![demand_rps], slack: None },
            objective: Objective::scaled_to(slices),
            ipa: Default::default(),
            compass: Default::default(),
            batch_sizes: None,
        }
    }

    /// Analytic profile rows for every task of the app.
    pub fn profile_rows(self) -> Vec<ProfileRow> {
        let (tasks, ..) = self.graph();
        tasks
            .iter()
            .flat_map(|(slot, variants)| {
                let costs: Vec<(&str, ModelCost)> = variants.iter().map(|(n, _, c, _)| (*n, *c)).collect();
                analytic::profile_rows(slot, &costs)
            })
            .collect()
    }

    /// The app on MPS shares of whole GPUs (`mps:P` for each of `shares`, MIG off) instead of MIG instances, as
    /// gpu-lets and Compass partition a GPU: its spec at `slices` and `demand_rps`, and analytic profile rows for
    /// those shares.
    pub fn on_mps(self, shares: &[u8], slices: u32, demand_rps: f64) -> (PlanSpec, Vec<ProfileRow>) {
        let kinds: Vec<SegmentKind> =
            shares.iter().map(|&percent| SegmentKind::Mps { percent, processes: 1 }).collect();
        let mut spec = self.spec(slices, demand_rps);
        spec.segments = kinds.iter().map(|k| SegmentSpec { name: k.name(), slices: None }).collect();
        let (tasks, ..) = self.graph();
        let rows = tasks
            .iter()
            .flat_map(|(slot, variants)| {
                let costs: Vec<(&str, ModelCost)> = variants.iter().map(|(n, _, c, _)| (*n, *c)).collect();
                analytic::profile_rows_on(slot, &costs, &kinds)
            })
            .collect();
        (spec, rows)
    }

    /// The validated problem with analytic profiles.
    pub fn problem(
        self,
        slices: u32,
        demand_rps: f64,
    ) -> Result<jig_planner::problem::Problem, jig_planner::error::PlanError> {
        let source = format!("{} (no measured tables for the paper's models)", analytic::DEVICE);
        jig_planner::problem::Problem::new(&self.spec(slices, demand_rps), &self.profile_rows(), &source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jig_planner::spec::{MigProfile, SegmentKind};
    use jig_policy::stats::quantile;

    /// The fitted constants predict the measurements they were fitted to (a MIG instance of the share's
    /// compute slices, one process): within 10% at the median and 60% at worst, for every model.
    #[test]
    fn fitted_models_predict_their_measurements() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/evaluation/measured/h100-mps-paper-models.csv");
        let text = std::fs::read_to_string(path).unwrap();
        let costs: BTreeMap<&str, ModelCost> =
            [&RESNET[..], &YOLO_TRAFFIC, &EFFICIENTNET, &VGG].into_iter().flatten().map(|v| (v.0, v.2)).collect();
        let mut errors: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for m in measurements(&text).unwrap_or_else(|e| panic!("{path}: {e}")) {
            let profile = match m.segment.as_str() {
                "mps:14" => MigProfile::G1_20,
                "mps:28" => MigProfile::G2_20,
                "mps:42" => MigProfile::G3_40,
                "mps:57" => MigProfile::G4_40,
                "mps:100" => MigProfile::G7_80,
                other => panic!("unexpected share {other}"),
            };
            let cost = costs.get(m.model.as_str()).unwrap_or_else(|| panic!("{} is measured but not fitted", m.model));
            let (predicted, _) = cost.predict(SegmentKind::Mig { profile, mps: 1 }, m.batch).unwrap();
            errors.entry(m.model).or_default().push((predicted / m.p50_ms - 1.0).abs());
        }
        assert_eq!(errors.len(), costs.len(), "every fitted model is measured");
        for (model, mut e) in errors {
            e.sort_by(f64::total_cmp);
            let (median, worst) = (quantile(&e, 0.5).unwrap(), e[e.len() - 1]);
            assert!(median < 0.10 && worst < 0.6, "{model}: median error {median:.2}, worst {worst:.2}");
        }
    }

    /// A row of the measurements the constants were fitted to (`scripts/fit_analytic.py` reads the same table).
    #[derive(serde::Deserialize)]
    struct Measured {
        model: String,
        segment: String,
        batch: u32,
        p50_ms: f64,
    }

    /// The measurements in `text` (CSV with a header; other columns ignored); an error names the bad row's line.
    fn measurements(text: &str) -> Result<Vec<Measured>, String> {
        let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
        let headers = reader.headers().map_err(|e| e.to_string())?.clone();
        let (mut record, mut rows) = (csv::StringRecord::new(), Vec::new());
        while reader.read_record(&mut record).map_err(|e| e.to_string())? {
            // csv's own `Position::line` miscounts after blank lines (BurntSushi/rust-csv#208): count to the
            // record's end instead.
            let read = &text.as_bytes()[..reader.position().byte() as usize];
            let line = read.trim_ascii_end().iter().filter(|&&b| b == b'\n').count() + 1;
            rows.push(record.deserialize(Some(&headers)).map_err(|e| match e.kind() {
                csv::ErrorKind::Deserialize { err, .. } => format!("line {line}: {err}"),
                _ => format!("line {line}: {e}"),
            })?);
        }
        Ok(rows)
    }

    #[test]
    fn a_malformed_measurement_names_its_line() {
        let text = "model,segment,batch,p50_ms\nresnet18,mps:100,1,0.845\n\nresnet18,mps:100,two,0.87\n";
        let err = measurements(text).err().expect("`two` is not a batch size");
        assert!(err.starts_with("line 4:"), "{err}");
        assert_eq!(measurements(&text.replace("two", "2")).unwrap().len(), 2);
    }
}
