//! Helpers shared by model-host's integration tests.
#![allow(dead_code)] // each test file uses its own subset

use std::path::PathBuf;

use jig_model_host::{DType, Tensor};

/// A model `make setup` wrote into .jig/models.
pub fn model_path(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.jig/models").join(format!("{name}.onnx"));
    assert!(path.is_file(), "{} is missing: run `make setup`", path.display());
    path
}

/// The fields of `/proc/PID/stat` after the parenthesised command name (the line's 3rd field first), as
/// numbers where they are; none when the process is gone.
fn proc_stat(pid: u32) -> Vec<Option<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    rest.split_whitespace().map(|f| f.parse().ok()).collect()
}

/// User plus system CPU time of a process (the line's 14th and 15th fields), in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    proc_stat(pid).iter().skip(11).take(2).flatten().sum()
}

/// Minor page faults of a process so far (the line's 10th field): what touching fresh memory costs.
pub fn minor_faults(pid: u32) -> u64 {
    proc_stat(pid).get(7).copied().flatten().unwrap_or(0)
}

pub fn i64s(shape: Vec<u64>, values: &[i64]) -> Tensor {
    Tensor::new(DType::I64, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap()
}

pub fn f32s(t: &Tensor) -> Vec<f32> {
    t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Two rows for the `mixed` model (y = x × ids), and the y it must answer.
pub fn mixed_two_rows() -> (Vec<Tensor>, Vec<f32>) {
    let x = Tensor::from_f32(vec![2, 4], &[1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 0.5, 0.5]).unwrap();
    let ids = i64s(vec![2, 4], &[1, 2, 3, 4, 2, 4, 6, 8]);
    (vec![x, ids], vec![1.0, 4.0, 9.0, 16.0, 1.0, 2.0, 3.0, 4.0])
}
