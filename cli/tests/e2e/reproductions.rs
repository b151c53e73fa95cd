//! Guards of the reproductions (EVALUATION.md): each checks a reproduction's ranking of methods and its ratio
//! within a stated band, on the committed specs and profiles, with the `jig` commands its script runs, so that a
//! change that reverses a result fails `make test`. The bands are the current results ± about 15%.

use std::path::Path;

use jig_test_support::{jig, root};

/// The sign reader's measured profiles, which the IPA and Compass reproductions plan on.
fn profiles() -> std::path::PathBuf {
    root().join("examples/sign-reader/profiles.csv")
}

/// Compass's classes' goodput (req/s) and the cores used, planned from `spec` on `cores` cores.
fn compass_plan(spec: &Path, cores: u32) -> (f64, u64) {
    let output = jig()
        .arg("plan")
        .arg(spec)
        .arg("--profiles")
        .arg(profiles())
        .args(["--slices", &cores.to_string(), "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let plans: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let plan = &plans[0];
    let served = plan["classes"].as_array().unwrap().iter().map(|c| c["served_rps"].as_f64().unwrap()).sum();
    (served, plan["slices_used"].as_u64().unwrap())
}

/// EVALUATION §7 (scripts/reproduce_compass.sh): query classes planned together serve more than each planned
/// alone on scarce cores: 1.96×, 2.52× and 1.43× on 4, 6 and 8 cores (2026-11-28 accuracies).
#[test]
fn compass_classes_planned_together_serve_more_than_each_alone_on_scarce_cores() {
    let dir = tempfile::tempdir().unwrap();
    let spec = std::fs::read_to_string(root().join("docs/evaluation/compass/sign-reader.toml")).unwrap();
    let (together, alone) = (dir.path().join("together.toml"), dir.path().join("alone.toml"));
    std::fs::write(&together, &spec).unwrap();
    std::fs::write(&alone, format!("{spec}\n[compass]\nalone = true\n")).unwrap();
    for (cores, low, high) in [(4, 1.67, 2.25), (6, 2.15, 2.9), (8, 1.2, 1.65)] {
        let ((g1, used), (g2, _)) = (compass_plan(&together, cores), compass_plan(&alone, cores));
        let ratio = g1 / g2;
        assert!((low..=high).contains(&ratio), "{cores} cores: together {g1} / alone {g2} = {ratio:.2}");
        assert!(used <= u64::from(cores));
    }
}

/// The `ipa` row of `jig simulate`: the share of the 32 cores used (%) and the accuracy drop (%).
fn ipa_simulated(dir: &Path, name: &str, ipa: &str) -> (f64, f64) {
    let spec = std::fs::read_to_string(root().join("docs/evaluation/ipa/sign-reader.toml")).unwrap();
    let head = &spec[..spec.find("[ipa]").expect("the spec has an [ipa] table")];
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, format!("{head}[ipa]\nthreshold_rps = 4\nbeta = 1\n{ipa}\n")).unwrap();
    let trace = dir.join("steady.csv");
    let rows: String = (0..8).map(|i| format!("{},60\n", i * 900)).collect();
    std::fs::write(&trace, format!("start_s,rps\n{rows}")).unwrap();
    let output = jig()
        .arg("simulate")
        .arg(&path)
        .arg("--profiles")
        .arg(profiles())
        .arg("--trace")
        .arg(&trace)
        .args(["--sample", "2000"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    let row = text.lines().find(|l| l.starts_with("ipa ")).unwrap_or_else(|| panic!("no `ipa` row in {text}"));
    let number = |i: usize| row.split_whitespace().nth(i).unwrap().trim_end_matches('%').parse::<f64>().unwrap();
    (number(1), number(2))
}

/// EVALUATION §5 (scripts/reproduce_ipa.sh), at 60 req/s steady and the paper's α = 2 (fixed before the run):
/// IPA holds the best pipeline accuracy on 9.0 cores where FA2-low (the lightest variants) holds 67% on 8.0 and
/// FA2-high (the heaviest) all of it on 13.8.
#[test]
fn ipa_is_more_accurate_than_fa2_low_for_a_few_more_cores_and_cheaper_than_fa2_high() {
    let dir = tempfile::tempdir().unwrap();
    let (ipa_cores, ipa_drop) = ipa_simulated(dir.path(), "ipa", "alpha = 2");
    let (low_cores, low_drop) = ipa_simulated(dir.path(), "fa2-low", "alpha = 2\nvariants = \"lightest\"");
    let (high_cores, high_drop) = ipa_simulated(dir.path(), "fa2-high", "alpha = 2\nvariants = \"heaviest\"");
    let (ipa, low, high) = (100.0 - ipa_drop, 100.0 - low_drop, 100.0 - high_drop);
    assert!(ipa >= 99.0, "IPA's accuracy {ipa}% of the best");
    assert!((57.0..=77.0).contains(&low), "FA2-low's accuracy {low}%");
    assert!(
        ipa - low >= 25.0 && ipa_cores <= low_cores * 1.3,
        "IPA {ipa}% on {ipa_cores}%, FA2-low {low}% on {low_cores}%"
    );
    assert!(high >= 99.0 && high_cores >= ipa_cores * 1.3, "FA2-high {high}% on {high_cores}%, IPA on {ipa_cores}%");
}

/// EVALUATION §8.2: PPipe's plan for ResNet-50 on an H200 and CPU cores (measured profiles, simulated) serves
/// 7.0% more than NP's and DART-r's in the load that keeps 99% of requests within its SLO.
#[test]
fn ppipe_serves_more_than_np_on_the_h200_resnet() {
    let spec = root().join("docs/benchmarks/2026-11-26-gpu-issue19/ppipe-resnet50.toml");
    let output = jig().arg("simulate").arg(&spec).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    let served = |scheme: &str| -> f64 {
        let row = text.lines().find(|l| l.split_whitespace().next() == Some(scheme));
        let row = row.unwrap_or_else(|| panic!("no `{scheme}` row in {text}"));
        row.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let (ppipe, np, dart) = (served("ppipe"), served("np"), served("dart-r"));
    let gain = ppipe / np;
    assert!((1.02..=1.12).contains(&gain), "PPipe {ppipe} against NP {np}: {gain:.3}");
    assert!(ppipe > dart, "PPipe {ppipe} against DART-r {dart}");
}

/// The `plans` and `serves` (req/s) columns of a `jig simulate` row for `scheduler`.
fn scheduler_rates(text: &str, scheduler: &str) -> (f64, f64) {
    let row = text.lines().find(|l| l.split_whitespace().next() == Some(scheduler));
    let row = row.unwrap_or_else(|| panic!("no `{scheduler}` row in {text}"));
    let number = |i: usize| row.split_whitespace().nth(i).unwrap().parse::<f64>().unwrap();
    (number(1), number(2))
}

/// EVALUATION §8.1: gpu-lets with measured interference against squishy bin packing on the five H200 scenarios
/// (measured profiles and interference, simulated): it serves −6.7% on average (+10.1% over the first four,
/// losing the traffic scenario), and plans 64.9% of the exhaustive ideal's rate.
#[test]
fn gpulets_with_interference_against_squishy_bin_packing_on_the_h200_scenarios() {
    let (mut served, mut planned) = (Vec::new(), Vec::new());
    for scenario in ["equal", "game", "long-only", "short-skew", "traffic"] {
        let spec = root().join(format!("docs/benchmarks/2026-11-26-gpu-issue19/gpulet-{scenario}.toml"));
        let output = jig().arg("simulate").arg(&spec).output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{scenario}: {text}{}", String::from_utf8_lossy(&output.stderr));
        let ((plans, serves), (_, sbp), (ideal, _)) =
            (scheduler_rates(&text, "gpulet+int"), scheduler_rates(&text, "sbp"), scheduler_rates(&text, "ideal"));
        served.push(serves / sbp - 1.0);
        planned.push(plans / ideal);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (all, first_four) = (mean(&served), mean(&served[..4]));
    assert!((-0.12..=-0.02).contains(&all), "served against sbp, five scenarios: {all:+.3} ({served:?})");
    assert!((0.05..=0.15).contains(&first_four), "served against sbp, the first four: {first_four:+.3}");
    assert!((0.55..=0.75).contains(&mean(&planned)), "planned against ideal: {planned:?}");
}

/// The columns of `jig`'s table row that starts with `name` (a space's, a scheduler's), numbers with their `%`
/// and `×` trimmed.
fn row_numbers(text: &str, name: &str) -> Vec<f64> {
    let row = text.lines().find(|l| l.split_whitespace().next() == Some(name));
    let row = row.unwrap_or_else(|| panic!("no `{name}` row in {text}"));
    row.split_whitespace().skip(1).map_while(|cell| cell.trim_end_matches(['%', '×']).parse().ok()).collect()
}

/// EVALUATION §1, JigsawServe's Figure 3 on the measured H100 table: the largest demand A+S+T serves on 840
/// slices is 3.56× Unopt's, the most of the eight spaces; S alone 1.30×.
#[test]
fn figure_3_a_s_t_serves_the_most_on_the_measured_table() {
    let profiles = root().join("docs/evaluation/measured/traffic-h100-mps.csv");
    let output = jig()
        .args(["plan", "--max-demand", "--app", "traffic", "--slices", "840", "--time-limit", "10", "--profiles"])
        .arg(profiles)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    let times = |space: &str| row_numbers(&text, space)[1];
    let spaces = ["S", "A", "T", "A+T", "S+T", "A+S"];
    assert!(spaces.iter().all(|s| times(s) < times("A+S+T")), "A+S+T serves the most:\n{text}");
    assert!((3.0..=4.1).contains(&times("A+S+T")), "A+S+T {}× Unopt\n{text}", times("A+S+T"));
    assert!((1.1..=1.5).contains(&times("S")), "S {}× Unopt\n{text}", times("S"));
}

/// EVALUATION §2, JigsawServe's Figure 4 for social media (calibrated model, a generated day, the paper's 20 ms
/// staleness): A+S+T holds 61% of the 28 slices with 0.2% violations, the fewest slices of the spaces that
/// serve; S+T and A+T pass 10% violations on more slices; A+S serves nothing.
#[test]
fn figure_4_a_s_t_serves_social_media_on_the_fewest_slices_within_its_slo() {
    let output =
        jig().args(["simulate", "--app", "social", "--bins", "288", "--compare", "--sample", "2000"]).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    // slices %, accuracy drop %, violations %.
    let (all, st, at, a_s) =
        (row_numbers(&text, "A+S+T"), row_numbers(&text, "S+T"), row_numbers(&text, "A+T"), row_numbers(&text, "A+S"));
    assert!((52.0..=70.0).contains(&all[0]) && all[2] < 1.0, "A+S+T {all:?}\n{text}");
    for other in [&st, &at] {
        assert!(other[0] > all[0] * 1.3 && other[2] > 10.0, "{other:?} against A+S+T {all:?}\n{text}");
    }
    assert_eq!(a_s[2], 100.0, "A+S serves nothing (Appendix B's slice budget)\n{text}");
}
