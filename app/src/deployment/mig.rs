//! MIG instances a plan lacks: jig never creates MIG instances, so a plan that would serve more on instances
//! the machine does not have says which, on which GPU, and writes the `nvidia-mig-parted` config that creates
//! them, in the GPU's own profile names.

use std::path::Path;

use jig_manifest::Bundle;
use jig_planner::Features;
use jig_planner::mig_parted::{config_name, mig_parted_config, missing_instances};
use jig_policy::mig::{GPU_80GB, GpuModel};

use super::capacity::{Capacity, GpuCapacity};
use super::observations::Observations;
use super::problem::problem;
use super::solve::plan_options;

/// A GPU of the machine whose MIG profiles and layouts jig does not know, named, with what to do.
pub(super) fn unknown_mig_gpu(capacity: &Capacity) -> Option<String> {
    let gpu = capacity.gpus().find(|g| !jig_policy::mig::has_layouts(&g.name))?;
    Some(format!(
        "GPU {} is an {}, whose MIG profiles jig does not know (it knows {}): create the instances with \
         `nvidia-smi mig -cgi` or the GPU operator, and profile them",
        gpu.index,
        gpu.name,
        jig_policy::mig::GPUS_WITH_LAYOUTS
    ))
}

/// Where the machine's MIG instances hold the plan short of its demand: the instances the plan for the whole
/// demand would add, were any layout of the GPUs allowed, and how to get them (`None` when MIG is not what it
/// lacks).
pub(super) fn mig_shortfall(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Option<String> {
    capacity.mig_instances().filter(|existing| !existing.is_empty())?;
    let plan = any_layout_plan(bundle, profiles, demand_windows, capacity, observed)?;
    let missing = missing_mig(&plan, capacity);
    (!missing.is_empty()).then(|| {
        format!(
            "; with more MIG instances it would serve it: {} (`jig plan BUNDLE --mig-config FILE` writes the \
             nvidia-mig-parted config that provides them)",
            missing.join("; ")
        )
    })
}

/// The plan of `bundle` were any MIG layout of `capacity`'s GPUs allowed, as `jig plan BUNDLE --mig-config FILE`
/// plans, with its GPUs numbered as the machine's ([`on_these_gpus`]); `None` when none is found.
fn any_layout_plan(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Option<jig_planner::Plan> {
    let any = capacity.clone().with_any_mig_layout();
    let (problem, _) = problem(bundle, profiles, demand_windows, &any, observed).ok()?;
    let mut plan = jig_planner::plan(&problem, Features::ALL, &plan_options()).ok()?;
    on_these_gpus(&mut plan.placement, &any);
    Some(plan)
}

/// Number `placement`'s GPUs as the machine does: the packing's GPU k (from 0, in the order it opened them) is
/// the k-th GPU `capacity` offers (GPU 1 on a gateway given `--gpus 1`), those free to take any layout first,
/// so that a layout to create lands on a GPU no app holds part of.
fn on_these_gpus(placement: &mut jig_planner::placement::Placement, capacity: &Capacity) {
    use jig_planner::placement::Device;
    let (free, rest): (Vec<&GpuCapacity>, Vec<&GpuCapacity>) = capacity.gpus().partition(|g| g.any_layout);
    let indices: Vec<u32> = free.iter().chain(&rest).map(|g| g.index).collect();
    for placed in &mut placement.instances {
        if let Device::Gpu { gpu, .. } | Device::GpuShare { gpu, .. } = &mut placed.device
            && let Some(&index) = indices.get(*gpu as usize)
        {
            *gpu = index;
        }
    }
}

/// The GPU model MIG profiles are named after: `capacity`'s first GPU's (a machine of mixed models is said in
/// its first GPU's names), or the 80 GB H100's.
fn gpu_model(capacity: &Capacity) -> &'static GpuModel {
    capacity.gpus().next().and_then(|g| GpuModel::of(&g.name)).unwrap_or(&GPU_80GB)
}

/// The MIG instances `plan`'s placement (its GPUs numbered as the machine's) needs beyond the free ones of
/// `capacity`, each said in the machine's own names (an H200's 3g.71gb for jig's 3g.40gb).
fn missing_mig(plan: &jig_planner::Plan, capacity: &Capacity) -> Vec<String> {
    let present: Vec<(u32, String)> =
        capacity.gpus().flat_map(|g| g.mig.iter().map(move |(p, _)| (g.index, p.to_string()))).collect();
    missing_instances(&plan.placement, &present, gpu_model(capacity)).iter().map(|m| m.to_string()).collect()
}

/// For a bundle refused for want of MIG instances: the instances its plan would place here, were any layout of
/// the machine's GPUs allowed, and the `nvidia-mig-parted` config that creates them (its header says how to
/// apply it). `None` when no GPU here takes a layout jig knows, or no such plan needs a new instance.
pub(super) fn mig_instances_to_create(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Option<String> {
    if unknown_mig_gpu(capacity).is_some() {
        return None;
    }
    let plan = any_layout_plan(bundle, profiles, demand_windows, capacity, observed)?;
    let missing = missing_mig(&plan, capacity);
    if missing.is_empty() {
        return None;
    }
    let yaml = mig_parted_config(&plan.placement, &config_name(&bundle.manifest.name), gpu_model(capacity)).ok()?;
    Some(format!(
        "; or create the MIG instances it would be planned on here ({}) with this nvidia-mig-parted config:\n{yaml}",
        missing.join("; ")
    ))
}

/// Which MIG instances `plan` needs that the machine lacks, and the `nvidia-mig-parted` config that would
/// provide them (the plan's GPUs numbered as the machine's).
pub(super) fn mig_layout_hint(app: &str, plan: &jig_planner::Plan, capacity: &Capacity) -> String {
    let mut plan = plan.clone();
    on_these_gpus(&mut plan.placement, capacity);
    let missing = missing_mig(&plan, capacity);
    if let Some(unknown) = unknown_mig_gpu(capacity) {
        return format!("; {}. {unknown}", missing.join("; "));
    }
    match mig_parted_config(&plan.placement, &config_name(app), gpu_model(capacity)) {
        Ok(yaml) => format!(
            "; {}. This nvidia-mig-parted config provides the layout (`jig plan --mig-config` writes it):\n{yaml}",
            missing.join("; ")
        ),
        Err(_) => format!("; {}", missing.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::deploy::plan_with_profiles;
    use crate::deployment::plan_for_deploy;
    use crate::deployment::test_support::{bundle, machine};
    use jig_model_host::device::Devices;
    use jig_planner::SolveOptions;
    use jig_planner::spec::SegmentKind;
    use std::collections::BTreeMap;

    #[test]
    fn a_plan_within_the_mig_instances_that_exist_says_which_would_serve_the_demand() {
        let dir = tempfile::tempdir().unwrap();
        // 31.5 req/s at 20 req/s an instance: two 1g.10gb instances, where GPU 0 has one. The plan holds the one
        // there is, serves what it can, and says what would serve the rest.
        let bundle = bundle(dir.path(), &[("mig:0:1g.10gb:1", 4, 40.0, 20.0)]);
        let capacity = Capacity::of(&machine(), 8, Some(&[0]));
        let existing = BTreeMap::from([("1g.10gb".to_string(), 1), ("3g.40gb".to_string(), 2)]);
        assert_eq!(capacity.mig_instances(), Some(existing));
        assert_eq!(capacity.clone().with_any_mig_layout().mig_instances(), None);
        let d = plan_with_profiles(&bundle, &bundle.profiles_path().unwrap(), &[], &capacity, &Observations::default())
            .unwrap();
        assert_eq!(d.instances.iter().filter(|i| i.segment.starts_with("mig:")).map(|i| i.count).sum::<u32>(), 1);
        assert!(d.source.contains("the most this machine serves, short of the 31.5 req/s"), "{}", d.source);
        assert!(d.source.contains("the plan needs 2× 1g.10gb on GPU 0; this machine has only 1"), "{}", d.source);
        assert!(d.source.contains("--mig-config"), "{}", d.source);
    }

    #[test]
    fn a_plan_for_a_mig_config_may_take_any_layout_of_the_gpus() {
        let dir = tempfile::tempdir().unwrap();
        // 31.5 req/s at 20 req/s an instance: two 2g.20gb instances, a profile GPU 0 has none of.
        let bundle = bundle(dir.path(), &[("mig:0:2g.20gb:1", 4, 40.0, 20.0)]);
        let (profiles, observed) = (bundle.profiles_path().unwrap(), Observations::default());
        let capacity = Capacity::of(&machine(), 0, Some(&[0]));
        let error = problem(&bundle, &profiles, &[], &capacity, &observed).unwrap_err();
        assert!(error.to_string().contains("`jig plan BUNDLE --mig-config FILE` writes a layout"), "{error}");

        let any = capacity.with_any_mig_layout();
        assert_eq!(any.to_string(), "0 cores, GPU 0: any MIG layout");
        let (problem, _) = problem(&bundle, &profiles, &[], &any, &observed).unwrap();
        assert_eq!(problem.gpu_slices, Some(7), "one whole GPU, whatever its instances now");
        let plan = jig_planner::plan(&problem, Features::ALL, &SolveOptions::default()).unwrap();
        assert_eq!(plan.slices_used, 4, "two 2g.20gb instances: {}", plan.to_text());
    }

    #[test]
    fn a_gpu_without_a_layout_table_is_named_with_the_ones_jig_knows() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("mig:0:1g.10gb:1", 4, 40.0, 20.0)]);
        let a30 = Devices::from_nvidia_smi(
            (0..8).collect(),
            "0, NVIDIA A30, GPU-cccc, 24576, Enabled\n",
            "GPU 0: NVIDIA A30 (UUID: GPU-cccc)\n",
        );
        let capacity = Capacity::of(&a30, 8, None);
        let error =
            plan_with_profiles(&bundle, &bundle.profiles_path().unwrap(), &[], &capacity, &Observations::default())
                .unwrap_err()
                .to_string();
        assert!(error.contains("GPU 0 is an NVIDIA A30, whose MIG profiles jig does not know"), "{error}");
        assert!(error.contains("the A100 40GB, the H100 NVL (94 GB) and the H200"), "{error}");
        assert!(!error.contains("--mig-config"), "{error}");
    }

    #[test]
    fn other_models_offer_their_instances_by_shape_and_are_told_what_to_create_in_their_names() {
        let dir = tempfile::tempdir().unwrap();
        // An A100 40GB's 1g.10gb is the shape jig calls 1g.20gb (two memory slots); an H200's 3g.71gb is 3g.40gb.
        let a100_40 = Devices::from_nvidia_smi(
            (0..8).collect(),
            "0, NVIDIA A100-SXM4-40GB, GPU-cccc, 40960, Enabled\n1, NVIDIA H200, GPU-dddd, 143771, Enabled\n",
            "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-cccc)\n  MIG 1g.10gb Device 0: (UUID: MIG-5)\n\
             GPU 1: NVIDIA H200 (UUID: GPU-dddd)\n  MIG 3g.71gb Device 0: (UUID: MIG-6)\n",
        );
        let capacity = Capacity::of(&a100_40, 8, None);
        assert!(capacity.offers(&SegmentKind::parse("mig:1g.20gb:1").unwrap()));
        assert!(capacity.offers(&SegmentKind::parse("mig:3g.40gb:1").unwrap()));
        assert!(!capacity.offers(&SegmentKind::parse("mig:1g.10gb:1").unwrap()), "no one-slot instance exists");
        // 31.5 req/s at 20 req/s an instance needs two 1g.20gb-shaped instances; the A100 40GB has one.
        let bundle = bundle(dir.path(), &[("mig:0:1g.20gb:1", 4, 40.0, 20.0)]);
        let d = plan_with_profiles(&bundle, &bundle.profiles_path().unwrap(), &[], &capacity, &Observations::default())
            .unwrap();
        assert!(d.source.contains("the plan needs 2× 1g.10gb on GPU 0; this machine has only 1"), "{}", d.source);
        assert!(!d.source.contains("1g.20gb"), "A100 40GB names: {}", d.source);
    }

    #[test]
    fn a_printed_mig_layout_never_relays_a_gpu_another_app_holds_part_of() {
        let (first_dir, second_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let on_mps = bundle(first_dir.path(), &[("mps:0:50", 4, 40.0, 100.0)]);
        let all = Capacity::of(&machine(), 8, None);
        let first = plan_for_deploy(&on_mps, &[], &all, &Observations::default()).unwrap();
        let free = all.clone().without(&first);
        assert!(free.machines[0].gpus[1].held && !free.machines[0].gpus[0].held, "{free:?}");
        // GPU 0 (in MIG mode, without 2g.20gb instances) is the one to lay out; GPU 1 serves the first app.
        let on_mig = bundle(second_dir.path(), &[("mig:0:2g.20gb:1", 4, 40.0, 100.0)]);
        let text = plan_for_deploy(&on_mig, &[], &free, &Observations::default()).unwrap_err().to_string();
        assert!(text.contains("on GPU 0; this machine has none") && text.contains("devices: [0]"), "{text}");
        assert!(!text.contains("devices: [1]") && !text.contains("[0, 1]"), "{text}");
        // Given GPU 1 alone, there is no GPU to lay out: no config.
        let gpu1 = Capacity::of(&machine(), 8, Some(&[1])).without(&first);
        let text = plan_for_deploy(&on_mig, &[], &gpu1, &Observations::default()).unwrap_err().to_string();
        assert!(!text.contains("mig-configs:"), "{text}");
    }
}
