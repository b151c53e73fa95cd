//! A pool of buffers for tensor bytes that come back when their last tensor drops.

use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

/// Memory that tensors reuse: a buffer comes back here when the last tensor over it drops (an in-process
/// instance's stacked batches, the outputs a remote node sends, the large inputs glue passes to `infer`). A
/// fresh allocation of a large batch costs a page fault per 4 KiB, several times the copy that fills it
/// (BENCHMARKS.md, "The tensor path"); a buffer written before costs only the copy.
#[derive(Debug, Default)]
pub struct Spare {
    free: Mutex<Vec<Vec<u8>>>,
}

/// Buffers a [`Spare`] keeps while unused: a batch being stacked and the one before it whose outputs still live,
/// with room for batches of other shapes.
const SPARE_KEPT: usize = 4;

impl Spare {
    /// A buffer of `len` bytes to overwrite: the smallest kept one that holds them, else a new one. A kept buffer
    /// keeps its length, so reusing it writes nothing but the copy that fills it.
    pub fn take(&self, len: usize) -> Vec<u8> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let fits = free.iter().enumerate().filter(|(_, b)| b.capacity() >= len).min_by_key(|(_, b)| b.capacity());
        let mut data = match fits.map(|(i, _)| i) {
            Some(i) => free.swap_remove(i),
            None => Vec::with_capacity(len),
        };
        drop(free);
        data.resize(len, 0); // zeroes only what it grows by: nothing once warm
        data
    }

    /// `data` as bytes that come back to this pool when they drop.
    pub fn share(self: &Arc<Self>, data: Vec<u8>) -> Bytes {
        Bytes::from_owner(Recycled { data, home: Arc::downgrade(self) })
    }

    /// Keep `data` (from [`Spare::take`], no longer read) for a later batch, in place of a smaller buffer when all
    /// places are taken.
    pub fn give_back(&self, data: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < SPARE_KEPT {
            free.push(data);
        } else if let Some(smaller) =
            free.iter_mut().filter(|b| b.capacity() < data.capacity()).min_by_key(|b| b.capacity())
        {
            *smaller = data;
        }
    }

    /// Let every kept buffer go: what a load that ended leaves here goes back to the allocator (the next batch
    /// faults its buffer in again).
    pub fn clear(&self) {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Bytes held for later use.
    pub fn held(&self) -> usize {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).iter().map(Vec::capacity).sum()
    }
}

/// A buffer's bytes, owned by its tensors until the last of them drops.
struct Recycled {
    data: Vec<u8>,
    home: Weak<Spare>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        if let Some(home) = self.home.upgrade() {
            home.give_back(std::mem::take(&mut self.data));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_when_its_last_view_drops_and_clear_lets_it_go() {
        let spare = Arc::new(Spare::default());
        let bytes = spare.share(spare.take(4096));
        let view = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(spare.held(), 0, "a view still reads the buffer");
        drop(view);
        assert_eq!(spare.held(), 4096);
        assert_eq!(spare.take(100).capacity(), 4096, "a kept buffer serves a smaller request");
        spare.give_back(vec![0; 512]);
        spare.clear();
        assert_eq!(spare.held(), 0);
    }
}
