//! PPipe's pre-partitioning (`scripts/partition_model.py`, which `make setup` runs into .jig/models/partitions):
//! the PP-OCRv4 recognizer's blocks, chained through jig's own model host, compute what the whole model does.

use std::path::PathBuf;

use jig_model_host::Tensor;
use jig_model_host::onnx::{Model, SessionOptions};
use jig_tests::{model, root};
use serde::Deserialize;

const TOLERANCE: f32 = 1e-4;

/// `<stem>.blocks.json`, the parts of it this test reads.
#[derive(Deserialize)]
struct Partition {
    model: String,
    blocks: Vec<Block>,
}

#[derive(Deserialize)]
struct Block {
    file: String,
    inputs: Vec<Io>,
    outputs: Vec<Io>,
    ms: f64,
    output_bytes_per_row: u64,
}

/// A block's input or output; `shape` is at batch 1.
#[derive(Deserialize)]
struct Io {
    name: String,
    shape: Vec<u64>,
}

fn partitions() -> PathBuf {
    root().join(".jig/models/partitions")
}

fn load(path: &std::path::Path) -> Model {
    let name = path.file_name().unwrap().to_string_lossy();
    Model::load(&name, path, &SessionOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// `n` values in [-1, 1) from a fixed xorshift sequence.
fn pseudo_random(n: usize, mut state: u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// `shape` (at batch 1) at batch `batch`.
fn at_batch(shape: &[u64], batch: u64) -> Vec<u64> {
    assert_eq!(shape.first(), Some(&1), "shapes in the blocks json are at batch 1: {shape:?}");
    std::iter::once(batch).chain(shape[1..].iter().copied()).collect()
}

#[test]
fn chained_recognizer_blocks_compute_the_whole_model() {
    let json = partitions().join("ppocr-rec.blocks.json");
    let bytes =
        std::fs::read(&json).unwrap_or_else(|e| panic!("{} is missing ({e}): run `make setup`", json.display()));
    let partition: Partition = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(partition.model, "ppocr-rec.onnx");
    assert!(partition.blocks.len() >= 2, "{} blocks", partition.blocks.len());

    let whole = load(&model("ppocr-rec"));
    let blocks: Vec<Model> = partition
        .blocks
        .iter()
        .map(|b| {
            let path = partitions().join(&b.file);
            assert!(path.is_file(), "{} is missing: run `make setup`", path.display());
            load(&path)
        })
        .collect();
    for (i, (block, session)) in partition.blocks.iter().zip(&blocks).enumerate() {
        assert!(block.ms.is_finite() && block.ms >= 0.0, "block {i}: {} ms", block.ms);
        assert!(block.output_bytes_per_row > 0, "block {i}");
        let declared: Vec<&str> = session.inputs().iter().map(|s| s.name.as_str()).collect();
        let listed: Vec<&str> = block.inputs.iter().map(|io| io.name.as_str()).collect();
        assert_eq!(declared, listed, "block {i}'s inputs");
        if i > 0 {
            assert_eq!(block.inputs.len(), 1, "block {i} takes one activation");
            assert_eq!(
                block.inputs[0].name,
                partition.blocks[i - 1].outputs[0].name,
                "block {i} takes block {}'s output",
                i - 1
            );
        }
    }

    for batch in [1u64, 3] {
        let shape = at_batch(&partition.blocks[0].inputs[0].shape, batch);
        let n = shape.iter().product::<u64>() as usize;
        let x = Tensor::from_f32(shape, &pseudo_random(n, 0x9e37_79b9_7f4a_7c15 ^ batch)).unwrap();
        let want = whole.run(std::slice::from_ref(&x)).unwrap();

        let mut value = x;
        for (i, (block, session)) in partition.blocks.iter().zip(&blocks).enumerate() {
            let out =
                session.run(std::slice::from_ref(&value)).unwrap_or_else(|e| panic!("block {i}, batch {batch}: {e}"));
            assert_eq!(out.len(), block.outputs.len(), "block {i}'s outputs");
            for (got, io) in out.iter().zip(&block.outputs) {
                assert_eq!(got.shape(), at_batch(&io.shape, batch), "block {i}'s output {} at batch {batch}", io.name);
            }
            value = out.into_iter().next().unwrap();
        }

        assert_eq!(value.shape(), want[0].shape(), "batch {batch}");
        let (got, want) = (f32s(&value), f32s(&want[0]));
        // Within 1e-4 absolute plus 1e-4 relative, as the script's --check.
        let excess =
            got.iter().zip(&want).map(|(g, w)| (g - w).abs() - TOLERANCE * (1.0 + w.abs())).fold(f32::MIN, f32::max);
        assert!(
            excess <= 0.0,
            "batch {batch}: the chained blocks differ from the whole model by {excess:e} beyond 1e-4"
        );
    }
}
