//! An idle model hands back what ONNX Runtime's arena grew to. Its own test binary: no other test's memory moves
//! the process's resident size while this one measures it.

use jig_model_host::onnx::{Model, SessionOptions};
use jig_model_host::{DType, Tensor};
use jig_test_support::{model, resident_bytes};

/// This process's resident memory, in bytes.
fn resident() -> u64 {
    resident_bytes(std::process::id())
}

#[test]
fn release_memory_gives_back_what_a_large_batch_grew_the_arena_to() {
    // `big`: x [N, 4096] -> y [N, 4096]; at N = 4096 its output alone is 64 MiB of the arena.
    let model = Model::load("big", &model("big"), &SessionOptions::default()).unwrap();
    model.release_memory().expect("nothing ran yet: nothing to release");
    let run = |rows: u64| {
        let x = Tensor::new(DType::F32, vec![rows, 4096], vec![0u8; rows as usize * 4096 * 4]).unwrap();
        assert_eq!(model.run(&[x]).unwrap()[0].shape(), &[rows, 4096]);
    };
    run(2); // the footprint of a light load
    run(4096); // a burst's large batch
    let grown = resident();
    model.release_memory().unwrap();
    let released = grown.saturating_sub(resident());
    assert!(released >= 48 << 20, "released {} MiB of {} MiB resident", released >> 20, grown >> 20);
    run(2); // it runs on
}
