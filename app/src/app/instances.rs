//! Starting a deployment's model instances: each in its planned place, on this machine or a `jig node`, with
//! the batch policy its plan gives it, grouped by variant and segment type for what the app observes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jig_manifest::Bundle;
use jig_model_host::instance::{BatchPolicy, Instance, InstanceConfig};
use jig_model_host::launch::{LaunchError, Launcher, Placement};
use jig_model_host::pool::Pool;
use jig_model_host::segment::Segment;

use super::DEFAULT_DEADLINE;
use crate::deployment::Deployment;
use crate::error::StartError;
use crate::slots::ModelSlots;
use jig_api::InstancePlace;
use jig_planner::profile::ProfileRow;

/// Where an app's model instances start: this machine's segments, and the cluster's `jig node`s.
#[derive(Debug, Clone)]
pub struct ModelHosts {
    /// This machine's segments.
    pub launcher: Launcher,
    /// How to reach the nodes instances are placed on; `None`: the gateway has none.
    pub nodes: Option<jig_node::Access>,
}

/// Why [`ModelHosts::start`] started no instance.
pub(super) enum Unstarted {
    /// The place names a node, and the gateway has no access to nodes.
    NoNodeAccess { node: String },
    /// The launcher or the node could not start it.
    Launch(LaunchError),
}

impl Unstarted {
    /// Why `bundle`'s app could not start, for the one who deployed it.
    fn of(self, bundle: &Bundle) -> StartError {
        let app = bundle.manifest.name.clone();
        match self {
            Unstarted::NoNodeAccess { node } => StartError::Deployment {
                app,
                detail: format!(
                    "the plan places an instance on node {node}, but the gateway has no node token \
                     (`node_token_file`)"
                ),
            },
            Unstarted::Launch(source) => {
                StartError::Model { app, source: Box::new(source), bundle: bundle.dir.clone() }
            }
        }
    }
}

impl ModelHosts {
    /// Start one instance of the model at `path` at `place`: on this machine's segments through the launcher
    /// (pinned to the place's cores, or bound to its device), or on the `jig node` the place names, whose
    /// batches the instance's queue and batcher, here, send there. The one way an app starts an instance.
    pub(super) fn start(
        &self,
        config: InstanceConfig,
        model: &str,
        path: &Path,
        segment: Segment,
        place: &InstancePlace,
    ) -> Result<Instance, Unstarted> {
        let Some(node) = &place.node else {
            return self
                .launcher
                .start_instance(config, model, path, placement(segment, place))
                .map_err(Unstarted::Launch);
        };
        let access = self.nodes.as_ref().ok_or_else(|| Unstarted::NoNodeAccess { node: node.clone() })?;
        let spec = jig_node::RemoteSpec {
            node: node.clone(),
            access: access.clone(),
            instance: config.name.clone(),
            model_name: model.to_string(),
            model_path: path.to_path_buf(),
            segment,
            device: place.device.clone(),
            cores: place.cores.iter().map(|&c| c as usize).collect(),
        };
        Instance::start(config, move || Ok(jig_node::Remote::connect(spec)?))
            .map_err(|e| Unstarted::Launch(LaunchError::Instance(e)))
    }
}

/// The instances of one variant on one segment type, and what the profile table says of them.
#[derive(Clone)]
pub(super) struct Group {
    pub(super) slot: String,
    pub(super) variant: String,
    pub(super) segment: String,
    pub(super) max_batch: u32,
    pub(super) instances: Vec<Arc<Instance>>,
    /// The profile's latencies by batch size.
    pub(super) profiled_ms: HashMap<u32, Profiled>,
    /// Whether its instances run their batches on this machine's cores, in this process: the CPU time a batch
    /// takes is then what it costs the cores (a GPU's or a node's instance only waits for the batch).
    pub(super) on_cores: bool,
    /// The requests the app had answered when its instances started: what they served since is counted from it.
    pub(super) answered_from: u64,
    /// What the instances it took over from a running group had been busy before then, ms.
    pub(super) busy_before_ms: f64,
}

impl Group {
    /// The mean host CPU a batch cost the group's worker processes, ms, over every batch they ran
    /// ([`ObservedLatency::host_cpu_ms`](jig_api::ObservedLatency::host_cpu_ms)); `None` for instances in
    /// process or on nodes, and before the first batch.
    pub(super) fn host_cpu_ms(&self) -> Option<f64> {
        let cpu: Option<Duration> = self.instances.iter().map(|i| i.process_cpu()).sum();
        let batches: u64 = self.instances.iter().map(|i| i.stats().batches.load(Ordering::Relaxed)).sum();
        (batches > 0).then_some(cpu?.as_secs_f64() * 1e3 / batches as f64)
    }

    /// A group for `planned`, with nothing in it yet, the profile's rows of its variant on its segment
    /// (`profiles`), counting what it serves from the `answered`th request.
    fn planned(planned: &jig_api::PlannedInstances, profiles: &[ProfileRow], answered: u64) -> Group {
        Group {
            slot: planned.slot.clone(),
            variant: planned.variant.clone(),
            segment: planned.segment.clone(),
            max_batch: planned.max_batch,
            instances: Vec::new(),
            profiled_ms: profiles
                .iter()
                .filter(|r| r.slot == planned.slot && r.variant == planned.variant && r.is_on(&planned.segment))
                .map(|r| {
                    let mean = f64::from(r.batch) * 1000.0 / r.throughput_rps;
                    (r.batch, Profiled { p50: r.p50_ms, p95: r.p95_ms, mean })
                })
                .collect(),
            on_cores: planned.local_cores().is_some(),
            answered_from: answered,
            busy_before_ms: 0.0,
        }
    }

    /// Its instances' time busy running batches since `answered_from`, ms.
    pub(super) fn busy_ms(&self) -> f64 {
        (self.instances.iter().map(|i| busy_ms(i)).sum::<f64>() - self.busy_before_ms).max(0.0)
    }
}

/// The time `instance` has been busy running batches since it started, ms.
fn busy_ms(instance: &Instance) -> f64 {
    instance.stats().busy_ns.load(Ordering::Relaxed) as f64 / 1e6
}

/// What a profile row says of one batch size, ms: p50, p95, and the mean (its rows over its throughput).
#[derive(Debug, Clone, Copy)]
pub(super) struct Profiled {
    pub(super) p50: f64,
    pub(super) p95: f64,
    pub(super) mean: f64,
}

/// Start the deployment's instances, each in its planned place: pinned to its cores, or in a worker bound, by
/// UUID, to the GPU or MIG instance its place names (one worker for each of a `mig:…:K` instance's K processes),
/// on this machine or on the `jig node` the place names (the instance's queue and batcher stay here).
///
/// A group the running deployment has already, `kept` (its planned instances and their group: the same slot,
/// variant, segment, count and places), keeps its running instances, which take the new plan's batch policy in
/// place: a re-plan then loads only what changed, instead of a second copy of everything beside the first on the
/// same cores, and a new batch size or wait bound costs no restart. Of a group planned anew, each instance at a
/// place where the running deployment has one of the same slot, variant and segment takes that one over: a group
/// grown from one instance to two loads one (a voice takes 3.4 s of a core to load on the CI machine, while the
/// cores serve). The rest start side by side ([`side_by_side`]). `answered`: the requests the app has answered so
/// far, from which the new groups count what they serve.
pub(super) fn start_models(
    hosts: &ModelHosts,
    bundle: &Bundle,
    deployment: &Deployment,
    kept: &[(&jig_api::PlannedInstances, &Group)],
    answered: u64,
) -> Result<(ModelSlots, Vec<Group>), StartError> {
    let app = &bundle.manifest.name;
    // Pooled pipelines' instances run the batches their head books, each alone and at once: none is taken over.
    let pipelined: Vec<&str> =
        deployment.pipelines.iter().flat_map(|p| p.pools.iter().map(|q| q.slot.as_str())).collect();
    let (whole, mut spare) = takeovers(deployment, kept, &pipelined);
    let refused = |detail: String| StartError::Deployment { app: app.clone(), detail };
    // The profile table, for what observed latencies are compared with; a bundle without one compares none.
    let profiles = bundle.profiles_path().and_then(|p| crate::deployment::read_profiles(&p).ok()).unwrap_or_default();
    // Each group's instances in order: running ones taken over, and those to start, which start at once, each
    // loading on its own thread (a voice's 3.4 s beside the detector's 0.2 s, GPU workers side by side).
    let mut members: Vec<Vec<(Member, f64)>> = Vec::new();
    let mut groups = Vec::new();
    let mut to_start = Vec::new();
    for (planned, whole) in deployment.instances.iter().zip(whole) {
        let mut group = Group::planned(planned, &profiles, answered);
        let in_pipeline = pipelined.contains(&planned.slot.as_str());
        let policy = policy(planned, in_pipeline);
        let mut these = Vec::new();
        if let Some(running) = whole {
            group.answered_from = running.answered_from;
            group.busy_before_ms = running.busy_before_ms;
            // A `mig:…:K` or `mps:…xK` instance's rate is that of its K processes together, as below.
            let per = running.instances.len().max(1) as f64 / f64::from(planned.count.max(1));
            for instance in &running.instances {
                // From its next batch on, while the running copy still routes to it too.
                instance.set_policy(policy);
                these.push((Member::Running(instance.clone()), planned.rate_rps / per));
            }
            members.push(these);
            groups.push(group);
            continue;
        }
        let variant = bundle.manifest.variants.iter().find(|v| v.slot == planned.slot && v.name == planned.variant);
        let variant = variant.ok_or_else(|| {
            refused(format!(
                "the plan names variant `{}` of slot `{}`, which the bundle lacks",
                planned.variant, planned.slot
            ))
        })?;
        for i in 0..planned.count {
            let place = planned.places.get(i as usize).cloned().unwrap_or_default();
            let here = SparePlace::of(planned, i as usize);
            if let Some(at) = spare.iter().position(|(there, _)| !in_pipeline && *there == here) {
                let (_, running) = spare.swap_remove(at);
                let rate = planned.rate_rps / running.len() as f64;
                for instance in running {
                    instance.set_policy(policy);
                    group.busy_before_ms += busy_ms(instance);
                    these.push((Member::Running(instance.clone()), rate));
                }
                continue;
            }
            let name = place.segment(&planned.segment);
            let segment: Segment =
                name.parse().map_err(|e| refused(format!("the plan places an instance on `{name}`: {e}")))?;
            let processes = segment.processes();
            for process in 0..processes {
                let label = if processes > 1 { format!("{i}.{process}") } else { i.to_string() };
                let mut config =
                    InstanceConfig::new(format!("{app}/{}/{}@{name}#{label}", planned.slot, planned.variant));
                config.policy = policy;
                // A `mig:…:K` or `mps:…xK` instance's rate is that of its K processes together.
                these.push((Member::Starting(to_start.len()), planned.rate_rps / f64::from(processes)));
                to_start.push(ToStart {
                    config,
                    model: &variant.name,
                    path: bundle.model_path(variant),
                    segment,
                    place: place.clone(),
                });
            }
        }
        members.push(these);
        groups.push(group);
    }
    let started = side_by_side(to_start, |t| hosts.start(t.config, t.model, &t.path, t.segment, &t.place));
    let started: Vec<Arc<Instance>> =
        started.into_iter().map(|r| r.map(Arc::new).map_err(|e| e.of(bundle))).collect::<Result<_, _>>()?;
    let mut by_slot: HashMap<&str, Vec<(Arc<Instance>, f64)>> = HashMap::new();
    for ((planned, group), these) in deployment.instances.iter().zip(&mut groups).zip(members) {
        for (member, rate) in these {
            let instance = match member {
                Member::Running(instance) => instance,
                Member::Starting(at) => started[at].clone(),
            };
            group.instances.push(instance.clone());
            by_slot.entry(planned.slot.as_str()).or_default().push((instance, rate));
        }
    }
    let mut slots = ModelSlots::new();
    for (slot, instances) in by_slot {
        slots.insert(slot, Arc::new(Pool::new(instances)));
    }
    Ok((slots, groups))
}

/// Of the running groups `kept` (with the instances each was planned as), the one the plan keeps whole for each of
/// its groups, in its order, and each instance (its processes) of the others by where it runs, for a group planned
/// anew to take over. Pooled pipelines' slots (`pipelined`) take nothing over.
fn takeovers<'a>(
    deployment: &Deployment,
    kept: &[(&'a jig_api::PlannedInstances, &'a Group)],
    pipelined: &[&str],
) -> (Vec<Option<&'a Group>>, Vec<Spare<'a>>) {
    let mut kept: Vec<_> = kept.to_vec();
    let whole = (deployment.instances.iter())
        .map(|planned| {
            let same = |(old, _): &(&jig_api::PlannedInstances, &Group)| {
                (&old.slot, &old.variant, &old.segment, old.count, &old.places)
                    == (&planned.slot, &planned.variant, &planned.segment, planned.count, &planned.places)
            };
            let taken_over = !pipelined.contains(&planned.slot.as_str());
            kept.iter().position(same).filter(|_| taken_over).map(|at| kept.swap_remove(at).1)
        })
        .collect();
    let spare = (kept.into_iter())
        .filter(|(old, group)| group.instances.len() % old.count.max(1) as usize == 0)
        .flat_map(|(old, group)| {
            let processes = group.instances.len() / old.count.max(1) as usize;
            group.instances.chunks(processes.max(1)).enumerate().map(move |(i, chunk)| (SparePlace::of(old, i), chunk))
        })
        .collect();
    (whole, spare)
}

/// Running instances (one planned instance's processes) and where they run, for a group planned anew to take over.
type Spare<'a> = (SparePlace<'a>, &'a [Arc<Instance>]);

/// An instance of a group being started: one taken over, running, or the one at this index of those to start.
enum Member {
    Running(Arc<Instance>),
    Starting(usize),
}

/// An instance to start: its name and batch policy, its model, and where it runs.
struct ToStart<'a> {
    config: InstanceConfig,
    model: &'a str,
    path: PathBuf,
    segment: Segment,
    place: InstancePlace,
}

/// `start` of each of `items`, side by side: as many at once as this machine has cores (an instance's start
/// mostly waits, for its model to load on the instance's own thread, or for its worker or node to). In order.
fn side_by_side<T: Send, R: Send>(items: Vec<T>, start: impl Fn(T) -> R + Sync) -> Vec<R> {
    let at_once = std::thread::available_parallelism().map_or(1, usize::from).min(items.len());
    let queue = Mutex::new(items.into_iter().enumerate());
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..at_once)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        // Its own statement, so that the queue is unlocked while the item starts.
                        let next = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                        let Some((at, item)) = next else { return mine };
                        mine.push((at, start(item)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    done.sort_unstable_by_key(|&(at, _)| at);
    done.into_iter().map(|(_, started)| started).collect()
}

/// Where one planned instance runs, as a running one taken over must: its slot, variant, segment and place.
#[derive(PartialEq)]
struct SparePlace<'a> {
    slot: &'a str,
    variant: &'a str,
    segment: &'a str,
    place: InstancePlace,
}

impl<'a> SparePlace<'a> {
    fn of(planned: &'a jig_api::PlannedInstances, i: usize) -> SparePlace<'a> {
        let place = planned.places.get(i).cloned().unwrap_or_default();
        SparePlace { slot: &planned.slot, variant: &planned.variant, segment: &planned.segment, place }
    }
}

/// How the instances of `planned` batch and drop. As planned (§3.3): wait up to L̂ for a fuller batch, drop what
/// can no longer make its deadline. Unplanned instances start batches at once and drop what is past its deadline,
/// or, once observed, what has less time left than their median batch; a pooled pipeline's run each batch its
/// head books alone.
pub(super) fn policy(planned: &jig_api::PlannedInstances, pipelined: bool) -> BatchPolicy {
    let ms = |ms: f64| Duration::from_secs_f64(ms.max(0.0) / 1000.0);
    if pipelined {
        BatchPolicy::serving(1, DEFAULT_DEADLINE)
    } else if planned.wait_ms > 0.0 {
        let stale = if planned.stale_ms > 0.0 { planned.stale_ms } else { 2.0 * planned.wait_ms };
        BatchPolicy::planned(planned.max_batch.into(), ms(planned.wait_ms), ms(planned.drop_budget_ms), ms(stale))
    } else {
        BatchPolicy {
            min_service: ms(planned.drop_budget_ms),
            ..BatchPolicy::serving(planned.max_batch.into(), DEFAULT_DEADLINE)
        }
    }
}

/// Where the launcher starts an instance placed at `place`: pinned to its cores, or bound to the device it was
/// placed on, by UUID (a GPU instance placed on none, as the default deployment's are not, is placed by the
/// launcher when it starts).
fn placement(segment: Segment, place: &InstancePlace) -> Placement {
    let cores = place.cores.iter().map(|&c| c as usize).collect::<Vec<_>>();
    Placement { segment, cores: (!cores.is_empty()).then_some(cores), device: place.device.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jig_api::PlannedInstances;

    /// A re-plan that keeps a group's slot, variant, segment, count and places keeps its running instances, which
    /// take the new plan's batch size and wait bound in place; one that changes the count keeps as many as it
    /// plans and starts the rest.
    #[test]
    fn a_kept_group_takes_the_new_batch_policy_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.jig/models/mlp.onnx");
        std::fs::copy(&model, dir.path().join("mlp.onnx")).expect("`make setup` generates .jig/models");
        std::fs::write(dir.path().join("probe.wasm"), b"").unwrap();
        let manifest = "name = \"kept\"\n[slo]\nlatency_ms = 1000\n\n[[tasks]]\nname = \"probe\"\n\
                        glue = \"probe.wasm\"\nslot = \"classifier\"\n\n[[variants]]\nslot = \"classifier\"\n\
                        name = \"fast\"\nmodel = \"mlp.onnx\"\n";
        let bundle = Bundle::with_manifest(dir.path(), manifest).unwrap();
        let hosts = ModelHosts { launcher: Launcher::discover(), nodes: None };
        let deployment = |max_batch: u32, wait_ms: f64, count: u32| Deployment {
            instances: vec![PlannedInstances {
                slot: "classifier".into(),
                variant: "fast".into(),
                segment: "cpu:1".into(),
                max_batch,
                count,
                rate_rps: 10.0,
                latency_ms: 20.0,
                wait_ms,
                drop_budget_ms: 20.0,
                stale_ms: 200.0,
                places: Vec::new(),
            }],
            ..Deployment::default()
        };
        let first = deployment(1, 10.0, 1);
        let (_, groups) = start_models(&hosts, &bundle, &first, &[], 0).unwrap();
        let running = groups[0].instances[0].clone();
        assert_eq!(running.policy().max_batch, 1);

        let second = deployment(4, 30.0, 1);
        let kept: Vec<_> = first.instances.iter().zip(&groups).collect();
        let (_, regrouped) = start_models(&hosts, &bundle, &second, &kept, 7).unwrap();
        assert!(Arc::ptr_eq(&regrouped[0].instances[0], &running), "the running instance was not kept");
        assert_eq!(regrouped[0].answered_from, 0, "it counts what it served from where it started");
        assert_eq!(regrouped[0].max_batch, 4);
        let policy = running.policy();
        assert_eq!((policy.max_batch, policy.max_wait), (4, Duration::from_millis(30)), "{policy:?}");

        let third = deployment(4, 30.0, 2);
        let kept: Vec<_> = second.instances.iter().zip(&regrouped).collect();
        let (_, grown) = start_models(&hosts, &bundle, &third, &kept, 9).unwrap();
        assert_eq!((grown[0].instances.len(), grown[0].answered_from), (2, 9));
        assert!(Arc::ptr_eq(&grown[0].instances[0], &running), "a group grown by one takes the running one over");
        assert!(!Arc::ptr_eq(&grown[0].instances[1], &running));

        let fourth = deployment(4, 30.0, 1);
        let kept: Vec<_> = third.instances.iter().zip(&grown).collect();
        let (_, shrunk) = start_models(&hosts, &bundle, &fourth, &kept, 11).unwrap();
        assert!(Arc::ptr_eq(&shrunk[0].instances[0], &running), "a group shrunk by one keeps one running");
    }

    /// A planned place on the second 3g.40gb instance starts its worker on that instance, by UUID.
    #[test]
    fn a_place_binds_its_worker_to_the_device_it_names() {
        use jig_model_host::device::Devices;
        let devices = Devices::from_nvidia_smi(
            vec![0, 1],
            "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559, Enabled\n",
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n  MIG 3g.40gb Device 0: (UUID: MIG-0)\n  \
             MIG 3g.40gb Device 1: (UUID: MIG-1)\n",
        );
        let launcher = Launcher::new(devices, None);
        let place = InstancePlace { gpu: Some(0), device: Some("MIG-1".into()), ..InstancePlace::default() };
        let segment: Segment = place.segment("mig:3g.40gb:2").parse().unwrap();
        let bound = launcher.bind(&placement(segment, &place)).unwrap();
        assert_eq!(bound.env()[0], ("CUDA_VISIBLE_DEVICES".into(), "MIG-1".into()));
        assert_eq!(bound.memory, 20_000_000_000, "half of the instance's 40 GB for each of its two processes");
        let cores = InstancePlace { cores: vec![2, 3], ..InstancePlace::default() };
        let pinned = placement(Segment::Cpu { cores: 2 }, &cores);
        assert_eq!((pinned.cores, pinned.device), (Some(vec![2, 3]), None));
    }

    /// Instances start side by side, up to a core each, and come back in the order they were asked for: a
    /// deployment waits for its slowest model to load, not for the sum of them all.
    #[test]
    fn instances_start_side_by_side_and_come_back_in_order() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        use std::sync::atomic::AtomicUsize;
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let started = side_by_side((0..6).collect(), |i: u64| {
            most.fetch_max(running.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
            running.fetch_sub(1, Ordering::SeqCst);
            i * 10
        });
        assert_eq!(started, [0, 10, 20, 30, 40, 50]);
        let most = most.load(Ordering::SeqCst);
        assert!(most <= cores, "{most} at once on {cores} cores");
        assert!(cores < 2 || most >= 2, "one start at a time on {cores} cores");
        assert!(side_by_side(Vec::<u64>::new(), |i| i).is_empty());
    }
}
