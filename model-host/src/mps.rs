//! MPS control daemons. A process's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` only takes effect when it runs as a
//! client of an MPS server, so every device that hosts MPS segments — a whole GPU for `mps:` segments, a MIG
//! instance for `mig:` segments shared by several processes — gets its own `nvidia-cuda-mps-control` daemon,
//! with its own pipe and log directories under [`ROOT`]. Workers find their daemon through
//! `CUDA_MPS_PIPE_DIRECTORY` (see [`crate::device::Bound::env`]). Several apps' workers may share a
//! device's daemon: each holds an [`MpsDaemon`] handle, and a daemon this process started is stopped when the
//! last handle on it goes, not when the app that started it is deleted or re-planned.
//!
//! A daemon is alive when its control socket (`PIPE/control`) accepts a connection, not when the file exists:
//! a daemon that quit or died can leave the socket file behind, and a client that finds no daemon behind its
//! `CUDA_MPS_PIPE_DIRECTORY` runs without MPS, silently, its active-thread percentage ignored (seen on an
//! H100: a 10% share ran as fast as the whole GPU).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

/// Where the daemons' directories live: `ROOT/<device UUID>/{pipe,log}`.
pub const ROOT: &str = "/tmp/jig-mps";
/// The NVIDIA driver's MPS control program.
pub const CONTROL_PROGRAM: &str = "nvidia-cuda-mps-control";

/// The pipe directory of the daemon serving `device` (a `GPU-…` or `MIG-…` UUID).
pub fn pipe_dir(device: &str) -> PathBuf {
    Path::new(ROOT).join(device).join("pipe")
}

/// A handle on the MPS control daemon serving one device. Every user of a device's MPS shares holds one; the
/// handles of a device share one daemon (see [`MpsDaemon::ensure`]). A daemon jig started is stopped (`quit`)
/// when the last handle of the last jig process using it is dropped (several processes, a gateway and a
/// `jig profile`, may share it); a daemon started otherwise is left alone.
#[derive(Debug)]
pub struct MpsDaemon {
    /// The device's registry entry, locked while a daemon is started, shared or stopped.
    entry: Arc<Entry>,
    /// The daemon; `None` only while the handle is being dropped.
    daemon: Option<Arc<Running>>,
}

/// One device's (one pipe directory's) entry in the registry: its daemon while any handle holds it.
type Entry = Mutex<Weak<Running>>;

/// A daemon that handles share; dropping the last of them stops it if jig started it and no other process uses it.
#[derive(Debug)]
struct Running {
    device: String,
    program: PathBuf,
    pipe: PathBuf,
    /// Whether jig started it (its `started` file says so), in this process or another.
    owned: bool,
    /// The device's `users` file, share-locked while this process uses the daemon: another process's exclusive
    /// lock on it succeeds only when none does.
    users: Option<std::fs::File>,
}

/// The daemons of this process, one entry per pipe directory (a device under a root), kept for the process's
/// lifetime (a few devices at most).
fn registry() -> &'static Mutex<HashMap<PathBuf, Arc<Entry>>> {
    static DAEMONS: OnceLock<Mutex<HashMap<PathBuf, Arc<Entry>>>> = OnceLock::new();
    DAEMONS.get_or_init(Mutex::default)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a device's MPS daemon could not be started.
#[derive(Debug, thiserror::Error)]
pub enum MpsError {
    /// The control program could not be run, or its pipe and log directories could not be created.
    #[error(
        "could not run `{program}` for {device}: {error}; MPS segments need the NVIDIA driver's MPS tools \
         (or use mig: segments with one process each, which need no MPS)"
    )]
    Spawn {
        /// The device's UUID.
        device: String,
        /// The control program.
        program: String,
        /// The system's answer.
        error: std::io::Error,
    },
    /// The control program ran but `-d` exited with a failure status.
    #[error("`{program} -d` for {device} failed: {detail}")]
    Start {
        /// The device's UUID.
        device: String,
        /// The control program.
        program: String,
        /// Its exit status and standard error.
        detail: String,
    },
    /// The daemon did not answer on its control socket within 5 seconds of starting.
    #[error(
        "the MPS daemon for {device} did not answer on its control socket in {} (its log: the `log` folder beside it)",
        .pipe.display()
    )]
    NoPipe {
        /// The device's UUID.
        device: String,
        /// The pipe directory it was given.
        pipe: PathBuf,
    },
}

impl MpsDaemon {
    /// A handle on the daemon serving `device`: the one this process's other handles share, else one already
    /// running (its control pipe exists), else one started now. One daemon serves each device; the handles of
    /// a device share it, and the one this process started runs until the last of them is dropped.
    pub fn ensure(device: &str) -> Result<MpsDaemon, MpsError> {
        Self::ensure_with(Path::new(CONTROL_PROGRAM), Path::new(ROOT), device)
    }

    /// [`MpsDaemon::ensure`] with another control program and root directory (tests use a stand-in).
    pub fn ensure_with(program: &Path, root: &Path, device: &str) -> Result<MpsDaemon, MpsError> {
        let pipe = root.join(device).join("pipe");
        let entry = lock(registry()).entry(pipe).or_default().clone();
        // Held while the daemon starts, so that two users of a device start one daemon between them, and
        // while a last handle stops it (see `Drop`), so that no user is handed a daemon that is quitting.
        let mut shared = lock(&entry);
        let daemon = match shared.upgrade() {
            Some(daemon) => daemon,
            None => {
                let daemon = Arc::new(Running::start(program, root, device)?);
                *shared = Arc::downgrade(&daemon);
                daemon
            }
        };
        drop(shared);
        Ok(MpsDaemon { entry, daemon: Some(daemon) })
    }

    fn running(&self) -> &Running {
        self.daemon.as_deref().expect("a handle holds its daemon until it is dropped")
    }

    /// The UUID of the device the daemon serves (`GPU-…` or `MIG-…`).
    pub fn device(&self) -> &str {
        &self.running().device
    }

    /// What clients set `CUDA_MPS_PIPE_DIRECTORY` to.
    pub fn pipe_dir(&self) -> &Path {
        &self.running().pipe
    }

    /// Whether jig started the daemon (this process or another), and so stops it when its last user goes.
    pub fn owned(&self) -> bool {
        self.running().owned
    }
}

impl Drop for MpsDaemon {
    fn drop(&mut self) {
        // The last handle stops the daemon (`Running::drop`) with the device's entry locked: a user that
        // arrives meanwhile waits, then starts a daemon afresh.
        let _entry = lock(&self.entry);
        self.daemon.take();
    }
}

impl Running {
    /// The daemon of `device` under `root`: one already running (its control socket answers), else one started
    /// with `program -d`, in a pipe directory cleared of what a daemon that is gone left there.
    fn start(program: &Path, root: &Path, device: &str) -> Result<Running, MpsError> {
        let (pipe, log) = (root.join(device).join("pipe"), root.join(device).join("log"));
        let started = root.join(device).join("started");
        let spawn_error =
            |error| MpsError::Spawn { device: device.to_string(), program: program.display().to_string(), error };
        let mut daemon = Running {
            device: device.to_string(),
            program: program.to_path_buf(),
            pipe: pipe.clone(),
            owned: false,
            users: None,
        };
        // Other processes (another `jig profile`, a gateway) may be starting or stopping this daemon too.
        let _starting = device_lock(root, device).map_err(spawn_error)?;
        let users = device_file(root, device, "users").map_err(spawn_error)?;
        users.lock_shared().map_err(spawn_error)?;
        daemon.users = Some(users);
        if answers(&pipe) {
            daemon.owned = started.exists();
            return Ok(daemon);
        }
        if pipe.exists() {
            tracing::warn!(
                device,
                pipe = %pipe.display(),
                "no MPS daemon answers there (one died, or was stopped outside jig): clearing what it left"
            );
            std::fs::remove_dir_all(&pipe).map_err(spawn_error)?;
        }
        std::fs::create_dir_all(&pipe).and_then(|()| std::fs::create_dir_all(&log)).map_err(spawn_error)?;
        // `-d` forks the daemon and returns once it is up.
        let out = Command::new(program)
            .arg("-d")
            .env("CUDA_VISIBLE_DEVICES", device)
            .env("CUDA_MPS_PIPE_DIRECTORY", &pipe)
            .env("CUDA_MPS_LOG_DIRECTORY", &log)
            .output()
            .map_err(spawn_error)?;
        if !out.status.success() {
            return Err(MpsError::Start {
                device: device.to_string(),
                program: program.display().to_string(),
                detail: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
            });
        }
        // From here a failure stops the daemon again, as `daemon` is dropped (after `_starting`, declared later).
        daemon.owned = true;
        std::fs::write(&started, std::process::id().to_string()).map_err(spawn_error)?;
        if !wait_until(|| answers(&pipe)) {
            return Err(MpsError::NoPipe { device: device.to_string(), pipe });
        }
        Ok(daemon)
    }
}

/// The device's lock file under `root`, locked: held by whichever process starts or stops its daemon, so that
/// two processes arriving together start one daemon, none clears the pipe directory of one being started, and
/// none starts using one being stopped.
fn device_lock(root: &Path, device: &str) -> std::io::Result<std::fs::File> {
    let file = device_file(root, device, "lock")?;
    file.lock()?;
    Ok(file)
}

/// The file `name` in the device's directory under `root`, created if need be.
fn device_file(root: &Path, device: &str, name: &str) -> std::io::Result<std::fs::File> {
    let dir = root.join(device);
    std::fs::create_dir_all(&dir)?;
    std::fs::File::options().create(true).truncate(false).write(true).open(dir.join(name))
}

/// Whether a daemon listens on the control socket in `pipe`. The driver's daemon listens on a socket of
/// another type than a stream (a stream's `connect` is refused as the wrong protocol type, EPROTOTYPE), so
/// only "refused" (a socket file nobody listens on) and "not found" mean no daemon.
fn answers(pipe: &Path) -> bool {
    use std::io::ErrorKind;
    match std::os::unix::net::UnixStream::connect(pipe.join("control")) {
        Ok(_) => true,
        Err(e) => !matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::NotFound),
    }
}

/// Poll `done` every 10 ms for up to 5 seconds; whether it came true.
fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(root) = self.pipe.parent().and_then(Path::parent) else { return };
        let _stopping = device_lock(root, &self.device);
        self.users.take(); // this process's share lock goes with the file
        if !self.owned {
            return;
        }
        let others = device_file(root, &self.device, "users").map(|users| users.try_lock().is_err());
        if others.unwrap_or(true) {
            tracing::info!(device = %self.device, "other processes use its MPS daemon: leaving it running for them");
            return;
        }
        let _ = std::fs::remove_file(root.join(&self.device).join("started"));
        let quit = Command::new(&self.program)
            .env("CUDA_MPS_PIPE_DIRECTORY", &self.pipe)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .and_then(|mut control| {
                control.stdin.take().map_or(Ok(()), |mut stdin| stdin.write_all(b"quit\n"))?;
                control.wait()
            });
        if let Err(e) = quit {
            tracing::warn!(device = %self.device, "stopping its MPS control daemon: {e}");
        }
        // `quit` returns before the daemon is gone: a user arriving next (waiting on the entry) starts afresh
        // only once this one no longer answers.
        if !wait_until(|| !answers(&self.pipe)) {
            tracing::warn!(device = %self.device, "its MPS control daemon still answers 5 s after `quit`");
            return;
        }
        // The driver's daemon leaves its control socket and pipes behind; cleared here, what the next start
        // finds left over is a daemon's that died.
        let _ = std::fs::remove_dir_all(&self.pipe);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for `nvidia-cuda-mps-control` that logs how it was called and, as the real daemon does,
    /// listens on its control socket until told to `quit` (Python for the socket; `make setup` needs it too).
    fn fake_control(dir: &Path) -> (PathBuf, PathBuf) {
        let (program, log) = (dir.join("mps-control"), dir.join("calls.log"));
        let script = format!(
            "#!/bin/sh\ncontrol=\"$CUDA_MPS_PIPE_DIRECTORY/control\"\nif [ \"$1\" = -d ]; then\n  \
             echo \"start $CUDA_VISIBLE_DEVICES $CUDA_MPS_LOG_DIRECTORY\" >> {log}\n  \
             python3 -c '{LISTEN}' \"$control\" </dev/null >/dev/null 2>&1 &\nelse\n  read cmd\n  \
             echo \"$cmd $CUDA_MPS_PIPE_DIRECTORY\" >> {log}\n  python3 -c '{QUIT}' \"$control\"\nfi\n",
            log = log.display()
        );
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        (program, log)
    }

    /// The stand-in daemon: accept on the socket until a connection says `quit`, then remove the socket.
    const LISTEN: &str = "import os, socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\n\
                          s.listen()\nwhile not s.accept()[0].recv(8).startswith(b\"quit\"): pass\n\
                          os.unlink(sys.argv[1])";
    const QUIT: &str = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n\
                        s.sendall(b\"quit\")";

    fn calls(log: &Path) -> Vec<String> {
        std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
    }

    #[test]
    fn the_users_of_a_device_share_one_daemon_that_the_last_of_them_quits() {
        let dir = tempfile::tempdir().unwrap();
        let (program, log) = fake_control(dir.path());
        let root = dir.path().join("mps");
        let (pipe, control) = (root.join("MIG-aaaa/pipe"), root.join("MIG-aaaa/pipe/control"));

        // Two apps' workers on one device, and one on another.
        let first = MpsDaemon::ensure_with(&program, &root, "MIG-aaaa").unwrap();
        assert!(first.owned());
        assert_eq!(first.pipe_dir(), pipe);
        let second = MpsDaemon::ensure_with(&program, &root, "MIG-aaaa").unwrap();
        assert!(second.owned(), "the second user shares the daemon this process started");
        assert!(Arc::ptr_eq(first.daemon.as_ref().unwrap(), second.daemon.as_ref().unwrap()));
        let other = MpsDaemon::ensure_with(&program, &root, "MIG-bbbb").unwrap();
        assert!(other.owned());
        let started: Vec<String> = calls(&log).into_iter().filter(|l| l.starts_with("start")).collect();
        assert_eq!(started.len(), 2, "one daemon per device: {started:?}");
        assert!(started.contains(&format!("start MIG-aaaa {}", root.join("MIG-aaaa/log").display())));

        // The user that started it goes (its app deleted or re-planned): the daemon serves the other on.
        drop(first);
        assert!(!calls(&log).iter().any(|l| l.starts_with("quit")), "{:?}", calls(&log));
        assert!(control.exists(), "the daemon still runs for the second user");
        assert_eq!(second.pipe_dir(), pipe);

        // The last user goes: the daemon is quit, and only this device's.
        drop(second);
        assert_eq!(
            calls(&log).iter().filter(|l| l.starts_with("quit")).collect::<Vec<_>>(),
            [&format!("quit {}", pipe.display())]
        );
        assert!(!control.exists());
        assert!(!pipe.exists(), "what the daemon left in its pipe directory goes with it");
        assert!(root.join("MIG-bbbb/pipe/control").exists());

        // A later user starts it afresh.
        let again = MpsDaemon::ensure_with(&program, &root, "MIG-aaaa").unwrap();
        assert!(again.owned() && control.exists());
        assert_eq!(calls(&log).iter().filter(|l| l.starts_with("start MIG-aaaa")).count(), 2);
        drop((again, other));
        assert_eq!(calls(&log).iter().filter(|l| l.starts_with("quit")).count(), 3);
    }

    #[test]
    fn users_arriving_together_start_one_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let (program, log) = fake_control(dir.path());
        let root = dir.path().join("mps");
        let users: Vec<MpsDaemon> = std::thread::scope(|scope| {
            let threads: Vec<_> =
                (0..8).map(|_| scope.spawn(|| MpsDaemon::ensure_with(&program, &root, "GPU-cccc").unwrap())).collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(users.iter().all(MpsDaemon::owned));
        assert_eq!(calls(&log).iter().filter(|l| l.starts_with("start")).count(), 1, "{:?}", calls(&log));
        let mut users = users;
        users.truncate(1);
        assert!(!calls(&log).iter().any(|l| l.starts_with("quit")), "seven of eight gone: {:?}", calls(&log));
        users.clear();
        assert_eq!(calls(&log).iter().filter(|l| l.starts_with("quit")).count(), 1);
    }

    #[test]
    fn processes_arriving_together_start_one_daemon_between_them() {
        let dir = tempfile::tempdir().unwrap();
        let (program, log) = fake_control(dir.path());
        let root = dir.path().join("mps");
        // `Running::start` directly, past this process's registry, as separate processes reach it.
        let daemons: Vec<Running> = std::thread::scope(|scope| {
            let threads: Vec<_> =
                (0..6).map(|_| scope.spawn(|| Running::start(&program, &root, "GPU-ffff").unwrap())).collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(daemons.iter().all(|d| d.owned), "each knows jig started it, and one of them did");
        assert_eq!(calls(&log).iter().filter(|l| l.starts_with("start")).count(), 1, "{:?}", calls(&log));
        assert!(answers(&root.join("GPU-ffff/pipe")));
        // Processes end one by one, the one that started it among them (a `jig profile` ends while a gateway
        // serves on): it runs until the last of them goes.
        let mut daemons = daemons;
        daemons.truncate(5);
        assert!(calls(&log).iter().all(|l| !l.starts_with("quit")) && answers(&root.join("GPU-ffff/pipe")));
        daemons.truncate(1);
        assert!(calls(&log).iter().all(|l| !l.starts_with("quit")), "one user left: {:?}", calls(&log));
        drop(daemons);
        assert_eq!(calls(&log).iter().filter(|l| l.starts_with("quit")).count(), 1, "the last user stops it");
        assert!(!answers(&root.join("GPU-ffff/pipe")));
    }

    #[test]
    fn a_daemon_this_process_did_not_start_is_left_running() {
        let dir = tempfile::tempdir().unwrap();
        let (program, log) = fake_control(dir.path());
        let root = dir.path().join("mps");
        let control = root.join("GPU-dddd/pipe/control");
        std::fs::create_dir_all(control.parent().unwrap()).unwrap();
        // Listening as the driver's daemon does, on a socket that is not a stream.
        let _other = std::os::unix::net::UnixDatagram::bind(&control).unwrap();
        let (a, b) = (
            MpsDaemon::ensure_with(&program, &root, "GPU-dddd").unwrap(),
            MpsDaemon::ensure_with(&program, &root, "GPU-dddd").unwrap(),
        );
        assert!(!a.owned() && !b.owned());
        drop((a, b));
        assert!(calls(&log).is_empty(), "neither started nor quit: {:?}", calls(&log));
        assert!(control.exists());
    }

    /// A socket file that nothing listens on (a daemon that died) is no daemon: one is started in its place,
    /// so that clients do not run without MPS.
    #[test]
    fn a_control_socket_left_by_a_daemon_that_is_gone_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (program, log) = fake_control(dir.path());
        let root = dir.path().join("mps");
        let control = root.join("GPU-eeee/pipe/control");
        std::fs::create_dir_all(control.parent().unwrap()).unwrap();
        drop(std::os::unix::net::UnixListener::bind(&control).unwrap());
        assert!(control.exists() && !answers(control.parent().unwrap()));
        let daemon = MpsDaemon::ensure_with(&program, &root, "GPU-eeee").unwrap();
        assert!(daemon.owned() && answers(daemon.pipe_dir()));
        assert_eq!(calls(&log).iter().filter(|l| l.starts_with("start GPU-eeee")).count(), 1);
        drop(daemon);
        assert!(!answers(&root.join("GPU-eeee/pipe")), "quit, and gone before the handle's drop returned");
    }

    #[test]
    fn a_missing_control_program_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = MpsDaemon::ensure_with(&dir.path().join("absent"), dir.path(), "GPU-1234").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("GPU-1234") && message.contains("MPS tools"), "{message}");
    }
}
