//! Precompiled adapter artifacts cached on disk, so a session loads the guard in under
//! a millisecond instead of compiling it with Cranelift (about 0.1 s).
//!
//! A cache file is `sha256(payload) ++ payload`, named by the component digest and the
//! engine's compatibility hash (which covers the wasmtime version and settings). A file
//! that fails its checksum or that wasmtime refuses is deleted and rebuilt.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::Path;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Loads the component from the cache, or compiles it and stores the artifact.
pub(super) fn load(
    engine: &Engine,
    wasm: &[u8],
    digest: &str,
    cache_dir: Option<&Path>,
) -> Result<Component, String> {
    // Native code is loaded from here: only from a directory no one else can write.
    let path = cache_dir
        .map(|dir| dir.join("wasm"))
        .filter(|dir| {
            let ok = !dir.exists() || is_private(dir);
            if !ok {
                tracing::warn!(
                    dir = %dir.display(),
                    "not using the adapter artifact cache: the directory is not this user's alone"
                );
            }
            ok
        })
        .map(|dir| dir.join(file_name(engine, digest)));
    if let Some(path) = &path
        && let Some(component) = read(engine, path)
    {
        return Ok(component);
    }
    let component = Component::new(engine, wasm).map_err(|e| format!("cannot compile: {e:#}"))?;
    if let Some(path) = &path
        && let Err(e) = write(&component, path)
    {
        tracing::debug!(path = %path.display(), "cannot cache the compiled adapter: {e}");
    }
    Ok(component)
}

/// Whether `path` belongs to this user and no one else can write it (checked, not
/// assumed: a cache directory may predate edgar or be shared).
pub(super) fn is_private(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::symlink_metadata(path)
        .is_ok_and(|m| m.uid() == rustix::process::geteuid().as_raw() && m.mode() & 0o022 == 0)
}

fn file_name(engine: &Engine, digest: &str) -> String {
    let mut h = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    let engine_key = crate::digest::hex(&h.0.finalize());
    format!(
        "{}-{}.cwasm",
        &digest[..digest.len().min(32)],
        &engine_key[..16]
    )
}

fn read(engine: &Engine, path: &Path) -> Option<Component> {
    if path.exists() && !is_private(path) {
        tracing::warn!(path = %path.display(), "ignoring an adapter artifact others can write");
        return None;
    }
    let bytes = fs::read(path).ok()?;
    let component = (bytes.len() > 32)
        .then(|| bytes.split_at(32))
        .filter(|(sum, payload)| Sha256::digest(payload).as_slice() == *sum)
        .and_then(|(_, payload)| deserialize(engine, payload).ok());
    if component.is_none() {
        tracing::debug!(path = %path.display(), "ignoring a corrupt or foreign adapter artifact");
        let _ = fs::remove_file(path);
    }
    component
}

/// Loads a precompiled artifact.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, payload: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime requires that the bytes come from `Component::serialize` of a
    // compatible engine and were not tampered with. They come from `write` below, in a
    // directory only this user can write (created 0700), and the sha256 checked in `read`
    // rules out corruption; artifacts of other versions or settings are refused by
    // wasmtime itself (and by the file name, which includes the engine hash).
    unsafe { Component::deserialize(engine, payload) }
}

fn write(component: &Component, path: &Path) -> Result<(), String> {
    let payload = component.serialize().map_err(|e| e.to_string())?;
    let mut file = Vec::with_capacity(32 + payload.len());
    file.extend_from_slice(&Sha256::digest(&payload));
    file.extend_from_slice(&payload);
    crate::paths::write_atomic(path, &file).map_err(|e| e.to_string())
}

/// Feeds `Hash` output into sha256, a hasher that is stable across runs and versions.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
