//! A payload framing for functions that pass structured metadata together with a binary body (an image, a
//! crop, audio), without base64 and without copying the body:
//!
//! ```text
//! body bytes | metadata, UTF-8 JSON | u32 little-endian: length of the metadata
//! ```
//!
//! The metadata trails the body so that decoding only truncates the payload: the body is handed on in the
//! payload's own allocation. The bundled `crop` function takes and emits envelopes; `jig run --meta JSON`
//! builds one from the command line.

use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// Why bytes are not an envelope of the metadata expected; the message says what the caller should send instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EnvelopeError(String);

/// Spare capacity worth leaving in a body that will be framed: typical metadata then fits, and
/// [`Envelope::encode`] appends it without moving the body.
pub const TRAILER_RESERVE: usize = 512;

/// JSON metadata of type `M` and a binary body.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope<M> {
    /// The metadata, JSON on the wire.
    pub meta: M,
    /// The binary body.
    pub body: Vec<u8>,
}

impl<M: Serialize> Envelope<M> {
    /// The framed bytes, built in the body's allocation (reserve [`TRAILER_RESERVE`] in it to avoid a copy).
    pub fn encode(self) -> Vec<u8> {
        let mut out = self.body;
        let body_len = out.len();
        serde_json::to_writer(&mut out, &self.meta).expect("metadata types serialise to JSON");
        let meta_len = (out.len() - body_len) as u32;
        out.extend_from_slice(&meta_len.to_le_bytes());
        out
    }
}

/// The metadata of a *tensor envelope*: the body is a tensor's raw little-endian bytes; the metadata its element
/// type, by the Open Inference Protocol's name (`FP32`, `INT64`, …), and its shape. The bundled `forward` function
/// takes and answers them, and the gateway frames a v2 call of an app that declares `[tensors]` as one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorMeta {
    /// The element type, by the Open Inference Protocol's name.
    pub datatype: String,
    /// The shape.
    pub shape: Vec<u64>,
}

/// What a caller whose input is not an envelope should do instead.
const SEND_AN_ENVELOPE: &str = "this function takes a body with JSON metadata: send it with `jig invoke APP INPUT --meta JSON` (or `jig run \
     … --meta JSON`)";

impl<M: DeserializeOwned> Envelope<M> {
    /// Parse framed bytes; the body keeps the payload's allocation.
    pub fn decode(mut bytes: Vec<u8>) -> Result<Self, EnvelopeError> {
        let total = bytes.len();
        let trailer = total.checked_sub(4).ok_or_else(|| {
            EnvelopeError(format!(
                "the input is not an envelope ({total} bytes, shorter than its 4-byte metadata length); \
                 {SEND_AN_ENVELOPE}"
            ))
        })?;
        let meta_len = u32::from_le_bytes(bytes[trailer..].try_into().expect("4 bytes")) as usize;
        let meta_start = trailer.checked_sub(meta_len).ok_or_else(|| {
            EnvelopeError(format!(
                "the input is not an envelope (its metadata length, {meta_len}, runs past its {total} bytes); \
                 {SEND_AN_ENVELOPE}"
            ))
        })?;
        let meta = serde_json::from_slice(&bytes[meta_start..trailer])
            .map_err(|e| EnvelopeError(format!("the input's envelope metadata is not the JSON expected: {e}")))?;
        bytes.truncate(meta_start);
        Ok(Envelope { meta, body: bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let env = Envelope { meta: serde_json::json!({"k": [1, 2]}), body: vec![9, 8, 7] };
        let bytes = env.clone().encode();
        assert_eq!(&bytes[..3], &[9, 8, 7]);
        assert_eq!(Envelope::<serde_json::Value>::decode(bytes.clone()).unwrap(), env);
        let mut overlong = bytes.clone();
        let n = overlong.len();
        overlong[n - 4..].copy_from_slice(&1000u32.to_le_bytes());
        let error = Envelope::<serde_json::Value>::decode(overlong).unwrap_err().to_string();
        assert!(error.contains("not an envelope") && error.contains("--meta JSON"), "{error}");
        assert!(Envelope::<serde_json::Value>::decode(bytes[..n - 1].to_vec()).is_err());
        assert!(Envelope::<serde_json::Value>::decode(vec![1, 0]).is_err());
        assert!(Envelope::<serde_json::Value>::decode(vec![0, 0, 0, 0]).is_err(), "empty metadata is not JSON");
    }
}
