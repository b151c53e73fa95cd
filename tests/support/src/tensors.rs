//! Tensors for the models `make setup` generates, and their answers.

use jig_wire::{DType, Tensor};

/// An `i64` tensor of `shape`.
pub fn i64s(shape: Vec<u64>, values: &[i64]) -> Tensor {
    Tensor::new(DType::I64, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap()
}

/// An `f32` tensor's values.
pub fn f32s(t: &Tensor) -> Vec<f32> {
    t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Two rows for the `mixed` model (y = x × ids), and the y it must answer.
pub fn mixed_two_rows() -> (Vec<Tensor>, Vec<f32>) {
    let x = Tensor::from_f32(vec![2, 4], &[1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 0.5, 0.5]).unwrap();
    let ids = i64s(vec![2, 4], &[1, 2, 3, 4, 2, 4, 6, 8]);
    (vec![x, ids], vec![1.0, 4.0, 9.0, 16.0, 1.0, 2.0, 3.0, 4.0])
}
