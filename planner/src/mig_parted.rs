//! A plan's MIG layout, the ecosystem's way: an `nvidia-mig-parted` config file, and what a machine lacks.
//!
//! jig never changes MIG settings itself. [`mig_parted_config`] writes the layout a [`Placement`] needs as the
//! YAML that NVIDIA's MIG partition editor applies (`nvidia-mig-parted apply -f FILE -c NAME`), and that the
//! GPU operator's MIG manager applies to a node labelled `nvidia.com/mig.config=NAME`:
//!
//! ```yaml
//! version: v1
//! mig-configs:
//!   "jig-traffic":
//!     - devices: [0, 1]
//!       mig-enabled: true
//!       mig-devices:
//!         "3g.40gb": 1
//!         "4g.40gb": 1
//!     - devices: [2]
//!       mig-enabled: false
//! ```
//!
//! One entry per distinct layout, listing the GPUs that share it. A MIG instance counts once whatever its MPS
//! processes; a GPU the plan only shares through MPS (`mps:PERCENT`) gets `mig-enabled: false`. GPU `i` of the
//! placement is the machine's GPU `i` as `nvidia-smi` numbers them; mig-parted leaves GPUs the file does not
//! list as they are, and skips listed indices the machine lacks, so a machine with fewer GPUs applies only part
//! of the layout (`nvidia-mig-parted assert` tells). mig-parted is given counts per GPU, not the planner's start
//! slots: it finds a valid arrangement itself.
//!
//! A placement with no GPU has no MIG layout: [`mig_parted_config`] refuses it ([`MigConfigError::NoGpu`])
//! rather than write a file that mig-parted would reject (it needs at least one entry) or one that disables MIG
//! on every GPU (`devices: all`), which the plan does not ask for.
//!
//! [`missing_instances`] compares the layout with the MIG instances a machine has, for a deployment to say what
//! is missing before it starts models.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use thiserror::Error;

use crate::placement::{Device, Placement};
use jig_policy::mig::GpuModel;

/// What the plan needs of one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuUse {
    /// MIG enabled, with these instances: profile name (`3g.40gb`) → count.
    Mig(BTreeMap<String, u32>),
    /// The whole GPU, shared through MPS: MIG disabled.
    Shared,
}

/// Why no config could be written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MigConfigError {
    /// The placement uses no GPU (only CPU cores), so there is no MIG layout.
    #[error("the plan places nothing on a GPU, so it has no MIG layout to write")]
    NoGpu,
    /// The name cannot name a config: it must also be a Kubernetes label value (`nvidia.com/mig.config=NAME`).
    #[error(
        "`{0}` cannot name a MIG config: use 1 to 63 letters, digits, `-`, `_` or `.`, starting and ending with a letter or digit"
    )]
    BadName(String),
}

/// Each GPU the placement uses, by index, and what it needs of it. A GPU with MIG instances is [`GpuUse::Mig`]
/// even if a share were also placed on it (the packing never does: shared GPUs are numbered after MIG ones).
pub fn gpu_layout(placement: &Placement) -> BTreeMap<u32, GpuUse> {
    let mut layout = BTreeMap::new();
    for placed in &placement.instances {
        match &placed.device {
            Device::Gpu { gpu, profile, .. } => {
                let entry = layout.entry(*gpu).or_insert(GpuUse::Shared);
                if *entry == GpuUse::Shared {
                    *entry = GpuUse::Mig(BTreeMap::new());
                }
                if let GpuUse::Mig(counts) = entry {
                    *counts.entry(profile.clone()).or_insert(0) += 1;
                }
            }
            Device::GpuShare { gpu, .. } => {
                layout.entry(*gpu).or_insert(GpuUse::Shared);
            }
            Device::Cpu { .. } | Device::None => {}
        }
    }
    layout
}

/// The config name jig gives an app's layout: `jig-APP`, with characters a label value cannot hold replaced by
/// `-` and cut to 63 characters.
pub fn config_name(app: &str) -> String {
    let name: String = format!("jig-{app}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .take(63)
        .collect();
    name.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()).to_string()
}

/// Whether `name` is a Kubernetes label value (the MIG manager reads the config name from a node label).
fn valid_name(name: &str) -> bool {
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    name.len() <= 63
        && ends_ok(name.chars().next())
        && ends_ok(name.chars().last())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The placement's MIG layout as an `nvidia-mig-parted` config file with one config, `name`, under a comment
/// header that says how to apply it.
/// Profiles are written with `model`'s names (the H200's `3g.71gb` for jig's `3g.40gb`).
pub fn mig_parted_config(placement: &Placement, name: &str, model: &GpuModel) -> Result<String, MigConfigError> {
    if !valid_name(name) {
        return Err(MigConfigError::BadName(name.to_string()));
    }
    let layout = gpu_layout(placement);
    if layout.is_empty() {
        return Err(MigConfigError::NoGpu);
    }
    let used: Vec<String> = layout.keys().map(u32::to_string).collect();
    let gpus = match used.as_slice() {
        [one] => format!("GPU {one}"),
        many => format!("GPUs {}", many.join(", ")),
    };
    // GPUs with the same layout share one entry, in the order of their first GPU.
    let mut groups: Vec<(GpuUse, Vec<u32>)> = Vec::new();
    for (gpu, use_) in layout {
        match groups.iter_mut().find(|(u, _)| *u == use_) {
            Some((_, gpus)) => gpus.push(gpu),
            None => groups.push((use_, vec![gpu])),
        }
    }

    let shared = groups.iter().any(|(u, _)| *u == GpuUse::Shared);
    let mut out = format!(
        "\
# MIG layout of a jig plan for {gpus}, for nvidia-mig-parted (config `{name}`). jig changes no MIG settings.
# GPU i here is the machine's GPU i as nvidia-smi numbers them; GPUs not listed are left as they are.
# Apply it on the machine (stop what runs on these GPUs first), then check it:
#   sudo nvidia-mig-parted apply -f THIS_FILE -c {name}
#   nvidia-mig-parted assert -f THIS_FILE -c {name}
# Or with the NVIDIA GPU operator: add config `{name}` below to the `config.yaml` of the MIG manager's
# ConfigMap (`default-mig-parted-config`, or the one the ClusterPolicy's migManager.config.name names;
# mig.strategy=mixed unless all instances are of one profile), then label the node:
#   kubectl label node NODE nvidia.com/mig.config={name} --overwrite
"
    );
    if shared {
        out.push_str("# GPUs with mig-enabled: false are shared whole through MPS.\n");
    }
    let _ = write!(out, "version: v1\nmig-configs:\n  \"{name}\":\n");
    for (use_, gpus) in groups {
        let list: Vec<String> = gpus.iter().map(u32::to_string).collect();
        let _ = writeln!(out, "    - devices: [{}]", list.join(", "));
        match use_ {
            GpuUse::Mig(counts) => {
                out.push_str("      mig-enabled: true\n      mig-devices:\n");
                for (profile, n) in counts {
                    let profile = named_by(model, &profile);
                    let _ = writeln!(out, "        \"{profile}\": {n}");
                }
            }
            GpuUse::Shared => out.push_str("      mig-enabled: false\n"),
        }
    }
    Ok(out)
}

/// MIG instances of one profile on one GPU that the plan needs and the machine lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingInstances {
    /// GPU index, as in the placement and `nvidia-smi`.
    pub gpu: u32,
    /// The MIG profile, e.g. `3g.40gb`.
    pub profile: String,
    /// Instances of `profile` the plan places on `gpu`.
    pub needed: u32,
    /// Instances of `profile` the machine has on `gpu` (fewer than `needed`).
    pub present: u32,
}

impl fmt::Display for MissingInstances {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (needed, profile, gpu) = (self.needed, &self.profile, self.gpu);
        write!(f, "the plan needs {needed}× {profile} on GPU {gpu}; this machine has ")?;
        match self.present {
            0 => f.write_str("none"),
            n => write!(f, "only {n}"),
        }
    }
}

/// `profile` (jig's name) as `model` names it.
fn named_by<'a>(model: &GpuModel, profile: &'a str) -> &'a str {
    profile.parse().map_or(profile, |p| model.name_of(p))
}

/// The MIG instances the placement needs that `present` (the machine's instances as (GPU index, jig's name of
/// the profile, e.g. `3g.40gb`)) lacks, by GPU then profile, named as `model` names them; empty when the machine
/// has them all. Extra instances, and MIG mode on GPUs the plan shares through MPS, are not checked.
pub fn missing_instances<S: AsRef<str>>(
    placement: &Placement,
    present: &[(u32, S)],
    model: &GpuModel,
) -> Vec<MissingInstances> {
    let mut have: BTreeMap<(u32, &str), u32> = BTreeMap::new();
    for (gpu, profile) in present {
        *have.entry((*gpu, profile.as_ref())).or_insert(0) += 1;
    }
    let mut missing = Vec::new();
    for (gpu, use_) in gpu_layout(placement) {
        let GpuUse::Mig(counts) = use_ else { continue };
        for (profile, needed) in counts {
            let present = have.get(&(gpu, profile.as_str())).copied().unwrap_or(0);
            if present < needed {
                let profile = named_by(model, &profile).to_string();
                missing.push(MissingInstances { gpu, profile, needed, present });
            }
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Item, place};
    use crate::spec::{MigProfile, SegmentKind};
    use jig_policy::mig::{GPU_80GB, GPU_MODELS};

    fn mig(profile: MigProfile, mps: u8) -> Item {
        Item { label: format!("{profile}:{mps}"), kind: SegmentKind::Mig { profile, mps } }
    }

    fn share(percent: u8) -> Item {
        Item { label: format!("mps:{percent}"), kind: SegmentKind::Mps { percent, processes: 1 } }
    }

    fn cpu(cores: u32) -> Item {
        Item { label: format!("cpu:{cores}"), kind: SegmentKind::Cpu { cores } }
    }

    /// The file as mig-parted reads it (`api/spec/v1/spec.go`): unknown fields refused, `devices` a list of
    /// indices or `all`.
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Spec {
        version: String,
        #[serde(rename = "mig-configs")]
        mig_configs: BTreeMap<String, Vec<Entry>>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    struct Entry {
        devices: Devices,
        mig_enabled: bool,
        mig_devices: Option<BTreeMap<String, u32>>,
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(untagged)]
    enum Devices {
        List(Vec<u32>),
        All(String),
    }

    /// Parse `yaml` and apply mig-parted's own checks; returns the one config's entries.
    fn parse(yaml: &str, name: &str) -> Vec<Entry> {
        let spec: Spec = serde_norway::from_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        assert_eq!(spec.version, "v1");
        assert_eq!(spec.mig_configs.keys().collect::<Vec<_>>(), [name]);
        let entries = spec.mig_configs.into_values().next().unwrap();
        assert!(!entries.is_empty(), "mig-parted needs at least one entry");
        for e in &entries {
            match (&e.mig_enabled, &e.mig_devices) {
                (true, Some(d)) => assert!(d.values().any(|&n| n > 0), "all counts 0: {e:?}"),
                (true, None) => panic!("mig-enabled without mig-devices: {e:?}"),
                (false, d) => assert!(d.as_ref().is_none_or(|d| d.is_empty()), "devices on a MIG-off GPU: {e:?}"),
            }
        }
        entries
    }

    fn counts(pairs: &[(&str, u32)]) -> Option<BTreeMap<String, u32>> {
        Some(pairs.iter().map(|&(p, n)| (p.to_string(), n)).collect())
    }

    #[test]
    fn writes_each_gpus_instances_and_merges_equal_layouts() {
        use MigProfile::*;
        // GPU 0 and 1: a 4g.40gb and a 3g.40gb each (one of the 3g runs 2 MPS processes: still one instance);
        // GPU 2: seven 1g.10gb.
        let mut items = vec![mig(G4_40, 1), mig(G3_40, 2), mig(G4_40, 1), mig(G3_40, 1)];
        items.extend(std::iter::repeat_n(mig(G1_10, 3), 7));
        let p = place(&items, 16);
        assert_eq!(p.gpus, 3, "{p:#?}");
        let yaml = mig_parted_config(&p, "jig-traffic", &GPU_80GB).unwrap();
        assert!(yaml.contains("sudo nvidia-mig-parted apply -f THIS_FILE -c jig-traffic"), "{yaml}");
        assert!(yaml.contains("nvidia.com/mig.config=jig-traffic"), "{yaml}");
        assert!(yaml.contains("for GPUs 0, 1, 2,") && !yaml.contains("through MPS"), "{yaml}");
        let entries = parse(&yaml, "jig-traffic");
        assert_eq!(entries.len(), 2, "{yaml}");
        assert_eq!(entries[0].devices, Devices::List(vec![0, 1]));
        assert!(entries[0].mig_enabled);
        assert_eq!(entries[0].mig_devices, counts(&[("3g.40gb", 1), ("4g.40gb", 1)]));
        assert_eq!(entries[1].devices, Devices::List(vec![2]));
        assert_eq!(entries[1].mig_devices, counts(&[("1g.10gb", 7)]));
        // An H200 gets the same layout in its own names.
        let h200 = parse(&mig_parted_config(&p, "jig-traffic", &GPU_MODELS[3]).unwrap(), "jig-traffic");
        assert_eq!(h200[0].mig_devices, counts(&[("3g.71gb", 1), ("4g.71gb", 1)]));
        assert_eq!(h200[1].mig_devices, counts(&[("1g.18gb", 7)]));
    }

    #[test]
    fn gpus_shared_through_mps_have_mig_disabled() {
        // GPU 0 is MIG (7g.80gb); 60 % + 30 % share GPU 1, 50 % takes GPU 2; CPU items are not GPUs.
        let items = [share(50), share(30), share(60), mig(MigProfile::G7_80, 4), cpu(4)];
        let p = place(&items, 16);
        let layout = gpu_layout(&p);
        assert_eq!(layout.get(&1), Some(&GpuUse::Shared));
        let yaml = mig_parted_config(&p, "jig-x", &GPU_80GB).unwrap();
        assert!(yaml.contains("mig-enabled: false are shared whole through MPS"), "{yaml}");
        let entries = parse(&yaml, "jig-x");
        assert_eq!(entries.len(), 2, "{yaml}");
        assert_eq!(entries[0].devices, Devices::List(vec![0]));
        assert_eq!(entries[0].mig_devices, counts(&[("7g.80gb", 1)]));
        assert_eq!(entries[1].devices, Devices::List(vec![1, 2]));
        assert!(!entries[1].mig_enabled && entries[1].mig_devices.is_none(), "{yaml}");

        // Only shares: every GPU gets MIG disabled, and the file still parses.
        let only = place(&[share(70), share(70)], 16);
        let entries = parse(&mig_parted_config(&only, "jig-x", &GPU_80GB).unwrap(), "jig-x");
        assert_eq!(entries.len(), 1);
        assert_eq!((&entries[0].devices, entries[0].mig_enabled), (&Devices::List(vec![0, 1]), false));
    }

    #[test]
    fn a_plan_without_gpus_or_with_a_bad_name_is_refused() {
        let p = place(&[cpu(4), cpu(8)], 16);
        assert_eq!(mig_parted_config(&p, "jig-cpu", &GPU_80GB), Err(MigConfigError::NoGpu));
        let g = place(&[mig(MigProfile::G1_10, 1)], 16);
        for bad in ["", "-jig", "jig x", "jig-", &"a".repeat(64)] {
            assert_eq!(mig_parted_config(&g, bad, &GPU_80GB), Err(MigConfigError::BadName(bad.to_string())), "{bad:?}");
        }
        assert_eq!(config_name("traffic-analysis"), "jig-traffic-analysis");
        assert_eq!(config_name("a b/c_"), "jig-a-b-c");
        let long = config_name(&"x".repeat(100));
        assert!(long.len() == 63 && valid_name(&long), "{long}");
    }

    #[test]
    fn missing_instances_say_what_the_machine_lacks() {
        use MigProfile::*;
        // GPU 0: 4g.40gb + 3g.40gb (the 3g with 2 MPS processes); GPU 1: two 3g.40gb; GPU 2: shared.
        let items = [mig(G4_40, 1), mig(G3_40, 2), mig(G3_40, 1), mig(G3_40, 1), share(40)];
        let p = place(&items, 16);
        let layout = gpu_layout(&p);
        assert_eq!(layout[&0], GpuUse::Mig(counts(&[("3g.40gb", 1), ("4g.40gb", 1)]).unwrap()), "{p:#?}");
        assert_eq!(layout[&1], GpuUse::Mig(counts(&[("3g.40gb", 2)]).unwrap()), "{p:#?}");

        let none: &[(u32, &str)] = &[];
        let all_missing = missing_instances(&p, none, &GPU_80GB);
        assert_eq!(all_missing.len(), 3, "{all_missing:?}");
        assert_eq!(all_missing[2].to_string(), "the plan needs 2× 3g.40gb on GPU 1; this machine has none");

        // The right profiles on the wrong GPU, and too few: still missing. Extras do not matter.
        let have = [(0, "4g.40gb".to_string()), (0, "3g.40gb".into()), (1, "3g.40gb".into()), (2, "1g.10gb".into())];
        let missing = missing_instances(&p, &have, &GPU_80GB);
        assert_eq!(
            missing,
            [MissingInstances { gpu: 1, profile: "3g.40gb".into(), needed: 2, present: 1 }],
            "{missing:?}"
        );
        assert_eq!(missing[0].to_string(), "the plan needs 2× 3g.40gb on GPU 1; this machine has only 1");
        let full = [(0, "4g.40gb"), (0, "3g.40gb"), (1, "3g.40gb"), (1, "3g.40gb"), (1, "1g.10gb")];
        assert!(missing_instances(&p, &full, &GPU_80GB).is_empty());
    }
}
