//! A discovery cache shared beyond this machine (a team gateway's replicas, through the
//! `state` layer): the entry files a discovery writes are handed to it too, and a
//! replica without an entry asks it before starting the server. What comes back is
//! written as a local entry and read as one, re-admitted through the guard's checks
//! like any cache file.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{Entry, ToolCache, remove_indexes};
use crate::config::ServerSpec;

/// An entry's two files (the full entry, the names), as fetched.
pub type Fetched = Pin<Box<dyn Future<Output = Option<(Vec<u8>, Vec<u8>)>> + Send>>;

/// Where entries are shared.
pub trait SharedCache: Send + Sync {
    /// The files stored under `file` (the full entry's file name: the server's name and
    /// the digests of its config and adapter), if any (and intact).
    fn fetch(&self, file: &str) -> Fetched;
    /// Stores an entry's files for `server` (not waited for; a failure is logged).
    fn store(&self, server: &str, file: &str, entry: Vec<u8>, names: Vec<u8>);
}

/// The shared cache a [`ToolCache`] hands its entries to.
#[derive(Clone)]
pub(super) struct Shared(pub(super) Arc<dyn SharedCache>);

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedCache")
    }
}

impl ToolCache {
    /// This cache, also handing its entries to `shared` and asking it on a miss.
    pub fn with_shared(mut self, shared: Option<Arc<dyn SharedCache>>) -> ToolCache {
        self.shared = shared.map(Shared);
        self
    }

    /// [`ToolCache::read`], or on a miss the shared cache's entry for the same server,
    /// config and adapter, written here first.
    pub async fn read_shared(&self, spec: &ServerSpec, adapter: &str) -> Option<Entry> {
        if let Some(entry) = self.read(spec, adapter) {
            return Some(entry);
        }
        let shared = self.shared.as_ref()?;
        let (full, names, dir) = (
            self.path(spec, adapter, ".json")?,
            self.path(spec, adapter, ".names.json")?,
            self.dir.as_ref()?,
        );
        let file = full.file_name()?.to_str()?.to_owned();
        let (entry, list) = shared.0.fetch(&file).await?;
        self.remove_stale(dir, spec, adapter);
        remove_indexes(dir);
        let written = crate::paths::write_atomic(&full, &entry)
            .and_then(|()| crate::paths::write_atomic(&names, &list));
        if let Err(e) = written {
            tracing::warn!(
                server = spec.name,
                "a shared discovery could not be kept: {e}"
            );
            return None;
        }
        let read = self.read(spec, adapter);
        if read.is_some() {
            tracing::debug!(server = spec.name, "discovery taken from the shared cache");
        }
        read
    }

    /// Hands a just written entry's files to the shared cache, if there is one.
    pub(super) fn share(
        &self,
        spec: &ServerSpec,
        file: &std::path::Path,
        entry: Vec<u8>,
        names: Vec<u8>,
    ) {
        if let (Some(shared), Some(file)) =
            (&self.shared, file.file_name().and_then(|f| f.to_str()))
        {
            shared.0.store(&spec.name, file, entry, names);
        }
    }
}
