//! GPU placements on a machine without a GPU: the machine comes from recorded `nvidia-smi` listings, and the
//! "worker" is a shell script that records the environment it was started with and exits, so what reaches
//! the process is checked, not just what the launcher computes.

use std::path::{Path, PathBuf};

use jig_model_host::device::Devices;
use jig_model_host::instance::{InstanceConfig, InstanceError};
use jig_model_host::launch::{LaunchError, Launcher, Placement, WorkerCommand};
use jig_model_host::worker::WorkerError;

/// An H100 80GB in MIG mode with two 3g.40gb instances and a 1g.10gb one, and an H100 without MIG.
const QUERY: &str =
    "0, NVIDIA H100 80GB HBM3, GPU-5e3c, 81559, Enabled\n1, NVIDIA H100 80GB HBM3, GPU-77aa, 81559, Disabled\n";
const LIST: &str = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5e3c)
  MIG 3g.40gb     Device  0: (UUID: MIG-0b6e4a5c-first)
  MIG 3g.40gb     Device  1: (UUID: MIG-9d2f7c11-second)
  MIG 1g.10gb     Device  2: (UUID: MIG-44aa0000-small)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77aa)
";

/// A launcher over the recorded machine whose worker writes its environment to `env` and exits 3.
fn launcher(env: &Path) -> Launcher {
    let script = format!("env > '{}'; exit 3", env.display());
    let worker = WorkerCommand { program: "/bin/sh".into(), args: vec!["-c".into(), script, "worker".into()] };
    Launcher::new(Devices::from_nvidia_smi(vec![0], QUERY, LIST), Some(worker))
}

fn placed(segment: &str, device: &str) -> Placement {
    Placement { device: Some(device.into()), ..Placement::new(segment.parse().unwrap()) }
}

fn start(launcher: &Launcher, instance: &str, model: &Path, placement: Placement) -> LaunchError {
    launcher.start_instance(InstanceConfig::new(instance), "yolo", model, placement).err().expect("cannot start")
}

/// The worker of an instance placed on the second 3g.40gb instance runs with that instance's UUID: the case
/// "the nth instance of the profile" (nth = 1) used to look up again when the worker started.
#[test]
fn a_worker_starts_on_the_mig_instance_it_was_placed_on_by_uuid() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env");
    let placement = placed("mig:0:3g.40gb:1", "MIG-9d2f7c11-second");
    let err = start(&launcher(&env), "demo/detect/yolo@mig:0:3g.40gb:1#1", Path::new("/nonexistent.onnx"), placement);
    assert!(matches!(&err, LaunchError::Worker(WorkerError::Spawn { .. })), "the script exits: {err:?}");
    let env = std::fs::read_to_string(&env).expect("the worker ran");
    assert!(env.lines().any(|l| l == "CUDA_VISIBLE_DEVICES=MIG-9d2f7c11-second"), "{env}");
    assert!(!env.contains("CUDA_MPS_"), "one process on the instance needs no MPS: {env}");
}

/// Weights larger than what the binding grants are refused before any worker starts, naming the instance,
/// the segment and the device: 1% of an 80 GB GPU is 815 MiB; 1g.10gb shared by four is 2.5 GB.
#[test]
fn weights_larger_than_the_bindings_memory_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env");
    // Sparse: as large as it says, without taking the disk.
    let model: PathBuf = dir.path().join("big.onnx");
    std::fs::File::create(&model).unwrap().set_len(3_000_000_000).unwrap();
    let launcher = launcher(&env);
    for (segment, device, grants) in
        [("mps:1:1", "GPU-77aa", "grants 815 MiB"), ("mig:0:1g.10gb:4", "MIG-44aa0000-small", "grants 2384 MiB")]
    {
        let instance = format!("demo/detect/big@{segment}#0");
        let err = start(&launcher, &instance, &model, placed(segment, device));
        assert!(matches!(&err, LaunchError::Instance(InstanceError::Start { .. })), "{err:?}");
        let text = err.to_string();
        for says in [instance.as_str(), &format!("segment {segment} on {device}"), grants, "2861 MiB"] {
            assert!(text.contains(says), "{says}: {text}");
        }
    }
    assert!(!env.exists(), "no worker was started");
    // A 3g.40gb instance (40 GB) holds it: the worker starts (and the script exits).
    let err =
        start(&launcher, "demo/detect/big@mig:0:3g.40gb:1#0", &model, placed("mig:0:3g.40gb:1", "MIG-0b6e4a5c-first"));
    assert!(matches!(&err, LaunchError::Worker(WorkerError::Spawn { .. })), "{err:?}");
}

/// An instance placed on a MIG instance the machine no longer lists is refused when its worker would start,
/// naming the instance (app, slot, segment) and the UUID, and saying what to do.
#[test]
fn a_worker_whose_mig_instance_disappeared_is_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env");
    let without_second = LIST.lines().filter(|l| !l.contains("second")).collect::<Vec<_>>().join("\n");
    let now = Devices::from_nvidia_smi(vec![0], QUERY, &without_second);
    let launcher = launcher(&env).with_relist(move || Some(now.clone()));
    let instance = "demo/detect/yolo@mig:0:3g.40gb:1#1";
    let err =
        start(&launcher, instance, Path::new("/nonexistent.onnx"), placed("mig:0:3g.40gb:1", "MIG-9d2f7c11-second"));
    assert!(matches!(&err, LaunchError::Worker(WorkerError::Device { .. })), "{err:?}");
    let text = err.to_string();
    for says in [instance, "segment mig:0:3g.40gb:1", "MIG instance MIG-9d2f7c11-second", "redeploy the app"] {
        assert!(text.contains(says), "{says}: {text}");
    }
    assert!(!env.exists(), "no worker process was started");
}
