//! Device discovery: CPU cores always; NVIDIA GPUs through the CUDA driver API (`cudarc`, which loads
//! `libcuda` at run time: count, name, UUID, memory, streaming multiprocessors) and `nvidia-smi` (MIG mode and
//! the MIG instances that exist). Without a GPU, or without the driver, discovery reports CPU cores only, and
//! everything runs on CPU segments.

use std::process::Command;

use crate::segment::{MigProfile, Segment};

/// What this machine offers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Devices {
    /// CPU cores this process may run on.
    pub cpu_cores: Vec<usize>,
    /// NVIDIA GPUs, in `nvidia-smi`'s order; empty without a GPU or its driver.
    pub gpus: Vec<Gpu>,
}

/// One NVIDIA GPU, as `nvidia-smi` (or, without it, the CUDA driver) describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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

    /// The environment of a worker process on GPU segment `segment`: the device it sees
    /// (`CUDA_VISIBLE_DEVICES`: the GPU's UUID, or a `MIG-…` UUID for a MIG instance) and, when it shares that
    /// device through MPS, its active-thread percentage and the pipe directory of the device's own MPS
    /// daemon ([`crate::mps`]). MIG segments use the `nth` existing instance of their profile on their GPU.
    pub fn binding(&self, segment: &Segment, nth: usize) -> Result<Vec<(String, String)>, DeviceError> {
        let device = self.device_uuid(segment, nth)?;
        let mut env = vec![("CUDA_VISIBLE_DEVICES".to_string(), device.clone())];
        if let Some(percent) = segment.mps_percentage() {
            env.push(("CUDA_MPS_PIPE_DIRECTORY".into(), crate::mps::pipe_dir(&device).display().to_string()));
            env.push(("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), percent.to_string()));
        }
        Ok(env)
    }

    /// The UUID of the device a worker on `segment` binds to: its GPU, or for MIG segments the `nth` MIG
    /// instance of the segment's profile on that GPU.
    pub fn device_uuid(&self, segment: &Segment, nth: usize) -> Result<String, DeviceError> {
        let gpu = |index: u32| {
            self.gpus.iter().find(|g| g.index == index).ok_or(DeviceError::NoGpu { segment: *segment, gpu: index })
        };
        match *segment {
            Segment::Cpu { .. } => Err(DeviceError::NotGpu { segment: *segment }),
            Segment::Mps { gpu: index, .. } => Ok(gpu(index)?.uuid.clone()),
            Segment::Mig { gpu: index, profile, .. } => {
                let gpu = gpu(index)?;
                gpu.mig_instances
                    .iter()
                    .filter(|m| m.profile_on(&gpu.name) == Some(profile))
                    .nth(nth)
                    .map(|m| m.uuid.clone())
                    .ok_or(DeviceError::NoMigInstance { segment: *segment, gpu: index, nth, profile })
            }
        }
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
    /// The GPU lacks the MIG instance the segment needs.
    #[error(
        "segment {segment}: GPU {gpu} has no MIG instance #{nth} of profile {profile} (jig does not create MIG \
         instances)"
    )]
    NoMigInstance {
        /// The segment asked for.
        segment: Segment,
        /// Its GPU index.
        gpu: u32,
        /// Which instance of the profile.
        nth: usize,
        /// The MIG profile.
        profile: MigProfile,
    },
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

fn nvidia_smi(args: &[&str]) -> Option<String> {
    let out = Command::new("nvidia-smi").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The GPUs `nvidia-smi` lists (or, without it, those CUDA sees), with CUDA's SM counts and the MIG
/// instances of GPUs in MIG mode.
fn discover_gpus() -> Vec<Gpu> {
    let cuda = cuda_gpus().unwrap_or_default();
    let query =
        nvidia_smi(&["--query-gpu=index,name,uuid,memory.total,mig.mode.current", "--format=csv,noheader,nounits"]);
    let mut gpus = match query {
        Some(query) => parse_gpu_query(&query),
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

/// Give each GPU in MIG mode the MIG instances `nvidia-smi -L`'s `list` shows on it.
fn attach_mig_instances(gpus: &mut [Gpu], list: &str) {
    for (index, instance) in parse_mig_list(list) {
        if let Some(gpu) = gpus.iter_mut().find(|g| g.index == index && g.mig_enabled) {
            gpu.mig_instances.push(instance);
        }
    }
}

/// What the CUDA driver says of one device it can see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDevice {
    /// The driver's device ordinal, counted among the devices this process sees.
    pub ordinal: i32,
    /// The product name.
    pub name: String,
    /// `GPU-…`, as `nvidia-smi` prints it.
    pub uuid: String,
    /// Total memory, in MiB.
    pub memory_mib: u64,
    /// Streaming multiprocessors.
    pub sms: u32,
}

/// The devices the CUDA driver API sees from this process (all GPUs, or those `CUDA_VISIBLE_DEVICES`
/// names). `None` when `libcuda` cannot be loaded or does not initialise, as on a machine without a GPU.
pub fn cuda_gpus() -> Option<Vec<CudaDevice>> {
    use cudarc::driver::{result, sys};
    // SAFETY: only probes whether the library can be opened; cudarc panics on first use without it.
    if !unsafe { sys::is_culib_present() } {
        return None;
    }
    result::init().ok()?;
    (0..result::device::get_count().ok()?)
        .map(|ordinal| {
            let device = result::device::get(ordinal).ok()?;
            let uuid = result::device::get_uuid(device).ok()?;
            // SAFETY: `device` is a handle the driver just returned.
            let (memory, sms) = unsafe {
                (
                    result::device::total_mem(device).ok()?,
                    result::device::get_attribute(
                        device,
                        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                    )
                    .ok()?,
                )
            };
            Some(CudaDevice {
                ordinal,
                name: result::device::get_name(device).ok()?,
                uuid: format_uuid(uuid.bytes.map(|b| b as u8)),
                memory_mib: memory as u64 >> 20,
                sms: u32::try_from(sms).ok()?,
            })
        })
        .collect()
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, the form `nvidia-smi` and `CUDA_VISIBLE_DEVICES` use.
fn format_uuid(bytes: [u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("GPU-{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// Parse `nvidia-smi --query-gpu=index,name,uuid,memory.total,mig.mode.current --format=csv,noheader,nounits`.
pub fn parse_gpu_query(text: &str) -> Vec<Gpu> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let [index, name, uuid, memory, mig] = f.as_slice() else { return None };
            Some(Gpu {
                index: index.parse().ok()?,
                name: name.to_string(),
                uuid: uuid.to_string(),
                memory_mib: memory.parse().ok()?,
                sms: None,
                mig_enabled: *mig == "Enabled",
                mig_instances: Vec::new(),
            })
        })
        .collect()
}

/// Parse `nvidia-smi -L`: `GPU 0: … (UUID: GPU-…)` lines, each followed by its
/// `  MIG 3g.40gb     Device  0: (UUID: MIG-…)` lines.
pub fn parse_mig_list(text: &str) -> Vec<(u32, MigInstance)> {
    let mut gpu = None;
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("GPU ") {
            gpu = rest.split(':').next().and_then(|i| i.trim().parse().ok());
        } else if let (Some(rest), Some(gpu)) = (trimmed.strip_prefix("MIG "), gpu) {
            let profile = rest.split_whitespace().next().map(str::to_string);
            let uuid = rest.split("UUID:").nth(1).map(|u| u.trim().trim_end_matches(')').to_string());
            if let Some(uuid) = uuid {
                out.push((gpu, MigInstance { uuid, profile }));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nvidia_smi_output() {
        let gpus = parse_gpu_query(
            "0, NVIDIA H100 80GB HBM3, GPU-5e3c, 81559, Enabled\n1, NVIDIA H100, GPU-77aa, 81559, Disabled\n",
        );
        assert_eq!(gpus.len(), 2);
        assert_eq!((gpus[0].memory_mib, gpus[0].mig_enabled, gpus[1].mig_enabled), (81559, true, false));

        let list = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5e3c)\n  MIG 3g.40gb     Device  0: (UUID: MIG-aaaa)\n  MIG 1g.10gb     Device  1: (UUID: MIG-bbbb)\nGPU 1: NVIDIA H100 (UUID: GPU-77aa)\n";
        let migs = parse_mig_list(list);
        assert_eq!(migs.len(), 2);
        assert_eq!(migs[0].0, 0);
        assert_eq!(migs[0].1.uuid, "MIG-aaaa");
        assert_eq!(migs[1].1.profile_on("NVIDIA H100 80GB HBM3"), Some(MigProfile::G1_10));
        // The same name is another shape on an A100 40GB; an H200 lists its own names.
        assert_eq!(migs[1].1.profile_on("NVIDIA A100-SXM4-40GB"), Some(MigProfile::G1_20));
        let h200 = parse_mig_list("GPU 0: NVIDIA H200 (UUID: GPU-1)\n  MIG 3g.71gb     Device  0: (UUID: MIG-cccc)\n");
        assert_eq!(h200[0].1.profile_on("NVIDIA H200"), Some(MigProfile::G3_40));
        assert_eq!(migs[0].1.profile_on("NVIDIA A30"), None, "a model jig does not know");
    }

    #[test]
    fn gpu_segments_bind_to_their_device_and_share() {
        let devices = Devices::from_nvidia_smi(
            vec![0],
            "0, NVIDIA H100 80GB HBM3, GPU-5e3c, 81559, Enabled\n",
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5e3c)\n  MIG 3g.40gb Device 0: (UUID: MIG-aaaa)\n",
        );
        assert_eq!(devices.gpus[0].mig_instances.len(), 1);
        let env = devices.binding(&"mig:0:3g.40gb:2".parse().unwrap(), 0).unwrap();
        assert!(env.contains(&("CUDA_VISIBLE_DEVICES".into(), "MIG-aaaa".into())));
        assert!(env.contains(&("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "50".into())));
        assert!(env.contains(&("CUDA_MPS_PIPE_DIRECTORY".into(), "/tmp/jig-mps/MIG-aaaa/pipe".into())));
        let env = devices.binding(&"mig:0:3g.40gb:1".parse().unwrap(), 0).unwrap();
        assert_eq!(env, vec![("CUDA_VISIBLE_DEVICES".into(), "MIG-aaaa".into())], "one process needs no MPS");
        let env = devices.binding(&"mps:0:30".parse().unwrap(), 0).unwrap();
        assert_eq!(
            env,
            vec![
                ("CUDA_VISIBLE_DEVICES".into(), "GPU-5e3c".into()),
                ("CUDA_MPS_PIPE_DIRECTORY".into(), "/tmp/jig-mps/GPU-5e3c/pipe".into()),
                ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "30".into())
            ]
        );
        assert!(
            devices
                .binding(&"mig:0:1g.10gb:1".parse().unwrap(), 0)
                .unwrap_err()
                .to_string()
                .contains("no MIG instance")
        );
        assert!(devices.binding(&"mps:1:30".parse().unwrap(), 0).unwrap_err().to_string().contains("no GPU 1"));
    }

    #[test]
    fn this_machine_has_cores() {
        assert!(!Devices::discover().cpu_cores.is_empty());
    }

    #[test]
    fn cuda_uuids_print_as_nvidia_smi_does() {
        let bytes = [0x5e, 0x3c, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7];
        assert_eq!(format_uuid(bytes), "GPU-5e3c1a2b-3c4d-5e6f-7081-92a3b4c5d6e7");
    }

    /// Without `libcuda` (as in CI) discovery says so instead of panicking; with it, every device has SMs.
    #[test]
    fn cuda_discovery_never_panics() {
        match cuda_gpus() {
            None => assert!(Devices::discover().gpus.iter().all(|g| g.sms.is_none())),
            Some(devices) => assert!(devices.iter().all(|d| d.sms > 0 && d.uuid.starts_with("GPU-"))),
        }
    }
}
