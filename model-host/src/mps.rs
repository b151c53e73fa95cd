//! MPS control daemons. A process's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` only takes effect when it runs as a
//! client of an MPS server, so every device that hosts MPS segments — a whole GPU for `mps:` segments, a MIG
//! instance for `mig:` segments shared by several processes — gets its own `nvidia-cuda-mps-control` daemon,
//! with its own pipe and log directories under [`ROOT`]. Workers find their daemon through
//! `CUDA_MPS_PIPE_DIRECTORY` (see [`crate::device::Devices::binding`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the daemons' directories live: `ROOT/<device UUID>/{pipe,log}`.
pub const ROOT: &str = "/tmp/jig-mps";
/// The NVIDIA driver's MPS control program.
pub const CONTROL_PROGRAM: &str = "nvidia-cuda-mps-control";

/// The pipe directory of the daemon serving `device` (a `GPU-…` or `MIG-…` UUID).
pub fn pipe_dir(device: &str) -> PathBuf {
    Path::new(ROOT).join(device).join("pipe")
}

/// A running MPS control daemon for one device. Stopped (`quit`) on drop if this handle started it; a daemon
/// that was already running is left alone.
#[derive(Debug)]
pub struct MpsDaemon {
    device: String,
    program: PathBuf,
    pipe: PathBuf,
    owned: bool,
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
    /// The daemon did not create its control pipe within 5 seconds of starting.
    #[error("the MPS daemon for {device} did not create its control pipe in {}", .pipe.display())]
    NoPipe {
        /// The device's UUID.
        device: String,
        /// The pipe directory it was given.
        pipe: PathBuf,
    },
}

impl MpsDaemon {
    /// Make sure a daemon serves `device`, starting one if its control pipe does not exist yet.
    pub fn ensure(device: &str) -> Result<MpsDaemon, MpsError> {
        Self::ensure_with(Path::new(CONTROL_PROGRAM), Path::new(ROOT), device)
    }

    /// [`MpsDaemon::ensure`] with another control program and root directory (tests use a stand-in).
    pub fn ensure_with(program: &Path, root: &Path, device: &str) -> Result<MpsDaemon, MpsError> {
        let (pipe, log) = (root.join(device).join("pipe"), root.join(device).join("log"));
        let mut daemon =
            MpsDaemon { device: device.to_string(), program: program.to_path_buf(), pipe: pipe.clone(), owned: false };
        if pipe.join("control").exists() {
            return Ok(daemon);
        }
        let spawn_error =
            |error| MpsError::Spawn { device: device.to_string(), program: program.display().to_string(), error };
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
        daemon.owned = true;
        let started = Instant::now();
        while !pipe.join("control").exists() {
            if started.elapsed() > Duration::from_secs(5) {
                return Err(MpsError::NoPipe { device: device.to_string(), pipe });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(daemon)
    }

    /// The UUID of the device the daemon serves (`GPU-…` or `MIG-…`).
    pub fn device(&self) -> &str {
        &self.device
    }

    /// What clients set `CUDA_MPS_PIPE_DIRECTORY` to.
    pub fn pipe_dir(&self) -> &Path {
        &self.pipe
    }

    /// Whether this handle started the daemon (and so stops it when dropped).
    pub fn owned(&self) -> bool {
        self.owned
    }
}

impl Drop for MpsDaemon {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for `nvidia-cuda-mps-control` that logs how it was called and keeps the control pipe as
    /// the real daemon does.
    fn fake_control(dir: &Path) -> (PathBuf, PathBuf) {
        let (program, log) = (dir.join("mps-control"), dir.join("calls.log"));
        let script = format!(
            "#!/bin/sh\nif [ \"$1\" = -d ]; then\n  echo \"start $CUDA_VISIBLE_DEVICES $CUDA_MPS_LOG_DIRECTORY\" >> {log}\n  \
             mkfifo \"$CUDA_MPS_PIPE_DIRECTORY/control\"\nelse\n  read cmd\n  echo \"$cmd $CUDA_MPS_PIPE_DIRECTORY\" >> {log}\n  \
             rm \"$CUDA_MPS_PIPE_DIRECTORY/control\"\nfi\n",
            log = log.display()
        );
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        (program, log)
    }

    #[test]
    fn one_daemon_per_device_started_once_and_quit_by_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let (program, log) = fake_control(dir.path());
        let root = dir.path().join("mps");

        let first = MpsDaemon::ensure_with(&program, &root, "MIG-aaaa").unwrap();
        assert!(first.owned());
        assert_eq!(first.pipe_dir(), root.join("MIG-aaaa/pipe"));
        let again = MpsDaemon::ensure_with(&program, &root, "MIG-aaaa").unwrap();
        assert!(!again.owned(), "a running daemon is reused, not started twice");
        let other = MpsDaemon::ensure_with(&program, &root, "MIG-bbbb").unwrap();
        assert!(other.owned());

        drop(again);
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(calls.lines().filter(|l| l.starts_with("start")).count(), 2);
        assert!(calls.contains(&format!("start MIG-aaaa {}", root.join("MIG-aaaa/log").display())));
        assert!(!calls.contains("quit"), "only the owner stops a daemon");

        drop(first);
        let calls = std::fs::read_to_string(&log).unwrap();
        assert!(calls.contains(&format!("quit {}", root.join("MIG-aaaa/pipe").display())));
        assert!(!root.join("MIG-aaaa/pipe/control").exists());
        drop(other);
    }

    #[test]
    fn a_missing_control_program_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = MpsDaemon::ensure_with(&dir.path().join("absent"), dir.path(), "GPU-1234").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("GPU-1234") && message.contains("MPS tools"), "{message}");
    }
}
