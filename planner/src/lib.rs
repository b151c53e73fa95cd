//! # jig-planner
//!
//! A pure library: from profiles (measured latency and throughput per model variant × segment × batch size),
//! a function graph with its latency and accuracy objectives, and the expected demand, it computes a plan —
//! which variant each task runs, with which maximum batch size, on which segments, how many instances — as
//! the JigsawServe MILP on HiGHS. It knows nothing of HTTP or WebAssembly.
//!
//! * [`profile`]: the profile tables `jig profile` writes and the planner reads.
//!
//! The MILP, its baselines and placement arrive with the planner work.

pub mod profile;
