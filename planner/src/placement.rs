//! Packing of planned instances onto H100 80GB GPUs (MIG start-slot rules) and onto CPU hosts (core ranges).
//!
//! A GPU has 8 memory slots; a MIG instance occupies `[start, start + size)` and may start only at its profile's
//! valid slots (`anchors-serving.md` §5.1), with at most 7 compute slices and 7 instances per GPU. MIG instances
//! go to the GPUs of a packing into valid layouts (`jig_policy::mig::layouts`): the plan's own, or the one
//! [`pack_layouts`] finds. Anything left (and MPS shares, and core ranges) goes largest first, each to the first
//! GPU or host where it fits, trying the start slots that strand least first: a 3g.40gb at slot 4 leaves 0–3
//! for a 4g.40gb, a 1g.20gb at slot 6 is the only small instance that uses slot 7.

use std::collections::HashMap;

use jig_policy::mig::{Layout, layouts};
use serde::Serialize;

use crate::spec::{MigProfile, SegmentKind};

/// Instances of each MIG profile, in the order of [`MigProfile::ALL`].
pub type MigCounts = [u32; 6];

/// The MIG instances among `items`, by profile.
pub fn mig_counts<'a>(kinds: impl IntoIterator<Item = &'a SegmentKind>) -> MigCounts {
    let mut counts = [0; 6];
    for kind in kinds {
        if let SegmentKind::Mig { profile, .. } = kind {
            counts[profile.index()] += 1;
        }
    }
    counts
}

/// How many GPUs take each layout of [`layouts`] (by index) to hold exactly `counts`: the packing that
/// holds the fewest slices ([`Layout::slices`]), and of those the fewest GPUs. `None` when the search would
/// be too large (thousands of instances of many profiles).
pub fn pack_layouts(counts: &MigCounts) -> Option<Vec<(usize, u32)>> {
    /// States the search may visit before it gives up.
    const MAX_STATES: usize = 200_000;
    type Best = Option<(u32, u32, usize)>; // (slices, GPUs, first layout)
    fn best(counts: MigCounts, memo: &mut HashMap<MigCounts, Best>) -> Option<Best> {
        if counts == [0; 6] {
            return Some(Some((0, 0, usize::MAX)));
        }
        if let Some(&known) = memo.get(&counts) {
            return Some(known);
        }
        if memo.len() >= MAX_STATES {
            return None;
        }
        // The largest instance left must go on some GPU: try each layout that holds it and fits in what is left.
        let largest = (0..6).rev().find(|&i| counts[i] > 0).expect("not all zero");
        let mut found: Best = None;
        for (index, layout) in layouts().iter().enumerate() {
            let held: MigCounts = std::array::from_fn(|i| layout.count(MigProfile::ALL[i]));
            if held[largest] == 0 || (0..6).any(|i| held[i] > counts[i]) {
                continue;
            }
            let rest: MigCounts = std::array::from_fn(|i| counts[i] - held[i]);
            if let Some((slices, gpus, _)) = best(rest, memo)? {
                let candidate = (slices + layout.slices(), gpus + 1, index);
                if found.is_none_or(|f| (candidate.0, candidate.1) < (f.0, f.1)) {
                    found = Some(candidate);
                }
            }
        }
        memo.insert(counts, found);
        Some(found)
    }
    // The best packing of each state does not depend on the call: keep them (evaluating many plans of one
    // problem, as the exhaustive search does, meets the same states again and again).
    thread_local! {
        static MEMO: std::cell::RefCell<HashMap<MigCounts, Best>> = Default::default();
    }
    let mut packing: Vec<(usize, u32)> = Vec::new();
    let mut counts = *counts;
    while counts != [0; 6] {
        let found = MEMO.with_borrow_mut(|memo| {
            if memo.len() >= MAX_STATES {
                memo.clear();
            }
            best(counts, memo)
        });
        let (_, _, index) = found??;
        let layout = &layouts()[index];
        counts = std::array::from_fn(|i| counts[i] - layout.count(MigProfile::ALL[i]));
        match packing.iter_mut().find(|(i, _)| *i == index) {
            Some((_, n)) => *n += 1,
            None => packing.push((index, 1)),
        }
    }
    Some(packing)
}

/// The slices `counts` MIG instances hold, packed by [`pack_layouts`]: their effective slices, less one for
/// each GPU they fill whose instances are priced 8. Without a packing, the effective slices.
pub fn mig_slices(counts: &MigCounts) -> u32 {
    let priced: u32 = MigProfile::ALL.iter().zip(counts).map(|(p, n)| p.effective_slices() * n).sum();
    let overcharged = pack_layouts(counts)
        .map(|packing| packing.iter().map(|&(i, gpus)| layouts()[i].overcharge() * gpus).sum::<u32>())
        .unwrap_or(0);
    priced - overcharged
}

/// One instance to place.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Names the instance in the placement (the planner writes `task/variant/bBATCH#i`).
    pub label: String,
    /// The segment type it needs.
    pub kind: SegmentKind,
}

/// Where the instances go, and how tightly they pack.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    /// Where each item went, in the order given.
    pub instances: Vec<Placed>,
    /// GPUs used.
    pub gpus: u32,
    /// Fewest GPUs any packing could use (by memory slots and by compute slices).
    pub gpus_lower_bound: u32,
    /// Compute slices left idle on the GPUs used.
    pub stranded_slices: u32,
    /// CPU hosts used.
    pub hosts: u32,
    /// Cores left idle on the CPU hosts used.
    pub stranded_cores: u32,
    /// Items that fit no device (a `cpu:N` segment larger than a host).
    pub unplaced: Vec<String>,
}

/// Where one item went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placed {
    /// The item's label.
    pub label: String,
    /// The item's segment type, by its canonical name.
    pub segment: String,
    /// The device and the part of it the item takes.
    pub device: Device,
}

/// A device and the part of it one instance takes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Device {
    /// A MIG instance on a GPU.
    Gpu {
        /// GPU index, from 0, in the order the packing opened them.
        gpu: u32,
        /// First memory slot (0–7) the instance occupies; a valid start for its profile.
        start_slot: u32,
        /// The MIG profile, e.g. `3g.40gb`.
        profile: String,
        /// MPS processes in the instance.
        mps: u8,
    },
    /// A share of a whole GPU through MPS (the GPU runs no MIG instances).
    GpuShare {
        /// GPU index, from 0, in the order the packing opened them (the same numbering as `Gpu`).
        gpu: u32,
        /// Percent of the GPU's SMs.
        percent: u8,
    },
    /// A range of cores on a CPU host.
    Cpu {
        /// Host index, from 0, in the order the packing opened them.
        host: u32,
        /// First core of the range.
        first_core: u32,
        /// Cores in the range.
        cores: u32,
    },
    /// Not placed: the item fits no device (see [`Placement::unplaced`]).
    None,
}

const GPU_SLOTS: u32 = 8;
const GPU_COMPUTE: u32 = 7;
const GPU_MAX_INSTANCES: u32 = 7;

#[derive(Debug, Clone, Default)]
struct Gpu {
    slots: [bool; GPU_SLOTS as usize],
    compute: u32,
    instances: u32,
}

impl Gpu {
    fn start_for(&self, p: MigProfile) -> Option<u32> {
        if self.compute + p.compute_slices() > GPU_COMPUTE || self.instances >= GPU_MAX_INSTANCES {
            return None;
        }
        preferred_starts(p).iter().copied().find(|&s| (s..s + p.memory_slots()).all(|i| !self.slots[i as usize]))
    }

    fn take(&mut self, p: MigProfile, start: u32) {
        (start..start + p.memory_slots()).for_each(|i| self.slots[i as usize] = true);
        self.compute += p.compute_slices();
        self.instances += 1;
    }
}

fn preferred_starts(p: MigProfile) -> &'static [u32] {
    match p {
        MigProfile::G3_40 => &[4, 0],
        MigProfile::G1_20 => &[6, 4, 2, 0],
        other => other.starts(),
    }
}

/// Place `items` on as few GPUs and hosts as the greedy rule finds; the MIG instances on the GPUs of
/// `layouts` first ((index into [`layouts`], GPUs) as [`pack_layouts`] or the planner chose them), each at
/// its layout's start slot.
pub fn place(items: &[Item], cores_per_host: u32) -> Placement {
    let packing = pack_layouts(&mig_counts(items.iter().map(|it| &it.kind))).unwrap_or_default();
    place_on(items, cores_per_host, &packing)
}

/// [`place`] with the MIG GPUs' layouts given.
pub fn place_on(items: &[Item], cores_per_host: u32, packing: &[(usize, u32)]) -> Placement {
    let mut order: Vec<usize> = (0..items.len()).collect();
    let size = |k: &SegmentKind| match k {
        SegmentKind::Mig { profile, .. } => (profile.memory_slots(), profile.compute_slices()),
        SegmentKind::Mps { percent, .. } => (u32::from(*percent), u32::from(*percent)),
        SegmentKind::Cpu { cores } => (*cores, *cores),
    };
    order.sort_by_key(|&i| std::cmp::Reverse(size(&items[i].kind)));

    let mut gpus: Vec<Gpu> = Vec::new();
    // The layouts' free instances: (GPU, profile, start slot).
    let mut planned: Vec<(usize, MigProfile, u32)> = Vec::new();
    for &(index, count) in packing {
        let layout: &Layout = &layouts()[index];
        for _ in 0..count {
            planned.extend(layout.instances.iter().map(|&(p, start)| (gpus.len(), p, start)));
            gpus.push(Gpu::default());
        }
    }
    // GPUs shared through MPS (percent in use), numbered after the MIG ones once packing is done.
    let mut shared: Vec<u32> = Vec::new();
    let mut hosts: Vec<u32> = Vec::new(); // cores used per host
    let mut devices = vec![Device::None; items.len()];
    let mut unplaced = Vec::new();
    for i in order {
        devices[i] = match items[i].kind {
            SegmentKind::Mig { profile, mps } => {
                let slot = planned.iter().position(|&(_, p, _)| p == profile).map(|k| planned.swap_remove(k));
                let found = slot
                    .map(|(g, _, start)| (g, start))
                    .or_else(|| gpus.iter().enumerate().find_map(|(g, gpu)| gpu.start_for(profile).map(|s| (g, s))));
                let (g, start) = found.unwrap_or_else(|| {
                    gpus.push(Gpu::default());
                    (gpus.len() - 1, profile.starts()[0])
                });
                gpus[g].take(profile, start);
                Device::Gpu { gpu: g as u32, start_slot: start, profile: profile.to_string(), mps }
            }
            SegmentKind::Mps { percent, .. } => {
                let percent32 = u32::from(percent);
                let g = shared.iter().position(|&used| used + percent32 <= 100).unwrap_or_else(|| {
                    shared.push(0);
                    shared.len() - 1
                });
                shared[g] += percent32;
                Device::GpuShare { gpu: g as u32, percent }
            }
            SegmentKind::Cpu { cores } if cores <= cores_per_host => {
                let h = hosts.iter().position(|&used| used + cores <= cores_per_host).unwrap_or_else(|| {
                    hosts.push(0);
                    hosts.len() - 1
                });
                let first_core = hosts[h];
                hosts[h] += cores;
                Device::Cpu { host: h as u32, first_core, cores }
            }
            SegmentKind::Cpu { cores } => {
                unplaced.push(format!("{} needs {cores} cores, a host has {cores_per_host}", items[i].label));
                Device::None
            }
        };
    }
    // MPS-shared GPUs come after the MIG ones.
    for device in &mut devices {
        if let Device::GpuShare { gpu, .. } = device {
            *gpu += gpus.len() as u32;
        }
    }
    let (slots, compute) = items.iter().fold((0, 0), |(s, c), it| match it.kind {
        SegmentKind::Mig { profile, .. } => (s + profile.memory_slots(), c + profile.compute_slices()),
        SegmentKind::Mps { .. } | SegmentKind::Cpu { .. } => (s, c),
    });
    let shared_lower_bound = shared.iter().sum::<u32>().div_ceil(100);
    Placement {
        instances: items
            .iter()
            .zip(devices)
            .map(|(it, device)| Placed { label: it.label.clone(), segment: it.kind.name(), device })
            .collect(),
        gpus: (gpus.len() + shared.len()) as u32,
        gpus_lower_bound: slots.div_ceil(GPU_SLOTS).max(compute.div_ceil(GPU_COMPUTE)) + shared_lower_bound,
        stranded_slices: gpus.iter().map(|g| GPU_COMPUTE - g.compute).sum::<u32>()
            + shared.iter().map(|used| (100 - used) * GPU_COMPUTE / 100).sum::<u32>(),
        hosts: hosts.len() as u32,
        stranded_cores: hosts.iter().map(|used| cores_per_host - used).sum(),
        unplaced,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mig(p: MigProfile) -> Item {
        Item { label: p.to_string(), kind: SegmentKind::Mig { profile: p, mps: 1 } }
    }

    /// Every instance sits at a valid start, inside the GPU, without overlap, within 7 compute slices.
    fn check(p: &Placement) {
        let mut used: std::collections::HashMap<u32, ([bool; 8], u32)> = Default::default();
        for inst in &p.instances {
            let Device::Gpu { gpu, start_slot, profile, .. } = &inst.device else { continue };
            let profile = profile.parse::<MigProfile>().unwrap();
            assert!(profile.starts().contains(start_slot), "{profile} at {start_slot}");
            let (slots, compute) = used.entry(*gpu).or_default();
            for s in *start_slot..start_slot + profile.memory_slots() {
                assert!(s < 8 && !slots[s as usize], "overlap on GPU {gpu} slot {s}");
                slots[s as usize] = true;
            }
            *compute += profile.compute_slices();
            assert!(*compute <= 7);
        }
    }

    #[test]
    fn packs_full_gpus_by_the_start_slot_rules() {
        use MigProfile::*;
        // 4g + 3g fill one GPU; 3 × 2g + 1g.20gb fill one; 7 × 1g.10gb fill one.
        let mut items = vec![mig(G4_40), mig(G3_40)];
        items.extend([G2_20, G2_20, G2_20, G1_20].map(mig));
        items.extend(std::iter::repeat_n(G1_10, 7).map(mig));
        let p = place(&items, 16);
        check(&p);
        assert_eq!((p.gpus, p.gpus_lower_bound, p.stranded_slices), (3, 3, 0), "{p:#?}");
    }

    #[test]
    fn reports_stranded_slices_and_cpu_cores() {
        use MigProfile::*;
        let items =
            vec![mig(G3_40), mig(G3_40), mig(G1_10), Item { label: "c".into(), kind: SegmentKind::Cpu { cores: 6 } }];
        let p = place(&items, 8);
        check(&p);
        // Two 3g.40gb take all 8 slots: the 1g.10gb needs a second GPU.
        assert_eq!((p.gpus, p.stranded_slices), (2, 1 + 6));
        assert_eq!((p.hosts, p.stranded_cores), (1, 2));
        let big = place(&[Item { label: "x".into(), kind: SegmentKind::Cpu { cores: 9 } }], 8);
        assert_eq!(big.unplaced.len(), 1);
    }

    #[test]
    fn mps_shares_fill_whole_gpus_after_the_mig_ones() {
        let share =
            |label: &str, percent| Item { label: label.into(), kind: SegmentKind::Mps { percent, processes: 1 } };
        let items = [share("a", 50), share("b", 30), share("c", 60), mig(MigProfile::G7_80)];
        let p = place(&items, 16);
        check(&p);
        let gpu_of = |label: &str| match p.instances.iter().find(|i| i.label == label).unwrap().device {
            Device::GpuShare { gpu, .. } => gpu,
            ref other => panic!("{label} on {other:?}"),
        };
        // 60 and 30 share one GPU, 50 takes another; the MIG GPU is GPU 0.
        assert_eq!((gpu_of("c"), gpu_of("b"), gpu_of("a")), (1, 1, 2), "{p:#?}");
        assert_eq!((p.gpus, p.gpus_lower_bound), (3, 1 + 2));
    }
}
