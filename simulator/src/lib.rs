//! # jig-sim
//!
//! What jig's planner is judged on, beyond one machine: the paper's applications, demand traces, and a
//! discrete-event simulation of plans under a trace (JigsawServe §4–5), on the runtime's own serving policy
//! (`jig-policy`).
//!
//! * [`apps`]: the paper's three applications (social media, traffic analysis, AR assistant), their specs and
//!   profile tables from [`analytic`], an analytic latency/throughput model of their model families.
//! * [`trace`]: demand traces, read from CSV or generated (a diurnal day).
//! * [`simulate`]: re-planned plans run under a trace, with each bin's slices, violations, accuracy drop and
//!   latency; rendered as text or SVG (Figure 4).
//! * [`ppipe`]: PPipe's plans run by its reservation scheduler under Poisson arrivals: SLO attainment and the
//!   largest load served at 99%.
//! * [`gpulet`]: gpu-lets' schedules served in duty cycles under Poisson arrivals: each model's violations.

#![deny(missing_docs)]

pub mod analytic;
pub mod apps;
pub mod gpulet;
pub mod ppipe;
pub mod simulate;
pub mod trace;
