//! Stacking requests' tensors into one batch along the first dimension, and splitting the outputs back.

use std::sync::Arc;

use jig_wire::Spare;

use crate::regions::SharedBuffer;
use crate::rows::Rows;
use crate::{Tensor, TensorError};

/// What must match for two requests to share a batch: per input, the dtype and every dimension but the first.
pub fn batch_key(inputs: &[Tensor]) -> Vec<(crate::DType, &[u64])> {
    inputs.iter().map(|t| (t.dtype(), t.shape().get(1..).unwrap_or(&[]))).collect()
}

/// Rows a request contributes: the first dimension of its first input (1 for scalars or no inputs).
pub fn rows(inputs: &[Tensor]) -> u64 {
    inputs.first().and_then(|t| t.shape().first().copied()).unwrap_or(1)
}

/// Concatenate the requests' inputs along dimension 0: a view over them where they lie end to end in
/// `placed` (in turn), else copied into memory from `buffer` where it gives some (an executor's shared region), else
/// into a buffer from `spare`. All requests must have equal [`batch_key`]s. A single request's inputs are used as
/// they are.
pub fn stack(
    requests: &[&[Tensor]],
    buffer: impl Fn(usize) -> Option<SharedBuffer>,
    spare: &Arc<Spare>,
    placed: &Rows,
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
            let sources: Vec<&[u8]> = parts.iter().map(|t| t.data()).collect();
            if let Some(data) = placed.span(&sources) {
                return Tensor::new(parts[0].dtype(), shape, data);
            }
            let data = match buffer(len) {
                Some(mut shared) => {
                    gather(shared.as_mut_slice(), &sources);
                    shared.freeze()
                }
                None => {
                    let mut data = spare.take(len);
                    gather(&mut data, &sources);
                    spare.share(data)
                }
            };
            Tensor::new(parts[0].dtype(), shape, data)
        })
        .collect()
}

/// Bytes one copying thread is given at least: below that a thread's start costs more than the share it copies.
const GATHER_PER_THREAD: usize = 8 << 20;

/// Threads that copy one batch at most: a few saturate a socket's memory bandwidth.
const GATHER_THREADS: usize = 8;

/// Copy `parts` end to end into `dst`, which is exactly as long as they are together. One thread copies 5–10
/// GB/s and a large batch is hundreds of megabytes, so a large copy is split among up to [`GATHER_THREADS`]
/// threads, no more than the cores the calling thread may run on (a CPU instance's own cores, which the
/// threads inherit); the calling thread copies the last share.
pub fn gather(dst: &mut [u8], parts: &[&[u8]]) {
    debug_assert_eq!(dst.len(), parts.iter().map(|p| p.len()).sum::<usize>());
    let threads = (dst.len() / GATHER_PER_THREAD).min(GATHER_THREADS);
    let threads = if threads > 1 { threads.min(crate::device::cpu_cores().len()) } else { threads };
    if threads <= 1 {
        gather_from(dst, parts, 0);
        return;
    }
    let share = dst.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut chunks = dst.chunks_mut(share).enumerate();
        let (last, last_chunk) = chunks.next_back().expect("a large copy has chunks");
        for (k, chunk) in chunks {
            scope.spawn(move || gather_from(chunk, parts, k * share));
        }
        gather_from(last_chunk, parts, last * share);
    });
}

/// Fill `dst` with the bytes of `parts` (end to end) from offset `start` on.
fn gather_from(dst: &mut [u8], parts: &[&[u8]], start: usize) {
    let (mut at, mut skip) = (0, start);
    for part in parts {
        if at == dst.len() {
            break;
        }
        if skip >= part.len() {
            skip -= part.len();
            continue;
        }
        let piece = &part[skip..(skip + dst.len() - at).min(part.len())];
        dst[at..at + piece.len()].copy_from_slice(piece);
        at += piece.len();
        skip = 0;
    }
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
    fn gather_copies_parts_end_to_end_on_one_thread_or_several() {
        let parts: Vec<Vec<u8>> = [7 << 20, 1, 0, 5 << 20, 9 << 20, 3]
            .iter()
            .enumerate()
            .map(|(k, &n)| (0..n).map(|i| (i * 31 + k * 7) as u8).collect())
            .collect();
        for count in [1, 2, parts.len()] {
            let sources: Vec<&[u8]> = parts[..count].iter().map(Vec::as_slice).collect();
            let expected = sources.concat();
            let mut dst = vec![0xAA; expected.len()];
            gather(&mut dst, &sources);
            assert!(dst == expected, "{count} parts of {} bytes", expected.len());
        }
    }

    #[test]
    fn stack_then_split_round_trips() {
        let a = vec![t(vec![1, 2], &[1.0, 2.0])];
        let b = vec![t(vec![2, 2], &[3.0, 4.0, 5.0, 6.0])];
        assert_eq!(batch_key(&a), batch_key(&b));
        let stacked = stack(&[&a, &b], |_| None, &Arc::default(), &Rows::default()).unwrap();
        assert_eq!(stacked[0].shape(), &[3, 2]);
        let back = split(stacked, &[rows(&a), rows(&b)]).unwrap();
        assert_eq!(back, vec![a, b]);
    }

    #[test]
    fn a_stacked_batch_reuses_the_memory_of_the_one_before_once_it_drops() {
        let spare = Arc::new(Spare::default());
        let (a, b) = (vec![t(vec![1, 256], &[1.0; 256])], vec![t(vec![1, 256], &[2.0; 256])]);
        let first = stack(&[&a, &b], |_| None, &spare, &Rows::default()).unwrap();
        let address = first[0].data().as_ptr();
        let outputs = split(first, &[1, 1]).unwrap();
        assert_eq!(spare.held(), 0, "a view of the batch is still alive");
        drop(outputs);
        assert_eq!(spare.held(), 2048, "the batch's buffer is kept once its last view drops");
        let second = stack(&[&b, &a], |_| None, &spare, &Rows::default()).unwrap();
        assert_eq!(second[0].data().as_ptr(), address, "the next batch is stacked into the same memory");
        assert_eq!(spare.held(), 0);
        assert_eq!(split(second, &[1, 1]).unwrap(), vec![b.clone(), a.clone()], "and holds its own rows");
        // A larger batch does not fit the kept buffer: it gets its own, and both are kept.
        let larger = stack(&[&a, &b, &a], |_| None, &spare, &Rows::default()).unwrap();
        assert_ne!(larger[0].data().as_ptr(), address);
        drop(larger);
        assert_eq!(spare.held(), 2048 + 3072);
    }

    #[test]
    fn different_trailing_shapes_do_not_share_a_key_and_unbatched_outputs_are_refused() {
        assert_ne!(batch_key(&[t(vec![1, 2], &[0.0; 2])]), batch_key(&[t(vec![1, 3], &[0.0; 3])]));
        let err = split(vec![t(vec![1], &[0.0])], &[1, 1]).unwrap_err();
        assert!(err.contains("max batch 1"), "{err}");
    }
}
