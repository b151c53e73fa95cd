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

#[test]
fn a_re_plan_from_the_last_plan_has_a_plan_when_its_search_is_cut_short() {
    use jig_planner::solve_from;
    for app in PaperApp::ALL {
        let base = app.problem(28, 1.0).unwrap();
        let first = solve(&base.clone().with_demand(100.0, 28), Features::ALL, &SolveOptions::default()).unwrap();
        let grown = base.with_demand(110.0, 28);
        // Too short a search to prove anything: the previous plan, scaled up to the new demand, is the answer
        // at worst.
        let hurried = SolveOptions { time_limit_s: 0.05, ..SolveOptions::default() };
        let warm = solve_from(&grown, Features::ALL, &hurried, &first.assignments)
            .unwrap_or_else(|e| panic!("{}: {e}", app.name()));
        assert!(evaluate(&grown, &warm.assignments).is_feasible(), "{}", app.name());
        // Where it started: the first plan's types, their counts scaled up to serve the new demand.
        let start: Vec<_> = first
            .assignments
            .iter()
            .map(|a| {
                let h = grown
                    .configs
                    .iter()
                    .find(|c| (c.task, c.variant, c.segment, c.batch) == (a.task, a.variant, a.segment, a.batch))
                    .unwrap()
                    .throughput_rps;
                let rate_rps = a.rate_rps * 1.1;
                jig_planner::solution::Assignment {
                    instances: ((rate_rps / h) - 1e-9).ceil().max(1.0) as u32,
                    rate_rps,
                    ..*a
                }
            })
            .collect();
        // Objective (14): the search may trade slices for accuracy, never end below its start.
        let objective = |plan: &[jig_planner::solution::Assignment]| {
            let e = evaluate(&grown, plan);
            grown.objective.alpha * e.accuracy - grown.objective.beta * f64::from(e.slices)
        };
        // (A start that is no plan, one that breaks a constraint at the new demand, is no floor.)
        if evaluate(&grown, &start).is_feasible() {
            let (reached, started) = (objective(&warm.assignments), objective(&start));
            assert!(reached >= started - 1e-6, "{}: no worse than its start ({reached} < {started})", app.name());
        }
    }
}
