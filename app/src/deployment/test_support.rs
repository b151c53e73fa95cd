//! Shared test fixtures: a two-GPU machine as `nvidia-smi` lists it, and one-task bundles with their profile
//! tables, which the tests of every file of the module plan.

use std::path::Path;

use jig_api::{Deployment, InstancePlace};
use jig_manifest::Bundle;
use jig_model_host::device::Devices;

/// Two H100s as `nvidia-smi` lists them: GPU 0 in MIG mode with two 3g.40gb instances and a 1g.10gb, GPU 1
/// whole; and 8 cores.
pub(super) fn machine() -> Devices {
    Devices::from_nvidia_smi(
        (0..8).collect(),
        "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559, Enabled\n1, NVIDIA H100 80GB HBM3, GPU-bbbb, 81559, Disabled\n",
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n  MIG 3g.40gb Device 0: (UUID: MIG-0)\n  \
         MIG 3g.40gb Device 1: (UUID: MIG-1)\n  MIG 1g.10gb Device 2: (UUID: MIG-2)\n\
         GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n",
    )
}

/// A one-task bundle whose slot `det` has variant `det` profiled on `rows` (segment, batch, p95, req/s).
pub(super) fn bundle(dir: &Path, rows: &[(&str, u32, f64, f64)]) -> Bundle {
    std::fs::write(
        dir.join("jig.toml"),
        "name = \"signs\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = 30\n\
         [[tasks]]\nname = \"detect\"\nglue = \"d.wasm\"\nslot = \"det\"\n\
         [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"det.onnx\"\naccuracy = 1.0\n",
    )
    .unwrap();
    std::fs::write(dir.join("d.wasm"), b"").unwrap();
    std::fs::write(dir.join("det.onnx"), b"").unwrap();
    let mut csv = String::from("slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n");
    for (segment, batch, p95, rps) in rows {
        csv.push_str(&format!("det,det,{segment},{batch},{p95},{p95},{rps},test\n"));
    }
    std::fs::write(dir.join("profiles.csv"), csv).unwrap();
    Bundle::open(dir).unwrap()
}

/// Each placed instance of `d`, with its segment.
pub(super) fn places(d: &Deployment) -> Vec<(String, InstancePlace)> {
    d.instances.iter().flat_map(|i| i.places.iter().map(|p| (i.segment.clone(), p.clone()))).collect()
}

/// `detect` (slot `det`, one row a request, 1.5 `speak`s) → `speak` (glue only), with `cpu_ms` declared as
/// given; `det` profiled at 50 ms a row on one core.
pub(super) fn glue_bundle(dir: &Path, cpu_ms: (f64, f64)) -> Bundle {
    std::fs::write(
        dir.join("jig.toml"),
        format!(
            "name = \"signs\"\n[slo]\nlatency_ms = 1000\n[demand]\nrps = 30\n\
             [[tasks]]\nname = \"detect\"\nglue = \"g.wasm\"\nslot = \"det\"\ncpu_ms = {}\n\
             [[tasks]]\nname = \"speak\"\nglue = \"g.wasm\"\ncpu_ms = {}\n\
             [[edges]]\nfrom = \"detect.lines\"\nto = \"speak\"\n\
             [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"det.onnx\"\nfactors = {{ speak = 1.5 }}\n",
            cpu_ms.0, cpu_ms.1
        ),
    )
    .unwrap();
    std::fs::write(dir.join("g.wasm"), b"").unwrap();
    std::fs::write(dir.join("det.onnx"), b"").unwrap();
    let csv = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\ndet,det,cpu:1,1,50,50,20,test\n";
    std::fs::write(dir.join("profiles.csv"), csv).unwrap();
    Bundle::open(dir).unwrap()
}
