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

/// The key file beside the trail, for a machine without a credential store (CI, a
/// container, headless Linux): 64 hex digits, 0600.
pub const FILE: &str = "audit.key";

/// A key source over `store`: the stored key, or (when `create`) a new random one,
/// stored first. `None` when the store cannot be reached or holds something else.
pub fn source(store: Store) -> KeySource {
    Arc::new(move |create| from_store(&store, create))
}

/// A key source for the trail in `state`: its key file when there is one (once made,
/// the trail's key for good, so a keyring that is slow one day never switches keys
/// mid-chain), else the key in `store`, else (when `create`) a new key file. Every
/// machine gets a keyed trail.
pub fn source_or_file(store: Option<Store>, state: &std::path::Path) -> KeySource {
    let file = state.join(FILE);
    Arc::new(move |create| {
        if let Some(key) = read_file(&file) {
            return Some(key);
        }
        if let Some(store) = &store
            && let Some(key) = from_store(store, create)
        {
            return Some(key);
        }
        if !create {
            return None;
        }
        make_file(&file)
    })
}

/// The key in `file`, if it holds one (a file of anything else is not believed).
fn read_file(file: &std::path::Path) -> Option<AuditKey> {
    let bytes = crate::paths::read_regular(file, 256).ok()??;
    AuditKey::from_hex(String::from_utf8_lossy(&bytes).trim())
}

/// Makes `file` with a new key (0600, never replacing one), then reads back the key
/// that stayed, so two processes racing to make it agree.
fn make_file(file: &std::path::Path) -> Option<AuditKey> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    let key = AuditKey::new(bytes);
    if let Some(dir) = file.parent() {
        use std::os::unix::fs::DirBuilderExt;
        // The state directory is edgar's alone, as when its other files make it.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .ok()?;
    }
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file);
    if let Ok(mut f) = made {
        f.write_all(key.to_hex().as_bytes()).ok()?;
        f.sync_all().ok()?;
    }
    read_file(file)
}

/// The stored key, made first when missing and `create`.
fn from_store(store: &Store, create: bool) -> Option<AuditKey> {
    {
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
    }
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

    #[test]
    fn without_a_store_the_key_is_a_private_file_that_stays_the_key() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let source = source_or_file(None, dir.path());
        assert!(source(false).is_none(), "verification never makes a key");
        let made = source(true).unwrap_or_else(|| panic!("no key made"));
        let file = dir.path().join(FILE);
        let mode = std::fs::metadata(&file)
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
            .unwrap_or_default();
        assert_eq!(mode, 0o600);
        // A store that appears later does not switch the trail's key.
        let later = source_or_file(Some(Store::memory()), dir.path());
        let again = later(true).unwrap_or_else(|| panic!("the key was not kept"));
        assert_eq!(made.to_hex(), again.to_hex());
        // A file that holds no key is not believed, and not replaced.
        std::fs::write(&file, "not a key").unwrap_or_else(|e| panic!("{e}"));
        assert!(source_or_file(None, dir.path())(true).is_none());
    }
}
