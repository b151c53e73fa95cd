//! The paper's three applications plan, place and re-check; the max-demand table (ignored: run it in release).

use clap::Parser;
use jig_planner::apps::PaperApp;
use jig_planner::cli::{PlanArgs, run};
use jig_planner::evaluate::evaluate;
use jig_planner::model::Features;
use jig_planner::{SolveOptions, plan, solve};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: PlanArgs,
}

fn cli(args: &[&str]) -> anyhow::Result<String> {
    run(&Cli::try_parse_from(std::iter::once("plan").chain(args.iter().copied()))?.args)
}

#[test]
fn paper_apps_plan_feasibly_and_place_on_28_slices() {
    for app in PaperApp::ALL {
        let problem = app.problem(28, 40.0).unwrap();
        let plan = plan(&problem, Features::ALL, &SolveOptions::default()).unwrap();
        assert!(plan.accuracy >= 0.9 - 1e-9 && plan.slices_used <= 28, "{}", plan.to_text());
        assert!(plan.placement.gpus <= 4 && plan.placement.unplaced.is_empty(), "{}", plan.to_text());
        assert_eq!(plan.solve.status, "optimal");
    }
}

#[test]
fn every_space_either_plans_feasibly_or_says_why() {
    let problem = PaperApp::TrafficAnalysis.problem(28, 100.0).unwrap();
    for f in Features::combinations() {
        match solve(&problem, f, &SolveOptions::default()) {
            Ok(s) => {
                let e = evaluate(&problem, &s.assignments);
                assert!(e.is_feasible(), "{f}: {:?}", e.violations);
            }
            Err(e) => assert!(e.to_string().starts_with("infeasible: "), "{f}: {e}"),
        }
    }
}

#[test]
fn the_cli_plans_an_app_and_rejects_nonsense() {
    let out = cli(&["--app", "ar", "--demand", "20", "--features", "A+S+T"]).unwrap();
    assert!(out.contains("plan for `ar-assistant` [A+S+T]") && out.contains("placement:"), "{out}");
    let json = cli(&["--app", "social", "--demand", "20", "--json"]).unwrap();
    assert!(json.trim_start().starts_with('['), "{json}");
    let each = cli(&["--app", "traffic", "--demand", "20", "--each"]).unwrap();
    assert!(each.contains("[Unopt]") || each.contains("plan for `traffic-analysis` [Unopt]"), "{each}");
    assert!(cli(&["--app", "nope"]).unwrap_err().to_string().contains("unknown app"));
    assert!(cli(&["--app", "ar", "--features", "X"]).unwrap_err().to_string().contains("unknown feature"));
    assert!(cli(&[]).is_err());
}

/// `cargo test -p jig-planner --release --test paper_apps -- --ignored --nocapture`
#[test]
#[ignore]
fn max_demand_table() {
    println!("{}", cli(&["--max-demand", "--app", "all"]).unwrap());
}
