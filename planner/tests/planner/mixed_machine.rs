//! A machine with CPU cores and a GPU: each kind within its own budget (`cpu_cores`, `gpu_slices`).

use jig_planner::profile::from_csv;
use jig_planner::{Features, Plan, PlanError, PlanSpec, Problem, SolveOptions, plan};

const PROFILE: &str = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device
detect,det,cpu:2,1,40,50,10,test
detect,det,mps:0:50,4,30,40,100,test
";

fn plan_on(resources: &str) -> Result<Plan, PlanError> {
    let spec = format!(
        r#"
[app]
name = "signs"
slo_latency_ms = 400
slo_accuracy = 0.9
tasks = [{{ name = "detect", variants = [{{ name = "det", accuracy = 1.0 }}] }}]

[[segments]]
name = "cpu:2"

[[segments]]
name = "mps:50"

[resources]
{resources}

[demand]
windows = [30]
"#
    );
    let problem = Problem::new(&PlanSpec::from_toml(&spec)?, &from_csv(PROFILE)?, "test")?;
    plan(&problem, Features::ALL, &SolveOptions::default())
}

/// (segment, instances) of every entry.
fn entries(plan: &Plan) -> Vec<(String, u32)> {
    plan.tasks.iter().flat_map(|t| &t.entries).map(|e| (e.segment.clone(), e.instances)).collect()
}

#[test]
fn the_cheaper_gpu_share_is_chosen_when_both_kinds_are_free() {
    let plan = plan_on("slices = 20\ncpu_cores = 16\ngpu_slices = 7").unwrap();
    assert_eq!(entries(&plan), vec![("mps:50".to_string(), 1)], "{}", plan.to_text());
}

#[test]
fn without_gpu_slices_the_cores_serve_within_their_budget() {
    let plan = plan_on("slices = 20\ncpu_cores = 8\ngpu_slices = 0").unwrap();
    // 31.5 req/s at 10 req/s an instance: four `cpu:2` instances, 8 cores.
    assert_eq!(entries(&plan), vec![("cpu:2".to_string(), 4)], "{}", plan.to_text());
}

#[test]
fn too_few_cores_and_no_gpu_find_no_plan() {
    let error = plan_on("slices = 20\ncpu_cores = 2\ngpu_slices = 0").unwrap_err();
    assert!(matches!(error, PlanError::Infeasible(_)), "{error}");
}

/// A type on cores more productive a slice than one on a GPU share does not stand in for it: once the cores are
/// spent the share serves the rest. (Pruning the share as dominated left 70 req/s with no plan.)
#[test]
fn cores_full_the_gpu_share_serves_the_rest_though_a_core_serves_more_a_slice() {
    const VOICE: &str = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device
detect,det,cpu:1,1,50,60,17,test
detect,det,mps:14,1,120,130,8,test
";
    let spec = r#"
[app]
name = "voice"
slo_latency_ms = 5000
slo_accuracy = 0.0
tasks = [{ name = "detect", variants = [{ name = "det", accuracy = 1.0 }] }]

[[segments]]
name = "cpu:1"

[[segments]]
name = "mps:14"

[resources]
slices = 11
cpu_cores = 4
gpu_slices = 7

[demand]
windows = [70]
"#;
    let problem = Problem::new(&PlanSpec::from_toml(spec).unwrap(), &from_csv(VOICE).unwrap(), "test").unwrap();
    let plan = plan(&problem, Features::ALL, &SolveOptions::default()).unwrap();
    // 73.5 req/s: the four cores serve 68, a share 8 more.
    let on = |segment: &str| entries(&plan).iter().filter(|(s, _)| s == segment).map(|(_, n)| n).sum::<u32>();
    assert_eq!((on("cpu:1"), on("mps:14")), (4, 1), "{}", plan.to_text());
}

/// Shares of one GPU run beside each other: four instances on four 14% shares serve no more than four 14%
/// processes measured together (`mps:57x4`), though one alone serves more. (Read as measured alone, four shares
/// were planned for what takes five.)
#[test]
fn shares_packed_on_a_gpu_are_planned_as_measured_together() {
    const SHARES: &str = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device
detect,det,mps:0:14,4,35,40,100,test
detect,det,mps:0:57x4,4,45,50,320,test
";
    let spec = r#"
[app]
name = "shares"
slo_latency_ms = 5000
slo_accuracy = 0.0
tasks = [{ name = "detect", variants = [{ name = "det", accuracy = 1.0 }] }]

[[segments]]
name = "mps:14"

[[segments]]
name = "mps:57x4"

[resources]
slices = 7
gpu_slices = 7

[demand]
windows = [360]
"#;
    let problem = Problem::new(&PlanSpec::from_toml(spec).unwrap(), &from_csv(SHARES).unwrap(), "test").unwrap();
    let alone = problem.configs.iter().find(|c| problem.segments[c.segment].name == "mps:14").unwrap();
    assert_eq!((alone.latency_ms, alone.throughput_rps), (50.0, 80.0), "one of the four together");
    let plan = plan(&problem, Features::ALL, &SolveOptions::default()).unwrap();
    // 378 req/s (the demand and its margin) at 80 an instance of 14%.
    let slices: u32 = entries(&plan).iter().map(|(s, n)| if s == "mps:14" { *n } else { 4 * n }).sum();
    assert_eq!(slices, 5, "{}", plan.to_text());
}

/// A GPU instance's host side runs on the machine's cores: where the profile measured it (`cpu_ms`, here the
/// H200's voice, whose ONNX Runtime CUDA session kept its host thread busy for as long as a line took), the plan
/// counts it beside the cores' instances. Uncounted, the voice's shares looked free of cores, and the plan put
/// lines there that the cores could not carry (planned 31.8 req/s, served 11.1; 2026-11-30).
#[test]
fn a_gpu_share_s_host_cpu_is_planned_on_the_cores() {
    let table = |cpu_ms: &str| {
        format!(
            "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device,cpu_ms
speak,voice,cpu:1,1,90,97,11,test,
speak,voice,mps:14,1,179,183,6.8,test,{cpu_ms}
speak,voice,mps:57x8,1,189,218,49.5,test,{cpu_ms}
"
        )
    };
    let spec = |rps: u32| {
        format!(
            r#"
[app]
name = "voice"
slo_latency_ms = 5000
slo_accuracy = 0.0
tasks = [{{ name = "speak", variants = [{{ name = "voice", accuracy = 1.0 }}] }}]

[[segments]]
name = "cpu:1"

[[segments]]
name = "mps:14"

[[segments]]
name = "mps:57x8"

[resources]
slices = 19
cpu_cores = 12
gpu_slices = 7

[demand]
windows = [{rps}]
"#
        )
    };
    let solve = |rps: u32, cpu_ms: &str| {
        let problem =
            Problem::new(&PlanSpec::from_toml(&spec(rps)).unwrap(), &from_csv(&table(cpu_ms)).unwrap(), "test")
                .unwrap();
        plan(&problem, Features::ALL, &SolveOptions::default())
    };
    // Unmeasured, the shares add their lines to the cores': 130 lines/s (and the margin) find a plan.
    assert!(solve(130, "").is_ok());
    // A line on a share costs 0.19 s of a core, twice a line on a core: 12 cores at 0.87 carry 115 at the most.
    let error = solve(130, "190").unwrap_err();
    assert!(matches!(error, PlanError::Infeasible(_)), "{error}");
    let plan = solve(90, "190").unwrap();
    let on_gpu = entries(&plan).iter().filter(|(s, _)| s.starts_with("mps")).count();
    assert_eq!(on_gpu, 0, "a share's line costs the cores more than a core's: {}", plan.to_text());
}
