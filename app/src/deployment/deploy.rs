//! The entry points: [`plan`] for a running app's re-plans, which never refuses, and [`plan_for_deploy`] for a
//! deploy, which refuses a bundle this machine cannot serve as profiled; and the default deployment
//! ([`fallback`]) that serves an app the planner could not plan, saying why.

use std::path::Path;

use jig_api::{Deployment, PlannedInstances};
use jig_manifest::{Bundle, Variant};
use jig_planner::spec::SegmentKind;

use super::capacity::Capacity;
use super::error::{PlanningError, Refused};
use super::mig::mig_instances_to_create;
use super::observations::{Observations, unplanned_cpu_ms};
use super::solve::plan_within;
use super::untasked::{pin_untasked_slots, unpinned_note, untasked_slots};

/// Plan `bundle` for `demand_windows` (recent req/s at the entry, oldest first) within `capacity`, refined by
/// what the running app `observed`; without a profile table, or when the planner finds no plan, each slot's
/// [`fallback`]. Re-plans use it: a running app is never refused. A deploy uses [`plan_for_deploy`].
pub fn plan(bundle: &Bundle, demand_windows: &[f64], capacity: &Capacity, observed: &Observations) -> Deployment {
    planned_or_refused(bundle, demand_windows, capacity, observed).unwrap_or_else(|refused| {
        tracing::warn!(app = %bundle.manifest.name, "planning failed: {}", refused.reason);
        fallback(bundle, capacity, &format!("default: the planner found no plan: {}", refused.reason))
    })
}

/// [`plan`] for a deploy (or a gateway's restart), which refuses a bundle this machine cannot serve as
/// profiled: one whose profile table measures GPU segments only (`mps:`, `mig:`), none of which the machine
/// offers (no GPU, not the MIG instances, or none free). The default deployment would run it unplanned on
/// cores it was never measured on. A bundle without a profile table still gets the default deployment. A bundle
/// measured on MIG instances the machine lacks is told which its plan would use, and the config that makes them.
pub fn plan_for_deploy(
    bundle: &Bundle,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Result<Deployment, Refused> {
    planned_or_refused(bundle, demand_windows, capacity, observed).map_err(|mut refused| {
        let mig = matches!(&*refused.reason, PlanningError::NoSegments { measured, .. }
            if measured.iter().any(|kind| matches!(kind, SegmentKind::Mig { .. })));
        if let (true, Some(profiles)) = (mig, bundle.profiles_path()) {
            let config = mig_instances_to_create(bundle, &profiles, demand_windows, capacity, observed);
            refused.mig_config = config.unwrap_or_default();
        }
        refused
    })
}

/// [`plan_for_deploy`] without the MIG config of a refusal, which a re-plan would throw away.
fn planned_or_refused(
    bundle: &Bundle,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Result<Deployment, Refused> {
    if bundle.manifest.variants.is_empty() {
        // Glue alone: the cores serve as many requests as its CPU time a request leaves them.
        let mut glue_only = fallback(bundle, capacity, "no model slots");
        let (cpu_ms, from) = unplanned_cpu_ms(bundle, observed);
        if cpu_ms > 0.0 && capacity.cores() > 0 {
            glue_only.capacity_rps =
                Some(jig_planner::SHARED_CORES_BUSY * f64::from(capacity.cores()) * 1000.0 / cpu_ms);
            glue_only.unplanned_cpu_ms = Some(cpu_ms);
            glue_only.source = format!("no model slots: glue of {cpu_ms:.1} ms of CPU a request ({from})");
        }
        return Ok(glue_only);
    }
    let Some(profiles) = bundle.profiles_path() else {
        return Ok(fallback(bundle, capacity, "default: no profiles.csv in the bundle (run `jig profile`)"));
    };
    match plan_with_profiles(bundle, &profiles, demand_windows, capacity, observed) {
        Ok(deployment) => Ok(deployment),
        Err(reason @ PlanningError::NoSegments { .. }) if reason.needs_gpu_segments() => {
            let (app, reason) = (bundle.manifest.name.clone(), Box::new(reason));
            Err(Refused { app, reason, mig_config: String::new() })
        }
        Err(e) => {
            tracing::warn!(app = %bundle.manifest.name, "planning failed: {e}");
            Ok(fallback(bundle, capacity, &format!("default: the planner found no plan: {e}")))
        }
    }
}

/// Each slot's most accurate variant (the first declared among equals), one instance on the free cores
/// (at least one), unpinned and holding none of them, batching up to 8 requests that arrive while it is busy.
pub fn fallback(bundle: &Bundle, capacity: &Capacity, why: &str) -> Deployment {
    let mut best: Vec<&Variant> = Vec::new();
    for v in &bundle.manifest.variants {
        match best.iter_mut().find(|b| b.slot == v.slot) {
            Some(b) if v.accuracy.unwrap_or(0.0) > b.accuracy.unwrap_or(0.0) => *b = v,
            Some(_) => {}
            None => best.push(v),
        }
    }
    let cores = capacity.cores_per_machine().max(1);
    let place = capacity.fallback_place();
    Deployment {
        source: why.into(),
        demand_rps: None,
        accuracy: None,
        capacity_rps: None,
        factors: Vec::new(),
        refined: Vec::new(),
        glue: Vec::new(),
        unplanned_cpu_ms: None,
        classes: Vec::new(),
        pipelines: Vec::new(),
        instances: best
            .into_iter()
            .map(|v| PlannedInstances {
                slot: v.slot.clone(),
                variant: v.name.clone(),
                segment: format!("cpu:{cores}"),
                max_batch: 8,
                count: 1,
                rate_rps: 1.0,
                latency_ms: 0.0,
                wait_ms: 0.0,
                drop_budget_ms: 0.0,
                stale_ms: 0.0,
                places: place.iter().cloned().collect(),
            })
            .collect(),
    }
}

/// The plan of `bundle`'s model tasks, with a default instance for each slot no task names (the planner does not
/// see them; glue calls them). Each such instance first takes a core of its own out of `capacity`, pinned there
/// on `cpu:1`, and the tasks are planned on the rest ([`pin_untasked_slots`]), so that the deployment holds no
/// more cores than `capacity` has and the plan's demand and capacity are what its own cores serve. When no plan
/// is found on the rest (two cores for three model slots), or no core is left for it, a default instance runs
/// unpinned beside the planned ones, holding none, as [`fallback`]'s do, and the deployment says so.
pub(super) fn plan_with_profiles(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Result<Deployment, PlanningError> {
    let untasked = untasked_slots(bundle);
    let (rest, pinned) = pin_untasked_slots(bundle, capacity);
    let held = pinned.len();
    if held > 0 {
        match plan_within(bundle, profiles, demand_windows, &rest, observed, pinned) {
            Ok(mut deployment) => {
                if held < untasked.len() {
                    deployment.source += &unpinned_note(&untasked[held..], "no core is left for it");
                }
                return Ok(deployment);
            }
            Err(e) => tracing::info!(
                app = %bundle.manifest.name,
                "no plan with a core held for each slot no task names ({e}); planning on all {} cores",
                capacity.cores()
            ),
        }
    }
    let mut deployment = plan_within(bundle, profiles, demand_windows, capacity, observed, Vec::new())?;
    if !untasked.is_empty() {
        let why = if held > 0 {
            format!("no plan of the tasks leaves it a core of the {} this app may use", capacity.cores())
        } else {
            "no core is left for it".to_string()
        };
        deployment.source += &unpinned_note(&untasked, &why);
    }
    Ok(deployment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::test_support::{bundle, machine};
    use crate::deployment::{ObservedGlue, problem};

    #[test]
    fn a_bundle_profiled_only_on_gpus_says_what_the_machine_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("mps:0:50", 4, 40.0, 100.0)]);
        let error =
            problem(&bundle, &bundle.profiles_path().unwrap(), &[], &Capacity::cpu_only(4), &Observations::default())
                .unwrap_err();
        assert!(matches!(&error, PlanningError::NoSegments { measured, .. } if measured.len() == 1), "{error:?}");
        assert!(error.to_string().contains("measures no segment this machine offers (free: 4 cores)"), "{error}");
        assert!(error.to_string().contains("it measures slot `det` on mps:50; the gateway has no GPU"), "{error}");

        // A deploy is refused, naming the app, the segment, what the machine offers and what to do.
        let refused = plan_for_deploy(&bundle, &[], &Capacity::cpu_only(4), &Observations::default()).unwrap_err();
        let text = refused.to_string();
        assert!(text.starts_with("app `signs` cannot be deployed on this machine: profiles.csv"), "{text}");
        assert!(text.contains("it measures slot `det` on mps:50;") && text.contains("(free: 4 cores)"), "{text}");
        assert!(text.contains("`jig profile BUNDLE`") && text.contains("on a machine with the GPU"), "{text}");
        let start = crate::StartError::from(refused);
        assert!(start.is_bundle_fault(), "a 400 that keeps the previous deployment serving");
        assert!(start.to_string().contains("app `signs` cannot be deployed"), "{start}");

        // A running app's re-plan is never refused: it falls back to the default deployment and says why.
        let d = plan(&bundle, &[], &Capacity::cpu_only(4), &Observations::default());
        assert!(d.source.contains("measures no segment"), "{}", d.source);
        assert!(d.instances[0].places.is_empty() && d.instances[0].segment == "cpu:4", "{d:?}");

        // A GPU the gateway has but other apps hold: refused, and told to free it.
        let mut held = Capacity::of(&machine(), 8, Some(&[1]));
        held.machines[0].gpus[0].mps_percent = 40;
        let text = plan_for_deploy(&bundle, &[], &held, &Observations::default()).unwrap_err().to_string();
        assert!(text.contains("GPU 1: 40% for MPS shares); it measures slot `det` on mps:50; give the"), "{text}");

        // MIG instances on a machine without a GPU: there is none to make them on.
        let mig = self::bundle(dir.path(), &[("mig:0:2g.20gb:1", 4, 40.0, 100.0)]);
        let error = problem(&mig, &mig.profiles_path().unwrap(), &[], &Capacity::cpu_only(4), &Observations::default())
            .unwrap_err();
        assert!(error.to_string().contains("on mig:2g.20gb:1; the gateway has no GPU"), "{error}");
        let text =
            plan_for_deploy(&mig, &[], &Capacity::cpu_only(4), &Observations::default()).unwrap_err().to_string();
        assert!(!text.contains("nvidia-mig-parted config"), "{text}");
        // On a GPU in MIG mode without that profile's instances: which to make, and the config that makes them.
        let gpu0 = Capacity::of(&machine(), 8, Some(&[0]));
        let text = plan_for_deploy(&mig, &[], &gpu0, &Observations::default()).unwrap_err().to_string();
        for says in [
            "GPU 0: MIG 3g.40gb 3g.40gb 1g.10gb); it measures slot `det` on mig:2g.20gb:1; MIG instances must exist",
            "2g.20gb on GPU 0; this machine has none) with this nvidia-mig-parted config",
            "mig-enabled: true",
        ] {
            assert!(text.contains(says), "{says}: {text}");
        }
        // A gateway given GPU 1 alone: the instances and the config are for GPU 1, as nvidia-smi numbers it.
        let gpu1 = Capacity::of(&machine(), 8, Some(&[1]));
        let text = plan_for_deploy(&mig, &[], &gpu1, &Observations::default()).unwrap_err().to_string();
        assert!(text.contains("GPU 1: 100% for MPS shares"), "{text}");
        assert!(text.contains("2g.20gb on GPU 1; this machine has none") && text.contains("devices: [1]"), "{text}");
        assert!(!text.contains("GPU 0"), "{text}");
        // A re-plan falls back without planning the config it would not show.
        assert!(!plan(&mig, &[], &gpu1, &Observations::default()).source.contains("mig-configs:"));
    }

    #[test]
    fn a_deploy_without_gpu_only_rows_is_not_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = Capacity::cpu_only(4);
        // CPU rows that need more cores than are free: the default deployment, as before.
        let bundle = bundle(dir.path(), &[("cpu:8", 1, 50.0, 10.0), ("mps:0:50", 4, 40.0, 100.0)]);
        let d = plan_for_deploy(&bundle, &[], &cpu, &Observations::default()).expect("not refused");
        assert!(d.source.starts_with("default: the planner found no plan") && d.demand_rps.is_none(), "{d:?}");
        assert!(d.source.contains("it measures slot `det` on cpu:8, mps:50; give the gateway"), "{}", d.source);
        // No profile table at all: the default deployment.
        std::fs::remove_file(dir.path().join("profiles.csv")).unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        let d = plan_for_deploy(&bundle, &[], &cpu, &Observations::default()).expect("not refused");
        assert!(d.source.contains("no profiles.csv"), "{}", d.source);
        assert_eq!(d.instances.len(), 1);
    }

    #[test]
    fn glue_alone_serves_what_its_cpu_a_request_leaves_the_cores() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = "name = \"crops\"\n[slo]\nlatency_ms = 1000\n\
                        [[tasks]]\nname = \"crop\"\nglue = \"g.wasm\"\ncpu_ms = 5\n";
        std::fs::write(dir.path().join("jig.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        let d = plan(&bundle, &[], &Capacity::cpu_only(2), &Observations::default());
        let busy = jig_planner::SHARED_CORES_BUSY;
        assert_eq!((d.capacity_rps, d.unplanned_cpu_ms), (Some(busy * 400.0), Some(5.0)), "{}", d.source);
        let seen = vec![ObservedGlue { task: "crop".into(), invocations: 100, mean_ms: 8.0 }];
        let observed = Observations { glue: seen, answered: 100, ..Default::default() };
        let d = plan(&bundle, &[], &Capacity::cpu_only(2), &observed);
        assert_eq!(d.capacity_rps, Some(busy * 250.0), "{}", d.source);
    }
}
