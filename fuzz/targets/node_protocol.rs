//! The frames between a gateway and a `jig node` on TCP, read as the node reads them (the first before any
//! token is checked) and as the gateway reads the node's replies.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        jig_node::protocol::read_frames(data);
    });
}
