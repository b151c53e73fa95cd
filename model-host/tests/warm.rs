//! Warm batches in process touch no fresh memory. Its own test binary, the one beside model-host's others
//! (`tests/model_host`): it counts this process's page faults, which tests running beside it would add to.

use jig_test_support::{minor_faults, model};

use std::time::{Duration, Instant};

use jig_model_host::Tensor;
use jig_model_host::instance::{BatchPolicy, InstanceConfig};
use jig_model_host::launch::{Launcher, Placement};
use jig_model_host::segment::Segment;

/// Once warm, a batch touches no fresh memory in process: ONNX Runtime reads the request's bytes in place and
/// writes outputs into memory its arena reuses, and a batch of several requests is stacked into memory the
/// batcher keeps. A batch that allocated its 39 MB anew would fault on each of its 9 600 pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_batch_touches_no_fresh_memory_in_process() {
    let policy = BatchPolicy::planned(8, Duration::ZERO, Duration::ZERO, Duration::from_secs(10));
    let config = InstanceConfig { policy, ..InstanceConfig::new("cpu/add") };
    let instance = Launcher::discover()
        .start_instance(config, "add", &model("add"), Placement::new(Segment::Cpu { cores: 1 }))
        .unwrap();
    let row = 3 * 640 * 640;
    let x: Vec<f32> = (0..8 * row).map(|i| (i % 97) as f32).collect();
    let whole = vec![Tensor::from_f32(vec![8, 3, 640, 640], &x).unwrap()];
    let rows: Vec<Vec<Tensor>> =
        x.chunks(row).map(|r| vec![Tensor::from_f32(vec![1, 3, 640, 640], r).unwrap()]).collect();
    let pages = (x.len() * 4 / 4096) as u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    for stacked in [false, true] {
        let mut faults = Vec::new();
        for turn in 0..13 {
            let before = minor_faults(std::process::id());
            let outputs = if stacked {
                let answers = instance.infer_together(rows.clone(), deadline).await.unwrap();
                answers.into_iter().flatten().collect()
            } else {
                instance.infer(whole.clone(), deadline).await.unwrap()
            };
            // Three turns to warm up.
            if turn >= 3 {
                faults.push(minor_faults(std::process::id()).saturating_sub(before));
            }
            let y = outputs
                .iter()
                .flat_map(|t| t.data().chunks_exact(4))
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()));
            assert!(y.zip(&x).all(|(y, x)| y == x + 1.0), "turn {turn}");
        }
        // The median batch: the system may unmap a page now and then (NUMA balancing, reclaim).
        faults.sort();
        assert!(
            faults[5] < pages / 100,
            "stacked {stacked}: page faults of 10 warm batches {faults:?}, {pages} pages each"
        );
    }
}
