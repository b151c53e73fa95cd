//! jig-planner's integration tests, one binary: each planner strategy against exhaustive search on random
//! problems, the plans it makes fitting the machine, and the errors bad input gets.

mod bad_input;
mod common;
mod compass_classes;
mod gpulet;
mod ipa_vs_exhaustive;
mod milp_vs_exhaustive;
mod mixed_machine;
mod plans_fit;
mod ppipe_vs_exhaustive;
mod uninformed_spaces;
