//! # jig-planner
//!
//! A pure library (no HTTP, WebAssembly or ONNX Runtime): from profiles (p95 latency and throughput per model
//! variant × segment × batch size), a function graph with its latency and accuracy objectives, and the expected
//! demand, it decides which variant each task runs, on which segment type, with which maximum batch size and how
//! many instances, so that the objectives hold at the lowest cost, and places the instances on GPUs and CPU
//! hosts. It is the JigsawServe MILP (§3.2) on HiGHS, with the paper's A/S/T baselines, beside IPA's, Compass's,
//! gpu-lets' and PPipe's planners ([`strategy`] picks one per problem).
//!
//! ## Modules
//!
//! * [`spec`]: the input spec, the [`Strategy`] its `app.planner` names, and its segment types
//!   ([`spec::SegmentKind`], whose names `jig_policy::segment` parses for the runtime too); [`profile`]: the CSV
//!   profile table `jig profile` writes.
//! * [`problem`]: the validated problem (graph checked and ordered, paths and weights, profiles joined).
//! * [`solution`]: what every strategy returns ([`solution::Solved`]: its [`solution::Assignment`]s, Compass's
//!   class plans, PPipe's pipelines) and how they run HiGHS ([`SolveOptions`]).
//! * [`strategy`]: which planner plans a problem (`app.planner`): the one entry point, [`solve`] /
//!   [`solve_from`], that the deploy path, the controller and the simulator call.
//! * [`milp`]: the formulation below, solved by `good_lp` + HiGHS; when no plan exists, it names the binding
//!   constraint by solving relaxations.
//! * [`ipa`]: IPA's integer program; [`compass`]: Compass's, over query classes; [`ppipe`]: PPipe's, over a
//!   model cut into blocks and pools of segment classes; [`gpulet`]: gpu-lets' elastic partitioning of GPUs
//!   into MPS shares, with Nexus's squishy bin packing as its baseline (their module docs; each `app`
//!   submodule reads an app's problem as that strategy plans it); [`interference`]: gpu-lets' measured
//!   interference, which a problem carries to the `gpulet` strategy.
//! * [`baselines`]: the A/S/T switches and Appendix B's static budgets.
//! * [`evaluate`]: an independent evaluator of equations (1)–(14); [`exhaustive`]: exhaustive search for tests.
//! * [`placement`]: MIG instances onto GPUs by the plan's layouts (or the cheapest packing into valid
//!   layouts), MPS shares and CPU core ranges.
//! * [`plan`](mod@plan): solve → re-check → place → report, and the output [`Plan`].
//! * [`max_demand`]: the Figure 3 bisection: the largest demand a configuration can serve.
//! * [`mig_parted`]: a placement's MIG layout as an `nvidia-mig-parted` config, and the instances a machine lacks.
//! * [`query_search`]: Compass's per-query searches (CAMO) against Vulcan's and VideoStorm's under planning
//!   deadlines, on a simulated profiler, each matched by Compass's greedy scheduler (`jig simulate --searches`).
//!
//! Imports go one way, so that no module imports one that imports it back: `error`, `spec`, `profile`,
//! `placement`, `interference` and `solution` import no strategy; `problem`, `evaluate` and `baselines` build on
//! them; each strategy's module (`milp`, `ipa`, `compass`, `gpulet`, `ppipe`) on those; `strategy`, which
//! dispatches to every strategy, on those; `plan` and `max_demand` on `strategy`. Items are named where they
//! live (`solution::Solved`, `interference::MeasuredInterference`, `spec::Strategy`, …), or by the crate-root
//! re-exports below, and by no other path.
//!
//! The paper's applications, demand traces and the discrete-event simulation of plans live in `jig-sim`; the
//! `jig plan` command in the `jig` binary.
//!
//! ## Inputs
//!
//! A spec file, TOML (or JSON when named `*.json`; same fields):
//!
//! ```toml
//! batch_sizes = [1, 2, 4, 8]          # optional: all the profile table has
//!
//! [app]
//! name = "traffic"
//! slo_latency_ms = 650                 # SLO_l
//! slo_accuracy = 0.9                   # SLO_a, a fraction of the best achievable A_obj
//! edges = [{ from = "detect", to = "car" }]
//! paths = [{ tasks = ["detect", "car"], fraction = 1.0 }]   # optional: every root-to-sink path, f_p ∝ Π F
//! staleness_ms = 20                    # optional: stale after L̂ + this; the task's SLO share by default
//! planner = "jigsaw"                  # optional: `jigsaw`, `ipa`, `compass`, `gpulet`, `ppipe` (Strategy)
//! classes = [{ name = "fast", slo_latency_ms = 300, slo_accuracy = 0.9, share = 0.5 }]   # compass only
//!
//! [[app.tasks]]
//! name = "detect"
//! slot = "yolo"                        # optional: the profile table's slot; the task name by default
//! variants = [
//!   { name = "yolov5n", accuracy = 28, factors = { car = 1.8 } },   # A(t,v); F(t,v,t′), 1 when absent
//!   { name = "yolov5x", accuracy = 51, factors = { car = 2.0 } },
//! ]
//!
//! [[app.tasks]]
//! name = "car"
//! variants = [{ name = "effnet-b0", accuracy = 77.7 }]
//!
//! [[segments]]                         # segment types; names match the profile table's `segment`
//! name = "mig:1g.10gb:2"               # MIG profile : MPS processes (1–4), mps:PERCENT[xK] or cpu:CORES
//! slices = 1                           # optional: s_n; see MigProfile::effective_slices
//!
//! [resources]
//! slices = 28                          # S_avail (GPU slices, or cores for cpu segments)
//! cores_per_host = 16                  # optional, for placing cpu segments
//! cpu_cores = 8                        # optional: at most this many cores in cpu segments
//! gpu_slices = 21                      # optional: at most this many slices in GPU segments
//! mig_instances = { "3g.40gb" = 2 }    # optional: the MIG instances that exist; a plan holds no more
//!
//! [demand]
//! windows = [40, 42, 45, 41, 44]       # recent req/s; R = mean of the last 5 × (1 + slack)
//! slack = 0.05                         # optional
//!
//! [objective]                          # optional: α, β of (14)
//! alpha = 1.0
//! beta = 0.035
//!
//! [ipa]                                # optional, `planner = "ipa"` (ipa.rs): objective (9) and Eq. 1
//! alpha = 2
//! beta = 1
//! delta = 1e-6
//! threshold_rps = 4
//! variants = "switch"                  # or "lightest" (FA2-low), "heaviest" (FA2-high)
//! replicas = 0                         # N > 0: fixed per stage (RIM)
//!
//! [compass]                            # optional, `planner = "compass"` (compass.rs)
//! alone = false                        # true: each class planned alone, Compass's baseline
//! ```
//!
//! and the profile table ([`profile`]): `slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device`.
//! L(t,v,s,b) is `p95_ms`, H(t,v,s,b) is `throughput_rps` (for `mig:GPU:PROFILE:K`, of all K processes
//! together; an `mps:GPU:PERCENT` share alone as one of the most processes of its size measured together, where
//! the table has them: [`profile::as_packed`]). A missing (segment, batch) row means the configuration is
//! unavailable (e.g. out of memory); a variant with no row on any declared segment type is an error.
//!
//! ## The formulation
//!
//! Instance types k = (t, v, s, b) with L_k, H_k, slice cost s_k; a_k = A(t,v)/A(t,v*) the accuracy normalised
//! by the task's best variant v*. Variables: M_k ∈ ℤ≥0 (instances), N_k ∈ {0,1}, x_k ≥ 0 (req/s routed to
//! type k: the *served-rate flow*), ℓ_t ≥ 0.
//!
//! ```text
//! (1)      N_k ≤ M_k ≤ U_k·N_k                       U_k = min(⌊S_t/s_k⌋, ⌈R̂max(t)/H_k⌉)
//! (2)      ℓ_t ≥ L_k·N_k                  ∀k ∈ t
//! (3)      Σ_{t∈p} 2·ℓ_t ≤ SLO_l          ∀p
//! (6)      x_k ≤ H_k·M_k
//! (4)(5)   Σ_{k∈t} x_k = R                          t a root
//!          Σ_{k∈t} x_k = Σ_{t′∈P(t)} Σ_{k′∈t′} F(t′,v_k′,t)·x_k′    otherwise
//! (7)(8)   S = Σ_k s_k·M_k − Σ_L o_L·y_L ≤ S_avail
//! (fit)    Σ_{k on profile p} M_k = Σ_L c_L(p)·y_L   ∀ MIG profile p,     Σ_L y_L ≤ ⌈S_avail/7⌉
//! (10)–(13) 1 − Σ_t G_t·ε_t ≥ SLO_a,       ε_t = Σ_{k∈t} x_k·(1 − a_k) / R̂min(t)
//! (14)     max α·(1 − Σ_t G_t·ε_t) − β·S
//! ```
//!
//! (fit) is jig's, not the paper's: y_L ∈ ℤ≥0 counts the GPUs that take MIG layout L, one of the 77 valid
//! layouts of an 80 GB H100, and of every model with its six shapes (A100 40GB, H100 NVL, H200:
//! `jig_policy::mig::layouts`, c_L(p) its instances of profile p), so the MIG
//! instances of every plan pack onto the GPUs there are, and placement puts them where the layouts say. The
//! paper prices an instance by the slices its memory blocks (`MigProfile::effective_slices`: 3g.40gb as 4),
//! which prices a GPU of 4g.40gb + 3g.40gb at 8; o_L = 1 for such a layout gives the GPU back its true 7.
//!
//! with g_p = f_p·Π_{t∈p} A(t,v*) / A_max (so Σ_p g_p = 1 and A_obj = Σ_p g_p·Π_{t∈p} â(t), â(t) = Â(t)/A(t,v*)),
//! G_t = Σ_{p∋t} g_p, and R̂min(t), R̂max(t) the demand at t propagated with the smallest, resp. largest,
//! factors of the admitted variants.
//!
//! Linearisations and their errors:
//!
//! * **(1)** exact (N_k ≤ M_k ≤ U_k·N_k); U_k is a valid bound: more instances of one type than cover the
//!   largest possible demand, or than the slices allow, are never needed.
//! * **(2) max**: exact. ℓ_t appears only in (3)'s ≤ rows, so any feasible ℓ_t ≥ L̂(t) and the feasible set
//!   of (M, N, x) is exactly the paper's. A task that must serve (R̂min(t) > 0) also has ℓ_t ≥ min_{k∈t} L_k, a
//!   bound every plan meets but the LP relaxation (fractional N_k) does not see: it tightens (3), and the AR
//!   assistant's re-plans at 28 slices take a quarter less time (BENCHMARKS.md, "Re-plans").
//! * **(4)–(6) demand × factor**: exact, with served-rate flows. The paper's F̂ (4) sums F over active instance
//!   types (N); we read it as what Table 2 calls it, the *average* factor, weighted by the requests each
//!   instance type serves; then R̂(t)·F̂(t,t′) = Σ_k F_k·x_k is linear. Likewise Ĥ in (9)–(10) is the served
//!   rate x_k ≤ M_k·H_k rather than the capacity M_k·H_k, so idle head-room of a cheap variant does not count as
//!   served requests; the plan states each entry's rate and the router splits traffic in those proportions.
//!   [`Weighting::Literal`] reads both as printed, exactly: R̂(t′) = Σ_t R̂(t)·Σ_k F_k·N_k with the products
//!   R̂(t)·N_k linearised by their binary factor, and Ĥ = M·H by routing each task's requests in proportion to
//!   its types' capacities (x_k = u_t·H_k·M_k, the product exact over M_k's binary digits), so the rows below
//!   hold unchanged. Its re-plans start cold.
//! * **(10) ratio**: Â(t) = Σ x_k·A_k / R̂(t); R̂(t) depends on upstream variant choices, so the loss
//!   ε_t = 1 − â(t) is over-estimated with R̂min(t) ≤ R̂(t) in the denominator (exact when upstream factors
//!   do not depend on the variant, e.g. at roots). Error: ε_t·(1 − R̂min/R̂) ≤ ε_t·(1 − F_min/F_max) along the
//!   way. Where R̂min(t) = 0, ε_t ≥ (1 − a_k)·N_k (the worst active variant's loss) instead.
//! * **(11) product along paths**: Π_{t∈p}(1 − ε_t) ≥ 1 − Σ_{t∈p} ε_t (Weierstrass), so A_obj ≥
//!   1 − Σ_t G_t·ε_t. Error per path ≤ Σ_{i<j} ε_i·ε_j ≤ (d−1)/(2d)·(Σ_{t∈p} ε_t)² for depth d: at most 0.005
//!   when a path loses 10% accuracy, 0 for one-task paths or without accuracy scaling.
//!
//! Both approximations are conservative: the true A_obj of a returned plan is at least the MILP's value (the
//! plan reports both), so every plan meets SLO_a; a plan whose exact accuracy just meets SLO_a but whose bound
//! does not may be missed. The property tests check the MILP against exhaustive search of the paper's model.
//!
//! **Pruning** (exact): types with 2·L_k above what their task can take on some path given the other tasks'
//! fastest types (or its static budget), dearer than the task's slice cap, or dominated within the same
//! variant are left out. Type j dominates k when L_j ≤ L_k and the ⌊s_k/s_j⌋ copies of j that fit in k's slices
//! serve at least H_k: a 7g.80gb instance is dominated by seven 1g.10gb ones that are as fast. Where cores and GPU
//! slices have budgets of their own (`cpu_cores`, `gpu_slices`), a type dominates only types on the same kind.
//!
//! **Cuts**: Σ_{k∈t} H_k·M_k ≥ R̂(t) per task, implied by (4)–(6), is added as a row so that HiGHS derives
//! knapsack cover cuts on the instance counts. The search stops at a relative gap of 10⁻⁴ or an absolute gap
//! of half a slice's cost (β/2) ([`SolveOptions`]): plans closer than that differ only in how they break ties.
//!
//! **Switches** ([`Features`]): without A only each task's most accurate variant; without S only whole devices
//! (a 7g.80gb MIG instance with one process, or a whole CPU host); without T, Appendix B's static budgets:
//! per-task slices S_t = S_avail × (expected demand with the best variants' factors ÷ the best variant's highest
//! H × that type's slices, normalised), and per-task latency 2·ℓ_t ≤ SLO_l split along each path in the ratio of
//! the best variant's highest L, the smallest share where a task is on several paths. [`Uninformed`] says how
//! to read the rest: as the paper writes it (the default: the highest L over every type, and, accuracy
//! budgeting being part of T, a static budget ε_t ≤ (1 − SLO_a) split along each path in the ratio of each
//! task's largest loss), or as stronger baselines (the highest L over types whose 2·L fits SLO_l, and the
//! accuracy SLO end-to-end, weighted by the graph, as with T).
//!
//! HiGHS runs with a time limit ([`SolveOptions`]); when it hits, the best plan found so far is returned and
//! marked `time limit`. Every returned plan is re-checked by [`evaluate`] before it is handed out.

#![deny(missing_docs)]

pub mod baselines;
pub mod compass;
pub mod error;
pub mod evaluate;
pub mod exhaustive;
pub mod gpulet;
pub mod interference;
pub mod ipa;
pub mod max_demand;
pub mod mig_parted;
pub mod milp;
pub mod placement;
pub mod plan;
pub mod ppipe;
pub mod problem;
pub mod profile;
pub mod query_search;
pub mod solution;
pub mod spec;
pub mod strategy;

pub use error::{ParseError, PlanError};
pub use plan::{Plan, plan, plan_from};
pub use problem::{Problem, SHARED_CORES_BUSY};
pub use solution::SolveOptions;
pub use spec::{Features, PlanSpec, Strategy, Uninformed, Weighting};
pub use strategy::{TaskPolicy, runtime_policies, solve, solve_from};
