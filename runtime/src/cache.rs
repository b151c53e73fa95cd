//! The on-disk cache of compiled components.
//!
//! An entry is `<dir>/<sha256 of the wasm>-<engine compatibility hash>.cwasm`, written atomically (temporary
//! file, then rename) so concurrent loaders never see half an artifact. An entry that fails to deserialize
//! (written by another wasmtime, truncated) is replaced by a fresh compilation.

use std::hash::{Hash, Hasher};
use std::path::Path;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Compile `wasm`, through the cache in `dir` when there is one. Cache failures are logged, never fatal.
pub(crate) fn compile(engine: &Engine, dir: Option<&Path>, wasm: &[u8]) -> wasmtime::Result<Component> {
    let Some(dir) = dir else {
        return Component::new(engine, wasm);
    };
    let path = dir.join(format!("{}-{:016x}.cwasm", hex::encode(Sha256::digest(wasm)), compatibility(engine)));
    // Read the artifact into memory rather than mapping the file: a cache entry rewritten or truncated
    // behind our back must not become a SIGBUS in a running function.
    if let Ok(bytes) = std::fs::read(&path) {
        // SAFETY: the bytes come from the runtime's own cache directory, written by `Component::serialize`
        // under a key that includes this engine's compatibility hash; wasmtime checks the header again.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => return Ok(component),
            Err(e) => {
                tracing::warn!(path = %path.display(), "discarding unusable cached component: {e:#}")
            }
        }
    }
    let component = Component::new(engine, wasm)?;
    if let Err(e) = store(&component, dir, &path) {
        tracing::warn!(path = %path.display(), "could not cache compiled component: {e:#}");
    }
    Ok(component)
}

fn store(component: &Component, dir: &Path, path: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize().map_err(|e| anyhow::anyhow!("{e:#}"))?;
    // A name of its own for each writer: gateway replicas share the cache on one volume, each possibly as pid 1.
    let mut tmp = tempfile::Builder::new().prefix(".compiling-").tempfile_in(dir)?;
    std::io::Write::write_all(&mut tmp, &bytes)?;
    tmp.persist(path)?;
    Ok(())
}

/// A stable number for the engine's settings and version: artifacts compiled under other settings don't match.
fn compatibility(engine: &Engine) -> u64 {
    // `DefaultHasher::new()` uses fixed keys, so the value is the same across processes of one build.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.finish()
}
