//! Frames between a gateway and a `jig node` on TCP.
//!
//! A frame ([`jig_wire::frame`]) is a little-endian `u32` body length and the bincode-2 (standard
//! configuration) encoding of a [`Request`] or a [`Reply`]. Tensor bytes follow the frame that describes them
//! ([`Head`]s), raw and in order, each as long as its element type and shape say: they are written from the
//! tensors' memory and read into their buffers with no encoding. A model's bytes follow the same way, when the
//! node asks for them.
//!
//! A connection: `Hello` → `Challenge` → `Prove` → `Welcome` (or `Refused` at any step, and the node closes);
//! `Load` → `SendModel` (then the model's bytes) → `Loaded` or `LoadFailed`; then `Run` → `Done` or `Failed`, one
//! batch at a time, until the gateway closes.
//!
//! The handshake proves the cluster's token both ways without sending it: each side sends a fresh random nonce,
//! and each proves the token with an HMAC-SHA256 over both nonces under a label of its own ([`proof`]); the node
//! proves itself first, so a gateway never tells an impostor anything it could replay, and a recorded handshake
//! proves nothing on the next connection.

use std::io::{self, Read, Write};
use std::sync::Arc;

use jig_model_host::device::Devices;
use jig_model_host::onnx::TensorSpec;
use jig_wire::frame;
use jig_wire::{DType, Spare, Tensor};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The protocol's version: gateway and node must speak the same one (they are the same `jig` release).
pub const VERSION: u32 = 2;

/// A handshake nonce, or a proof (an HMAC-SHA256).
pub type Nonce = [u8; 32];

/// Who proves the token: each side's proof is labelled, so one side's proof is never the other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The node, answering a gateway's hello.
    Node,
    /// The gateway, answering the node's challenge.
    Gateway,
}

/// `side`'s proof of `token` for the handshake of `gateway`'s and `node`'s nonces.
pub fn proof(token: &str, side: Side, gateway: &Nonce, node: &Nonce) -> Nonce {
    use hmac::Mac;
    mac(token, side, gateway, node).finalize().into_bytes().into()
}

/// Whether `given` is `side`'s proof of `token` for the nonces, compared in constant time.
pub fn proves(given: &Nonce, token: &str, side: Side, gateway: &Nonce, node: &Nonce) -> bool {
    use hmac::Mac;
    mac(token, side, gateway, node).verify_slice(given).is_ok()
}

fn mac(token: &str, side: Side, gateway: &Nonce, node: &Nonce) -> hmac::Hmac<sha2::Sha256> {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(match side {
        Side::Node => b"jig node protocol 2: node",
        Side::Gateway => b"jig node protocol 2: gate",
    });
    mac.update(gateway);
    mac.update(node);
    mac
}

/// A fresh random nonce, from the operating system.
pub fn nonce() -> std::io::Result<Nonce> {
    let mut nonce = [0u8; 32];
    getrandom::getrandom(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(nonce)
}

/// The largest frame either side accepts. Frames are descriptors; a larger length prefix means the peer is not
/// speaking this protocol, and refusing it keeps a corrupt prefix from allocating gigabytes.
pub const MAX_FRAME: usize = 1 << 20;

/// A tensor's element type and shape, before its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<u64>,
}

impl Head {
    /// `tensor`'s head.
    pub fn of(tensor: &Tensor) -> Head {
        Head { dtype: tensor.dtype(), shape: tensor.shape().to_vec() }
    }

    /// Bytes of the tensor it describes; `None` when that overflows.
    pub fn bytes(&self) -> Option<usize> {
        self.dtype.bytes_for(&self.shape)
    }
}

/// Gateway to node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Request {
    /// The first frame (first of its enum in every version, as `Refused` is second of the replies, so that a node
    /// can tell a gateway of another version which it speaks). Answered by `Challenge`, or `Refused` and the node
    /// closes.
    Hello {
        /// [`VERSION`].
        version: u32,
        /// The gateway's fresh nonce.
        nonce: Nonce,
    },
    /// Load a model for this connection. Answered by `SendModel` when the node's cache lacks the model (the
    /// gateway then sends its bytes), then `Loaded` or `LoadFailed`.
    Load {
        /// The instance, `APP/SLOT/VARIANT@SEGMENT#N`, for errors and logs on both sides.
        instance: String,
        /// The model's name, for errors.
        model_name: String,
        /// The ONNX file's SHA-256, hex: the node's cache key.
        model_sha256: String,
        /// The ONNX file's size in bytes.
        model_len: u64,
        /// Where to run it: a segment type, e.g. `cpu:2` or `mps:0:50`.
        segment: String,
        /// The GPU or MIG instance's UUID to bind to; `None`: the node chooses.
        device: Option<String>,
        /// The node's cores to pin a CPU segment to, as it numbers them (the gateway's plan holds each core
        /// for one instance, as it does its own machine's); empty: unpinned.
        cores: Vec<usize>,
    },
    /// Run one batch; the inputs' bytes follow. Answered by `Done` (the outputs' bytes follow) or `Failed`.
    Run {
        /// The inputs, in the model's declared order.
        inputs: Vec<Head>,
    },
    /// The gateway's proof of the token ([`Side::Gateway`]), once the node proved it. Answered by `Welcome`, or
    /// `Refused` and the node closes.
    Prove {
        /// [`proof`] over the two nonces.
        proof: Nonce,
    },
}

/// Node to gateway.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    /// The token and version are right.
    Welcome {
        /// The node's name, for errors and logs.
        node: String,
        /// What it offers instances: its cores and GPUs.
        devices: Devices,
    },
    /// The connection is refused (wrong token or version, the node at its connection cap); the node closes it.
    Refused {
        /// Why, and what to do.
        reason: String,
    },
    /// The node's nonce and its proof of the token ([`Side::Node`]) over both nonces.
    Challenge {
        /// The node's fresh nonce.
        nonce: Nonce,
        /// [`proof`] over the two nonces.
        proof: Nonce,
    },
    /// Send the model's bytes: the node's cache lacks them.
    SendModel,
    /// The model runs on the node.
    Loaded {
        /// Its declared inputs.
        inputs: Vec<TensorSpec>,
        /// Its declared outputs.
        outputs: Vec<TensorSpec>,
    },
    /// The model could not be loaded; the node closes the connection.
    LoadFailed {
        /// What went wrong, naming the node, instance and segment.
        error: String,
    },
    /// The batch ran; its outputs' bytes follow.
    Done {
        /// The outputs, in the model's declared order.
        outputs: Vec<Head>,
    },
    /// The batch failed (the connection stays open for the next).
    Failed {
        /// The model's error.
        error: String,
    },
}

/// Write `msg` as one frame ([`frame::encode`]).
pub fn write_frame<W: Write, T: Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
    let mut buf = Vec::new();
    frame::encode::<T, MAX_FRAME>(&mut buf, msg)?;
    w.write_all(&buf)
}

/// Read one frame; `Ok(None)` when the stream ends before it starts ([`frame::read`]: bounded before it is
/// trusted, so the first frame of an unauthenticated peer cannot make either side allocate what it claims).
pub fn read_frame<R: Read, T: DeserializeOwned>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<Option<T>> {
    frame::read::<T, MAX_FRAME>(r, buf)
}

/// Read `bytes` as a stream of frames, once as a node reads a gateway's and once as a gateway reads a node's,
/// sizing the tensors each describes, until the stream ends or a frame is refused; the frames read. For `fuzz/`,
/// which feeds it arbitrary bytes: a malformed frame must be an error, never a panic or an abort.
#[doc(hidden)]
pub fn read_frames(bytes: &[u8]) -> usize {
    let mut buf = Vec::new();
    let mut frames = 0;
    let mut requests = bytes;
    while let Ok(Some(request)) = read_frame::<_, Request>(&mut requests, &mut buf) {
        if let Request::Run { inputs } = request {
            let _ = total_len(&inputs, u64::MAX);
        }
        frames += 1;
    }
    let mut replies = bytes;
    while let Ok(Some(reply)) = read_frame::<_, Reply>(&mut replies, &mut buf) {
        if let Reply::Done { outputs } = reply {
            let _ = total_len(&outputs, u64::MAX);
        }
        frames += 1;
    }
    frames
}

/// Write the bytes of `tensors`, in order, after the frame that names their heads.
pub fn write_tensors<W: Write>(w: &mut W, tensors: &[Tensor]) -> io::Result<()> {
    tensors.iter().try_for_each(|t| w.write_all(t.data()))
}

/// The heads' bytes of all of `heads`; an error when they overflow or exceed `limit`.
pub fn total_len(heads: &[Head], limit: u64) -> io::Result<usize> {
    let mut total: usize = 0;
    for h in heads {
        let len = h.bytes().ok_or_else(|| invalid(format!("a tensor of shape {:?} is too large", h.shape)))?;
        total = total.checked_add(len).ok_or_else(|| invalid("tensors too large".into()))?;
    }
    if total as u64 > limit {
        return Err(invalid(format!("a batch of {total} B exceeds the limit of {limit} B")));
    }
    Ok(total)
}

/// Read the tensors `heads` describe, each into a buffer from `spare` that returns there when the tensor drops.
pub fn read_tensors<R: Read>(r: &mut R, heads: &[Head], spare: &Arc<Spare>) -> io::Result<Vec<Tensor>> {
    heads
        .iter()
        .map(|h| {
            let len = h.bytes().ok_or_else(|| invalid(format!("a tensor of shape {:?} is too large", h.shape)))?;
            let mut data = spare.take(len);
            r.read_exact(&mut data)?;
            Tensor::new(h.dtype, h.shape.clone(), spare.share(data)).map_err(|e| invalid(e.to_string()))
        })
        .collect()
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_tensors_round_trip() {
        let t = Tensor::from_f32(vec![2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let mut wire = Vec::new();
        write_frame(&mut wire, &Request::Run { inputs: vec![Head::of(&t)] }).unwrap();
        write_tensors(&mut wire, std::slice::from_ref(&t)).unwrap();
        let mut r = wire.as_slice();
        let Some(Request::Run { inputs }) = read_frame(&mut r, &mut Vec::new()).unwrap() else { panic!("not a Run") };
        assert_eq!(total_len(&inputs, 16).unwrap(), 16);
        let back = read_tensors(&mut r, &inputs, &Arc::default()).unwrap();
        assert_eq!(back[0].data(), t.data());
        assert_eq!(back[0].shape(), t.shape());
        assert!(r.is_empty());
    }

    #[test]
    fn a_proof_holds_for_its_token_side_and_nonces_only() {
        let (g, n) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(g, n, "fresh nonces");
        let p = proof("token", Side::Node, &g, &n);
        assert!(proves(&p, "token", Side::Node, &g, &n));
        assert!(!proves(&p, "token2", Side::Node, &g, &n), "another token");
        assert!(!proves(&p, "token", Side::Gateway, &g, &n), "the other side's proof: not a reflection");
        assert!(!proves(&p, "token", Side::Node, &n, &g), "other nonces");
    }

    #[test]
    fn bad_frames_are_errors() {
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(read_frame::<_, Request>(&mut huge.as_slice(), &mut Vec::new()).is_err());
        let garbage = [3u8, 0, 0, 0, 0xff, 0xff, 0xff];
        assert!(read_frame::<_, Request>(&mut garbage.as_slice(), &mut Vec::new()).is_err());
        assert!(read_frame::<_, Request>(&mut [].as_slice(), &mut Vec::new()).unwrap().is_none());
        let big = Head { dtype: DType::F32, shape: vec![1 << 20] };
        let err = total_len(&[big], 1024).unwrap_err();
        assert!(err.to_string().contains("exceeds the limit"), "{err}");
    }
}
