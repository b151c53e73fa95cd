//! One live worker process as its parent holds it: [`Process::spawn`] starts it and waits for the model to load;
//! [`Process::run`] sends it a batch through the mailbox, lending regions for inputs and outputs, and reads the
//! answer; what went wrong is a [`Fault`], which the [`Worker`](super::Worker) turns into an error and, if the
//! process is lost, a restart.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufReader};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::WorkerError;
use super::learnt::{Learnt, REMEMBERED_SHAPES};
use super::mailbox::{Mailbox, SPIN};
use super::protocol::{Reply, Request, SharedTensor, read_frame, write_frame};
use super::rendezvous::{Accept, Rendezvous};
use super::spec::WorkerSpec;
use crate::onnx::TensorSpec;
use crate::regions::{Region, Regions, SharedBuffer};
use crate::{DType, Tensor};

/// How a batch went wrong inside [`Process::run`].
pub(super) enum Fault {
    /// The model failed; the worker is fine.
    Failed(String),
    /// The parent could not make room in the shared region; the worker is fine.
    Memory(io::Error),
    /// The socket broke: the worker is gone.
    Died(io::Error),
    /// No answer within the batch timeout.
    Hung,
    /// The worker said something it should not have.
    Protocol(String),
}

/// One live worker process and its channel.
#[derive(Debug)]
pub(super) struct Process {
    child: Child,
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    buf: Vec<u8>,
    /// Where requests and answers go once the model is loaded.
    mailbox: Mailbox,
    next_id: u64,
    /// The regions this process maps.
    pub(super) regions: Arc<Regions>,
    /// What the batches run taught, by input shapes.
    learnt: HashMap<Vec<Vec<u64>>, Learnt>,
    /// The CPU time the process had spent when its model was loaded: its start-up (ONNX Runtime's, and on a GPU
    /// CUDA's and cuDNN's), a cost of the deployment rather than of the requests it serves.
    pub(super) loaded_cpu: Duration,
}

impl Process {
    pub(super) fn spawn(spec: &WorkerSpec) -> Result<(Process, Vec<TensorSpec>, Vec<TensorSpec>), WorkerError> {
        let spawn_err = |detail: String| WorkerError::Spawn {
            instance: spec.instance.clone(),
            model: spec.model_name.clone(),
            program: spec.program.clone(),
            detail,
        };
        if let Some(check) = &spec.check {
            check.run().map_err(|detail| WorkerError::Device {
                instance: spec.instance.clone(),
                model: spec.model_name.clone(),
                detail,
            })?;
        }
        let deadline = Instant::now() + spec.load_timeout;
        let rendezvous = Rendezvous::new().map_err(|e| spawn_err(format!("cannot create its socket: {e}")))?;
        let mut command = Command::new(&spec.program);
        command.args(&spec.args).arg("--socket").arg(&rendezvous.path).stdin(Stdio::null());
        if spec.options.cuda.is_some()
            && let Some(path) = crate::onnx::cuda_library_path()
        {
            command.env("LD_LIBRARY_PATH", path);
        }
        let mut child = command
            .envs(spec.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))))
            .spawn()
            .map_err(|e| spawn_err(e.to_string()))?;
        let stream = match rendezvous.accept(&mut child, deadline) {
            Ok(stream) => stream,
            Err(Accept::Exited(status)) => {
                return Err(spawn_err(format!("it {} before connecting", describe(status))));
            }
            Err(Accept::TimedOut) => {
                kill(&mut child);
                return Err(WorkerError::Timeout {
                    instance: spec.instance.clone(),
                    model: spec.model_name.clone(),
                    stage: "connect",
                    after: spec.load_timeout,
                });
            }
            Err(Accept::Io(e)) => {
                kill(&mut child);
                return Err(spawn_err(format!("accepting its connection: {e}")));
            }
        };
        drop(rendezvous);

        // From here on `process` owns the child, so every early return kills it.
        let reader = match stream.try_clone() {
            Ok(r) => BufReader::new(r),
            Err(e) => {
                kill(&mut child);
                return Err(spawn_err(e.to_string()));
            }
        };
        let mailbox = match Mailbox::create() {
            Ok(mailbox) => mailbox,
            Err(e) => {
                kill(&mut child);
                return Err(spawn_err(format!("cannot create its mailbox: {e}")));
            }
        };
        let mailbox_path = mailbox.path().expect("a new mailbox has a name").to_path_buf();
        let mut process = Process {
            child,
            stream,
            reader,
            buf: Vec::new(),
            mailbox,
            next_id: 0,
            regions: Arc::default(),
            learnt: HashMap::new(),
            loaded_cpu: Duration::ZERO,
        };
        let load_err = |detail: String| WorkerError::Load {
            instance: spec.instance.clone(),
            model: spec.model_name.clone(),
            detail,
        };
        let load = Request::Load {
            model_name: spec.model_name.clone(),
            model_path: spec.model_path.clone(),
            options: spec.options.clone(),
            mailbox: mailbox_path,
        };
        let remaining = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let reply = write_frame(&process.stream, &mut process.buf, &load)
            .and_then(|()| process.stream.set_read_timeout(Some(remaining)))
            .and_then(|()| read_frame::<Reply>(&mut process.reader, &mut process.buf));
        process.mailbox.unlink();
        match reply {
            Ok(Some(Reply::Loaded { inputs, outputs })) => {
                // From here the parent reads the socket only while it sleeps for an answer (the mailbox's doorbell).
                process.stream.set_read_timeout(Some(spec.batch_timeout)).map_err(|e| spawn_err(e.to_string()))?;
                process.loaded_cpu = cpu_time(process.pid()).unwrap_or_default();
                Ok((process, inputs, outputs))
            }
            Ok(Some(Reply::LoadFailed { error })) => Err(load_err(error)),
            Ok(Some(other)) => Err(load_err(format!("it answered {} instead of Loaded", kind(&other)))),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                Err(WorkerError::Timeout {
                    instance: spec.instance.clone(),
                    model: spec.model_name.clone(),
                    stage: "load the model",
                    after: spec.load_timeout,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(load_err(format!("malformed answer: {e}"))),
            Ok(None) | Err(_) => {
                let detail = process.reap(io::ErrorKind::UnexpectedEof.into());
                Err(load_err(format!("the worker process ended while loading ({detail})")))
            }
        }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Fault> {
        // Inputs already in a region are read where they lie; others are copied into one, held until answered.
        let mut copied = Vec::new();
        let mut input_places = Vec::with_capacity(inputs.len());
        for tensor in inputs {
            let (region, offset) = match self.regions.locate(tensor.data()) {
                Some(found) => found,
                None => {
                    let mut buffer = self.regions.take(tensor.data().len()).map_err(Fault::Memory)?;
                    crate::batch::gather(buffer.as_mut_slice(), &[tensor.data()]);
                    let region = buffer.region();
                    copied.push(buffer);
                    (region, 0)
                }
            };
            input_places.push(SharedTensor {
                region,
                dtype: tensor.dtype(),
                shape: tensor.shape().to_vec(),
                offset: offset as u64,
                len: tensor.data().len() as u64,
            });
        }
        let key: Vec<Vec<u64>> = inputs.iter().map(|t| t.shape().to_vec()).collect();
        let (mut places, spin) = match self.learnt.get(&key) {
            Some(learnt) => (Some(self.places(&learnt.outputs)?), learnt.spin()),
            None => (None, SPIN),
        };
        self.next_id += 1;
        let id = self.next_id;
        let (open, close) = self.regions.changes();
        let outputs = places.as_ref().map(|p| p.iter().map(|(place, _)| place.clone()).collect());
        let asked = Instant::now();
        let mut reply = self.ask(&Request::Run { id, open, close, inputs: input_places, outputs }, id, spin)?;
        let took = asked.elapsed();
        if let Reply::Sized { outputs: shapes, .. } = reply {
            if self.learnt.len() >= REMEMBERED_SHAPES {
                self.learnt.clear();
            }
            let placed = self.places(&shapes)?;
            self.learnt.insert(key, Learnt { outputs: shapes, took });
            let open = self.regions.announcements();
            let outputs = placed.iter().map(|(place, _)| place.clone()).collect();
            places = Some(placed);
            reply = self.ask(&Request::Place { id, open, outputs }, id, SPIN)?;
        } else if let Some(learnt) = self.learnt.get_mut(&key) {
            learnt.took = took;
        }
        drop(copied);
        match (reply, places) {
            (Reply::Done { .. }, Some(places)) => places
                .into_iter()
                .map(|(place, buffer)| {
                    Tensor::new(place.dtype, place.shape, buffer.freeze())
                        .map_err(|e| Fault::Protocol(format!("malformed output: {e}")))
                })
                .collect(),
            (Reply::Failed { error, .. }, _) => Err(Fault::Failed(error)),
            (other, _) => Err(Fault::Protocol(format!("it answered {} to request {id}", kind(&other)))),
        }
    }

    /// Ask the worker to give back what its batches grew ([`Request::Release`]), with the free regions both
    /// sides map.
    pub(super) fn release(&mut self) -> Result<(), Fault> {
        self.next_id += 1;
        let id = self.next_id;
        let close = self.regions.retire_free();
        match self.ask(&Request::Release { id, close }, id, SPIN)? {
            Reply::Done { .. } => Ok(()),
            Reply::Failed { error, .. } => Err(Fault::Failed(error)),
            other => Err(Fault::Protocol(format!("it answered {} to request {id}", kind(&other)))),
        }
    }

    /// A region for each output of these types and shapes.
    fn places(&self, shapes: &[(DType, Vec<u64>)]) -> Result<Vec<(SharedTensor, SharedBuffer)>, Fault> {
        shapes
            .iter()
            .map(|(dtype, shape)| {
                let len = dtype
                    .bytes_for(shape)
                    .ok_or_else(|| Fault::Protocol(format!("an output of shape {shape:?} overflows memory")))?;
                let buffer = self.regions.take(len).map_err(Fault::Memory)?;
                let place = SharedTensor {
                    region: buffer.region(),
                    dtype: *dtype,
                    shape: shape.clone(),
                    offset: 0,
                    len: len as u64,
                };
                Ok((place, buffer))
            })
            .collect()
    }

    /// Send `request` and read the answer to `id`, polling for it for up to `spin`; the regions it announced are
    /// unlinked once answered.
    fn ask(&mut self, request: &Request, id: u64, spin: Duration) -> Result<Reply, Fault> {
        let sent = self.mailbox.send(request, &self.stream);
        let answer = sent.and_then(|()| self.mailbox.receive::<Reply>(&mut self.reader, &mut self.buf, spin));
        if let Request::Run { open, .. } | Request::Place { open, .. } = request {
            unlink(open);
        }
        match answer {
            Ok(Some(
                reply @ (Reply::Done { id: got } | Reply::Sized { id: got, .. } | Reply::Failed { id: got, .. }),
            )) if got == id => Ok(reply),
            Ok(Some(other)) => Err(Fault::Protocol(format!("it answered {} to request {id}", kind(&other)))),
            Ok(None) => Err(Fault::Died(io::ErrorKind::UnexpectedEof.into())),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(Fault::Protocol(e.to_string())),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Err(Fault::Hung),
            Err(e) => Err(Fault::Died(e)),
        }
    }

    /// After the socket broke: why the process ended. Waits briefly for the exit the broken socket announces;
    /// a process that closed its socket but lives on is killed.
    pub(super) fn reap(mut self, io: io::Error) -> String {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return describe(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
                Ok(None) => {
                    kill(&mut self.child);
                    return format!("its socket failed ({io}) while it kept running, so it was killed");
                }
                Err(e) => return format!("its socket failed ({io}); its status is unknown ({e})"),
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => {
            let name = match signal {
                libc::SIGKILL => " (SIGKILL: killed, possibly by the out-of-memory killer)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGTERM => " (SIGTERM)",
                _ => "",
            };
            format!("killed by signal {signal}{name}")
        }
        (None, None) => status.to_string(),
    }
}

fn kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Loaded { .. } => "Loaded",
        Reply::LoadFailed { .. } => "LoadFailed",
        Reply::Done { .. } => "Done",
        Reply::Sized { .. } => "Sized",
        Reply::Failed { .. } => "Failed",
    }
}

/// Remove the names of regions the worker has opened (or, if it died, never will): the mappings keep them.
fn unlink(regions: &[Region]) {
    for region in regions {
        let _ = std::fs::remove_file(&region.path);
    }
}

/// The CPU time process `pid` has spent, user and system, over all its threads (`/proc/PID/stat`); `None` where
/// it cannot be read (no such process, not Linux).
pub(super) fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    cpu_time_of_stat(&stat)
}

/// The user and system time of a `/proc/PID/stat` line: its 14th and 15th fields, in clock ticks. The command
/// name (2nd field) is in parentheses and may hold spaces and parentheses itself: fields are counted after the
/// last `)`.
fn cpu_time_of_stat(stat: &str) -> Option<Duration> {
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let per_second = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok().filter(|&t| t > 0)?;
    Some(Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / per_second))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_cpu_time_is_its_user_and_system_ticks() {
        // SAFETY: as in `cpu_time_of_stat`.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        let line = "4242 (jig (worker) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(cpu_time_of_stat(line), Some(Duration::from_nanos(200 * 1_000_000_000 / hz)));
        assert_eq!(cpu_time_of_stat("4242 (jig"), None, "a line cut short");
        // This process, read live: 200 ms of this thread's CPU show (at a tick's grain; other threads only add).
        let before = cpu_time(std::process::id()).expect("this process's own stat");
        let spun = cpu_time::ThreadTime::now();
        while spun.elapsed() < Duration::from_millis(200) {
            std::hint::black_box(0u64.wrapping_add(1));
        }
        let grown = cpu_time(std::process::id()).unwrap() - before;
        assert!(grown >= Duration::from_millis(180), "{grown:?}");
    }
}
