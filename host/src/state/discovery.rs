//! The discovery cache the replicas share (`edgar_discovery`): a server discovered by
//! one replica is listed and searched on the others without starting it there. Rows are
//! the cache's own entry files, keyed by the entry's file name (the server's name and
//! the digests of its config and adapter, so a changed config misses), each with an
//! HMAC under a key derived from the state key: a row written by anyone without the key
//! file is not believed. A replica that takes a row writes it as a local cache entry,
//! which the guard's checks re-admit like any other.

use std::sync::Arc;

use ring::hmac;

use super::database::{Pipelined, db_error};
use super::{Database, StateError};
use crate::mcp::cache::{Fetched, SharedCache};

/// Largest entry shared (the local cache reads at most 64 MiB).
const MAX_ENTRY_BYTES: usize = 64 << 20;

/// The shared discovery cache.
#[derive(Clone)]
pub struct SharedDiscovery {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Pipelined,
    key: hmac::Key,
}

impl std::fmt::Debug for SharedDiscovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedDiscovery")
            .field("conn", &self.inner.conn)
            .finish_non_exhaustive()
    }
}

impl SharedDiscovery {
    /// Rows in `db`, checked with `key` (see [`super::StateKey::discovery_key`]).
    pub fn new(db: Database, key: [u8; 32]) -> SharedDiscovery {
        SharedDiscovery {
            inner: Arc::new(Inner {
                conn: Pipelined::new(db),
                key: hmac::Key::new(hmac::HMAC_SHA256, &key),
            }),
        }
    }
}

impl SharedDiscovery {
    /// Forgets every shared discovery of `server` (its tools were approved: the
    /// replicas discover it again).
    pub async fn forget(&self, server: &str) -> Result<(), StateError> {
        self.inner
            .conn
            .get()
            .await?
            .execute("DELETE FROM edgar_discovery WHERE server = $1", &[&server])
            .await
            .map_err(db_error)?;
        Ok(())
    }
}

impl Inner {
    /// What the MAC covers: each part with its length, so no two rows' parts run into
    /// each other.
    fn message(file: &str, entry: &[u8], names: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(file.len() + entry.len() + names.len() + 24);
        for part in [file.as_bytes(), entry, names] {
            out.extend_from_slice(&(part.len() as u64).to_be_bytes());
            out.extend_from_slice(part);
        }
        out
    }

    fn mac(&self, file: &str, entry: &[u8], names: &[u8]) -> String {
        let tag = hmac::sign(&self.key, &Self::message(file, entry, names));
        crate::digest::hex(tag.as_ref())
    }

    async fn fetch(&self, file: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>, StateError> {
        let row = self
            .conn
            .get()
            .await?
            .query_opt(
                "SELECT entry, names, mac FROM edgar_discovery WHERE file = $1",
                &[&file],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let (entry, names, mac): (Vec<u8>, Vec<u8>, String) = (row.get(0), row.get(1), row.get(2));
        // Checked in constant time (ring's `verify`): the MAC is the row's only credential.
        let tag = crate::digest::from_hex32(&mac).unwrap_or([0; 32]);
        if hmac::verify(&self.key, &Self::message(file, &entry, &names), &tag).is_err() {
            return Err(StateError::Database(format!(
                "the shared discovery of {file} does not carry a valid MAC (written without the state key?); not believed"
            )));
        }
        Ok(Some((entry, names)))
    }

    async fn store(
        &self,
        server: &str,
        file: &str,
        entry: &[u8],
        names: &[u8],
    ) -> Result<(), StateError> {
        let mac = self.mac(file, entry, names);
        let client = self.conn.get().await?;
        client
            .execute(
                "INSERT INTO edgar_discovery (file, server, entry, names, mac) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (file) DO UPDATE
                 SET entry = excluded.entry, names = excluded.names, mac = excluded.mac, written_at = now()",
                &[&file, &server, &entry, &names, &mac],
            )
            .await
            .map_err(db_error)?;
        // Older configs of the server, left behind by a change a week ago or more.
        client
            .execute(
                "DELETE FROM edgar_discovery WHERE server = $1 AND file <> $2
                 AND written_at < now() - interval '7 days'",
                &[&server, &file],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }
}

impl SharedCache for SharedDiscovery {
    fn fetch(&self, file: &str) -> Fetched {
        let (inner, file) = (self.inner.clone(), file.to_owned());
        Box::pin(async move {
            match inner.fetch(&file).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::warn!("the shared discovery cache: {e}");
                    None
                }
            }
        })
    }

    fn store(&self, server: &str, file: &str, entry: Vec<u8>, names: Vec<u8>) {
        if entry.len() > MAX_ENTRY_BYTES {
            return;
        }
        let (inner, server, file) = (self.inner.clone(), server.to_owned(), file.to_owned());
        // Not waited for: a discovery is not held up by sharing it.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            if let Err(e) = inner.store(&server, &file, &entry, &names).await {
                tracing::warn!("a discovery could not be shared with the other replicas: {e}");
            }
        });
    }
}
