//! What a deployment may use: the free cores, MPS shares and MIG instances of the gateway's machine or its
//! nodes; and how planned instances take their places out of it. Places are handed out here and nowhere else,
//! so that no two instances (of one app or of two) hold the same core, share or MIG instance.

use std::collections::BTreeMap;

use jig_api::{Deployment, InstancePlace};
use jig_model_host::device::Devices;
use jig_model_host::segment::MigProfile;
use jig_planner::spec::SegmentKind;

/// What a deployment may use: the cores and GPUs the gateway is given (its own machine's, or its nodes'), less
/// what other apps hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// The machines instances may run on: the gateway's own, or each `jig node` it was given.
    pub machines: Vec<Machine>,
}

/// What is free on one machine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Machine {
    /// The `jig node` it is, by address (`IP:PORT`); `None` for the gateway's own machine.
    pub node: Option<String>,
    /// Free CPU cores, as the machine numbers them.
    pub cores: Vec<u32>,
    /// GPUs with what is free on each.
    pub gpus: Vec<GpuCapacity>,
}

/// What is free on one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuCapacity {
    /// The GPU's index, as `nvidia-smi` numbers it.
    pub index: u32,
    /// Its product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Its `GPU-…` UUID, which an `mps:` share placed on it is bound to.
    pub uuid: String,
    /// Percent of its SMs free for `mps:` shares; 0 on a GPU in MIG mode, whose MIG instances serve instead.
    pub mps_percent: u32,
    /// Whether the GPU is in MIG mode (then only its MIG instances serve).
    pub mig_mode: bool,
    /// Its existing MIG instances that no app holds, in `nvidia-smi -L`'s order: the profile and the
    /// instance's `MIG-…` UUID, which an instance placed on it is bound to.
    pub mig: Vec<(MigProfile, String)>,
    /// Whether a plan may give it any MIG layout (its seven slices, whatever instances exist now): what
    /// `jig plan BUNDLE --mig-config FILE` plans with, to write the layout that would serve the plan.
    pub any_layout: bool,
    /// Whether an app holds part of it (an MPS share or a MIG instance): its layout is not for a new plan to
    /// change.
    pub held: bool,
}

impl Machine {
    /// The first `cores` of `devices`' CPU cores and the GPUs listed in `gpus` (all of them when `None`).
    pub fn of(devices: &Devices, cores: u32, gpus: Option<&[u32]>) -> Machine {
        let gpus = devices
            .gpus
            .iter()
            .filter(|g| gpus.is_none_or(|allowed| allowed.contains(&g.index)))
            .map(|g| {
                let mig =
                    g.mig_instances.iter().filter_map(|m| Some((m.profile_on(&g.name)?, m.uuid.clone()))).collect();
                GpuCapacity {
                    index: g.index,
                    name: g.name.clone(),
                    uuid: g.uuid.clone(),
                    mps_percent: if g.mig_enabled { 0 } else { 100 },
                    mig_mode: g.mig_enabled,
                    mig,
                    any_layout: false,
                    held: false,
                }
            })
            .collect();
        Machine { node: None, cores: devices.cpu_cores.iter().take(cores as usize).map(|&c| c as u32).collect(), gpus }
    }

    /// Hold room for one instance of `segment` here: the first free cores, the first GPU with the share free,
    /// the first free MIG instance of the profile.
    fn take(&mut self, segment: &SegmentKind) -> Option<InstancePlace> {
        let here = InstancePlace { node: self.node.clone(), ..InstancePlace::default() };
        match *segment {
            SegmentKind::Cpu { cores } => {
                let cores = cores as usize;
                (self.cores.len() >= cores)
                    .then(|| InstancePlace { cores: self.cores.drain(..cores).collect(), ..here })
            }
            SegmentKind::Mps { percent, .. } => {
                let gpu = self.gpus.iter_mut().find(|g| g.mps_percent >= u32::from(percent))?;
                gpu.mps_percent -= u32::from(percent);
                Some(InstancePlace { gpu: Some(gpu.index), device: Some(gpu.uuid.clone()), ..here })
            }
            SegmentKind::Mig { profile, .. } => self.gpus.iter_mut().find_map(|g| {
                if g.any_layout {
                    return Some(InstancePlace { gpu: Some(g.index), ..here.clone() });
                }
                let i = g.mig.iter().position(|&(p, _)| p == profile)?;
                let (_, uuid) = g.mig.remove(i);
                Some(InstancePlace { gpu: Some(g.index), device: Some(uuid), ..here.clone() })
            }),
        }
    }
}

impl Capacity {
    /// The gateway's own machine: [`Machine::of`].
    pub fn of(devices: &Devices, cores: u32, gpus: Option<&[u32]>) -> Capacity {
        Capacity { machines: vec![Machine::of(devices, cores, gpus)] }
    }

    /// The nodes a gateway found (`jig_node::discover`): each node's cores and GPUs.
    pub fn of_nodes<'a>(nodes: impl IntoIterator<Item = (&'a str, &'a Devices)>) -> Capacity {
        let machines = nodes
            .into_iter()
            .map(|(addr, devices)| Machine {
                node: Some(addr.to_string()),
                ..Machine::of(devices, devices.cpu_cores.len() as u32, None)
            })
            .collect();
        Capacity { machines }
    }

    /// This capacity with each GPU of a model whose MIG layouts jig knows, and of which no app holds part,
    /// free to take any of them, as if MIG instances could be created at will: for a plan whose layout is to be
    /// written (`--mig-config`), not for a deployment, which serves only on instances that exist.
    pub fn with_any_mig_layout(mut self) -> Capacity {
        let gpus = self.machines.iter_mut().flat_map(|m| &mut m.gpus);
        for gpu in gpus.filter(|g| !g.held && jig_policy::mig::has_layouts(&g.name)) {
            gpu.any_layout = true;
        }
        self
    }

    /// Cores `0..cores` of the gateway's machine and no GPU.
    pub fn cpu_only(cores: u32) -> Capacity {
        Capacity { machines: vec![Machine { cores: (0..cores).collect(), ..Machine::default() }] }
    }

    /// Free cores on all machines.
    pub fn cores(&self) -> u32 {
        self.machines.iter().map(|m| m.cores.len() as u32).sum()
    }

    /// The most free cores on one machine: the largest `cpu:` segment an instance can have.
    pub fn cores_per_machine(&self) -> u32 {
        self.machines.iter().map(|m| m.cores.len() as u32).max().unwrap_or(0)
    }

    /// Every machine's GPUs.
    pub fn gpus(&self) -> impl Iterator<Item = &GpuCapacity> {
        self.machines.iter().flat_map(|m| &m.gpus)
    }

    /// What is left once `deployment`'s placed instances hold their cores, GPU shares and MIG instances.
    pub fn without(mut self, deployment: &Deployment) -> Capacity {
        for planned in &deployment.instances {
            let kind = SegmentKind::parse(&planned.segment).ok();
            for place in &planned.places {
                let Some(machine) = self.machines.iter_mut().find(|m| m.node == place.node) else { continue };
                machine.cores.retain(|c| !place.cores.contains(c));
                let Some(gpu) = machine.gpus.iter_mut().find(|g| Some(g.index) == place.gpu) else { continue };
                gpu.held = true;
                match kind {
                    Some(SegmentKind::Mps { percent, .. }) => {
                        gpu.mps_percent = gpu.mps_percent.saturating_sub(percent.into());
                    }
                    Some(SegmentKind::Mig { profile, .. }) => {
                        gpu.mig.retain(|(p, uuid)| (*p, Some(uuid)) != (profile, place.device.as_ref()));
                    }
                    _ => {}
                }
            }
        }
        self
    }

    /// Whether an instance of `segment` would find room.
    pub(super) fn offers(&self, segment: &SegmentKind) -> bool {
        self.clone().take(segment).is_some()
    }

    /// The free MIG instances by profile, which a plan may use no more of; `None` when a GPU may take any
    /// layout ([`Capacity::with_any_mig_layout`]).
    pub fn mig_instances(&self) -> Option<BTreeMap<String, u32>> {
        if self.gpus().any(|g| g.any_layout) {
            return None;
        }
        let mut counts = BTreeMap::new();
        for (profile, _) in self.gpus().flat_map(|g| &g.mig) {
            *counts.entry(profile.to_string()).or_insert(0) += 1;
        }
        Some(counts)
    }

    /// GPU slices free in all: an MPS share's part of seven, rounded up as a share's cost is (the half of a GPU
    /// another app left takes an `mps:50`, which costs 4), and the slices of free MIG instances. Placing the
    /// plan checks the percentages themselves.
    pub(super) fn gpu_slices(&self) -> u32 {
        let mig = |g: &GpuCapacity| g.mig.iter().map(|(p, _)| p.effective_slices()).sum::<u32>();
        self.gpus().map(|g| if g.any_layout { 7 } else { (g.mps_percent * 7).div_ceil(100) + mig(g) }).sum()
    }

    /// Hold room for one instance of `segment` on the first machine that has it.
    fn take(&mut self, segment: &SegmentKind) -> Option<InstancePlace> {
        self.machines.iter_mut().find_map(|m| m.take(segment))
    }

    /// Places for `shares` (`mps:` segments) all on one GPU: the first with room for them together.
    pub(super) fn take_together(&mut self, shares: &[SegmentKind]) -> Option<Vec<InstancePlace>> {
        let percents = shares.iter().map(|kind| match kind {
            SegmentKind::Mps { percent, .. } => Some(u32::from(*percent)),
            _ => None,
        });
        let total: u32 = percents.collect::<Option<Vec<u32>>>()?.iter().sum();
        self.machines.iter_mut().find_map(|m| {
            let gpu = m.gpus.iter_mut().find(|g| g.mps_percent >= total)?;
            gpu.mps_percent -= total;
            let place = InstancePlace {
                node: m.node.clone(),
                gpu: Some(gpu.index),
                device: Some(gpu.uuid.clone()),
                ..Default::default()
            };
            Some(vec![place; shares.len()])
        })
    }

    /// Hold one core on the machine with the most free cores, as [`Capacity::fallback_place`] chooses it.
    pub(super) fn take_core(&mut self) -> Option<InstancePlace> {
        self.machines.iter_mut().max_by_key(|m| m.cores.len())?.take(&SegmentKind::Cpu { cores: 1 })
    }

    /// Where an unplanned instance runs: unpinned on the gateway's machine, or on the node with the most free
    /// cores.
    pub(super) fn fallback_place(&self) -> Option<InstancePlace> {
        let machine = self.machines.iter().max_by_key(|m| m.cores.len())?;
        machine.node.clone().map(|node| InstancePlace { node: Some(node), ..InstancePlace::default() })
    }
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(node) = &self.node {
            write!(f, "node {node}: ")?;
        }
        write!(f, "{} cores", self.cores.len())?;
        for g in &self.gpus {
            write!(f, ", GPU {}: ", g.index)?;
            if g.any_layout {
                write!(f, "any MIG layout")?;
            } else if g.mig_mode && g.mig.is_empty() {
                write!(f, "MIG mode, no free MIG instance")?;
            } else if g.mig.is_empty() {
                write!(f, "{}% for MPS shares", g.mps_percent)?;
            } else {
                let mig: Vec<String> = g.mig.iter().map(|(p, _)| p.to_string()).collect();
                write!(f, "MIG {}", mig.join(" "))?;
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Capacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.machines.is_empty() {
            return f.write_str("no machine");
        }
        let machines: Vec<String> = self.machines.iter().map(Machine::to_string).collect();
        f.write_str(&machines.join("; "))
    }
}

/// Places from `free` for each `(kind, count)` of `wanted`, in its order (fewer than `count` where `free` runs
/// out). MPS shares are taken largest first, so that shares that fill a GPU together (gpu-lets' 20/80 and 40/60
/// splits, PPipe's halves and quarters) find each other: first fit in the plan's order can strand them.
pub(super) fn take_places(free: &mut Capacity, wanted: &[(SegmentKind, u32)]) -> Vec<Vec<InstancePlace>> {
    let share = |kind: &SegmentKind| if let SegmentKind::Mps { percent, .. } = kind { *percent } else { 0 };
    let mut order: Vec<usize> = (0..wanted.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(share(&wanted[i].0)));
    let mut taken = vec![Vec::new(); wanted.len()];
    for i in order {
        let (kind, count) = &wanted[i];
        taken[i] = (0..*count).map_while(|_| free.take(kind)).collect();
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::test_support::{bundle, machine, places};
    use crate::deployment::{Observations, fallback, plan, plan_for_deploy};

    #[test]
    fn capacity_offers_cores_whole_gpus_and_existing_mig_instances() {
        let capacity = Capacity::of(&machine(), 6, None);
        assert_eq!(capacity.machines[0].cores, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(capacity.to_string(), "6 cores, GPU 0: MIG 3g.40gb 3g.40gb 1g.10gb, GPU 1: 100% for MPS shares");
        assert!(capacity.offers(&SegmentKind::parse("mps:0:60").unwrap()));
        assert!(capacity.offers(&SegmentKind::parse("mig:0:3g.40gb:2").unwrap()));
        assert!(!capacity.offers(&SegmentKind::parse("mig:0:2g.20gb:1").unwrap()), "no such instance exists");
        assert!(!capacity.offers(&SegmentKind::parse("cpu:7").unwrap()));
        // 7 slices of GPU 1, and 4 + 4 + 2 of GPU 0's instances (1g.10gb blocks two memory slots).
        assert_eq!(capacity.gpu_slices(), 7 + 4 + 4 + 1);
        let only_gpu_1 = Capacity::of(&machine(), 6, Some(&[1]));
        assert_eq!(only_gpu_1.gpus().count(), 1);
        assert!(Capacity::of(&machine(), 6, Some(&[])).gpus().next().is_none());
        // Each place names its device by UUID: the second 3g.40gb instance is `MIG-1`, not "the 3g.40gb #1".
        let (mut free, mig) = (capacity.clone(), SegmentKind::parse("mig:0:3g.40gb:1").unwrap());
        let taken: Vec<Option<String>> = (0..3).map(|_| free.take(&mig).and_then(|p| p.device)).collect();
        assert_eq!(taken, [Some("MIG-0".into()), Some("MIG-1".into()), None]);
        let mps = free.take(&SegmentKind::parse("mps:0:50").unwrap()).unwrap();
        assert_eq!((mps.gpu, mps.device.as_deref()), (Some(1), Some("GPU-bbbb")));
    }

    #[test]
    fn shares_are_placed_largest_first_so_that_splits_fill_their_gpus() {
        let two = Devices::from_nvidia_smi(
            Vec::new(),
            "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559, Disabled\n1, NVIDIA H100 80GB HBM3, GPU-bbbb, 81559, Disabled\n",
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n",
        );
        // 20/80 and 40/60 in a plan's order: first fit would put 20 and 60 on GPU 0 and find no room for the 40.
        let wanted: Vec<(SegmentKind, u32)> =
            ["mps:20", "mps:60", "mps:80", "mps:40"].iter().map(|s| (SegmentKind::parse(s).unwrap(), 1)).collect();
        let taken = take_places(&mut Capacity::of(&two, 0, None), &wanted);
        let gpus: Vec<Option<u32>> = taken.iter().map(|places| places.first().and_then(|p| p.gpu)).collect();
        assert_eq!(gpus, [Some(0), Some(1), Some(0), Some(1)], "{taken:?}");
    }

    #[test]
    fn instances_are_planned_across_nodes_each_on_one_node() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0)]);
        let node = |cores: usize| Devices { cpu_cores: (0..cores).collect(), gpus: Vec::new() };
        let (a, b) = (node(3), node(2));
        let capacity = Capacity::of_nodes([("10.0.0.1:7070", &a), ("10.0.0.2:7070", &b)]);
        assert_eq!(capacity.to_string(), "node 10.0.0.1:7070: 3 cores; node 10.0.0.2:7070: 2 cores");
        assert!(!capacity.offers(&SegmentKind::parse("cpu:4").unwrap()), "no node has four cores");
        // 31.5 req/s at 10 req/s an instance wants four; five cores in all hold two, one on each node.
        let d = plan(&bundle, &[], &capacity, &Observations::default());
        let mut nodes: Vec<Option<String>> = places(&d).into_iter().map(|(_, p)| p.node).collect();
        nodes.sort();
        assert_eq!(nodes, [Some("10.0.0.1:7070".into()), Some("10.0.0.2:7070".into())], "{d:?}");
        // What they hold is held on their own node.
        let left = capacity.clone().without(&d);
        assert_eq!((left.machines[0].cores.len(), left.machines[1].cores.len()), (1, 0));
        // The default deployment runs on the node with the most free cores.
        let unplanned = fallback(&bundle, &left, "test");
        assert_eq!(unplanned.instances[0].places[0].node.as_deref(), Some("10.0.0.1:7070"));
        assert_eq!(unplanned.instances[0].segment, "cpu:1");
    }

    #[test]
    fn a_second_app_plans_within_what_the_first_left_free() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0), ("mig:0:3g.40gb:1", 4, 40.0, 40.0)]);
        let all = Capacity::of(&machine(), 8, Some(&[0]));
        let first = plan(&bundle, &[], &all, &Observations::default());
        let free = all.clone().without(&first);
        let second = plan(&bundle, &[], &free, &Observations::default());
        let (a, b) = (places(&first), places(&second));
        assert!(!a.is_empty() && !b.is_empty(), "{first:?}\n{second:?}");
        for (_, p) in &a {
            for (_, q) in &b {
                assert!(p.cores.iter().all(|c| !q.cores.contains(c)), "core handed out twice: {p:?} {q:?}");
                if p.device.as_ref().is_some_and(|d| d.starts_with("MIG-")) {
                    assert_ne!(p.device, q.device, "MIG instance handed out twice");
                }
            }
        }
        // Both 3g.40gb instances are taken between them, or cores make up the rest.
        let left = free.without(&second);
        let held = |c: &Capacity| c.cores() as usize + c.machines[0].gpus[0].mig.len();
        assert!(held(&left) < held(&all));
    }

    #[test]
    fn mps_shares_of_a_gpu_are_never_handed_out_twice() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("mps:0:50", 4, 40.0, 100.0)]);
        let share = |d: &Deployment| -> u32 {
            assert!(d.instances.iter().all(|i| i.segment == "mps:50" || i.segment == "mps:0:50"), "{d:?}");
            d.instances.iter().map(|i| i.places.iter().filter(|p| p.gpu == Some(1)).count() as u32 * 50).sum()
        };
        let gpu = |c: &Capacity| c.machines[0].gpus[0].mps_percent;
        let all = Capacity::of(&machine(), 8, Some(&[1]));
        let first = plan_for_deploy(&bundle, &[], &all, &Observations::default()).unwrap();
        let free = all.clone().without(&first);
        assert_eq!((share(&first), gpu(&free)), (50, 50), "{first:?}");
        let second = plan_for_deploy(&bundle, &[], &free, &Observations::default()).unwrap();
        let left = free.without(&second);
        assert_eq!((share(&second), gpu(&left)), (50, 0), "{second:?}");
        // A third finds none of the GPU left, and is refused rather than given a share twice.
        let third = plan_for_deploy(&bundle, &[], &left, &Observations::default()).unwrap_err().to_string();
        assert!(third.contains("GPU 1: 0% for MPS shares") && third.contains("or free them"), "{third}");
    }
}
