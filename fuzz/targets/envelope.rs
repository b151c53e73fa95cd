//! The envelope (a body, JSON metadata, the metadata's length), as glue and the gateway decode it.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = jig_wire::Envelope::<serde_json::Value>::decode(data.to_vec());
    });
}
