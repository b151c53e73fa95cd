//! Control messages between a parent and its worker, and their framing on the socket.
//!
//! A frame is the bincode-2 (standard configuration) encoding of a [`Request`] or a [`Reply`]; on the socket
//! (`Load` and its answer) it is a [`jig_wire::frame`], in the [`super::mailbox`] (everything after) its length is
//! in the mailbox's header. Frames carry only descriptors: tensor bytes live in shared
//! regions.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::DType;
use crate::onnx::{SessionOptions, TensorSpec};
use crate::regions::Region;
use jig_wire::frame;

/// The largest frame either side accepts. Descriptors are small; a larger length prefix means the peer is not
/// speaking this protocol, and refusing it keeps a corrupt prefix from allocating gigabytes.
pub const MAX_FRAME: usize = 16 << 20;

/// Parent to worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Request {
    /// The first message: load the model. Answered by `Loaded` or `LoadFailed`.
    Load {
        /// The model's name, for errors.
        model_name: String,
        /// The ONNX file to load.
        model_path: PathBuf,
        /// How to build the session.
        options: SessionOptions,
        /// The region of the [`super::mailbox`] the rest of the conversation goes through.
        mailbox: PathBuf,
    },
    /// Run one batch whose inputs lie in shared regions. Answered by `Done` when `outputs` gives where to
    /// write them, by `Sized` when it does not (or they did not fit), or by `Failed`.
    Run {
        /// Numbers the request; the answer carries it back.
        id: u64,
        /// Regions to map first: new since the last message, unlinked by the parent once this is answered.
        open: Vec<Region>,
        /// Regions the parent has let go of, to unmap.
        close: Vec<u64>,
        /// The inputs, in the model's declared order.
        inputs: Vec<SharedTensor>,
        /// Where to write the outputs, in declared order, when the parent knows their shapes.
        outputs: Option<Vec<SharedTensor>>,
    },
    /// Where to write the outputs of the run that was answered `Sized`. Answered by `Done` or `Failed`.
    Place {
        /// The `id` of that run.
        id: u64,
        /// Regions to map first, as in `Run`.
        open: Vec<Region>,
        /// Where each output goes, in declared order.
        outputs: Vec<SharedTensor>,
    },
    /// The parent's instance went idle after a load: give back what the batches grew (the session's arena) and
    /// the allocator's free pages. Answered by `Done`, or `Failed` when the release run failed.
    Release {
        /// Numbers the request; the answer carries it back.
        id: u64,
        /// Regions the parent has let go of, to unmap: all its free ones.
        close: Vec<u64>,
    },
}

/// Worker to parent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    /// The model is loaded and the worker waits for `Run`.
    Loaded {
        /// The model's declared inputs.
        inputs: Vec<TensorSpec>,
        /// The model's declared outputs.
        outputs: Vec<TensorSpec>,
    },
    /// The model could not be loaded; the worker then exits.
    LoadFailed {
        /// What went wrong; the parent reports it as [`super::WorkerError::Load`].
        error: String,
    },
    /// The outputs are where the parent said.
    Done {
        /// The `id` of the `Run` it answers.
        id: u64,
    },
    /// The batch ran and its outputs have these types and shapes; the worker holds them until `Place`.
    Sized {
        /// The `id` of the `Run` it answers.
        id: u64,
        /// Each output's element type and shape, in declared order.
        outputs: Vec<(DType, Vec<u64>)>,
    },
    /// The batch failed; the worker serves the next one.
    Failed {
        /// The `id` of the request it answers.
        id: u64,
        /// The model's error, or why the inputs or outputs did not fit their regions.
        error: String,
    },
}

/// Where one tensor lies in a shared region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedTensor {
    /// The region it lies in.
    pub region: u64,
    /// The element type.
    pub dtype: DType,
    /// The tensor's shape.
    pub shape: Vec<u64>,
    /// Where its bytes start in the region.
    pub offset: u64,
    /// Its size, in bytes.
    pub len: u64,
}

impl SharedTensor {
    /// The byte range, if it lies within a region of `size` bytes.
    pub fn range(&self, size: usize) -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(self.offset).ok()?;
        let end = start.checked_add(usize::try_from(self.len).ok()?)?;
        (end <= size).then_some(start..end)
    }
}

/// Encode `msg` into `buf` and send it in one write, so a frame costs one system call.
pub fn write_frame<T: Serialize>(stream: &UnixStream, buf: &mut Vec<u8>, msg: &T) -> io::Result<()> {
    frame::encode::<T, MAX_FRAME>(buf, msg)?;
    send_all(stream, buf)
}

/// `send` with `MSG_NOSIGNAL`: a dead peer must surface as `EPIPE`, not as a `SIGPIPE` that kills the sender
/// (Rust binaries ignore it, but a host embedding this crate may not).
pub fn send_all(stream: &UnixStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length describe a live slice; the descriptor is owned by `stream`.
        let n = unsafe { libc::send(stream.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// Read one frame ([`frame::read`]).
pub fn read_frame<T: DeserializeOwned>(reader: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<Option<T>> {
    frame::read::<T, MAX_FRAME>(reader, buf)
}

/// Decode a frame's body, all of it ([`frame::decode`]).
pub fn decode<T: DeserializeOwned>(buf: &[u8]) -> io::Result<T> {
    frame::decode::<T, MAX_FRAME>(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_inside_a_frame_that_claims_petabytes_is_refused_not_allocated() {
        // Found by `make fuzz` (worker_protocol): a frame whose string claims 2 PB aborted the process.
        let frame: &[u8] = &[
            0x16, 0, 0, 0, 0, 0x0c, 0xfd, 0x1e, 0x1e, 0x1e, 0x1e, 0x1e, 0x1e, 0x07, 0, 0x11, 0, 0, 1, 0, 0, 0, 0, 0, 0,
            0,
        ];
        let err = read_frame::<Request>(&mut &frame[..], &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    }

    #[test]
    fn frames_round_trip_and_garbage_is_refused() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut buf = Vec::new();
        let run = Request::Run {
            id: 7,
            open: vec![Region { id: 1, path: "/dev/shm/x".into(), size: 4096 }],
            close: vec![],
            inputs: vec![SharedTensor { region: 1, dtype: DType::I64, shape: vec![2, 4], offset: 64, len: 64 }],
            outputs: None,
        };
        write_frame(&a, &mut buf, &run).unwrap();
        let got: Request = read_frame(&mut b, &mut buf).unwrap().unwrap();
        assert!(matches!(got, Request::Run { id: 7, ref inputs, .. } if inputs[0].shape == [2, 4]));

        send_all(&a, &[3, 0, 0, 0, 0xff, 0xff, 0xff]).unwrap();
        let err = read_frame::<Request>(&mut b, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");

        send_all(&a, &u32::MAX.to_le_bytes()).unwrap();
        assert_eq!(read_frame::<Request>(&mut b, &mut buf).unwrap_err().kind(), io::ErrorKind::InvalidData);

        send_all(&a, &[9, 0]).unwrap();
        drop(a);
        assert_eq!(read_frame::<Request>(&mut b, &mut buf).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert!(read_frame::<Request>(&mut b, &mut buf).unwrap().is_none());
    }

    #[test]
    fn places_out_of_bounds_have_no_range() {
        let place = |offset, len| SharedTensor { region: 0, dtype: DType::U8, shape: vec![len], offset, len };
        assert_eq!(place(8, 8).range(16), Some(8..16));
        assert_eq!(place(8, 9).range(16), None);
        assert_eq!(place(u64::MAX, 2).range(16), None);
    }
}
