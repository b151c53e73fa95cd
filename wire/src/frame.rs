//! Length-prefixed bincode frames: the one codec of the model host's worker socket (`jig-model-host`) and the node's TCP
//! protocol (`jig-node`).
//!
//! A frame is a little-endian `u32` body length and the bincode-2 (standard configuration) encoding of one
//! message. Both ends are bounded before anything is trusted: a length prefix over `MAX` is refused unread, the
//! body's buffer grows only as its bytes arrive, and bincode decodes under a limit of `MAX`, so a string or list
//! inside a frame that claims petabytes is refused instead of allocated (without it one crafted frame aborted
//! the process: `make fuzz` found it in the worker, a red team in `jig node` before the token was checked).

use std::io::{self, Read};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Encode `msg` as one frame into `buf` (cleared first), ready for one write; a body over `MAX` is an error.
pub fn encode<T: Serialize, const MAX: usize>(buf: &mut Vec<u8>, msg: &T) -> io::Result<()> {
    buf.clear();
    buf.extend_from_slice(&[0; 4]);
    bincode::serde::encode_into_std_write(msg, buf, bincode::config::standard())
        .map_err(|e| invalid(format!("cannot encode a message: {e}")))?;
    let len = buf.len() - 4;
    if len > MAX {
        return Err(invalid(format!("a {len}-byte message exceeds the {MAX}-byte frame limit")));
    }
    buf[..4].copy_from_slice(&(len as u32).to_le_bytes());
    Ok(())
}

/// Read one frame. `Ok(None)` is a clean end of stream between frames; a stream cut inside a frame is
/// `UnexpectedEof`; a length over `MAX`, or a body that does not decode, is `InvalidData`.
pub fn read<T: DeserializeOwned, const MAX: usize>(reader: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<Option<T>> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match reader.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX {
        return Err(invalid(format!("a frame of {len} bytes exceeds {MAX}: the peer does not speak jig's protocol")));
    }
    // Grown as bytes arrive: a peer that claims a megabyte and sends a byte holds a byte.
    buf.clear();
    reader.take(len as u64).read_to_end(buf)?;
    if buf.len() < len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a frame"));
    }
    decode::<T, MAX>(buf).map(Some)
}

/// Decode a frame's body, all of it, with no length inside it claiming more than `MAX` bytes.
pub fn decode<T: DeserializeOwned, const MAX: usize>(body: &[u8]) -> io::Result<T> {
    let config = bincode::config::standard().with_limit::<MAX>();
    let (msg, used) =
        bincode::serde::decode_from_slice(body, config).map_err(|e| invalid(format!("malformed message: {e}")))?;
    if used != body.len() {
        return Err(invalid(format!("{} trailing bytes after a message", body.len() - used)));
    }
    Ok(msg)
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    /// A frame within `MAX` whose only field, a string, claims `claimed` bytes (bincode's varint: 0xfd, then a
    /// little-endian u64).
    fn claiming(claimed: u64) -> Vec<u8> {
        let mut body = vec![0xfd];
        body.extend_from_slice(&claimed.to_le_bytes());
        body.resize(1000, b'x');
        let mut frame = (body.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(&body);
        frame
    }

    #[test]
    fn a_string_claiming_terabytes_or_exabytes_is_refused_not_allocated() {
        for claimed in [1u64 << 40, 1 << 62, u64::MAX] {
            let err = read::<String, MAX>(&mut claiming(claimed).as_slice(), &mut Vec::new()).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{claimed}: {err}");
        }
    }

    #[test]
    fn frames_round_trip_and_bad_ones_are_errors() {
        let mut wire = Vec::new();
        encode::<_, MAX>(&mut wire, &("hello".to_string(), 7u32)).unwrap();
        let mut r = wire.as_slice();
        assert_eq!(read::<(String, u32), MAX>(&mut r, &mut Vec::new()).unwrap(), Some(("hello".into(), 7)));
        assert!(read::<(String, u32), MAX>(&mut r, &mut Vec::new()).unwrap().is_none());

        let over = ((MAX + 1) as u32).to_le_bytes();
        assert_eq!(
            read::<String, MAX>(&mut over.as_slice(), &mut Vec::new()).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        let cut = [100u8, 0, 0, 0, 1, 2];
        assert_eq!(
            read::<String, MAX>(&mut cut.as_slice(), &mut Vec::new()).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        let trailing = [2u8, 0, 0, 0, 0, 0];
        assert!(
            read::<String, MAX>(&mut trailing.as_slice(), &mut Vec::new())
                .unwrap_err()
                .to_string()
                .contains("trailing")
        );
        assert!(encode::<_, 4>(&mut wire, &"longer than four bytes").is_err());
    }
}
