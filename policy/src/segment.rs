//! Segment names: one grammar for the planner's segment types and the runtime's placed segments, so that a name
//! one side writes the other reads, with the same messages when it is wrong.
//!
//! A segment is written `cpu:CORES`, `mig:[GPU:]PROFILE:MPS` or `mps:[GPU:]PERCENT[xPROCESSES]`. A segment that
//! runs somewhere names its GPU (`mig:0:3g.40gb:2`, `mps:1:50`, `mps:1:100x4`), as the runtime places it and as
//! profile tables record where they measured; a segment *type*, what the planner plans with, leaves it out
//! (`mig:3g.40gb:2`, `mps:50`, `mps:100x4`). [`SegmentName`] is either, as written; [`SegmentKind`] is what it is, wherever it runs.

use std::fmt;
use std::str::FromStr;

use crate::mig::{MigProfile, UnknownMigProfile};

/// What a segment is, wherever it runs: the planner's segment type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentKind {
    /// A MIG instance with `mps` identical MPS processes in it.
    Mig {
        /// The MIG profile, e.g. `2g.20gb`.
        profile: MigProfile,
        /// MPS processes in the instance, 1–4; a profiled throughput is of all of them together.
        mps: u8,
    },
    /// A share of a whole GPU (MIG off) through `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, as gpu-lets partition
    /// one; shares on one GPU add up to at most 100. Like a MIG instance's MPS processes, `processes` identical
    /// processes may serve the share together, each limited to `percent / processes` of the SMs: a model too
    /// small to fill its share alone (launch- or host-bound) serves more so, and a profiled throughput is of all
    /// of them together, so the plan counts what they serve side by side, not a sum of solo runs.
    Mps {
        /// Percent of the GPU's SMs, 1–100.
        percent: u8,
        /// Processes serving the share, 1–16, at most `percent`.
        processes: u8,
    },
    /// A set of CPU cores.
    Cpu {
        /// Cores taken (at least 1); also the default slice cost.
        cores: u32,
    },
}

impl SegmentKind {
    /// The most processes an `mps:` share may have: well within MPS's 48 clients a GPU, each process its own
    /// CUDA context and ONNX Runtime session.
    pub const MAX_SHARE_PROCESSES: u32 = 16;

    /// What the segment `name` is, placed or not: a profile table's `mig:0:3g.40gb:2` is the type
    /// `mig:3g.40gb:2`, since a type's profile holds on whichever GPU it was measured.
    pub fn parse(name: &str) -> Result<Self, ParseSegmentError> {
        Ok(name.parse::<SegmentName>()?.kind)
    }

    /// The canonical name of the type, without a GPU: `mig:PROFILE:MPS`, `mps:PERCENT` or `cpu:N`.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// The percent of a GPU an `mps:` share is charged for: its [`default_slices`](Self::default_slices), which
    /// are sevenths rounded up (`mps:25` pays for 2/7, 28.6%). `None` for other segments.
    pub fn charged_percent(&self) -> Option<f64> {
        matches!(self, Self::Mps { .. }).then(|| f64::from(self.default_slices()) * 100.0 / 7.0)
    }

    /// The points of a GPU an `mps:` share is charged for beyond its own percentage
    /// ([`charged_percent`](Self::charged_percent)): `mps:25` pays 3.6 more, so four of them do not fit one GPU,
    /// where a share in sevenths (14, 28, 42, 57, 71, 85 or 100%) pays under one point more. 0 for other segments.
    pub fn overcharged_percent(&self) -> f64 {
        match (self, self.charged_percent()) {
            (Self::Mps { percent, .. }, Some(charged)) => charged - f64::from(*percent),
            _ => 0.0,
        }
    }

    /// Slice cost when a spec gives none: the GPU slices a MIG instance effectively takes given its placement
    /// rules ([`MigProfile::effective_slices`]); an MPS share's part of a GPU's seven slices, rounded up; or the
    /// core count.
    pub fn default_slices(&self) -> u32 {
        match self {
            Self::Mig { profile, .. } => profile.effective_slices(),
            Self::Mps { percent, .. } => (u32::from(*percent) * 7).div_ceil(100),
            Self::Cpu { cores } => *cores,
        }
    }
}

impl fmt::Display for SegmentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&SegmentName { kind: *self, gpu: None }, f)
    }
}

/// A segment name as written: what the segment is and, for a GPU segment that names one, its GPU's index (as
/// `nvidia-smi` numbers it). A CPU segment names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentName {
    /// What the segment is.
    pub kind: SegmentKind,
    /// The GPU of a `mig:` or `mps:` segment, when the name gives it.
    pub gpu: Option<u32>,
}

impl FromStr for SegmentName {
    type Err = ParseSegmentError;
    fn from_str(text: &str) -> Result<Self, ParseSegmentError> {
        let invalid = |problem| ParseSegmentError { text: text.to_string(), problem };
        let number = |value: &str, what| {
            value.parse::<u32>().map_err(|_| invalid(SegmentProblem::NotANumber { what, value: value.to_string() }))
        };
        let gpu = |index: Option<&str>| index.map(|i| number(i, "GPU")).transpose();
        let parts: Vec<&str> = text.split(':').collect();
        let (kind, gpu) = match parts.as_slice() {
            ["cpu", cores] => match number(cores, "cores")? {
                0 => return Err(invalid(SegmentProblem::NoCores)),
                cores => (SegmentKind::Cpu { cores }, None),
            },
            ["mig", rest @ .., profile, mps] if rest.len() <= 1 => {
                let gpu = gpu(rest.first().copied())?;
                let profile: MigProfile = profile.parse().map_err(|e| invalid(SegmentProblem::Profile(e)))?;
                match number(mps, "MPS processes")? {
                    mps @ 1..=4 => (SegmentKind::Mig { profile, mps: mps as u8 }, gpu),
                    mps => return Err(invalid(SegmentProblem::MpsProcesses(mps))),
                }
            }
            ["mps", rest @ .., share] if rest.len() <= 1 => {
                let gpu = gpu(rest.first().copied())?;
                let (percent, processes) = match share.split_once('x') {
                    Some((percent, processes)) => (percent, number(processes, "processes")?),
                    None => (*share, 1),
                };
                let percent = match number(percent, "percentage")? {
                    percent @ 1..=100 => percent,
                    percent => return Err(invalid(SegmentProblem::Percent(percent))),
                };
                if !(1..=SegmentKind::MAX_SHARE_PROCESSES).contains(&processes) || processes > percent {
                    return Err(invalid(SegmentProblem::ShareProcesses { percent, processes }));
                }
                (SegmentKind::Mps { percent: percent as u8, processes: processes as u8 }, gpu)
            }
            _ => return Err(invalid(SegmentProblem::Form)),
        };
        Ok(SegmentName { kind, gpu })
    }
}

impl fmt::Display for SegmentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gpu = self.gpu.map(|g| format!("{g}:")).unwrap_or_default();
        match self.kind {
            SegmentKind::Cpu { cores } => write!(f, "cpu:{cores}"),
            SegmentKind::Mig { profile, mps } => write!(f, "mig:{gpu}{profile}:{mps}"),
            SegmentKind::Mps { percent, processes: 1 } => write!(f, "mps:{gpu}{percent}"),
            SegmentKind::Mps { percent, processes } => write!(f, "mps:{gpu}{percent}x{processes}"),
        }
    }
}

/// How to write a segment, which every message about a malformed one ends with.
const USAGE: &str = "write a segment as cpu:CORES, mig:GPU:PROFILE:MPS (e.g. mig:0:3g.40gb:2) or \
                     mps:GPU:PERCENT[xPROCESSES] (e.g. mps:0:50, mps:0:100x4); a segment type leaves out the GPU \
                     (mig:3g.40gb:2, mps:50)";

/// Text that is not a segment name; the message quotes it and says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseSegmentError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub problem: SegmentProblem,
}

/// What is wrong with a segment name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentProblem {
    /// It has none of the forms.
    Form,
    /// A part that must be a number is not.
    NotANumber {
        /// Which part: `cores`, `GPU`, `MPS processes` or `percentage`.
        what: &'static str,
        /// The text in its place.
        value: String,
    },
    /// `cpu:0`.
    NoCores,
    /// A MIG instance's MPS processes out of 1–4.
    MpsProcesses(u32),
    /// An MPS percentage out of 1–100.
    Percent(u32),
    /// An MPS share's processes out of 1–16, or more than its percent (each needs at least 1%).
    ShareProcesses {
        /// The share's percent.
        percent: u32,
        /// The processes asked for.
        processes: u32,
    },
    /// The MIG profile is none jig knows.
    Profile(UnknownMigProfile),
    /// A GPU segment that must run somewhere (the runtime's) names no GPU.
    NoGpu,
}

impl fmt::Display for SegmentProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Form => f.write_str(USAGE),
            Self::NotANumber { what, value } => write!(f, "{what} `{value}` is not a number; {USAGE}"),
            Self::NoCores => f.write_str("needs at least one core"),
            Self::MpsProcesses(n) => write!(f, "a MIG instance is shared by 1 to 4 MPS processes, not {n}"),
            Self::Percent(p) => write!(f, "an MPS percentage is 1 to 100, not {p}"),
            Self::ShareProcesses { percent, processes } => write!(
                f,
                "an MPS share is served by 1 to {} processes, each with at least 1% of the SMs; {percent}% cannot \
                 take {processes}",
                SegmentKind::MAX_SHARE_PROCESSES
            ),
            Self::Profile(e) => fmt::Display::fmt(e, f),
            Self::NoGpu => {
                f.write_str("a GPU segment that runs names its GPU: mig:GPU:PROFILE:MPS or mps:GPU:PERCENT[xPROCESSES]")
            }
        }
    }
}

impl fmt::Display for ParseSegmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "segment `{}`: {}", self.text, self.problem)
    }
}

impl std::error::Error for ParseSegmentError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_in_sevenths_is_charged_what_it_holds_and_a_quarter_share_more() {
        let over = |name: &str| SegmentKind::parse(name).unwrap().overcharged_percent();
        for name in ["mps:14", "mps:0:28", "mps:42x3", "mps:57", "mps:71", "mps:85", "mps:100x4"] {
            assert!(over(name) < 1.0, "{name}: {}", over(name));
        }
        assert!((over("mps:0:25") - 3.57).abs() < 0.01, "{}", over("mps:0:25"));
        assert!((over("mps:50") - 7.14).abs() < 0.01, "{}", over("mps:50"));
        assert_eq!(over("cpu:2"), 0.0);
        assert_eq!(over("mig:3g.40gb:2"), 0.0);
    }

    #[test]
    fn names_parse_with_and_without_a_gpu_and_print_back() {
        for text in ["cpu:4", "mig:0:3g.40gb:2", "mig:1g.10gb:1", "mps:0:50", "mps:100", "mps:0:100x4", "mps:50x2"] {
            assert_eq!(text.parse::<SegmentName>().unwrap().to_string(), text);
        }
        let placed: SegmentName = "mig:1:3g.40gb:2".parse().unwrap();
        assert_eq!(placed.gpu, Some(1));
        assert_eq!(placed.kind, SegmentKind::parse("mig:3g.40gb:2").unwrap());
        assert_eq!((placed.kind.name(), placed.kind.default_slices()), ("mig:3g.40gb:2".into(), 4));
        let share = SegmentKind::parse("mps:0:30").unwrap();
        assert_eq!(
            (share, share.default_slices()),
            (SegmentKind::Mps { percent: 30, processes: 1 }, 3),
            "30% of 7, rounded up"
        );
        let served_by_four = SegmentKind::parse("mps:0:100x4").unwrap();
        assert_eq!(
            (served_by_four, served_by_four.default_slices()),
            (SegmentKind::Mps { percent: 100, processes: 4 }, 7)
        );
        assert_eq!(SegmentKind::parse("mps:50x1").unwrap().name(), "mps:50", "one process is the plain share");
        assert_eq!(SegmentKind::parse("cpu:4").unwrap(), SegmentKind::Cpu { cores: 4 });
    }

    #[test]
    fn bad_names_say_what_is_wrong() {
        for (text, says) in [
            ("cpu:0", "at least one core"),
            ("cpu:x", "cores `x` is not a number"),
            ("cpu:0:4", "write a segment as"),
            ("mig:0:5g.50gb:1", "unknown MIG profile"),
            ("mig:0:1g.10gb:5", "1 to 4 MPS"),
            ("mig:x:1g.10gb:1", "GPU `x` is not a number"),
            ("mig:0:0:1g.10gb:1", "write a segment as"),
            ("mps:0:150", "1 to 100"),
            ("mps:0", "1 to 100"),
            ("mps:0:1:2", "write a segment as"),
            ("mps:0:100x0", "1 to 16 processes"),
            ("mps:0:100x17", "1 to 16 processes"),
            ("mps:0:2x4", "2% cannot take 4"),
            ("mps:0:50x", "processes `` is not a number"),
            ("mps:0:x4", "percentage `` is not a number"),
            ("gpu:1", "write a segment as"),
        ] {
            let err = text.parse::<SegmentName>().unwrap_err().to_string();
            assert!(err.starts_with(&format!("segment `{text}`: ")) && err.contains(says), "{text}: {err}");
        }
    }
}
