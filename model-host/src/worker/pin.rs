//! Page-locking the shared regions of a worker that runs its model on CUDA.
//!
//! ONNX Runtime's CUDA provider copies inputs from host memory to the device and outputs back. From pageable
//! memory the driver stages each copy through a pinned buffer of its own (a second copy, at a fraction of the
//! link's speed); from page-locked memory it copies by DMA directly. The regions are where a batch's tensors
//! lie, mapped once and reused, so the worker page-locks each when it maps it (`cuMemHostRegister`, portable:
//! for every context) and unlocks it before it unmaps it. Registration failing (a driver that refuses, a
//! lack of lockable memory) only costs speed: the region stays pageable, and the worker says so once.

use cudarc::driver::{result, sys};

/// Page-locks host memory for the CUDA device a worker's model runs on.
#[derive(Debug)]
pub struct HostPin {
    /// Whether a failure has been reported already.
    warned: bool,
}

impl HostPin {
    /// For a model on CUDA device `ordinal` (as the process sees it): makes the device's primary context,
    /// which ONNX Runtime's provider uses too, current on this thread. `None` when there is no CUDA driver or
    /// it refuses; the worker then runs with pageable regions.
    pub fn for_device(ordinal: i32) -> Option<HostPin> {
        // SAFETY: only probes whether the driver library can be opened; cudarc panics on first use without it.
        if !unsafe { sys::is_culib_present() } {
            return None;
        }
        let current = result::init().and_then(|()| result::device::get(ordinal)).and_then(|device| {
            // SAFETY: `device` was just returned by the driver; the primary context is retained for the
            // process's life (it is the one ONNX Runtime's provider already holds).
            unsafe { result::primary_ctx::retain(device).and_then(|ctx| result::ctx::set_current(ctx)) }
        });
        match current {
            Ok(()) => Some(HostPin { warned: false }),
            Err(e) => {
                tracing::warn!("CUDA device {ordinal}: cannot page-lock shared regions ({e}); copies stay pageable");
                None
            }
        }
    }

    /// Page-lock `bytes`; `false` (warning once) when the driver refuses.
    pub fn register(&mut self, bytes: &mut [u8]) -> bool {
        // SAFETY: `bytes` is a live mapping the caller unregisters (`unregister`) before unmapping it.
        let status = unsafe {
            sys::cuMemHostRegister_v2(bytes.as_mut_ptr().cast(), bytes.len(), sys::CU_MEMHOSTREGISTER_PORTABLE)
        };
        match status.result() {
            Ok(()) => true,
            Err(e) => {
                if !self.warned {
                    self.warned = true;
                    tracing::warn!(
                        "cannot page-lock a {}-byte shared region ({e}); CUDA copies from it stay pageable",
                        bytes.len()
                    );
                }
                false
            }
        }
    }

    /// Undo [`HostPin::register`] of the mapping that starts at `bytes`.
    pub fn unregister(&self, bytes: &mut [u8]) {
        // SAFETY: `bytes` was registered by `register` and is still mapped.
        let _ = unsafe { sys::cuMemHostUnregister(bytes.as_mut_ptr().cast()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_cuda_driver_there_is_nothing_to_pin_and_nothing_panics() {
        // SAFETY: only probes for the library.
        if unsafe { sys::is_culib_present() } {
            return; // a GPU machine: exercised by `make test-gpu`
        }
        assert!(HostPin::for_device(0).is_none());
    }
}
