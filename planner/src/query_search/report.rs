//! The comparison `jig simulate SPEC --searches` runs and prints: every query searched by each search under each
//! deadline, the plans found matched by the one greedy scheduler on each core count, beside an oracle that
//! knows every plan.

use std::fmt::Write as _;

use crate::error::PlanError;
use crate::problem::Problem;

use super::camo::{self, History};
use super::matching::{Candidate, Matching, greedy};
use super::profiler::Sampling;
use super::space::{Query, Space, queries};
use super::{SearchOutcome, videostorm, vulcan};

/// The paper's planning deadlines (§6.1): 5 s, Compass's own, and the baselines' relaxed 15 s.
pub const DEADLINES_S: [f64; 2] = [5.0, 15.0];

/// What to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// How many queries.
    pub queries: usize,
    /// Seed of the queries and the searches.
    pub seed: u64,
    /// Core counts the scheduler matches onto.
    pub cores: Vec<f64>,
    /// Planning deadlines, s.
    pub deadlines_s: Vec<f64>,
}

/// The three per-query searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// Vulcan-style BO of one utility.
    Vulcan,
    /// VideoStorm-style hill climbing.
    VideoStorm,
    /// Compass's CAMO with its profiler.
    Compass,
    /// CAMO with the baselines' profiler (fixed sampling, no prefix cache): the paper's "w/o SLO Profiler"
    /// ablation, printed after the three.
    CamoFixedProfiler,
}

impl Search {
    /// All three and the ablation, in the order printed.
    pub const ALL: [Search; 4] = [Search::Vulcan, Search::VideoStorm, Search::Compass, Search::CamoFixedProfiler];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Search::Vulcan => "Vulcan",
            Search::VideoStorm => "VideoStorm",
            Search::Compass => "Compass",
            Search::CamoFixedProfiler => "CAMO/fixed",
        }
    }
}

/// One search under one deadline: each query's outcome and each core count's matching.
#[derive(Debug, Clone)]
pub struct Run {
    /// The search.
    pub search: Search,
    /// The deadline, s.
    pub deadline_s: f64,
    /// Each query's outcome, in query order.
    pub outcomes: Vec<SearchOutcome>,
    /// (cores, what the scheduler admitted), in the settings' order.
    pub matchings: Vec<(f64, Matching)>,
}

/// The whole comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The app's name.
    pub app: String,
    /// How many plans a query has.
    pub plans: usize,
    /// The queries.
    pub queries: Vec<Query>,
    /// The settings it ran with.
    pub settings: Settings,
    /// Every (search, deadline), deadline-major.
    pub runs: Vec<Run>,
    /// (cores, the matching of every query's every compliant plan): the oracle's.
    pub oracle: Vec<(f64, Matching)>,
}

/// Search every query with every search under every deadline, and match the plans found.
pub fn compare(problem: &Problem, spec: &str, settings: &Settings) -> Result<Comparison, PlanError> {
    if settings.queries == 0 {
        return Err(PlanError::Input(format!("{spec}: --queries must be at least 1")));
    }
    let space = Space::new(problem, spec)?;
    let queries = queries(problem, settings.queries, settings.seed);
    let match_all = |candidates: &[Candidate]| -> Vec<(f64, Matching)> {
        settings.cores.iter().map(|&c| (c, greedy(candidates, c))).collect()
    };
    let mut runs = Vec::new();
    for &deadline_s in &settings.deadlines_s {
        for (s, search) in Search::ALL.into_iter().enumerate() {
            let mut history = History::default();
            let outcomes: Vec<SearchOutcome> = queries
                .iter()
                .enumerate()
                .map(|(q, query)| {
                    let seed = settings.seed.wrapping_mul(1_000_003).wrapping_add((q * Search::ALL.len() + s) as u64);
                    match search {
                        Search::Vulcan => vulcan::search(&space, query, deadline_s, seed),
                        Search::VideoStorm => videostorm::search(&space, query, deadline_s, seed),
                        Search::Compass | Search::CamoFixedProfiler => {
                            let profiler = if search == Search::Compass {
                                (Sampling::Adaptive, true)
                            } else {
                                (Sampling::Fixed, false)
                            };
                            let outcome = camo::search_profiled(&space, query, (deadline_s, seed), &history, profiler);
                            history.remember(&space, &outcome.observations);
                            outcome
                        }
                    }
                })
                .collect();
            let candidates = candidates(&queries, outcomes.iter().map(|o| o.compliant.iter().map(|c| c.truth.cores)));
            runs.push(Run { search, deadline_s, outcomes, matchings: match_all(&candidates) });
        }
    }
    let every = queries.iter().map(|q| {
        (0..space.len()).map(|p| space.truth(p, q)).filter(|t| q.compliant(t)).map(|t| t.cores).collect::<Vec<_>>()
    });
    let oracle = match_all(&candidates(&queries, every));
    Ok(Comparison { app: space.app.clone(), plans: space.len(), queries, settings: settings.clone(), runs, oracle })
}

/// The scheduler's candidates: each query's plans' cores, its rate the benefit.
fn candidates<P: IntoIterator<Item = f64>>(queries: &[Query], plans: impl Iterator<Item = P>) -> Vec<Candidate> {
    queries
        .iter()
        .zip(plans)
        .enumerate()
        .flat_map(|(q, (query, cores))| {
            cores.into_iter().map(move |cores| Candidate { query: q, benefit: query.rate_rps, cores })
        })
        .collect()
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| sum / n as f64)
}

impl Comparison {
    /// The run of `search` under `deadline_s`.
    pub fn run(&self, search: Search, deadline_s: f64) -> Option<&Run> {
        self.runs.iter().find(|r| r.search == search && r.deadline_s == deadline_s)
    }

    /// One line of goodput ratios, `a` over `b`, per core count.
    fn ratio_line(&self, out: &mut String, label: &str, a: (Search, f64), b: (Search, f64)) {
        let (Some(a), Some(b)) = (self.run(a.0, a.1), self.run(b.0, b.1)) else { return };
        let ratios: Vec<String> = a
            .matchings
            .iter()
            .zip(&b.matchings)
            .map(|((cores, ma), (_, mb))| {
                let r = if mb.goodput > 0.0 { format!("{:.2}x", ma.goodput / mb.goodput) } else { "inf".into() };
                format!("{cores} cores {r}")
            })
            .collect();
        let _ = writeln!(out, "  {label:<32} {}", ratios.join(", "));
    }

    /// The report `jig simulate --searches` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let n = self.queries.len();
        let demand: f64 = self.queries.iter().map(|q| q.rate_rps).sum();
        let mut classes: Vec<(&str, usize)> = Vec::new();
        for q in &self.queries {
            match classes.iter_mut().find(|(c, _)| *c == q.class) {
                Some(entry) => entry.1 += 1,
                None => classes.push((&q.class, 1)),
            }
        }
        let mix: Vec<String> = classes.iter().map(|(c, k)| format!("{k} {c}")).collect();
        let _ = writeln!(
            out,
            "Compass against Vulcan and VideoStorm, each with Compass's greedy matching: `{}`, {n} queries ({}; seed {}), {} plans each, {demand:.1} req/s in all",
            self.app,
            mix.join(", "),
            self.settings.seed,
            self.plans
        );
        let _ = writeln!(
            out,
            "simulated on measured profiles: planning clock = simulated profiling + measured search CPU\n"
        );
        let cores: Vec<String> = self.settings.cores.iter().map(|c| format!("{c} cores: req/s (admitted)")).collect();
        let _ = writeln!(
            out,
            "{:<9} {:<11} {:>6} {:>13} {:>17} {:>9}  {}",
            "deadline",
            "search",
            "found",
            "first plan s",
            "planning s (cpu)",
            "profiled",
            cores.join("  ")
        );
        for run in &self.runs {
            let found = run.outcomes.iter().filter(|o| o.first_compliant_s.is_some()).count();
            let first = mean(run.outcomes.iter().filter_map(|o| o.first_compliant_s));
            let planning = mean(run.outcomes.iter().map(|o| o.planning_s)).unwrap_or(0.0);
            let cpu = mean(run.outcomes.iter().map(|o| o.planning_s - o.simulated_s)).unwrap_or(0.0);
            let profiled = mean(run.outcomes.iter().map(|o| o.profiled as f64)).unwrap_or(0.0);
            let goodput: Vec<String> = run
                .matchings
                .iter()
                .map(|(c, m)| {
                    format!(
                        "{:>w$}",
                        format!("{:.1} ({})", m.goodput, m.admitted.len()),
                        w = format!("{c} cores: req/s (admitted)").len()
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "{:<9} {:<11} {:>6} {:>13} {:>17} {:>9.1}  {}",
                format!("{} s", run.deadline_s),
                run.search.name(),
                format!("{found}/{n}"),
                first.map_or("-".into(), |f| format!("{f:.2}")),
                format!("{planning:.2} ({cpu:.2})"),
                profiled,
                goodput.join("  ")
            );
        }
        let oracle: Vec<String> =
            self.oracle.iter().map(|(_, m)| format!("{:.1} ({})", m.goodput, m.admitted.len())).collect();
        let _ =
            writeln!(out, "{:<9} {:<11} every plan known, matched the same way: {}", "-", "oracle", oracle.join("  "));
        let _ = writeln!(out, "\nSLO goodput ratios:");
        let deadlines = &self.settings.deadlines_s;
        for &deadline in deadlines {
            for base in [Search::Vulcan, Search::VideoStorm] {
                let label = format!("{deadline} s  Compass/{}", base.name());
                self.ratio_line(&mut out, &label, (Search::Compass, deadline), (base, deadline));
            }
        }
        // The paper's headline (§6.2): Compass at its own 5 s against the baselines given 15 s.
        if let (Some(&short), Some(&long)) = (deadlines.first(), deadlines.last()) {
            for base in [Search::Vulcan, Search::VideoStorm].into_iter().filter(|_| short < long) {
                let label = format!("Compass {short} s / {} {long} s", base.name());
                self.ratio_line(&mut out, &label, (Search::Compass, short), (base, long));
            }
        }
        out
    }
}
