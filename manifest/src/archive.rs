//! The archive a bundle travels in: [`pack`] writes a tar of [`Bundle::files`] that is the same bytes for the same
//! bundle (fixed order and modes, no timestamps or owners); [`unpack`] stores an upload and opens it, refusing
//! anything but plain files and directories inside the bundle, and archives over their bounds.

use std::path::Path;

use crate::bundle::{Bundle, is_inside};
use crate::error::{Result, invalid};

/// Pack an opened (so checked) bundle for upload: a tar archive of [`Bundle::files`] in order, with fixed modes
/// and no timestamps or owners.
pub fn pack(bundle: &Bundle) -> Result<Vec<u8>> {
    let dir = &bundle.dir;
    let mut archive = tar::Builder::new(Vec::new());
    let glue: Vec<&Path> = bundle.manifest.tasks.iter().map(|t| t.glue.as_path()).collect();
    for file in bundle.files() {
        let path = dir.join(&file);
        let bytes = std::fs::read(&path).map_err(|e| invalid(format!("cannot read {}: {e}", path.display())))?;
        if glue.contains(&file.as_path()) {
            check_glue(&file, &bytes)?;
        }
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        archive
            .append_data(&mut header, &file, bytes.as_slice())
            .map_err(|e| invalid(format!("cannot pack {}: {e}", file.display())))?;
    }
    archive.into_inner().map_err(|e| invalid(format!("cannot pack {}: {e}", dir.display())))
}

/// A glue file is a WebAssembly component (or its text format), told before the upload rather than after it.
fn check_glue(file: &Path, bytes: &[u8]) -> Result<()> {
    const COMPONENT: [u8; 8] = *b"\0asm\x0d\0\x01\0";
    let what = match bytes.get(..8) {
        Some(head) if head == COMPONENT => return Ok(()),
        Some(head) if head.starts_with(b"\0asm") => "a core WebAssembly module, not a component",
        _ if std::str::from_utf8(bytes).is_ok() => return Ok(()), // the text format: the gateway parses it
        _ => "not WebAssembly",
    };
    Err(invalid(format!(
        "{} is {what}: build the glue for the `wasm32-wasip2` target (`jig build`, or cargo build --target \
         wasm32-wasip2), which makes a component",
        file.display()
    )))
}

/// Entries an uploaded bundle may hold.
pub const MAX_ENTRIES: usize = 10_000;

/// Unpack an archive made by [`pack`] into `dest` (which must not exist yet) and open it. Refuses entries
/// that are not plain files or directories, paths that leave the bundle, more than `max_bytes` in all and
/// more than [`MAX_ENTRIES`] entries.
pub fn unpack(archive: &[u8], dest: &Path, max_bytes: u64) -> Result<Bundle> {
    // The tar reader's messages may quote the input's bytes: keep them only when they are plain text.
    let io = |what: &str, e: std::io::Error| {
        let detail = e.to_string();
        if detail.chars().all(|c| c.is_ascii_graphic() || c == ' ') {
            invalid(format!("the uploaded bundle {what}: {detail}"))
        } else {
            invalid(format!("the uploaded bundle {what} (send the tar archive `jig deploy` makes)"))
        }
    };
    std::fs::create_dir(dest).map_err(|e| io("cannot be stored", e))?;
    let mut entries = tar::Archive::new(archive);
    let mut total = 0u64;
    for (count, entry) in entries.entries().map_err(|e| io("is not a tar archive", e))?.enumerate() {
        if count >= MAX_ENTRIES {
            return Err(invalid(format!("the uploaded bundle holds more than {MAX_ENTRIES} entries")));
        }
        let mut entry = entry.map_err(|e| io("is truncated or not a tar archive", e))?;
        let path = entry.path().map_err(|e| io("has an unreadable path", e))?.into_owned();
        if !is_inside(&path) {
            return Err(invalid(format!("the uploaded bundle holds {path:?}, which leaves the bundle")));
        }
        let target = dest.join(&path);
        match entry.header().entry_type() {
            tar::EntryType::Directory => std::fs::create_dir_all(&target).map_err(|e| io("cannot be stored", e))?,
            tar::EntryType::Regular => {
                total += entry.size();
                if total > max_bytes {
                    return Err(invalid(format!("the uploaded bundle unpacks to more than {max_bytes} bytes")));
                }
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| io("cannot be stored", e))?;
                }
                let mut file = std::fs::File::create(&target).map_err(|e| io("cannot be stored", e))?;
                std::io::copy(&mut entry, &mut file).map_err(|e| io("is truncated", e))?;
                file.sync_all().map_err(|e| io("cannot be stored", e))?;
            }
            other => {
                return Err(invalid(format!(
                    "the uploaded bundle holds {} of type {other:?}; only files and directories are allowed",
                    path.display()
                )));
            }
        }
    }
    Bundle::open(dest)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::MANIFEST;
    use crate::testing::{TWO_TASKS, write};

    #[test]
    fn packing_is_deterministic_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), TWO_TASKS);
        std::fs::write(dir.path().join("unrelated.txt"), b"not part of the bundle").unwrap();
        let packed = pack(&Bundle::open(dir.path()).unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        std::fs::write(dir.path().join("glue/a.wasm"), b"a").unwrap(); // a newer mtime, same bytes
        assert_eq!(pack(&Bundle::open(dir.path()).unwrap()).unwrap(), packed);

        let out = tempfile::tempdir().unwrap();
        let bundle = unpack(&packed, &out.path().join("b"), 1 << 20).unwrap();
        assert_eq!(bundle.entry().unwrap().name, "a");
        assert_eq!(bundle.files(), [PathBuf::from("glue/a.wasm"), "glue/b.wasm".into(), MANIFEST.into()]);
        assert!(!out.path().join("b/unrelated.txt").exists());
        assert!(unpack(&packed, &out.path().join("c"), 10).unwrap_err().0.contains("more than 10 bytes"));
    }

    #[test]
    fn an_archive_of_too_many_entries_is_refused() {
        let mut archive = tar::Builder::new(Vec::new());
        for i in 0..=MAX_ENTRIES {
            let mut header = tar::Header::new_ustar();
            header.set_size(0);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            archive.append_data(&mut header, format!("f{i}"), &b""[..]).unwrap();
        }
        let out = tempfile::tempdir().unwrap();
        let error = unpack(&archive.into_inner().unwrap(), &out.path().join("b"), 1 << 30).unwrap_err().0;
        assert!(error.contains("more than 10000 entries"), "{error}");
    }

    #[test]
    fn glue_that_is_not_a_component_is_refused_before_the_upload() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), TWO_TASKS);
        for (bytes, said) in
            [(&b"\0asm\x01\0\0\0"[..], "a core WebAssembly module"), (b"\x89PNG\r\n\x1a\n\xff", "not WebAssembly")]
        {
            std::fs::write(dir.path().join("glue/b.wasm"), bytes).unwrap();
            let err = pack(&Bundle::open(dir.path()).unwrap()).unwrap_err().to_string();
            assert!(err.contains("glue/b.wasm") && err.contains(said) && err.contains("wasm32-wasip2"), "{err}");
        }
        std::fs::write(dir.path().join("glue/b.wasm"), b"\0asm\x0d\0\x01\0").unwrap();
        pack(&Bundle::open(dir.path()).unwrap()).unwrap();
    }

    #[test]
    fn an_archive_of_junk_is_refused_without_its_bytes() {
        // A tar header block whose size field holds bytes that are not text: the tar reader quotes them.
        let mut junk = vec![0xffu8; 1024];
        junk[..5].copy_from_slice(b"name\0");
        let out = tempfile::tempdir().unwrap();
        let error = unpack(&junk, &out.path().join("b"), 1 << 20).unwrap_err().0;
        assert!(error.starts_with("the uploaded bundle is truncated or not a tar archive"), "{error}");
        assert!(error.chars().all(|c| c.is_ascii() && !c.is_ascii_control()), "no input bytes echoed: {error:?}");
    }
}
