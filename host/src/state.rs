//! What a team gateway's replicas share (`"state": "postgres://..."` in its config): the
//! audit trail, one chain whichever replica writes ([`trail`]), what each user's
//! searches found ([`found`]), the servers' discoveries ([`discovery`]), the tools'
//! pins ([`pins`]) and each user's exchanged upstream tokens, sealed ([`tokens`]), kept
//! in PostgreSQL so any replica can answer any request
//! and a replica lost loses nothing recorded; and what one replica tells the others at
//! once ([`notices`]). The key every replica reads from `"state_key_file"` keys that
//! chain.
//!
//! This layer knows PostgreSQL and the key; it knows nothing of HTTP, MCP or users
//! beyond the events it is given (the trust layer says what a line is, [`trail`] where
//! it goes).

use std::path::{Path, PathBuf};

pub mod database;
pub mod discovery;
pub mod found;
pub mod notices;
pub mod pins;
pub mod tokens;
pub mod trail;

pub use database::Database;
pub use discovery::SharedDiscovery;
pub use found::SharedFound;
pub use notices::Notices;
pub use pins::SharedPinFiles;
pub use tokens::SharedTokens;
pub use trail::Trail;

use crate::trust::audit::AuditKey;

/// What keeps shared state from being reached, read or believed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The state key file is missing, readable by others, or not a key.
    #[error("the state key file {}: {reason}", path.display())]
    Key { path: PathBuf, reason: String },
    /// The `state` URL is not one edgar can use.
    #[error("the state URL: {0}")]
    Url(String),
    /// The database did not answer, or refused (the URL's password is never shown).
    #[error("PostgreSQL: {0}")]
    Database(String),
    /// The shared audit trail does not verify: the first bad line, and why.
    #[error("the shared audit trail (PostgreSQL table edgar_audit): line {line}: {reason}")]
    Tampered { line: usize, reason: String },
}

/// The 32-byte key replicas share, read from `"state_key_file"`. Never shown.
pub struct StateKey([u8; 32]);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(***)")
    }
}

/// Longest key file read: 64 hex digits and a newline, with room for a comment-free
/// editor's whitespace.
const MAX_KEY_FILE_BYTES: u64 = 256;

impl StateKey {
    /// Reads the key: 64 hex digits (`openssl rand -hex 32`), in a file only its owner
    /// may read or write (mode 0600 or stricter).
    pub fn load(path: &Path) -> Result<StateKey, StateError> {
        use std::os::unix::fs::MetadataExt;
        let bad = |reason: String| StateError::Key {
            path: path.to_owned(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
        if meta.mode() & 0o077 != 0 {
            return Err(bad(format!(
                "its mode is {:o}: others may read it (chmod 600 it)",
                meta.mode() & 0o777
            )));
        }
        let bytes = crate::paths::read_capped(path, MAX_KEY_FILE_BYTES)
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("no such file".into()))?;
        let text = std::str::from_utf8(&bytes).map_err(|_| bad("not text".into()))?;
        crate::digest::from_hex32(text)
            .map(StateKey)
            .ok_or_else(|| bad("not a key: 64 hex digits expected (openssl rand -hex 32)".into()))
    }

    /// The key for the shared audit chain: derived (HKDF-SHA256), so it is never the key
    /// anything else uses.
    pub fn audit_key(&self) -> AuditKey {
        AuditKey::new(self.derive(b"edgar shared audit chain v1"))
    }

    /// The key shared discovery rows are authenticated with (derived, like the above).
    pub fn discovery_key(&self) -> [u8; 32] {
        self.derive(b"edgar shared discovery v1")
    }

    /// The key shared pin files are authenticated with.
    pub fn pins_key(&self) -> [u8; 32] {
        self.derive(b"edgar shared pins v1")
    }

    /// The AES-256-GCM key shared upstream tokens are sealed with.
    pub fn tokens_key(&self) -> [u8; 32] {
        self.derive(b"edgar shared upstream tokens v1")
    }

    /// The AES-256-GCM key clients' session ids are sealed with, so any replica opens
    /// what another handed out.
    pub fn sessions_key(&self) -> [u8; 32] {
        self.derive(b"edgar client sessions v1")
    }

    /// The AES-256-GCM key a user's sign-in in progress is sealed with (in its
    /// authorization request's `state`), so any replica finishes what another began.
    pub fn sign_in_key(&self) -> [u8; 32] {
        self.derive(b"edgar user sign-in state v1")
    }

    fn derive(&self, label: &[u8]) -> [u8; 32] {
        struct Len32;
        impl ring::hkdf::KeyType for Len32 {
            fn len(&self) -> usize {
                32
            }
        }
        let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"edgar state key");
        let prk = salt.extract(&self.0);
        let mut out = [0u8; 32];
        let info = [label];
        // Both can fail only for a length over 255 * 32 bytes; ours is 32.
        if let Ok(okm) = prk.expand(&info, Len32) {
            let _ = okm.fill(&mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn key_file(text: &str, mode: u32) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = d.path().join("state.key");
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("{e}"));
        (d, p)
    }

    #[test]
    fn a_private_hex_key_loads_and_derives_a_distinct_audit_key() {
        let hex = "ab".repeat(32);
        let (_d, p) = key_file(&format!("{hex}\n"), 0o600);
        let key = StateKey::load(&p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format!("{key:?}"), "StateKey(***)");
        let audit = key.audit_key().to_hex();
        assert_ne!(
            audit, hex,
            "the audit key is derived, not the state key itself"
        );
        assert_eq!(
            audit,
            key.audit_key().to_hex(),
            "and the same on every replica"
        );
        assert_eq!(audit.len(), 64);
        assert_ne!(
            crate::digest::hex(&key.discovery_key()),
            audit,
            "each use has its own key"
        );
    }

    #[test]
    fn a_key_file_others_may_read_or_that_holds_no_key_is_refused() {
        let hex = "ab".repeat(32);
        for (text, mode, says) in [
            (hex.as_str(), 0o644, "chmod 600"),
            (hex.as_str(), 0o640, "chmod 600"),
            ("not a key", 0o600, "64 hex digits"),
            (&hex[..62], 0o600, "64 hex digits"),
            ("", 0o600, "64 hex digits"),
        ] {
            let (_d, p) = key_file(text, mode);
            let e = StateKey::load(&p)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(says), "{mode:o} {text:?}: {e}");
            assert!(!e.contains(&hex), "the key is never shown: {e}");
        }
        let e = StateKey::load(Path::new("/nonexistent/state.key"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("/nonexistent/state.key"), "{e}");
    }
}
