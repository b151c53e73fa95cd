//! Rows placed in turn: memory where requests' inputs are written as they arrive, each input's bytes right after
//! the last request's, so that requests batched in the order they were placed lie end to end already and their
//! batch is a view over them, not a copy ([`Rows::span`]).
//!
//! Stacking copies every byte of a batch once more after the copy that brought each request in (from a
//! function's sandbox), and for a model that reads its input once that copy costs more than the model: the Add
//! of the tensor-path bench on 64 stacked requests ran at 0.46× bare ONNX Runtime on CPU, 19 of its 35 ms a batch
//! spent stacking (BENCHMARKS.md). Placed here, the one copy in is the batch's.
//!
//! Each input of the model has its block: memory for `max_batch` requests of the size of the one that opened
//! it (a worker's shared region, which it reads in place, or this process's memory from the instance's
//! [`Spare`]), filled in turn and replaced when full. A block lives while any row over it does. Requests placed
//! out of turn, dropped, or batched with others still form batches, copied as before.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use jig_wire::{Bytes, Spare};

use crate::regions::SharedBuffer;

/// The blocks of one instance's inputs, the open one of each and every one still alive.
#[derive(Default)]
pub struct Rows {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Per input, the block being filled and where its free bytes start.
    open: Vec<Option<(Arc<Block>, usize)>>,
    /// Every block some row still lies in, by address, to find a batch's parts in.
    live: Vec<Weak<Block>>,
}

/// Memory of one block, written only through ranges [`Rows::place`] reserved, each once, before the row over
/// it is handed out.
struct Block {
    base: *mut u8,
    len: usize,
    _memory: Memory,
}

// SAFETY: `base` points into `_memory`, which the block owns and never moves (a heap buffer or a mapping); each
// range is written once, by the `place` that reserved it under the lock, before its row is handed out and read.
unsafe impl Send for Block {}
// SAFETY: as for `Send`.
unsafe impl Sync for Block {}

/// What a block's bytes lie in.
pub enum Memory {
    /// A worker's shared region, which the worker reads where it lies.
    Shared(SharedBuffer),
    /// This process's memory, back to its spare buffers when the block goes.
    Heap(Vec<u8>, Weak<Spare>),
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Memory::Heap(data, spare) = &mut self._memory
            && let Some(spare) = spare.upgrade()
        {
            spare.give_back(std::mem::take(data));
        }
    }
}

impl Block {
    fn new(mut memory: Memory) -> Block {
        let bytes: &mut [u8] = match &mut memory {
            Memory::Shared(shared) => shared.as_mut_slice(),
            Memory::Heap(data, _) => data,
        };
        Block { base: bytes.as_mut_ptr(), len: bytes.len(), _memory: memory }
    }

    fn range(&self) -> (usize, usize) {
        (self.base as usize, self.base as usize + self.len)
    }
}

/// A row's bytes (or a batch's, over several rows): a range of a block, which it keeps alive.
struct Row {
    block: Arc<Block>,
    start: usize,
    len: usize,
}

impl AsRef<[u8]> for Row {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the range lies in the block (checked where the row is made) and was written before the row was.
        unsafe { std::slice::from_raw_parts(self.block.base.add(self.start), self.len) }
    }
}

impl Rows {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Copies of a request's `inputs` placed in turn, or `None` where `memory` gives none for a new block. A block
    /// opened for input `i` holds `per_block` times its bytes; `memory(len)` gives `len` bytes. Only the places
    /// are taken under the lock: requests placed at once copy at once.
    pub fn place(
        &self,
        inputs: &[&[u8]],
        per_block: u64,
        memory: impl Fn(usize) -> Option<Memory>,
    ) -> Option<Vec<Bytes>> {
        let reserved = {
            let mut state = self.state();
            if state.open.len() < inputs.len() {
                state.open.resize(inputs.len(), None);
            }
            let mut reserved = Vec::with_capacity(inputs.len());
            for (i, bytes) in inputs.iter().enumerate() {
                let fits = state.open[i].as_ref().is_some_and(|(block, at)| block.len - at >= bytes.len());
                if !fits {
                    let per_block = usize::try_from(per_block.max(1)).unwrap_or(usize::MAX);
                    let block = Arc::new(Block::new(memory(bytes.len().max(1).saturating_mul(per_block))?));
                    state.live.retain(|b| b.strong_count() > 0);
                    state.live.push(Arc::downgrade(&block));
                    state.open[i] = Some((block, 0));
                }
                let (block, at) = state.open[i].as_mut().expect("opened above");
                reserved.push(Row { block: block.clone(), start: *at, len: bytes.len() });
                *at += bytes.len();
            }
            reserved
        };
        let placed = reserved.into_iter().zip(inputs).map(|(row, bytes)| {
            // SAFETY: the row's range lies in its block (checked above) and was reserved for this copy alone: no
            // other row covers it, and this one is read only once it is returned.
            let dst = unsafe { std::slice::from_raw_parts_mut(row.block.base.add(row.start), row.len) };
            crate::batch::gather(dst, &[bytes]); // a large input by several threads
            Bytes::from_owner(row)
        });
        Some(placed.collect())
    }

    /// Stop filling the open blocks: each goes back to its memory's owner once its last row drops, and the next
    /// request placed opens a new one. An idle instance closes them, so that the blocks of a burst (sized for its
    /// largest batches) do not stay.
    pub fn close(&self) {
        self.state().open.clear();
    }

    /// The bytes of `parts` as one view, when they lie end to end in one block in this order (requests placed in
    /// turn and batched so): the batch's input, with no copy. `None` otherwise.
    pub fn span(&self, parts: &[&[u8]]) -> Option<Bytes> {
        let first = parts.first()?;
        let start = first.as_ptr() as usize;
        let mut end = start;
        for part in parts {
            if part.as_ptr() as usize != end {
                return None;
            }
            end += part.len();
        }
        let block = self.containing(start, end)?;
        let (from, _) = block.range();
        Some(Bytes::from_owner(Row { block, start: start - from, len: end - start }))
    }

    /// Whether `bytes` lie in one of its blocks.
    pub fn holds(&self, bytes: &[u8]) -> bool {
        let start = bytes.as_ptr() as usize;
        self.containing(start, start + bytes.len()).is_some()
    }

    /// The live block the addresses `start..end` lie in.
    fn containing(&self, start: usize, end: usize) -> Option<Arc<Block>> {
        self.state().live.iter().filter_map(Weak::upgrade).find(|b| {
            let (from, to) = b.range();
            from <= start && end <= to
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heap(spare: &Arc<Spare>) -> impl Fn(usize) -> Option<Memory> + '_ {
        |len| Some(Memory::Heap(spare.take(len), Arc::downgrade(spare)))
    }

    #[test]
    fn requests_placed_in_turn_are_batched_with_no_copy() {
        let (rows, spare) = (Rows::default(), Arc::new(Spare::default()));
        let a = rows.place(&[b"aaaa", b"x"], 3, heap(&spare)).unwrap();
        let b = rows.place(&[b"bbbb", b"y"], 3, heap(&spare)).unwrap();
        assert_eq!((&a[0][..], &b[1][..]), (&b"aaaa"[..], &b"y"[..]));
        let batch = rows.span(&[&a[0], &b[0]]).expect("end to end in one block");
        assert_eq!(&batch[..], b"aaaabbbb");
        assert_eq!(batch.as_ptr(), a[0].as_ptr(), "a view, not a copy");
        assert_eq!(&rows.span(&[&a[1], &b[1]]).unwrap()[..], b"xy", "each input its own block");
        assert!(rows.span(&[&b[0], &a[0]]).is_none(), "out of turn");
        assert!(rows.span(&[&a[0], &a[1]]).is_none(), "two blocks");
        let elsewhere = Bytes::from_static(b"aaaa");
        assert!(rows.span(&[&elsewhere]).is_none() && !rows.holds(&elsewhere));
        assert!(rows.holds(&b[0]));
    }

    #[test]
    fn a_full_block_is_replaced_and_each_goes_back_when_its_last_row_drops() {
        let (rows, spare) = (Rows::default(), Arc::new(Spare::default()));
        let first: Vec<Bytes> = (0..2).flat_map(|_| rows.place(&[&[7; 1000]], 2, heap(&spare)).unwrap()).collect();
        let third = rows.place(&[&[8; 1000]], 2, heap(&spare)).unwrap();
        assert!(rows.span(&[&first[0], &first[1]]).is_some());
        assert!(rows.span(&[&first[1], &third[0]]).is_none(), "the third opened a new block");
        let batch = rows.span(&[&first[0], &first[1]]).unwrap();
        drop(first);
        assert_eq!(spare.held(), 0, "the batch still holds the first block");
        drop(batch);
        assert_eq!(spare.held(), 2000, "the first block is back");
        assert!(rows.place(&[&[9; 1000]], 2, |_| None).is_some(), "room left in the open block");
        assert!(rows.place(&[&[9; 1000]], 2, |_| None).is_none(), "no memory for a new one");
    }

    #[test]
    fn a_closed_block_goes_back_when_its_last_row_drops_and_the_next_request_opens_another() {
        let (rows, spare) = (Rows::default(), Arc::new(Spare::default()));
        let first = rows.place(&[&[7; 1000]], 4, heap(&spare)).unwrap();
        rows.close();
        assert_eq!(spare.held(), 0, "a row still lies in the closed block");
        drop(first);
        assert_eq!(spare.held(), 4000, "the closed block is back");
        assert!(rows.place(&[&[8; 1000]], 4, |_| None).is_none(), "the closed block is not filled further");
    }
}
