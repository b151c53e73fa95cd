//! A region of memory a parent and its worker both map: tensor bytes live here and never cross the socket.
//!
//! A file in `/dev/shm` (tmpfs, so the bytes never touch a disk), created by the parent, opened by path by the
//! worker, and unlinked by the parent once the worker has it open, so that nothing is left behind however the
//! two processes end. A region keeps its size: each side maps it once, so views of it stay valid.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{MmapMut, MmapOptions};

/// Sizes are rounded up to this.
const GRANULE: usize = 1 << 16;

#[derive(Debug)]
pub struct Shm {
    map: MmapMut,
    /// The name while it is still linked; `None` once unlinked.
    path: Option<PathBuf>,
}

impl Shm {
    /// A new region of at least `size` bytes under a fresh name (parent side).
    pub fn create(size: usize) -> io::Result<Shm> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = Path::new("/dev/shm");
        let dir = if dir.is_dir() { dir.to_path_buf() } else { std::env::temp_dir() };
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let path =
            dir.join(format!("jig-worker-{}-{}-{nanos:x}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
        let size = match reserve(&file, size.max(1)) {
            Ok(size) => size,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        let map = map(&file, size)?;
        Ok(Shm { map, path: Some(path) })
    }

    /// The parent's region at `path`, mapped at `size` bytes (worker side).
    pub fn open(path: &Path, size: u64) -> io::Result<Shm> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let size = checked_size(&file, size)?;
        let map = map(&file, size)?;
        Ok(Shm { map, path: None })
    }

    /// Remove the name; the mappings and open descriptors keep the memory alive.
    pub fn unlink(&mut self) {
        if let Some(path) = self.path.take() {
            let _ = std::fs::remove_file(path);
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The mapping's address, for access that the two processes coordinate themselves (atomics, copies).
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_ptr().cast_mut()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

/// Make `file` `size` bytes, rounded up to the granule, returning the new size.
fn reserve(file: &File, size: usize) -> io::Result<usize> {
    let size = size.div_ceil(GRANULE).checked_mul(GRANULE).ok_or(io::ErrorKind::OutOfMemory)?;
    let len = libc::off_t::try_from(size).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
    // Reserve the pages rather than just set the length: on a full tmpfs a sparse file maps fine and then
    // kills the process with SIGBUS on first write, where `posix_fallocate` reports ENOSPC.
    // SAFETY: a plain system call on a descriptor `file` owns.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) } {
        0 => Ok(size),
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(size as u64).map(|()| size),
        errno => {
            let err = io::Error::from_raw_os_error(errno);
            Err(io::Error::new(err.kind(), format!("cannot reserve {size} bytes of shared memory: {err}")))
        }
    }
}

/// `size` as a mapping length, refused if the file is not that large (a peer announcing a size it did not
/// reserve would otherwise turn into SIGBUS).
fn checked_size(file: &File, size: u64) -> io::Result<usize> {
    let actual = file.metadata()?.len();
    if size == 0 || size > actual {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the shared region is {actual} bytes, not the {size} announced"),
        ));
    }
    usize::try_from(size).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))
}

fn map(file: &File, size: usize) -> io::Result<MmapMut> {
    // SAFETY: the file is never truncated, so the mapping stays backed. The two processes take turns on a
    // region (the parent writes inputs before a request, the worker writes outputs before its answer), so
    // neither reads bytes the other is writing. Populated now, so a batch does not fault in pages.
    unsafe { MmapOptions::new().len(size).populate().map_mut(file) }
}

impl Drop for Shm {
    fn drop(&mut self) {
        self.unlink();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_see_writes_and_the_name_goes_away() {
        let mut parent = Shm::create(10).unwrap();
        assert_eq!(parent.len(), GRANULE);
        let path = parent.path().unwrap().to_path_buf();
        let mut worker = Shm::open(&path, parent.len() as u64).unwrap();
        parent.unlink();
        assert!(!path.exists());

        parent.bytes_mut()[5] = 42;
        assert_eq!(worker.bytes()[5], 42);
        worker.bytes_mut()[GRANULE - 1] = 7;
        assert_eq!(parent.bytes()[GRANULE - 1], 7);
        assert!(Shm::open(&path, 1).is_err(), "the name is gone");
    }

    #[test]
    fn a_size_beyond_the_file_is_refused() {
        let parent = Shm::create(10).unwrap();
        let err = Shm::open(parent.path().unwrap(), GRANULE as u64 * 100).unwrap_err();
        assert!(err.to_string().contains("not the"), "{err}");
    }
}
