//! Guard of Compass's per-query searches against its baselines (`jig simulate SPEC --searches`, planner
//! `query_search`; docs/evaluation/compass/2026-11-28/searches.txt): on the committed sign-reader spec and
//! measured profiles, 30 queries, seed 1, Compass's CAMO with its profiler serves more SLO goodput than
//! Vulcan-style BO and VideoStorm-style hill climbing, each matched by Compass's greedy scheduler, under both
//! deadlines and on both core counts; two ratios within ±15% of what was measured (simulated on measured
//! profiles: 1.42× over Vulcan at 15 s on 4 cores, 1.57× over VideoStorm at 5 s on 4 cores).

use jig_test_support::{jig, root};

/// (goodput on 8 cores, goodput on 4 cores, queries with a compliant plan) of the row for `search` at
/// `deadline` seconds.
fn row(text: &str, deadline: u32, search: &str) -> (f64, f64, usize) {
    let prefix = format!("{deadline} s");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix) && l.split_whitespace().nth(2) == Some(search))
        .unwrap_or_else(|| panic!("no `{search}` row at {deadline} s in\n{text}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    let number = |i: usize| cells[i].parse::<f64>().unwrap_or_else(|_| panic!("cell {i} of `{line}`"));
    let found = cells[3].split('/').next().and_then(|f| f.parse().ok()).expect("found column");
    (number(8), number(10), found)
}

#[test]
fn compass_serves_more_slo_goodput_than_vulcan_and_videostorm_under_both_deadlines() {
    let output = jig()
        .arg("simulate")
        .arg(root().join("docs/evaluation/compass/sign-reader.toml"))
        .arg("--profiles")
        .arg(root().join("examples/sign-reader/profiles.csv"))
        .args(["--searches", "--queries", "30", "--seed", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("8 cores") && text.contains("4 cores"), "{text}");
    for deadline in [5, 15] {
        let compass = row(&text, deadline, "Compass");
        assert_eq!(compass.2, 30, "Compass found a compliant plan for every query by {deadline} s");
        for base in ["Vulcan", "VideoStorm"] {
            let b = row(&text, deadline, base);
            assert!(compass.0 > b.0 && compass.1 > b.1, "{deadline} s: Compass {compass:?} against {base} {b:?}");
        }
    }
    let ratio = |deadline, base| row(&text, deadline, "Compass").1 / row(&text, deadline, base).1;
    let (vulcan, videostorm) = (ratio(15, "Vulcan"), ratio(5, "VideoStorm"));
    assert!((1.21..=1.63).contains(&vulcan), "Compass/Vulcan at 15 s on 4 cores: {vulcan:.2}\n{text}");
    assert!((1.33..=1.81).contains(&videostorm), "Compass/VideoStorm at 5 s on 4 cores: {videostorm:.2}\n{text}");
}
