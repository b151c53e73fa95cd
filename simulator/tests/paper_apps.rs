//! The paper's three applications plan, place and re-check.

use jig_planner::evaluate::evaluate;
use jig_planner::spec::Features;
use jig_planner::{SolveOptions, plan, solve};
use jig_sim::apps::PaperApp;

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
