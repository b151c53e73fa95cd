//! Device discovery: CPU cores always; NVIDIA GPUs through the CUDA driver API (`cudarc`, which loads
//! `libcuda` at run time: count, name, UUID, memory, streaming multiprocessors) and `nvidia-smi` (MIG mode and
//! the MIG instances that exist). Without a GPU, or without the driver, discovery reports CPU cores only, and
//! everything runs on CPU segments.
//!
//! A GPU segment is bound to one device by its UUID ([`Devices::bind`]): the MIG instance or GPU its
//! placement names, never "the nth instance of a profile", so a worker restarts on the very instance it was
//! placed on or not at all. The binding also fixes the GPU memory the instance may use ([`Bound::memory`]).

mod cuda;
mod nvidia_smi;

pub use cuda::{CudaDevice, ProfilerRangeError, cuda_gpus, in_profiler_range, sleep_while_waiting};
pub use nvidia_smi::{parse_gpu_query, parse_mig_list};

use crate::segment::{MigProfile, Segment};
use nvidia_smi::{attach_mig_instances, nvidia_smi, query_gpus};

/// What this machine offers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Devices {
    /// CPU cores this process may run on.
    pub cpu_cores: Vec<usize>,
    /// NVIDIA GPUs, in `nvidia-smi`'s order; empty without a GPU or its driver.
    pub gpus: Vec<Gpu>,
}

/// One NVIDIA GPU, as `nvidia-smi` (or, without it, the CUDA driver) describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Gpu {
    /// The index segments name it by (`mig:GPU:…`, `mps:GPU:…`), as `nvidia-smi` numbers it.
    pub index: u32,
    /// The product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// `GPU-…`: what `CUDA_VISIBLE_DEVICES` takes to bind a process to the whole GPU.
    pub uuid: String,
    /// Total memory, in MiB.
    pub memory_mib: u64,
    /// Streaming multiprocessors, from the CUDA driver; `None` when only `nvidia-smi` answered.
    pub sms: Option<u32>,
    /// Whether MIG mode is on (`nvidia-smi`'s `mig.mode.current`); `mig:` segments need it.
    pub mig_enabled: bool,
    /// MIG instances already created (jig does not change MIG settings).
    pub mig_instances: Vec<MigInstance>,
}

/// A MIG instance that exists on a GPU, as `nvidia-smi -L` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MigInstance {
    /// `MIG-…`: what `CUDA_VISIBLE_DEVICES` takes to bind a process to this instance.
    pub uuid: String,
    /// The profile's name as listed (e.g. `3g.40gb`); `None` when the line names none. See
    /// [`MigInstance::profile`] for it as a [`MigProfile`].
    pub profile: Option<String>,
}

impl MigInstance {
    /// The profile `nvidia-smi` named (e.g. `3g.40gb`, or `3g.71gb` on an H200), as the [`MigProfile`] of that
    /// shape on the GPU `gpu` names; `None` for a model or profile jig does not know.
    pub fn profile_on(&self, gpu: &str) -> Option<MigProfile> {
        jig_policy::mig::GpuModel::of(gpu)?.profile(self.profile.as_deref()?)
    }

    /// The instance's memory in GB, as its listed profile name gives it: 40 for `3g.40gb`, 71 for `3g.71gb`
    /// (also `1c.3g.40gb`, a compute instance, and `1g.10gb+me`); `None` when the listing names no size.
    pub fn memory_gb(&self) -> Option<u64> {
        self.profile.as_deref()?.split('.').find_map(|part| part.split_once("gb")?.0.parse().ok())
    }
}

impl Devices {
    /// Look at the machine.
    pub fn discover() -> Devices {
        Devices { cpu_cores: cpu_cores(), gpus: discover_gpus() }
    }

    /// The machine that `nvidia-smi`'s GPU query (`--query-gpu=index,name,uuid,memory.total,mig.mode.current
    /// --format=csv,noheader,nounits`) and listing (`-L`) describe, with `cpu_cores`: how a test or a tool
    /// describes a machine from recorded listings.
    pub fn from_nvidia_smi(cpu_cores: Vec<usize>, query: &str, list: &str) -> Devices {
        let mut gpus = parse_gpu_query(query);
        attach_mig_instances(&mut gpus, list);
        Devices { cpu_cores, gpus }
    }

    /// What `nvidia-smi` lists now (GPUs and their MIG instances, without asking the CUDA driver), with this
    /// process's cores; `None` when `nvidia-smi` does not answer. How a worker's device is looked for again
    /// each time the worker (re)starts ([`crate::launch`]): a MIG instance can be destroyed while jig runs.
    pub fn list_now() -> Option<Devices> {
        let mut gpus = query_gpus()?;
        if gpus.iter().any(|g| g.mig_enabled) {
            attach_mig_instances(&mut gpus, &nvidia_smi(&["-L"])?);
        }
        Some(Devices { cpu_cores: cpu_cores(), gpus })
    }

    /// The device an unplaced GPU segment takes on this machine: its GPU's `GPU-…` UUID for `mps:`, the first
    /// MIG instance of the segment's profile on its GPU, in `nvidia-smi -L`'s order, for `mig:`. A deployment
    /// places each instance on a device of its own when it is planned; this is for a segment measured or run
    /// alone (`jig profile`), which is then bound to the UUID chosen here like any other.
    pub fn first_device(&self, segment: &Segment) -> Result<String, DeviceError> {
        let gpu = self.gpu(segment)?;
        match *segment {
            Segment::Mig { profile, .. } => gpu
                .mig_instances
                .iter()
                .find(|m| m.profile_on(&gpu.name) == Some(profile))
                .map(|m| m.uuid.clone())
                .ok_or(DeviceError::NoMigInstance { segment: *segment, gpu: gpu.index, profile }),
            _ => Ok(gpu.uuid.clone()),
        }
    }

    /// Bind GPU segment `segment` to `device`, the UUID it was placed on (`MIG-…` for `mig:`, `GPU-…` for
    /// `mps:`), as this machine lists its devices: the device must be listed, on the segment's GPU, and for
    /// `mig:` of the segment's profile (when the listing names a profile jig knows). A device that is not
    /// listed is [`DeviceError::Gone`]: binding by UUID never falls back to another instance, which would
    /// be one another instance or app may hold. The binding's memory follows [`Bound::memory`]'s rule.
    pub fn bind(&self, segment: &Segment, device: &str) -> Result<Bound, DeviceError> {
        let gpu = self.gpu(segment)?;
        let placed_elsewhere =
            |found: String| DeviceError::Mismatch { segment: *segment, device: device.into(), found };
        let memory = match *segment {
            Segment::Mig { profile, mps, .. } => {
                let Some(instance) = gpu.mig_instances.iter().find(|m| m.uuid == device) else {
                    return Err(match self.locate(device) {
                        Some(found) => placed_elsewhere(found),
                        None => DeviceError::Gone { segment: *segment, device: device.into() },
                    });
                };
                if let Some(listed) = instance.profile_on(&gpu.name).filter(|&p| p != profile) {
                    let name = instance.profile.as_deref().unwrap_or(listed.as_str());
                    return Err(placed_elsewhere(format!("a {name} instance on GPU {}", gpu.index)));
                }
                // The listed name's size (`3g.71gb` on an H200, `3g.20gb` on an A100 40GB), in GB as the name
                // counts them; the 80 GB table's only when the listing names no size.
                let gb = instance.memory_gb().unwrap_or(u64::from(profile.memory_gb()));
                gb * 1_000_000_000 / u64::from(mps)
            }
            Segment::Mps { percent, processes, .. } => {
                if gpu.uuid != device {
                    return Err(match self.locate(device) {
                        Some(found) => placed_elsewhere(found),
                        None => DeviceError::Gone { segment: *segment, device: device.into() },
                    });
                }
                (gpu.memory_mib << 20) * u64::from(percent) / 100 / u64::from(processes)
            }
            Segment::Cpu { .. } => return Err(DeviceError::NotGpu { segment: *segment }),
        };
        Ok(Bound { segment: *segment, device: device.to_string(), memory })
    }

    /// The GPU a GPU segment names by index.
    fn gpu(&self, segment: &Segment) -> Result<&Gpu, DeviceError> {
        let index = segment.gpu().ok_or(DeviceError::NotGpu { segment: *segment })?;
        self.gpus.iter().find(|g| g.index == index).ok_or(DeviceError::NoGpu { segment: *segment, gpu: index })
    }

    /// What the device with UUID `uuid` is on this machine, in words, if it is listed.
    fn locate(&self, uuid: &str) -> Option<String> {
        self.gpus.iter().find_map(|g| {
            if g.uuid == uuid {
                return Some(format!("GPU {}", g.index));
            }
            let m = g.mig_instances.iter().find(|m| m.uuid == uuid)?;
            Some(format!("a {} instance on GPU {}", m.profile.as_deref().unwrap_or("MIG"), g.index))
        })
    }
}

/// A GPU segment bound to the device it was placed on ([`Devices::bind`]): what its worker process gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The segment.
    pub segment: Segment,
    /// The UUID the worker binds to: `MIG-…` for a MIG instance, `GPU-…` for an MPS share of a whole GPU.
    pub device: String,
    /// GPU memory one process may use, in bytes: ONNX Runtime's CUDA arena limit (each process's CUDA
    /// context, a few hundred MiB, comes on top). jig's rule, so that the processes sharing a device never
    /// ask for more than it has between them:
    ///
    /// * `mig:GPU:PROFILE:K`: the MIG instance's memory as the profile name `nvidia-smi -L` lists for it
    ///   gives it, in GB (`3g.40gb` on an H100 80GB, `3g.71gb` on an H200: 40 and 71 GB), split evenly among
    ///   its K MPS processes; the 80 GB profile table's size only when the listing names none.
    /// * `mps:GPU:PERCENT`: PERCENT percent of the GPU's memory (`nvidia-smi`'s `memory.total`), the same
    ///   share as of its SMs; the shares on a GPU add up to at most 100 percent, so their limits to at most
    ///   its memory. Each of the K processes of `mps:GPU:PERCENTxK` has a K-th of it.
    pub memory: u64,
}

impl Bound {
    /// The environment of a worker process on this binding: the device it sees (`CUDA_VISIBLE_DEVICES`, the
    /// UUID, so it is exactly the device the plan placed it on, whatever order CUDA numbers devices in)
    /// and, when it shares that device through MPS, its active-thread percentage and the pipe directory of
    /// the device's own MPS daemon ([`crate::mps`]).
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![("CUDA_VISIBLE_DEVICES".to_string(), self.device.clone())];
        if let Some(percent) = self.segment.mps_percentage() {
            env.push(("CUDA_MPS_PIPE_DIRECTORY".into(), crate::mps::pipe_dir(&self.device).display().to_string()));
            env.push(("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), percent.to_string()));
        }
        env
    }
}

/// Why a segment has no device on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// A CPU segment was asked for a GPU device.
    #[error("segment {segment} runs on CPU cores, not in a GPU worker")]
    NotGpu {
        /// The segment asked for.
        segment: Segment,
    },
    /// The segment's GPU is not on this machine.
    #[error("segment {segment}: no GPU {gpu} on this machine")]
    NoGpu {
        /// The segment asked for.
        segment: Segment,
        /// Its GPU index.
        gpu: u32,
    },
    /// The GPU has no MIG instance of the segment's profile to take.
    #[error(
        "segment {segment}: GPU {gpu} has no MIG instance of profile {profile} (jig does not create MIG instances)"
    )]
    NoMigInstance {
        /// The segment asked for.
        segment: Segment,
        /// Its GPU index.
        gpu: u32,
        /// The MIG profile.
        profile: MigProfile,
    },
    /// The device the segment was placed on is no longer listed: its MIG instance was destroyed (a re-created
    /// one has a new UUID), or the GPU left the machine.
    #[error(
        "segment {segment} was placed on {} {device}, which this machine no longer has (`nvidia-smi -L` does not \
         list it); redeploy the app so that its plan is placed again on the devices that exist (each deploy \
         lists them anew; re-create the MIG instance first if the plan needs it: a new instance has a new UUID)",
        device_kind(.device)
    )]
    Gone {
        /// The segment.
        segment: Segment,
        /// The UUID it was placed on.
        device: String,
    },
    /// The device the segment was placed on is listed, but is not what the segment needs: on another GPU, or
    /// a MIG instance of another profile.
    #[error(
        "segment {segment} was placed on {} {device}, but on this machine that is {found}; redeploy the app so \
         that its plan is placed again",
        device_kind(.device)
    )]
    Mismatch {
        /// The segment.
        segment: Segment,
        /// The UUID it was placed on.
        device: String,
        /// What the UUID is on this machine.
        found: String,
    },
}

/// `MIG instance` or `GPU`, by a device UUID's prefix.
fn device_kind(uuid: &str) -> &'static str {
    if uuid.starts_with("MIG-") { "MIG instance" } else { "GPU" }
}

/// The cores in this process's affinity mask.
pub fn cpu_cores() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills a plain cpu_set_t; CPU_ISSET reads within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            return (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect();
        }
    }
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// The core the calling thread runs on now (`None` where the OS cannot tell).
pub fn current_core() -> Option<usize> {
    // SAFETY: sched_getcpu only reads which CPU runs the calling thread.
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// Restrict the calling thread to `cores`; threads it creates afterwards inherit the mask.
pub fn pin_current_thread(cores: &[usize]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it for indices below CPU_SETSIZE, checked here.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &core in cores {
            if core >= libc::CPU_SETSIZE as usize {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("core {core} out of range")));
            }
            libc::CPU_SET(core, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// This machine's host name (what names a node or a gateway replica by default); `None` where Linux does not say.
pub fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}

/// The CPU's model name and the cores this process may use, to label profiles.
pub fn cpu_name() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find(|l| l.starts_with("model name"))?.split(':').nth(1).map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    format!("{model} ({} cores)", cpu_cores().len())
}

/// The GPUs `nvidia-smi` lists (or, without it, those CUDA sees), with CUDA's SM counts and the MIG
/// instances of GPUs in MIG mode.
fn discover_gpus() -> Vec<Gpu> {
    let cuda = cuda_gpus().unwrap_or_default();
    let mut gpus = match query_gpus() {
        Some(gpus) => gpus,
        None => cuda
            .iter()
            .map(|d| Gpu {
                index: d.ordinal as u32,
                name: d.name.clone(),
                uuid: d.uuid.clone(),
                memory_mib: d.memory_mib,
                sms: None,
                mig_enabled: false,
                mig_instances: Vec::new(),
            })
            .collect(),
    };
    for gpu in &mut gpus {
        gpu.sms = cuda.iter().find(|d| d.uuid == gpu.uuid).map(|d| d.sms);
    }
    if gpus.iter().any(|g| g.mig_enabled)
        && let Some(list) = nvidia_smi(&["-L"])
    {
        attach_mig_instances(&mut gpus, &list);
    }
    gpus
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nvidia-smi`'s query and listing of an H100 80GB in MIG mode with two 3g.40gb instances, and a second
    /// H100 without MIG.
    const H100_QUERY: &str =
        "0, NVIDIA H100 80GB HBM3, GPU-5e3c, 81559, Enabled\n1, NVIDIA H100 80GB HBM3, GPU-77aa, 81559, Disabled\n";
    const H100_LIST: &str = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5e3c)
  MIG 3g.40gb     Device  0: (UUID: MIG-aaaa)
  MIG 3g.40gb     Device  1: (UUID: MIG-bbbb)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77aa)
";

    fn h100() -> Devices {
        Devices::from_nvidia_smi(vec![0], H100_QUERY, H100_LIST)
    }

    fn segment(s: &str) -> Segment {
        s.parse().unwrap()
    }

    #[test]
    fn gpu_segments_bind_to_their_device_and_share() {
        let devices = h100();
        assert_eq!(devices.gpus[0].mig_instances.len(), 2);
        let env = devices.bind(&segment("mig:0:3g.40gb:2"), "MIG-aaaa").unwrap().env();
        assert!(env.contains(&("CUDA_VISIBLE_DEVICES".into(), "MIG-aaaa".into())));
        assert!(env.contains(&("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "50".into())));
        assert!(env.contains(&("CUDA_MPS_PIPE_DIRECTORY".into(), "/tmp/jig-mps/MIG-aaaa/pipe".into())));
        let env = devices.bind(&segment("mig:0:3g.40gb:1"), "MIG-aaaa").unwrap().env();
        assert_eq!(env, vec![("CUDA_VISIBLE_DEVICES".into(), "MIG-aaaa".into())], "one process needs no MPS");
        let env = devices.bind(&segment("mps:1:30"), "GPU-77aa").unwrap().env();
        assert_eq!(
            env,
            vec![
                ("CUDA_VISIBLE_DEVICES".into(), "GPU-77aa".into()),
                ("CUDA_MPS_PIPE_DIRECTORY".into(), "/tmp/jig-mps/GPU-77aa/pipe".into()),
                ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "30".into())
            ]
        );
        let err = devices.first_device(&segment("mig:0:1g.10gb:1")).unwrap_err().to_string();
        assert!(err.contains("no MIG instance of profile 1g.10gb"), "{err}");
        assert!(devices.bind(&segment("mps:2:30"), "GPU-77aa").unwrap_err().to_string().contains("no GPU 2"));
        assert!(matches!(devices.bind(&segment("cpu:2"), "GPU-77aa"), Err(DeviceError::NotGpu { .. })));
    }

    /// The second instance of a profile binds to its own UUID, not the first's: what `nth > 0` used to pick
    /// by position.
    #[test]
    fn a_mig_instance_after_the_first_of_its_profile_binds_by_its_uuid() {
        let devices = h100();
        let bound = devices.bind(&segment("mig:0:3g.40gb:1"), "MIG-bbbb").unwrap();
        assert_eq!(bound.env(), vec![("CUDA_VISIBLE_DEVICES".into(), "MIG-bbbb".into())]);
        let env = devices.bind(&segment("mig:0:3g.40gb:4"), "MIG-bbbb").unwrap().env();
        assert!(env.contains(&("CUDA_MPS_PIPE_DIRECTORY".into(), "/tmp/jig-mps/MIG-bbbb/pipe".into())), "{env:?}");
        assert!(env.contains(&("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "25".into())), "{env:?}");
        // An unplaced segment takes the first of its profile, once, by UUID.
        assert_eq!(devices.first_device(&segment("mig:0:3g.40gb:1")).unwrap(), "MIG-aaaa");
        assert_eq!(devices.first_device(&segment("mps:1:50")).unwrap(), "GPU-77aa");
    }

    #[test]
    fn a_device_that_is_gone_or_elsewhere_is_refused_by_name() {
        let devices = h100();
        let err = devices.bind(&segment("mig:0:3g.40gb:1"), "MIG-cccc").unwrap_err();
        assert!(matches!(&err, DeviceError::Gone { device, .. } if device == "MIG-cccc"), "{err:?}");
        let text = err.to_string();
        for says in ["mig:0:3g.40gb:1", "MIG instance MIG-cccc", "no longer has", "redeploy the app"] {
            assert!(text.contains(says), "{says}: {text}");
        }
        let text = devices.bind(&segment("mps:1:50"), "GPU-dead").unwrap_err().to_string();
        assert!(text.contains("GPU GPU-dead") && text.contains("no longer has"), "{text}");
        // Listed, but not what the segment needs: the wrong GPU, or an instance of another profile.
        let text = devices.bind(&segment("mps:1:50"), "GPU-5e3c").unwrap_err().to_string();
        assert!(text.contains("that is GPU 0"), "{text}");
        let one = Devices::from_nvidia_smi(
            vec![0],
            H100_QUERY,
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5e3c)\n  MIG 1g.10gb Device 0: (UUID: MIG-aaaa)\n",
        );
        let text = one.bind(&segment("mig:0:3g.40gb:1"), "MIG-aaaa").unwrap_err().to_string();
        assert!(text.contains("a 1g.10gb instance on GPU 0"), "{text}");
    }

    /// `mps:GPU:PERCENT` gets PERCENT percent of the GPU's discovered memory.
    #[test]
    fn an_mps_share_gets_its_percentage_of_the_gpus_memory() {
        let devices = h100();
        let mib = |bytes: u64| bytes >> 20;
        assert_eq!(devices.bind(&segment("mps:1:100"), "GPU-77aa").unwrap().memory, 81559 << 20);
        assert_eq!(mib(devices.bind(&segment("mps:1:50"), "GPU-77aa").unwrap().memory), 81559 / 2);
        assert_eq!(mib(devices.bind(&segment("mps:1:30"), "GPU-77aa").unwrap().memory), 81559 * 30 / 100);
        let quarter = devices.bind(&segment("mps:1:100x4"), "GPU-77aa").unwrap();
        assert_eq!(mib(quarter.memory), 81559 / 4, "each of four processes of the whole GPU has a quarter");
        assert!(quarter.env().contains(&("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "25".into())));
        let h200 = Devices::from_nvidia_smi(vec![0], "0, NVIDIA H200, GPU-h200, 143771, Disabled\n", "");
        assert_eq!(mib(h200.bind(&segment("mps:0:25"), "GPU-h200").unwrap().memory), 143771 / 4);
    }

    /// A MIG instance's limit is the size its listed profile name gives, per MPS process.
    #[test]
    fn mig_limits_come_from_the_listed_instance() {
        let gb = 1_000_000_000u64;
        let devices = h100();
        assert_eq!(devices.bind(&segment("mig:0:3g.40gb:1"), "MIG-bbbb").unwrap().memory, 40 * gb);
        assert_eq!(devices.bind(&segment("mig:0:3g.40gb:2"), "MIG-bbbb").unwrap().memory, 20 * gb);
        // An H200 names the same shapes by their own sizes: 3g.40gb is a 3g.71gb instance there.
        let h200 = Devices::from_nvidia_smi(
            vec![0],
            "0, NVIDIA H200, GPU-h200, 143771, Enabled\n",
            "GPU 0: NVIDIA H200 (UUID: GPU-h200)\n  MIG 3g.71gb Device 0: (UUID: MIG-h3)\n  \
             MIG 1g.18gb Device 1: (UUID: MIG-h1)\n",
        );
        assert_eq!(h200.first_device(&segment("mig:0:3g.40gb:1")).unwrap(), "MIG-h3");
        assert_eq!(h200.bind(&segment("mig:0:3g.40gb:1"), "MIG-h3").unwrap().memory, 71 * gb);
        assert_eq!(h200.bind(&segment("mig:0:1g.10gb:3"), "MIG-h1").unwrap().memory, 6 * gb);
        // A listing without a profile name: the 80 GB table's size.
        let unnamed = Devices::from_nvidia_smi(
            vec![0],
            "0, NVIDIA H200, GPU-h200, 143771, Enabled\n",
            "GPU 0: NVIDIA H200 (UUID: GPU-h200)\n  MIG Device 0: (UUID: MIG-x)\n",
        );
        assert_eq!(unnamed.gpus[0].mig_instances[0].profile, None);
        assert_eq!(unnamed.bind(&segment("mig:0:3g.40gb:2"), "MIG-x").unwrap().memory, 20 * gb);
        let memory = |profile: &str| MigInstance { uuid: "MIG-x".into(), profile: Some(profile.into()) }.memory_gb();
        assert_eq!((memory("3g.71gb"), memory("1c.3g.40gb"), memory("1g.10gb+me")), (Some(71), Some(40), Some(10)));
        assert_eq!(MigInstance { uuid: "MIG-x".into(), profile: None }.memory_gb(), None);
    }

    #[test]
    fn this_machine_has_cores() {
        assert!(!Devices::discover().cpu_cores.is_empty());
    }
}
