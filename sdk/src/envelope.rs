//! A payload framing for functions that pass structured metadata together with a binary body (an image, a
//! crop, audio) without base64 or copies:
//!
//! ```text
//! u32 little-endian: length of the metadata | metadata, UTF-8 JSON | body bytes (the rest)
//! ```
//!
//! The bundled `crop` function takes and emits envelopes; `jig run --meta JSON` builds one from the command line.

use serde::{Serialize, de::DeserializeOwned};

use crate::{Error, Result};

/// JSON metadata of type `M` and a binary body.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope<M> {
    pub meta: M,
    pub body: Vec<u8>,
}

impl<M: Serialize> Envelope<M> {
    /// The framed bytes.
    pub fn encode(&self) -> Vec<u8> {
        let meta = serde_json::to_vec(&self.meta).expect("metadata types serialise to JSON");
        let mut out = Vec::with_capacity(4 + meta.len() + self.body.len());
        out.extend_from_slice(&(meta.len() as u32).to_le_bytes());
        out.extend_from_slice(&meta);
        out.extend_from_slice(&self.body);
        out
    }
}

impl<M: DeserializeOwned> Envelope<M> {
    /// Parse framed bytes; the body is moved out of `bytes` without a copy of the whole payload.
    pub fn decode(mut bytes: Vec<u8>) -> Result<Self> {
        let header: [u8; 4] = bytes
            .get(..4)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| {
                Error::invalid_input("envelope shorter than its 4-byte metadata length")
            })?;
        let meta_len = u32::from_le_bytes(header) as usize;
        let meta_end = 4usize
            .checked_add(meta_len)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "envelope metadata length {meta_len} runs past the payload's {} bytes",
                    bytes.len()
                ))
            })?;
        let meta = serde_json::from_slice(&bytes[4..meta_end])
            .map_err(|e| Error::invalid_input(format!("envelope metadata: {e}")))?;
        // Shift the body to the front in place rather than copying it into a new allocation.
        bytes.drain(..meta_end);
        Ok(Envelope { meta, body: bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let env = Envelope {
            meta: serde_json::json!({"k": [1, 2]}),
            body: vec![9, 8, 7],
        };
        let bytes = env.encode();
        assert_eq!(
            Envelope::<serde_json::Value>::decode(bytes.clone()).unwrap(),
            env
        );
        assert!(Envelope::<serde_json::Value>::decode(bytes[..6].to_vec()).is_err());
        assert!(Envelope::<serde_json::Value>::decode(vec![1, 0]).is_err());
    }
}
