//! The frames between a parent and its worker process, read as requests and as replies.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        jig_model_host::worker::read_frames(data);
    });
}
