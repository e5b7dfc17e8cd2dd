//! Per-user upstream tokens the replicas share (`edgar_tokens`): a token one replica
//! exchanged for a user is reused by the others until it expires. Each is sealed with
//! AES-256-GCM under a key derived from the state key, its upstream and user bound in as
//! associated data: a row copied to another user (or upstream) does not open, so a
//! token cannot cross users even by someone who can write the table. A row that does
//! not open is a miss (the replica exchanges again); rotating the state key turns every
//! row into one.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::database::{Pipelined, db_error};
use super::{Database, StateError};
use crate::auth::Secret;
use crate::auth::mcp::exchange::{Kept, TokenVault};
use crate::auth::vault::Done;
use crate::seal::Sealer;

/// The sealed tokens table.
#[derive(Clone)]
pub struct SharedTokens {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Pipelined,
    key: Sealer,
}

impl std::fmt::Debug for SharedTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTokens")
            .field("conn", &self.inner.conn)
            .finish_non_exhaustive()
    }
}

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl SharedTokens {
    /// Rows in `db`, sealed with `key` (see [`super::StateKey::tokens_key`]).
    pub fn new(db: Database, key: [u8; 32]) -> Result<SharedTokens, StateError> {
        Ok(SharedTokens {
            inner: Arc::new(Inner {
                conn: Pipelined::new(db),
                key: Sealer::new(&key),
            }),
        })
    }
}

impl Inner {
    /// The token sealed to `upstream` and `sub` (so a row moved to another user never
    /// opens for them): its nonce and the rest, as the table keeps them.
    fn seal(&self, upstream: &str, sub: &str, token: &Secret) -> Option<([u8; 12], Vec<u8>)> {
        let sealed = self.key.seal(&[upstream, sub], token.expose().as_bytes())?;
        let (nonce, rest) = sealed.split_at_checked(12)?;
        Some((nonce.try_into().ok()?, rest.to_vec()))
    }

    fn open(&self, upstream: &str, sub: &str, nonce: &[u8], sealed: Vec<u8>) -> Option<Secret> {
        let whole = [nonce, &sealed].concat();
        let plain = self.key.open(&[upstream, sub], &whole)?;
        String::from_utf8(plain).ok().map(Secret::new)
    }

    async fn get(
        &self,
        upstream: &str,
        sub: &str,
    ) -> Result<Option<(Secret, SystemTime)>, StateError> {
        let row = self
            .conn
            .get()
            .await?
            .query_opt(
                "SELECT nonce, sealed, expires_ms FROM edgar_tokens
                 WHERE upstream = $1 AND principal = $2 AND expires_ms > $3",
                &[&upstream, &sub, &millis(SystemTime::now())],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let (nonce, sealed, expires): (Vec<u8>, Vec<u8>, i64) =
            (row.get(0), row.get(1), row.get(2));
        let Some(token) = self.open(upstream, sub, &nonce, sealed) else {
            tracing::warn!(
                user = sub,
                "a shared upstream token does not open for this user (sealed under another key, or moved); exchanging again"
            );
            return Ok(None);
        };
        let until = UNIX_EPOCH + Duration::from_millis(u64::try_from(expires).unwrap_or(0));
        Ok(Some((token, until)))
    }

    async fn put(
        &self,
        upstream: &str,
        sub: &str,
        nonce: &[u8],
        sealed: &[u8],
        until: i64,
    ) -> Result<(), StateError> {
        self.conn
            .get()
            .await?
            .execute(
                "INSERT INTO edgar_tokens (upstream, principal, nonce, sealed, expires_ms)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (upstream, principal) DO UPDATE
                 SET nonce = excluded.nonce, sealed = excluded.sealed, expires_ms = excluded.expires_ms",
                &[&upstream, &sub, &nonce, &sealed, &until],
            )
            .await
            .map_err(db_error)?;
        // Expired rows of anyone, now and then (cheap: the table is one row per user and
        // upstream).
        self.conn
            .get()
            .await?
            .execute(
                "DELETE FROM edgar_tokens WHERE expires_ms < $1",
                &[&millis(SystemTime::now())],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn forget(&self, upstream: &str, sub: &str) -> Result<(), StateError> {
        self.conn
            .get()
            .await?
            .execute(
                "DELETE FROM edgar_tokens WHERE upstream = $1 AND principal = $2",
                &[&upstream, &sub],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }
}

/// Runs `work` on the current runtime without waiting for it, logging its failure.
fn spawn_logged(
    what: &'static str,
    work: impl std::future::Future<Output = Result<(), StateError>> + Send + 'static,
) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            if let Err(e) = work.await {
                tracing::warn!("{what}: {e}");
            }
        });
    }
}

impl TokenVault for SharedTokens {
    fn get(&self, upstream: &str, sub: &str) -> Kept {
        let (inner, upstream, sub) = (self.inner.clone(), upstream.to_owned(), sub.to_owned());
        Box::pin(async move {
            match inner.get(&upstream, &sub).await {
                Ok(kept) => kept,
                Err(e) => {
                    tracing::warn!("the shared upstream tokens: {e}");
                    None
                }
            }
        })
    }

    fn put(&self, upstream: &str, sub: &str, token: &Secret, until: SystemTime) {
        let Some((nonce, sealed)) = self.inner.seal(upstream, sub, token) else {
            return;
        };
        let (inner, upstream, sub) = (self.inner.clone(), upstream.to_owned(), sub.to_owned());
        spawn_logged("an upstream token could not be shared", async move {
            inner
                .put(&upstream, &sub, &nonce, &sealed, millis(until))
                .await
        });
    }

    fn forget(&self, upstream: &str, sub: &str) {
        let (inner, upstream, sub) = (self.inner.clone(), upstream.to_owned(), sub.to_owned());
        spawn_logged(
            "a refused upstream token could not be forgotten",
            async move { inner.forget(&upstream, &sub).await },
        );
    }

    fn keep(&self, upstream: &str, sub: &str, token: &Secret, until: SystemTime) -> Done {
        let sealed = self.inner.seal(upstream, sub, token);
        let (inner, upstream, sub) = (self.inner.clone(), upstream.to_owned(), sub.to_owned());
        Box::pin(async move {
            let (nonce, sealed) = sealed.ok_or("the OS random source failed")?;
            inner
                .put(&upstream, &sub, &nonce, &sealed, millis(until))
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn erase(&self, upstream: &str, sub: &str) -> Done {
        let (inner, upstream, sub) = (self.inner.clone(), upstream.to_owned(), sub.to_owned());
        Box::pin(async move {
            inner
                .forget(&upstream, &sub)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> SharedTokens {
        let db = Database::new("postgres://u@127.0.0.1:1/d").unwrap_or_else(|e| panic!("{e}"));
        SharedTokens::new(db, [9; 32]).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_sealed_token_opens_only_for_its_upstream_and_user() {
        let t = tokens();
        let secret = Secret::new("up-token-for-ada");
        let (nonce, sealed) = t
            .inner
            .seal("up\nhttps://u/mcp", "ada", &secret)
            .unwrap_or_else(|| panic!("sealed"));
        assert!(
            !sealed.windows(8).any(|w| w == b"up-token"),
            "the token is not stored in the clear"
        );
        let opened = t
            .inner
            .open("up\nhttps://u/mcp", "ada", &nonce, sealed.clone());
        assert_eq!(
            opened.map(|s| s.expose().to_owned()),
            Some("up-token-for-ada".into())
        );
        assert!(
            t.inner
                .open("up\nhttps://u/mcp", "bob", &nonce, sealed.clone())
                .is_none()
        );
        assert!(
            t.inner
                .open("other\nhttps://u/mcp", "ada", &nonce, sealed.clone())
                .is_none()
        );
        let mut flipped = sealed.clone();
        flipped[0] ^= 1;
        assert!(
            t.inner
                .open("up\nhttps://u/mcp", "ada", &nonce, flipped)
                .is_none()
        );
        let other = SharedTokens::new(
            Database::new("postgres://u@127.0.0.1:1/d").unwrap_or_else(|e| panic!("{e}")),
            [8; 32],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            other
                .inner
                .open("up\nhttps://u/mcp", "ada", &nonce, sealed)
                .is_none(),
            "another key (a rotated one) opens nothing: a miss, exchanged again"
        );
    }
}
