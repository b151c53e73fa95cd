//! Stacking requests' tensors into one batch along the first dimension, and splitting the outputs back.

use crate::worker::SharedBuffer;
use crate::{Tensor, TensorError};

/// What must match for two requests to share a batch: per input, the dtype and every dimension but the first.
pub fn batch_key(inputs: &[Tensor]) -> Vec<(crate::DType, &[u64])> {
    inputs.iter().map(|t| (t.dtype(), t.shape().get(1..).unwrap_or(&[]))).collect()
}

/// Rows a request contributes: the first dimension of its first input (1 for scalars or no inputs).
pub fn rows(inputs: &[Tensor]) -> u64 {
    inputs.first().and_then(|t| t.shape().first().copied()).unwrap_or(1)
}

/// Concatenate the requests' inputs along dimension 0, each into memory from `buffer` where it gives some (an
/// executor's shared region), else into a new allocation. All requests must have equal [`batch_key`]s. A
/// single request's inputs are used as they are.
pub fn stack(
    requests: &[&[Tensor]],
    buffer: impl Fn(usize) -> Option<SharedBuffer>,
) -> Result<Vec<Tensor>, TensorError> {
    let Some(first) = requests.first() else { return Ok(Vec::new()) };
    if requests.len() == 1 {
        return Ok(first.to_vec());
    }
    (0..first.len())
        .map(|i| {
            let parts: Vec<&Tensor> = requests.iter().map(|r| &r[i]).collect();
            let rows: u64 = parts.iter().map(|t| t.shape()[0]).sum();
            let mut shape = parts[0].shape().to_vec();
            shape[0] = rows;
            let len = parts.iter().map(|t| t.data().len()).sum();
            let data = match buffer(len) {
                Some(mut shared) => {
                    let mut at = 0;
                    for t in &parts {
                        shared.as_mut_slice()[at..at + t.data().len()].copy_from_slice(t.data());
                        at += t.data().len();
                    }
                    shared.freeze()
                }
                None => {
                    let mut data = Vec::with_capacity(len);
                    for t in &parts {
                        data.extend_from_slice(t.data());
                    }
                    data.into()
                }
            };
            Tensor::new(parts[0].dtype(), shape, data)
        })
        .collect()
}

/// Split each output along dimension 0 into pieces of `rows[k]` rows, one list of outputs per request: views of
/// the output's bytes, not copies.
/// Fails when an output's first dimension is not the total of `rows` (a model that does not batch).
pub fn split(outputs: Vec<Tensor>, rows: &[u64]) -> Result<Vec<Vec<Tensor>>, String> {
    if rows.len() == 1 {
        return Ok(vec![outputs]);
    }
    let total: u64 = rows.iter().sum();
    let mut per_request: Vec<Vec<Tensor>> = rows.iter().map(|_| Vec::with_capacity(outputs.len())).collect();
    for (index, output) in outputs.into_iter().enumerate() {
        if output.shape().first() != Some(&total) {
            return Err(format!(
                "output {index} has shape {:?}, whose first dimension is not the batch of {total} rows; \
                 serve this model with max batch 1",
                output.shape()
            ));
        }
        let (dtype, shape, data) = output.into_parts();
        let row_bytes = if total == 0 { 0 } else { data.len() / total as usize };
        let mut offset = 0;
        for (k, &n) in rows.iter().enumerate() {
            let len = row_bytes * n as usize;
            let mut piece_shape = shape.clone();
            piece_shape[0] = n;
            let piece = Tensor::new(dtype, piece_shape, data.slice(offset..offset + len)).map_err(|e| e.to_string())?;
            per_request[k].push(piece);
            offset += len;
        }
    }
    Ok(per_request)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: Vec<u64>, values: &[f32]) -> Tensor {
        Tensor::from_f32(shape, values).unwrap()
    }

    #[test]
    fn stack_then_split_round_trips() {
        let a = vec![t(vec![1, 2], &[1.0, 2.0])];
        let b = vec![t(vec![2, 2], &[3.0, 4.0, 5.0, 6.0])];
        assert_eq!(batch_key(&a), batch_key(&b));
        let stacked = stack(&[&a, &b], |_| None).unwrap();
        assert_eq!(stacked[0].shape(), &[3, 2]);
        let back = split(stacked, &[rows(&a), rows(&b)]).unwrap();
        assert_eq!(back, vec![a, b]);
    }

    #[test]
    fn different_trailing_shapes_do_not_share_a_key_and_unbatched_outputs_are_refused() {
        assert_ne!(batch_key(&[t(vec![1, 2], &[0.0; 2])]), batch_key(&[t(vec![1, 3], &[0.0; 3])]));
        let err = split(vec![t(vec![1], &[0.0])], &[1, 1]).unwrap_err();
        assert!(err.contains("max batch 1"), "{err}");
    }
}
