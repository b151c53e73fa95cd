//! The parent's shared regions: every tensor a worker reads or writes lies in one. A region is lent whole as
//! one tensor's bytes ([`SharedBuffer`]) and comes back to the pool when the last view of it drops, so once
//! warm a batch creates no region, faults in no page, and the worker maps each region once.
//!
//! It lies outside [`crate::worker`] (which re-exports [`SharedBuffer`]) so that the batcher and the
//! [`Executor`](crate::instance::Executor) trait, which the worker implements, name a buffer without importing
//! the worker; [`Region`] is how the worker protocol announces one.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use jig_wire::Bytes;
use serde::{Deserialize, Serialize};

use crate::shm::Shm;

/// A shared region, as the worker opens it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    /// How slots name it.
    pub id: u64,
    /// Its file, while it still has a name.
    pub path: PathBuf,
    /// Its size, in bytes.
    pub size: u64,
}

/// Free regions kept for reuse; more are unmapped.
const KEPT: usize = 8;

/// One worker's regions.
#[derive(Debug, Default)]
pub struct Regions {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Free regions, smallest first.
    free: Vec<Owned>,
    /// Lent regions: id and address range, to recognise a tensor's bytes as already shared.
    lent: Vec<(u64, usize, usize)>,
    /// Regions the worker has not been told of yet.
    unannounced: Vec<Region>,
    /// Regions unmapped here that the worker still maps.
    retired: Vec<u64>,
}

#[derive(Debug)]
struct Owned {
    id: u64,
    shm: Shm,
}

/// A region on loan: written by its holder, then frozen into a tensor's bytes.
#[derive(Debug)]
pub struct SharedBuffer {
    region: Option<Owned>,
    len: usize,
    home: Arc<Regions>,
}

impl Regions {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer of `len` bytes: the smallest free region that holds them, else a new one.
    pub fn take(self: &Arc<Self>, len: usize) -> io::Result<SharedBuffer> {
        if let Some(kept) = self.take_kept(len) {
            return Ok(kept);
        }
        let shm = Shm::create(rounded(len))?;
        let mut state = self.state();
        state.next_id += 1;
        let id = state.next_id;
        let path = shm.path().expect("a new region has a name").to_path_buf();
        state.unannounced.push(Region { id, path, size: shm.len() as u64 });
        drop(state);
        Ok(self.lend(Owned { id, shm }, len))
    }

    /// A buffer of `len` bytes in the smallest free region that holds them, if one does: memory the worker
    /// already maps (and, on CUDA, has page-locked), unlike a new region.
    pub fn take_kept(self: &Arc<Self>, len: usize) -> Option<SharedBuffer> {
        let region = {
            let mut state = self.state();
            let at = state.free.iter().position(|r| r.shm.len() >= len)?;
            state.free.remove(at)
        };
        Some(self.lend(region, len))
    }

    fn lend(self: &Arc<Self>, region: Owned, len: usize) -> SharedBuffer {
        let start = region.shm.bytes().as_ptr() as usize;
        self.state().lent.push((region.id, start, start + region.shm.len()));
        SharedBuffer { region: Some(region), len, home: self.clone() }
    }

    /// The region and offset where `bytes` lie, if they lie in a lent region of this pool.
    pub fn locate(&self, bytes: &[u8]) -> Option<(u64, usize)> {
        let (start, end) = (bytes.as_ptr() as usize, bytes.as_ptr() as usize + bytes.len());
        let state = self.state();
        state.lent.iter().find(|&&(_, from, to)| from <= start && end <= to).map(|&(id, from, _)| (id, start - from))
    }

    /// The regions to announce to the worker with the next message, and those it may unmap.
    pub fn changes(&self) -> (Vec<Region>, Vec<u64>) {
        let mut state = self.state();
        (std::mem::take(&mut state.unannounced), std::mem::take(&mut state.retired))
    }

    /// The regions to announce with a message that cannot say which to unmap (a `Place`): those wait for the
    /// next [`Regions::changes`].
    pub fn announcements(&self) -> Vec<Region> {
        std::mem::take(&mut self.state().unannounced)
    }

    /// Unmap every free region (an idle worker's, after a load whose batches were large), and the regions the
    /// worker may now unmap: those it was told of, for the message that asks it to.
    pub fn retire_free(&self) -> Vec<u64> {
        let mut state = self.state();
        for region in std::mem::take(&mut state.free) {
            match state.unannounced.iter().position(|r| r.id == region.id) {
                Some(at) => drop(state.unannounced.remove(at)),
                None => state.retired.push(region.id),
            }
        }
        std::mem::take(&mut state.retired)
    }

    fn give_back(&self, region: Owned) {
        let mut state = self.state();
        state.lent.retain(|&(id, ..)| id != region.id);
        if state.free.len() < KEPT {
            let at = state.free.partition_point(|r| r.shm.len() <= region.shm.len());
            state.free.insert(at, region);
        } else if let Some(at) = state.unannounced.iter().position(|r| r.id == region.id) {
            state.unannounced.remove(at);
        } else {
            state.retired.push(region.id);
        }
    }
}

/// `len` rounded up to an eighth of its power of two (at least 64 KiB), so that batches of nearby sizes reuse
/// one region while wasting at most an eighth of it.
fn rounded(len: usize) -> usize {
    let step = (len.max(1).next_power_of_two() / 8).max(1 << 16);
    len.max(1).div_ceil(step) * step
}

impl SharedBuffer {
    /// The region it lies in.
    pub fn region(&self) -> u64 {
        self.owned().id
    }

    /// Its `len` bytes, to write.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.region.as_mut().expect("held until dropped").shm.bytes_mut()[..len]
    }

    /// Its bytes as a tensor's, shared: the region comes back to the pool when the last view drops.
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(self)
    }

    fn owned(&self) -> &Owned {
        self.region.as_ref().expect("held until dropped")
    }
}

impl AsRef<[u8]> for SharedBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.owned().shm.bytes()[..self.len]
    }
}

impl Drop for SharedBuffer {
    fn drop(&mut self) {
        if let Some(region) = self.region.take() {
            self.home.give_back(region);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_buffer_lends_its_region_to_the_next_and_views_are_located() {
        let regions = Arc::new(Regions::default());
        let mut first = regions.take(4).unwrap();
        first.as_mut_slice().copy_from_slice(&[1, 2, 3, 4]);
        let id = first.region();
        let bytes = first.freeze();
        assert_eq!(&bytes[..], &[1, 2, 3, 4]);
        assert_eq!(regions.locate(&bytes[1..3]), Some((id, 1)));
        assert_eq!(regions.locate(&[1, 2]), None, "bytes elsewhere are not in a region");
        let (open, close) = regions.changes();
        assert_eq!((open.len(), open[0].id, close.len()), (1, id, 0));

        let view = bytes.slice(1..3);
        drop(bytes);
        assert!(regions.state().free.is_empty(), "a view still holds the region");
        drop(view);
        assert_eq!(regions.locate(&[0]), None);
        let second = regions.take(2).unwrap();
        assert_eq!(second.region(), id, "the same region again");
        assert!(regions.changes().0.is_empty(), "the worker maps it already");
    }

    #[test]
    fn regions_past_the_kept_few_are_retired() {
        let regions = Arc::new(Regions::default());
        let held: Vec<SharedBuffer> = (0..KEPT + 2).map(|_| regions.take(10).unwrap()).collect();
        let (open, _) = regions.changes();
        assert_eq!(open.len(), KEPT + 2);
        drop(held);
        let (open, close) = regions.changes();
        assert!(open.is_empty());
        assert_eq!(close.len(), 2, "two regions beyond the kept ones go");
    }

    #[test]
    fn kept_memory_is_only_what_is_free_and_retirements_wait_for_a_message_that_carries_them() {
        let regions = Arc::new(Regions::default());
        assert!(regions.take_kept(10).is_none(), "nothing free: no region is made");
        assert!(regions.changes().0.is_empty());
        let held: Vec<SharedBuffer> = (0..KEPT + 1).map(|_| regions.take(10).unwrap()).collect();
        assert_eq!(regions.announcements().len(), KEPT + 1);
        drop(held);
        let kept = regions.take_kept(10).expect("a freed region is lent again");
        assert!(regions.announcements().is_empty(), "the worker maps it already");
        assert_eq!(regions.changes().1.len(), 1, "the one retired is still to be unmapped");
        drop(kept);
    }

    #[test]
    fn retiring_the_free_regions_unmaps_them_and_names_those_the_worker_maps() {
        let regions = Arc::new(Regions::default());
        let told = regions.take(10).unwrap();
        assert_eq!(regions.changes().0.len(), 1, "announced");
        let untold = regions.take(10).unwrap();
        let lent = regions.take(10).unwrap();
        drop((told, untold));
        let retired = regions.retire_free();
        assert_eq!(retired.len(), 1, "the one the worker maps; the other it never heard of");
        assert!(regions.take_kept(10).is_none(), "nothing kept");
        assert_eq!(regions.announcements().len(), 1, "the one still lent is announced, the retired one not");
        drop(lent);
        assert!(regions.take_kept(10).is_some(), "a region given back later is kept again");
    }

    #[test]
    fn sizes_round_to_an_eighth() {
        assert_eq!(rounded(0), 1 << 16);
        assert_eq!(rounded(100 << 20), 112 << 20);
        assert!(rounded(315 << 20) < (315 << 20) * 9 / 8);
    }
}
