//! Buffers for a worker's outputs that return to their pool when the last view of them is dropped, so that
//! the parent's copy out of the shared region writes into memory already mapped (a fresh allocation of tens of
//! megabytes costs a page fault per 4 KiB, more than the copy itself).

use std::sync::{Arc, Mutex};

use jig_tensor::Bytes;

/// Buffers kept for reuse; more are freed.
const KEPT: usize = 8;

/// Free buffers, largest capacity last.
#[derive(Debug, Default)]
pub struct Buffers {
    free: Mutex<Vec<Vec<u8>>>,
}

/// A buffer on loan: its bytes, and the pool it goes back to.
struct Loan {
    data: Vec<u8>,
    home: Arc<Buffers>,
}

impl AsRef<[u8]> for Loan {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        let data = std::mem::take(&mut self.data);
        let mut free = self.home.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < KEPT {
            free.push(data);
            free.sort_by_key(Vec::capacity);
        }
    }
}

impl Buffers {
    /// A copy of `bytes` in a buffer of the pool (the smallest free one that fits, else a new one).
    pub fn copy(self: &Arc<Self>, bytes: &[u8]) -> Bytes {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            free.iter().position(|b| b.capacity() >= bytes.len()).map(|i| free.remove(i))
        };
        let mut data = reused.unwrap_or_default();
        data.clear();
        data.extend_from_slice(bytes);
        Bytes::from_owner(Loan { data, home: self.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_copy_lends_its_buffer_to_the_next() {
        let buffers = Arc::new(Buffers::default());
        let first = buffers.copy(&[1, 2, 3, 4]);
        let address = first.as_ptr();
        assert_eq!(&first[..], &[1, 2, 3, 4]);
        let view = first.slice(1..3);
        drop(first);
        assert!(buffers.free.lock().unwrap().is_empty(), "a view still holds the buffer");
        drop(view);
        let second = buffers.copy(&[9, 9]);
        assert_eq!((&second[..], second.as_ptr()), (&[9u8, 9][..], address), "the same memory, new bytes");
    }
}
