//! The MIG profiles of an 80 GB H100 (`anchors-serving.md` §5.1; `+me` is left out): what the device layer
//! creates and binds instances on, and what the planner places and prices.
//!
//! The A100 40GB, the H100 NVL (94 GB) and the H200 have the same six shapes (compute slices, memory slots)
//! and so the same layouts, under other names ([`GpuModel`]). jig names a shape by its 80 GB name everywhere
//! (segments, profile tables, plans), and translates at the machine's edge: `nvidia-smi`'s listing in, the
//! `nvidia-mig-parted` config and the names of missing instances out.

use std::fmt;
use std::str::FromStr;

/// A MIG profile: compute slices (of 7) and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MigProfile {
    /// `1g.10gb`: 1 compute slice, 1 memory slot (10 GB).
    G1_10,
    /// `1g.20gb`: 1 compute slice, 2 memory slots (20 GB).
    G1_20,
    /// `2g.20gb`: 2 compute slices, 2 memory slots (20 GB).
    G2_20,
    /// `3g.40gb`: 3 compute slices, 4 memory slots (40 GB).
    G3_40,
    /// `4g.40gb`: 4 compute slices, 4 memory slots (40 GB).
    G4_40,
    /// `7g.80gb`: the whole GPU, 7 compute slices, 8 memory slots (80 GB).
    G7_80,
}

impl MigProfile {
    /// Every profile, smallest first.
    pub const ALL: [MigProfile; 6] = [Self::G1_10, Self::G1_20, Self::G2_20, Self::G3_40, Self::G4_40, Self::G7_80];

    /// Its position in [`MigProfile::ALL`]: where tables of one number per profile keep its number.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The profile's name as `nvidia-smi` writes it, e.g. `3g.40gb`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::G1_10 => "1g.10gb",
            Self::G1_20 => "1g.20gb",
            Self::G2_20 => "2g.20gb",
            Self::G3_40 => "3g.40gb",
            Self::G4_40 => "4g.40gb",
            Self::G7_80 => "7g.80gb",
        }
    }

    /// Compute slices (of 7).
    pub fn compute_slices(self) -> u32 {
        match self {
            Self::G1_10 | Self::G1_20 => 1,
            Self::G2_20 => 2,
            Self::G3_40 => 3,
            Self::G4_40 => 4,
            Self::G7_80 => 7,
        }
    }

    /// Memory slots (of 8, 10 GB each) the instance occupies: its placement size.
    pub fn memory_slots(self) -> u32 {
        match self {
            Self::G1_10 => 1,
            Self::G1_20 | Self::G2_20 => 2,
            Self::G3_40 | Self::G4_40 => 4,
            Self::G7_80 => 8,
        }
    }

    /// Valid start slots.
    pub fn starts(self) -> &'static [u32] {
        match self {
            Self::G1_10 => &[0, 1, 2, 3, 4, 5, 6],
            Self::G1_20 => &[0, 2, 4, 6],
            Self::G2_20 => &[0, 2, 4],
            Self::G3_40 => &[0, 4],
            Self::G4_40 | Self::G7_80 => &[0],
        }
    }

    /// Memory in GB, as the name says: 10 GB per memory slot.
    pub fn memory_gb(self) -> u32 {
        10 * self.memory_slots()
    }

    /// Slices the instance costs once its placement rules are counted: the compute slices its memory slots
    /// block, of 7 (paper §5: 1g.20gb and 3g.40gb cost as much as 2g.20gb and 4g.40gb).
    pub fn effective_slices(self) -> u32 {
        self.memory_slots().min(7)
    }
}

/// A valid MIG layout of one GPU: its instances, each at a valid start slot, without overlap, within the 7
/// compute slices and at most 7 instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// (profile, start slot) of each instance, largest profile first.
    pub instances: Vec<(MigProfile, u32)>,
}

impl Layout {
    /// Instances of profile `p`.
    pub fn count(&self, p: MigProfile) -> u32 {
        self.instances.iter().filter(|(q, _)| *q == p).count() as u32
    }

    /// Slices a GPU with this layout holds: its instances' [`MigProfile::effective_slices`], but never more
    /// than the GPU's 7 (4g.40gb + 3g.40gb is priced 4 + 4, yet is one whole GPU).
    pub fn slices(&self) -> u32 {
        self.instances.iter().map(|(p, _)| p.effective_slices()).sum::<u32>().min(7)
    }

    /// What the per-instance prices charge beyond [`Layout::slices`]: 1 for a full layout whose effective
    /// slices add up to 8, else 0.
    pub fn overcharge(&self) -> u32 {
        self.instances.iter().map(|(p, _)| p.effective_slices()).sum::<u32>() - self.slices()
    }
}

/// A GPU model whose MIG profiles jig knows: the names its `nvidia-smi` gives the six shapes of [`MigProfile`].
#[derive(Debug, PartialEq, Eq)]
pub struct GpuModel {
    /// The model, in words.
    pub name: &'static str,
    /// Its names of the profiles of [`MigProfile::ALL`], in that order.
    pub profile_names: [&'static str; 6],
}

/// The 80 GB H100 and A100, whose names jig uses for every model.
pub const GPU_80GB: GpuModel = GpuModel {
    name: "80 GB H100 or A100",
    profile_names: ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
};

/// Every GPU model whose MIG profiles and layouts jig knows (NVIDIA's MIG user guide, "Supported MIG Profiles").
pub const GPU_MODELS: [GpuModel; 4] = [
    GPU_80GB,
    GpuModel { name: "A100 40GB", profile_names: ["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"] },
    GpuModel {
        name: "H100 NVL (94 GB)",
        profile_names: ["1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"],
    },
    GpuModel {
        name: "H200 (141 GB)",
        profile_names: ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
    },
];

/// The GPU models whose MIG profiles and layouts jig knows, in words.
pub const GPUS_WITH_LAYOUTS: &str = "the 80 GB H100 and A100, the A100 40GB, the H100 NVL (94 GB) and the H200";

impl GpuModel {
    /// The model of the GPU `nvidia-smi` names `name` (e.g. `NVIDIA H100 80GB HBM3`, `NVIDIA A100-SXM4-40GB`,
    /// `NVIDIA H200`), if jig knows its MIG profiles.
    pub fn of(name: &str) -> Option<&'static GpuModel> {
        let has = |s: &str| name.contains(s);
        let i = if (has("H100") || has("A100")) && has("80GB") || has("H100 PCIe") {
            0
        } else if has("A100") && has("40GB") {
            1
        } else if has("H100 NVL") || has("H100") && has("94GB") {
            2
        } else if has("H200") && !has("GH200") {
            3
        } else {
            return None;
        };
        Some(&GPU_MODELS[i])
    }

    /// This model's name of `profile` (e.g. `3g.71gb` on an H200 for [`MigProfile::G3_40`]).
    pub fn name_of(&self, profile: MigProfile) -> &'static str {
        let i = MigProfile::ALL.iter().position(|&p| p == profile).expect("every profile is in ALL");
        self.profile_names[i]
    }

    /// The profile this model names `name` (as `nvidia-smi` lists its instances).
    pub fn profile(&self, name: &str) -> Option<MigProfile> {
        let i = self.profile_names.iter().position(|&n| n == name)?;
        Some(MigProfile::ALL[i])
    }
}

/// Whether jig knows the MIG profiles and layouts of the GPU `nvidia-smi` names `name` ([`GpuModel::of`]).
pub fn has_layouts(name: &str) -> bool {
    GpuModel::of(name).is_some()
}

/// Every valid layout of an 80 GB H100 (and A100), one per combination of profiles (77 of them; a combination
/// that fits has one placement listed), in a fixed order.
pub fn layouts() -> &'static [Layout] {
    static LAYOUTS: std::sync::OnceLock<Vec<Layout>> = std::sync::OnceLock::new();
    LAYOUTS.get_or_init(|| {
        let mut found: Vec<Layout> = Vec::new();
        // Add instances in the order of ALL, largest first, so each combination is reached as a sorted list.
        fn grow(layout: &mut Vec<(MigProfile, u32)>, slots: &mut [bool; 8], compute: u32, found: &mut Vec<Layout>) {
            for p in MigProfile::ALL.into_iter().rev() {
                if layout.last().is_some_and(|&(q, _)| p > q) || compute + p.compute_slices() > 7 || layout.len() >= 7 {
                    continue;
                }
                for &start in p.starts() {
                    let span = start as usize..(start + p.memory_slots()) as usize;
                    if slots[span.clone()].iter().any(|&used| used) {
                        continue;
                    }
                    slots[span.clone()].iter_mut().for_each(|s| *s = true);
                    layout.push((p, start));
                    let profiles = |l: &[(MigProfile, u32)]| l.iter().map(|(p, _)| *p).collect::<Vec<_>>();
                    if !found.iter().any(|f| profiles(&f.instances) == profiles(layout)) {
                        found.push(Layout { instances: layout.clone() });
                    }
                    grow(layout, slots, compute + p.compute_slices(), found);
                    layout.pop();
                    slots[span].iter_mut().for_each(|s| *s = false);
                }
            }
        }
        grow(&mut Vec::new(), &mut [false; 8], 0, &mut found);
        found
    })
}

/// A name that is no H100 MIG profile; the message lists the profiles there are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMigProfile(pub String);

impl fmt::Display for UnknownMigProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = MigProfile::ALL.iter().map(|p| p.as_str()).collect();
        write!(f, "unknown MIG profile `{}`; use one of {}", self.0, names.join(", "))?;
        // Another model's name: say which shape it is.
        if let Some((model, p)) = GPU_MODELS.iter().find_map(|m| Some((m, m.profile(&self.0)?))) {
            write!(
                f,
                " (`{}` is the {}'s {p}: jig names every model's profiles by their 80 GB names)",
                self.0, model.name
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownMigProfile {}

impl FromStr for MigProfile {
    type Err = UnknownMigProfile;
    fn from_str(s: &str) -> Result<Self, UnknownMigProfile> {
        Self::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| UnknownMigProfile(s.to_string()))
    }
}

impl fmt::Display for MigProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_known() {
        for p in MigProfile::ALL {
            assert_eq!(p.as_str().parse::<MigProfile>(), Ok(p));
        }
        let error = "3g.20gb".parse::<MigProfile>().unwrap_err().to_string();
        assert!(error.contains("3g.20gb") && error.contains("7g.80gb"), "{error}");
        assert!(error.contains("the A100 40GB's 3g.40gb"), "{error}");
        assert!(!"5g.50gb".parse::<MigProfile>().unwrap_err().to_string().contains("'s"));
    }

    #[test]
    fn layouts_are_every_combination_that_fits_and_are_priced_at_most_a_gpu() {
        let all = layouts();
        assert_eq!(all.len(), 77);
        for l in all {
            let mut slots = [false; 8];
            for &(p, start) in &l.instances {
                assert!(p.starts().contains(&start), "{l:?}");
                for s in start..start + p.memory_slots() {
                    assert!(!std::mem::replace(&mut slots[s as usize], true), "overlap in {l:?}");
                }
            }
            assert!(l.instances.iter().map(|(p, _)| p.compute_slices()).sum::<u32>() <= 7, "{l:?}");
            assert!(l.slices() <= 7 && l.overcharge() <= 1, "{l:?}");
        }
        let of = |profiles: &[MigProfile]| {
            all.iter().find(|l| {
                let mut mine: Vec<MigProfile> = l.instances.iter().map(|(p, _)| *p).collect();
                mine.sort();
                let mut want = profiles.to_vec();
                want.sort();
                mine == want
            })
        };
        use MigProfile::*;
        let full = of(&[G4_40, G3_40]).expect("4g + 3g fits");
        assert_eq!((full.slices(), full.overcharge()), (7, 1));
        assert_eq!(of(&[G2_20, G2_20, G2_20, G1_10]).map(Layout::slices), Some(7));
        assert!(of(&[G4_40, G4_40]).is_none() && of(&[G3_40, G3_40, G1_10]).is_none());
        assert!(of(&[G1_10; 7]).is_some() && of(&[G1_10; 8]).is_none());
    }

    use MigProfile::*;

    #[test]
    fn each_model_names_the_same_shapes_its_own_way() {
        let model = |gpu: &str| GpuModel::of(gpu).map(|m| m.name);
        assert_eq!(model("NVIDIA H100 80GB HBM3"), Some(GPU_80GB.name));
        assert_eq!(model("NVIDIA A100-SXM4-80GB"), Some(GPU_80GB.name));
        assert_eq!(model("NVIDIA H100 PCIe"), Some(GPU_80GB.name));
        assert_eq!(model("NVIDIA A100-PCIE-40GB"), Some("A100 40GB"));
        assert_eq!(model("NVIDIA H100 NVL"), Some("H100 NVL (94 GB)"));
        assert_eq!(model("NVIDIA H200"), Some("H200 (141 GB)"));
        assert_eq!(model("NVIDIA H200 NVL"), Some("H200 (141 GB)"));
        for unknown in ["NVIDIA A30", "NVIDIA GH200 480GB", "NVIDIA B200", "Tesla T4"] {
            assert!(!has_layouts(unknown), "{unknown}");
        }
        // The one name two models give different shapes: 1 compute slice with one memory slot on an 80 GB GPU,
        // with two on an A100 40GB (10 GB is a quarter of its memory).
        let a100_40 = GpuModel::of("NVIDIA A100-SXM4-40GB").unwrap();
        assert_eq!((GPU_80GB.profile("1g.10gb"), a100_40.profile("1g.10gb")), (Some(G1_10), Some(G1_20)));
        let h200 = GpuModel::of("NVIDIA H200").unwrap();
        assert_eq!((h200.profile("3g.71gb"), h200.name_of(G3_40)), (Some(G3_40), "3g.71gb"));
        assert_eq!(h200.profile("3g.40gb"), None, "an 80 GB name is no H200 profile");
        for m in &GPU_MODELS {
            for p in MigProfile::ALL {
                assert_eq!(m.profile(m.name_of(p)), Some(p), "{}", m.name);
                // The name says the shape: its compute slices, and memory in proportion to its slots.
                let name = m.name_of(p);
                assert!(name.starts_with(&format!("{}g.", p.compute_slices())), "{name}");
                let gb: f64 = name.split('.').nth(1).unwrap().trim_end_matches("gb").parse().unwrap();
                let whole: f64 = m.name_of(G7_80).split('.').nth(1).unwrap().trim_end_matches("gb").parse().unwrap();
                let share = f64::from(p.memory_slots()) / 8.0;
                assert!((gb / whole - share).abs() < 0.03, "{name}: {gb} of {whole} GB is not {share}");
            }
        }
        assert_eq!(GPU_80GB.profile_names.map(|n| n.parse::<MigProfile>().unwrap()), MigProfile::ALL);
    }

    #[test]
    fn a_profiles_index_is_its_place_in_all() {
        for (i, p) in MigProfile::ALL.into_iter().enumerate() {
            assert_eq!(p.index(), i, "{p}");
        }
    }

    #[test]
    fn every_start_leaves_the_instance_inside_the_eight_memory_slots() {
        for p in MigProfile::ALL {
            assert!(p.starts().iter().all(|s| s + p.memory_slots() <= 8), "{p}");
            assert!(p.compute_slices() <= p.effective_slices(), "{p}");
            assert!(p.as_str().ends_with(&format!(".{}gb", p.memory_gb())), "{p}");
        }
        let effective: Vec<u32> = MigProfile::ALL.iter().map(|p| p.effective_slices()).collect();
        assert_eq!(effective, [1, 2, 2, 4, 4, 7]);
    }
}
