//! Test helpers shared by the checks' and the archive's tests: a bundle directory with two glue files, and a
//! manifest of two tasks joined by one edge.

use std::path::Path;

use crate::MANIFEST;

pub(crate) fn write(dir: &Path, manifest: &str) {
    std::fs::create_dir_all(dir.join("glue")).unwrap();
    std::fs::write(dir.join(MANIFEST), manifest).unwrap();
    std::fs::write(dir.join("glue/a.wasm"), b"a").unwrap();
    std::fs::write(dir.join("glue/b.wasm"), b"b").unwrap();
}

pub(crate) const TWO_TASKS: &str = "name = \"app\"\n[[tasks]]\nname = \"a\"\nglue = \"glue/a.wasm\"\n\
                         [[tasks]]\nname = \"b\"\nglue = \"glue/b.wasm\"\n[[edges]]\nfrom = \"a.out\"\nto = \"b\"\n";
