//! What the CUDA driver API says of the devices this process sees (`cudarc`, which loads `libcuda` at run time),
//! how its threads wait for them, and profiler ranges for `jig profile --counters`.

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

/// Run `f` inside a CUDA profiler range on device `ordinal` (as this process sees it): the kernels it launches
/// are what a profiler started with profiling off (`ncu --profile-from-start off`) measures. The device's
/// primary context, which ONNX Runtime's CUDA provider uses, is made current on this thread for the range.
/// An error when there is no CUDA driver or it refuses.
pub fn in_profiler_range<R>(ordinal: i32, f: impl FnOnce() -> R) -> Result<R, ProfilerRangeError> {
    use cudarc::driver::{result, sys};
    // SAFETY: only probes whether the library can be opened; cudarc panics on first use without it.
    if !unsafe { sys::is_culib_present() } {
        return Err(ProfilerRangeError::NoDriver);
    }
    let failed = |step: &'static str| move |source| ProfilerRangeError::Driver { ordinal, step, source };
    result::init().map_err(failed("initialise the driver"))?;
    let device = result::device::get(ordinal).map_err(failed("find the device"))?;
    // SAFETY: `device` was just returned by the driver; the primary context is retained for the process's life.
    unsafe { result::primary_ctx::retain(device).and_then(|ctx| result::ctx::set_current(ctx)) }
        .map_err(failed("make its context current"))?;
    // SAFETY: a context is current on this thread; start and stop only switch the profiler's collection.
    unsafe { sys::cuProfilerStart() }.result().map_err(failed("start the profiler range"))?;
    let out = f();
    // SAFETY: as above.
    unsafe { sys::cuProfilerStop() }.result().map_err(failed("stop the profiler range"))?;
    Ok(out)
}

/// Have this process's host threads sleep while they wait for CUDA device `ordinal` (as the process sees it)
/// rather than spin: `CU_CTX_SCHED_BLOCKING_SYNC` on the device's primary context, the one ONNX Runtime's CUDA
/// provider uses. CUDA's default spins while a process has fewer contexts than the machine has cores, so a GPU
/// worker would hold a core for as long as its batches run on the device: cores the plan gives glue and CPU
/// instances, and counts against the app (a GPU worker's CPU time is the CPU a request costs outside the
/// instances). Waking costs tens of microseconds a wait. Done once a device, before its first session is
/// created; where the driver refuses, the process spins as before and says so once. `JIG_CUDA_SPIN=1` keeps
/// CUDA's default (to compare, or where a driver misbehaves with the flag).
pub fn sleep_while_waiting(ordinal: i32) {
    use cudarc::driver::{result, sys};
    static DONE: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if done.contains(&ordinal) || std::env::var_os("JIG_CUDA_SPIN").is_some_and(|v| v == "1") {
        return;
    }
    done.push(ordinal);
    // SAFETY: only probes whether the library can be opened; cudarc panics on first use without it.
    if !unsafe { sys::is_culib_present() } {
        return; // the session that follows fails, saying what CUDA lacks
    }
    let flags = sys::CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC as std::ffi::c_uint;
    let set = result::init().and_then(|()| result::device::get(ordinal)).and_then(|device| {
        // SAFETY: `device` is a handle the driver just returned; the call sets the flags the primary context is
        // created with, and touches no memory of ours.
        unsafe { sys::cuDevicePrimaryCtxSetFlags_v2(device, flags) }.result()
    });
    if let Err(e) = set {
        tracing::warn!("CUDA device {ordinal}: its host threads spin while they wait for it ({e})");
    }
}

/// Why [`in_profiler_range`] could not run its closure inside a profiler range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfilerRangeError {
    /// `libcuda` cannot be loaded: no NVIDIA driver on this machine (or not on the library path).
    #[error("no CUDA driver (libcuda) on this machine: profile on a machine with an NVIDIA GPU and its driver")]
    NoDriver,
    /// The driver refused a step of setting the range up or ending it.
    #[error("CUDA device {ordinal}: cannot {step}")]
    Driver {
        /// The device, as this process sees it.
        ordinal: i32,
        /// What was refused: `initialise the driver`, `find the device`, `start the profiler range`, ….
        step: &'static str,
        /// The driver's answer.
        #[source]
        source: cudarc::driver::DriverError,
    },
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, the form `nvidia-smi` and `CUDA_VISIBLE_DEVICES` use.
fn format_uuid(bytes: [u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("GPU-{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Devices;

    #[test]
    fn cuda_uuids_print_as_nvidia_smi_does() {
        let bytes = [0x5e, 0x3c, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7];
        assert_eq!(format_uuid(bytes), "GPU-5e3c1a2b-3c4d-5e6f-7081-92a3b4c5d6e7");
    }

    /// Without `libcuda` (as in CI) a CUDA session's preparation does nothing, where cudarc would panic on first
    /// use; with it, the device's threads sleep while they wait (`make test-gpu` runs its sessions so).
    #[test]
    fn asking_threads_to_sleep_while_waiting_never_panics() {
        sleep_while_waiting(0);
        sleep_while_waiting(0);
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
