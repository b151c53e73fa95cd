//! The MIG profiles of an 80 GB H100 (`anchors-serving.md` §5.1; `+me` is left out): what the device layer
//! creates and binds instances on, and what the planner places and prices.

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

/// A name that is no H100 MIG profile; the message lists the profiles there are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMigProfile(pub String);

impl fmt::Display for UnknownMigProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = MigProfile::ALL.iter().map(|p| p.as_str()).collect();
        write!(f, "unknown MIG profile `{}`; use one of {}", self.0, names.join(", "))
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
