//! The shared region a parent and its worker exchange tensor bytes through.
//!
//! A file in `/dev/shm` (tmpfs, so the bytes never touch a disk), created by the parent, opened by path by the
//! worker, and unlinked by the parent once the worker has it open, so that nothing is left behind however the
//! two processes end. Either side may grow it; it never shrinks, so a mapping is always within the file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{MmapMut, MmapOptions};

/// Growth is rounded to this, so a batch a little larger than the last does not remap both sides.
const GRANULE: usize = 1 << 16;

#[derive(Debug)]
pub struct Shm {
    file: File,
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
        Ok(Shm { file, map, path: Some(path) })
    }

    /// The parent's region at `path`, mapped at `size` bytes (worker side).
    pub fn open(path: &Path, size: u64) -> io::Result<Shm> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let size = checked_size(&file, size)?;
        let map = map(&file, size)?;
        Ok(Shm { file, map, path: None })
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

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// Make the region at least `need` bytes, growing the file (for both sides) and this side's mapping.
    pub fn ensure(&mut self, need: usize) -> io::Result<()> {
        if need <= self.len() { Ok(()) } else { self.grow(need.max(self.len().saturating_mul(2))) }
    }

    fn grow(&mut self, size: usize) -> io::Result<()> {
        let size = reserve(&self.file, size)?;
        self.map = map(&self.file, size)?;
        Ok(())
    }

    /// Map `size` bytes of the file after the other side grew it (a smaller size keeps the larger mapping).
    pub fn remap(&mut self, size: u64) -> io::Result<()> {
        let size = checked_size(&self.file, size)?;
        if size > self.map.len() {
            self.map = map(&self.file, size)?;
        }
        Ok(())
    }
}

/// Grow `file` to `size` rounded up to the granule, returning the new size.
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
    // SAFETY: the file is never truncated below a size either side has mapped (it only grows), so the mapping
    // stays backed. The two processes take turns on it (one request in flight), so neither reads bytes the
    // other is writing.
    unsafe { MmapOptions::new().len(size).map_mut(file) }
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
    fn both_sides_see_writes_and_growth_and_the_name_goes_away() {
        let mut parent = Shm::create(10).unwrap();
        assert_eq!(parent.len(), GRANULE);
        let path = parent.path().unwrap().to_path_buf();
        let mut worker = Shm::open(&path, parent.len() as u64).unwrap();
        parent.unlink();
        assert!(!path.exists());

        parent.bytes_mut()[5] = 42;
        assert_eq!(worker.bytes()[5], 42);

        worker.ensure(GRANULE * 3 + 1).unwrap();
        assert_eq!(worker.len(), GRANULE * 4);
        worker.bytes_mut()[GRANULE * 3] = 7;
        parent.remap(worker.len() as u64).unwrap();
        assert_eq!(parent.bytes()[GRANULE * 3], 7);
        assert_eq!(parent.bytes()[5], 42);
        assert!(parent.remap(GRANULE as u64 * 100).is_err(), "a size beyond the file is refused");
    }
}
