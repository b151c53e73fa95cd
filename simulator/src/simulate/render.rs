//! Simulations rendered for people: the runs side by side as text ([`summary`]), what each run's plans chose
//! (Figure 5, [`configurations`]), and an SVG of the bins (Figure 4, [`svg`]).

use std::collections::BTreeMap;

use super::report::{BinReport, Simulation};
use crate::trace::Trace;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::report::Instances;

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
            surges: 0,
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
}
