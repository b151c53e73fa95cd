//! Where a new worker finds its parent: a Unix socket the parent binds in a private directory and names on the
//! worker's command line, accepted with an eye on the child so that one that exits first is noticed at once.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The socket a new worker connects to, in a directory only this user can enter; removed once accepted.
pub(super) struct Rendezvous {
    dir: PathBuf,
    pub(super) path: PathBuf,
    listener: UnixListener,
}

pub(super) enum Accept {
    Exited(ExitStatus),
    TimedOut,
    Io(io::Error),
}

impl Rendezvous {
    pub(super) fn new() -> io::Result<Rendezvous> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        // Short: a socket path must fit in 108 bytes.
        let dir = std::env::temp_dir().join(format!(
            "jig-w{}-{}-{nanos:x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let path = dir.join("s");
        let listener = match UnixListener::bind(&path).and_then(|l| l.set_nonblocking(true).map(|()| l)) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        Ok(Rendezvous { dir, path, listener })
    }

    /// Wait for the child to connect, noticing if it exits first.
    pub(super) fn accept(&self, child: &mut Child, deadline: Instant) -> Result<UnixStream, Accept> {
        let mut pause = Duration::from_micros(200);
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).map_err(Accept::Io)?;
                    return Ok(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Accept::Io(e)),
            }
            if let Some(status) = child.try_wait().map_err(Accept::Io)? {
                return Err(Accept::Exited(status));
            }
            if Instant::now() >= deadline {
                return Err(Accept::TimedOut);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
