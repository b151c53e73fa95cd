//! A deploy's body as the gateway unpacks it: a tar, into a fresh directory, at most 1 MiB.

fn main() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    afl::fuzz!(|data: &[u8]| {
        let dest = scratch.path().join("bundle");
        let _ = jig_manifest::unpack(data, &dest, 1 << 20);
        let _ = std::fs::remove_dir_all(&dest);
    });
}
