//! Segments: where an instance runs. A set of CPU cores; a MIG instance of an NVIDIA GPU shared by 1–4 MPS
//! processes (JigsawServe); or an MPS active-thread percentage of a whole GPU (gpu-lets), served by 1–16
//! processes.
//!
//! Written as `cpu:4`, `mig:0:3g.40gb:2` (GPU 0, profile 3g.40gb, 2 MPS processes), `mps:0:50` and `mps:0:100x4`
//! (all of GPU 0, served by four processes of 25% each): the grammar of
//! [`jig_policy::segment`], which the planner's segment types (the same without the GPU) share.

use std::fmt;
use std::str::FromStr;

pub use jig_policy::MigProfile;
use jig_policy::segment::{ParseSegmentError, SegmentKind, SegmentName, SegmentProblem};

/// Where an instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Segment {
    /// `cores` CPU cores, pinned, with as many intra-op threads.
    Cpu {
        /// How many cores (at least 1).
        cores: u32,
    },
    /// A MIG instance of GPU `gpu` shared by `mps` MPS processes (1–4); this segment is one of them.
    Mig {
        /// The GPU's index.
        gpu: u32,
        /// The MIG instance's profile, e.g. `3g.40gb`.
        profile: MigProfile,
        /// How many processes share the instance (1–4): each gets `1/mps` of its memory and, through MPS,
        /// `100 / mps` percent of its SMs. The memory is the instance's as this machine lists it, not the
        /// profile's 80 GB size ([`crate::device::Bound::memory`]).
        mps: u8,
    },
    /// `percent` of GPU `gpu`'s SMs through `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, and as much of its memory
    /// ([`crate::device::Bound::memory`]), shared by `processes` processes (1–16); this segment is one of them.
    Mps {
        /// The GPU's index.
        gpu: u32,
        /// The share's percentage (1–100), split evenly among its processes.
        percent: u8,
        /// How many processes serve the share together, each with `percent / processes` of the SMs and as
        /// much of the memory.
        processes: u8,
    },
}

impl Segment {
    /// Whether it is a GPU segment (MIG or MPS), run in a worker process rather than on CPU cores.
    pub fn is_gpu(&self) -> bool {
        !matches!(self, Segment::Cpu { .. })
    }

    /// The index of the GPU a GPU segment is on.
    pub fn gpu(&self) -> Option<u32> {
        match *self {
            Segment::Cpu { .. } => None,
            Segment::Mig { gpu, .. } | Segment::Mps { gpu, .. } => Some(gpu),
        }
    }

    /// How many processes serve one instance of this segment together: K of `mig:GPU:PROFILE:K` (the MIG
    /// instance's MPS processes) and of `mps:GPU:PERCENTxK`, which the planner and the profiler take as one unit;
    /// else 1.
    pub fn processes(&self) -> u32 {
        match *self {
            Segment::Mig { mps, .. } => u32::from(mps),
            Segment::Mps { processes, .. } => u32::from(processes),
            Segment::Cpu { .. } => 1,
        }
    }

    /// The MPS active-thread percentage a process on this segment runs with, if any.
    pub fn mps_percentage(&self) -> Option<u8> {
        match *self {
            Segment::Mig { mps, .. } if mps > 1 => Some(100 / mps),
            Segment::Mps { percent, processes, .. } => Some(percent / processes),
            _ => None,
        }
    }

    /// Its name's parts, in the grammar the planner's segment types share.
    fn name(&self) -> SegmentName {
        match *self {
            Segment::Cpu { cores } => SegmentName { kind: SegmentKind::Cpu { cores }, gpu: None },
            Segment::Mig { gpu, profile, mps } => {
                SegmentName { kind: SegmentKind::Mig { profile, mps }, gpu: Some(gpu) }
            }
            Segment::Mps { gpu, percent, processes } => {
                SegmentName { kind: SegmentKind::Mps { percent, processes }, gpu: Some(gpu) }
            }
        }
    }
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.name(), f)
    }
}

/// A segment runs somewhere: a GPU segment must name its GPU, where a segment type need not.
impl FromStr for Segment {
    type Err = ParseSegmentError;
    fn from_str(s: &str) -> Result<Self, ParseSegmentError> {
        let SegmentName { kind, gpu } = s.parse()?;
        match (kind, gpu) {
            (SegmentKind::Cpu { cores }, _) => Ok(Segment::Cpu { cores }),
            (SegmentKind::Mig { profile, mps }, Some(gpu)) => Ok(Segment::Mig { gpu, profile, mps }),
            (SegmentKind::Mps { percent, processes }, Some(gpu)) => Ok(Segment::Mps { gpu, percent, processes }),
            (_, None) => Err(ParseSegmentError { text: s.to_string(), problem: SegmentProblem::NoGpu }),
        }
    }
}

impl serde::Serialize for Segment {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Segment {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_parse_and_print_back() {
        for s in ["cpu:4", "mig:0:3g.40gb:2", "mig:1:1g.10gb:1", "mps:0:50", "mps:0:100x3"] {
            assert_eq!(s.parse::<Segment>().unwrap().to_string(), s);
        }
        let mig: Segment = "mig:0:3g.40gb:2".parse().unwrap();
        assert_eq!(mig.mps_percentage(), Some(50));
        assert_eq!((mig.processes(), "mps:0:50".parse::<Segment>().unwrap().processes()), (2, 1));
        let shared: Segment = "mps:0:100x3".parse().unwrap();
        assert_eq!((shared.processes(), shared.mps_percentage()), (3, Some(33)), "three processes of a third each");
        assert!(mig.is_gpu() && !"cpu:1".parse::<Segment>().unwrap().is_gpu());
    }

    #[test]
    fn bad_segments_say_what_is_wrong() {
        for (s, says) in [
            ("cpu:0", "at least one core"),
            ("mig:0:5g.50gb:1", "unknown MIG profile"),
            ("mig:0:1g.10gb:5", "1 to 4 MPS"),
            ("mps:0:150", "1 to 100"),
            ("gpu", "write a segment as"),
            ("cpu:x", "not a number"),
            ("mig:3g.40gb:2", "names its GPU"),
            ("mps:50", "names its GPU"),
        ] {
            let err = s.parse::<Segment>().unwrap_err();
            assert!(err.to_string().contains(says), "{s}: {err}");
        }
    }
}
