//! The audit trail's key, kept in the credential store (the OS keyring by default) so
//! that a process which can edit edgar's state files cannot recompute the chain. Read at
//! most once per process, when the first audit line is written or the trail verified.

use std::sync::Arc;
use std::time::Duration;

use super::Secret;
use super::store::Store;
use crate::trust::audit::{AuditKey, KeySource};

/// The store entry that holds the key (hex).
pub const ENTRY: &str = "audit-chain-key";
/// Longest the store may take to answer (a locked keyring waiting for a prompt would
/// otherwise hold every command); then the trail is written unkeyed, or, if it is keyed
/// already, not continued (the command says so).
const WAIT: Duration = Duration::from_secs(2);

/// A key source over `store`: the stored key, or (when `create`) a new random one,
/// stored first. `None` when the store cannot be reached or holds something else.
pub fn source(store: Store) -> KeySource {
    Arc::new(move |create| {
        let store = store.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        // Its own thread and runtime: the caller may be on an async worker or not.
        std::thread::spawn(move || {
            let got = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()
                .and_then(|rt| rt.block_on(fetch(&store, create)));
            let _ = tx.send(got);
        });
        rx.recv_timeout(WAIT).ok().flatten()
    })
}

async fn fetch(store: &Store, create: bool) -> Option<AuditKey> {
    match store.read(ENTRY).await {
        Ok(Some(secret)) => {
            let key = AuditKey::from_hex(secret.expose());
            if key.is_none() {
                tracing::warn!(
                    "the stored audit key is not 64 hex digits; the trail stays as it is"
                );
            }
            return key;
        }
        Ok(None) => {}
        Err(e) => {
            tracing::debug!("no audit key: {e}");
            return None;
        }
    }
    if !create {
        return None;
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    let key = AuditKey::new(bytes);
    store.write(ENTRY, &Secret::new(key.to_hex())).await.ok()?;
    // Read back, so two processes racing to create it agree on the one that stayed.
    match store.read(ENTRY).await {
        Ok(Some(secret)) => AuditKey::from_hex(secret.expose()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_and_read_back_after() {
        let store = Store::memory();
        let source = source(store.clone());
        assert!(source(false).is_none(), "verification never makes a key");
        let made = source(true).unwrap_or_else(|| panic!("no key made"));
        let again = source(false).unwrap_or_else(|| panic!("the key was not kept"));
        assert_eq!(made.to_hex(), again.to_hex());
        assert_eq!(format!("{made:?}"), "AuditKey(***)");
    }
}
