//! Where a secret lives: the OS keyring (a cargo feature, on by default), or a file the
//! user explicitly opted into, or memory (tests). `available` says honestly why there is
//! no store; there is never a silent fallback to plain text.
//!
//! Every keyring call runs on a blocking thread with a timeout: a locked keyring can wait
//! for a password prompt for ever.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::vault::TokenVault;
use super::{AuthError, Secret};
use crate::sync::lock;

/// The keyring service every edgar secret is stored under.
pub const SERVICE: &str = "edgar";
/// Longest a keyring call may take.
const KEYRING_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest secret stored (a JWT with claims fits; Windows caps entries at 2,560 bytes, so
/// tokens are stored one per entry, never combined).
const MAX_SECRET_BYTES: usize = 64 << 10;

/// Which store to use.
#[derive(Debug, Clone)]
pub enum Store {
    /// The OS keyring (Secret Service on Linux).
    Keyring,
    /// A 0600 JSON file, chosen explicitly in config for headless machines.
    File(PathBuf),
    /// In memory, for tests and for a session that must not persist anything.
    Memory(Arc<Mutex<HashMap<String, String>>>),
    /// One team gateway user's own sign-ins to upstream servers.
    User(UserSecrets),
}

/// How long a user's sign-in is kept in a vault: its refresh token may live that long.
const USER_KEPT: Duration = Duration::from_secs(30 * 86_400);

/// A team gateway user's secrets: in the replicas' vault when there is one (sealed
/// there to the entry and the user, so it is never another's), else in this process's
/// memory. Never both: with a vault, the vault alone has the last word.
#[derive(Clone)]
pub struct UserSecrets {
    sub: Arc<str>,
    held: Held,
}

#[derive(Clone)]
enum Held {
    Memory(Arc<Mutex<HashMap<String, String>>>),
    Vault(Arc<dyn TokenVault>),
}

impl std::fmt::Debug for UserSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSecrets")
            .field("sub", &self.sub)
            .field("vault", &self.shared())
            .finish_non_exhaustive()
    }
}

impl UserSecrets {
    pub fn new(sub: &str, vault: Option<Arc<dyn TokenVault>>) -> UserSecrets {
        UserSecrets {
            sub: sub.into(),
            held: match vault {
                Some(v) => Held::Vault(v),
                None => Held::Memory(Arc::default()),
            },
        }
    }

    /// The vault's word when there is one (another replica may have signed the user in
    /// anew, or out), else this process's memory. A vault that cannot be reached says
    /// none: the user is asked to sign in rather than sent upstream on a token that
    /// may be signed out.
    async fn read(&self, key: &str) -> Option<Secret> {
        match &self.held {
            Held::Memory(m) => lock(m).get(key).cloned().map(Secret::new),
            Held::Vault(v) => v.get(key, &self.sub).await.map(|(secret, _)| secret),
        }
    }

    /// Keeps the user's sign-in, waiting for the vault: a replica asked next finds it.
    async fn write(&self, key: &str, secret: &Secret) -> Result<(), AuthError> {
        match &self.held {
            Held::Memory(m) => {
                lock(m).insert(key.to_owned(), secret.expose().to_owned());
                Ok(())
            }
            Held::Vault(v) => {
                let until = std::time::SystemTime::now() + USER_KEPT;
                v.keep(key, &self.sub, secret, until)
                    .await
                    .map_err(|e| AuthError::Store(format!("the sign-in is not shared: {e}")))
            }
        }
    }

    /// Erases the user's sign-in, waiting for the vault.
    async fn erase(&self, key: &str) -> Result<(), AuthError> {
        match &self.held {
            Held::Memory(m) => {
                lock(m).remove(key);
                Ok(())
            }
            Held::Vault(v) => v
                .erase(key, &self.sub)
                .await
                .map_err(|e| AuthError::Store(format!("the shared sign-in stays: {e}"))),
        }
    }

    /// Whether other processes (replicas) share these secrets.
    fn shared(&self) -> bool {
        matches!(self.held, Held::Vault(_))
    }
}

impl Store {
    /// Where secrets go, for messages.
    pub fn describe(&self) -> String {
        match self {
            Store::Keyring => format!("the OS keyring (service \"{SERVICE}\")"),
            Store::File(p) => format!("the file {}", p.display()),
            Store::Memory(_) => "memory (not kept)".into(),
            Store::User(u) if u.shared() => "the team gateway's shared state (sealed)".into(),
            Store::User(_) => "this team gateway's memory (not kept)".into(),
        }
    }

    /// Whether other processes (a team gateway's replicas) may change these secrets
    /// while this one holds them: a held sign-in is checked against the store again.
    pub fn shared(&self) -> bool {
        matches!(self, Store::User(u) if u.shared())
    }

    pub fn memory() -> Store {
        Store::Memory(Arc::default())
    }

    /// `Ok` when secrets can be stored; otherwise why not, in words a user can act on.
    pub async fn available(&self) -> Result<(), AuthError> {
        match self {
            Store::Keyring => keyring_available().await,
            Store::File(path) => {
                tracing::warn!(path = %path.display(), "secrets are stored in a plain file, as configured (\"credential_store\": \"file\")");
                Ok(())
            }
            Store::Memory(_) | Store::User(_) => Ok(()),
        }
    }

    pub async fn read(&self, key: &str) -> Result<Option<Secret>, AuthError> {
        match self {
            Store::Keyring => keyring_call(key, Op::Read).await,
            Store::File(path) => Ok(file::load(path)?.remove(key).map(Secret::new)),
            Store::Memory(m) => Ok(lock(m).get(key).cloned().map(Secret::new)),
            Store::User(u) => Ok(u.read(key).await),
        }
    }

    pub async fn write(&self, key: &str, secret: &Secret) -> Result<(), AuthError> {
        if secret.expose().len() > MAX_SECRET_BYTES {
            return Err(AuthError::Store(format!(
                "a secret over {MAX_SECRET_BYTES} bytes is not stored"
            )));
        }
        match self {
            Store::Keyring => keyring_call(key, Op::Write(secret.clone()))
                .await
                .map(|_| ()),
            Store::File(path) => {
                let _lock = file::lock(path)?;
                let mut all = file::load(path)?;
                all.insert(key.to_owned(), secret.expose().to_owned());
                file::save(path, &all)
            }
            Store::Memory(m) => {
                lock(m).insert(key.to_owned(), secret.expose().to_owned());
                Ok(())
            }
            Store::User(u) => u.write(key, secret).await,
        }
    }

    /// Removes the secret and checks it is really gone.
    pub async fn erase(&self, key: &str) -> Result<(), AuthError> {
        match self {
            Store::Keyring => {
                keyring_call(key, Op::Erase).await?;
            }
            Store::File(path) => {
                let _lock = file::lock(path)?;
                let mut all = file::load(path)?;
                if all.remove(key).is_some() {
                    file::save(path, &all)?;
                }
            }
            Store::Memory(m) => {
                lock(m).remove(key);
            }
            // Done when the vault has it erased.
            Store::User(u) => return u.erase(key).await,
        }
        match self.read(key).await? {
            None => Ok(()),
            Some(_) => Err(AuthError::Store(format!(
                "the secret '{key}' is still there after deleting it"
            ))),
        }
    }
}

enum Op {
    Read,
    Write(Secret),
    Erase,
}

#[cfg(feature = "keyring")]
async fn keyring_available() -> Result<(), AuthError> {
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none()
        && !std::path::Path::new(&format!(
            "/run/user/{}/bus",
            rustix::process::getuid().as_raw()
        ))
        .exists()
    {
        // Where the opt-in goes: the user's config.json, as JSON.
        let file = crate::paths::config_dir().map_or_else(
            || "edgar's config.json".to_owned(),
            |d| d.join("config.json").display().to_string(),
        );
        return Err(AuthError::NoStore(format!(
            "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset), so no Secret Service keyring; \
             run inside a desktop session or start gnome-keyring, or put \"credential_store\": \"file\" \
             in {file} (a 0600 file, for headless machines)"
        )));
    }
    let status = blocking(|| match keyring::Entry::store_status() {
        Ok(()) => Ok(()),
        Err(e) => Err(describe(e)),
    })
    .await?;
    status.map_err(AuthError::NoStore)
}

#[cfg(not(feature = "keyring"))]
async fn keyring_available() -> Result<(), AuthError> {
    Err(AuthError::NoStore(
        "this edgar was built without the `keyring` feature".into(),
    ))
}

#[cfg(feature = "keyring")]
async fn keyring_call(key: &str, op: Op) -> Result<Option<Secret>, AuthError> {
    keyring_available().await?;
    let key = key.to_owned();
    let result = blocking(move || {
        let entry = keyring::Entry::new(SERVICE, &key).map_err(|e| describe(&e))?;
        match op {
            Op::Read => match entry.get_password() {
                Ok(v) => Ok(Some(Secret::new(v))),
                Err(keyring::Error::NoEntry) => Ok(None),
                Err(e) => Err(describe(&e)),
            },
            Op::Write(s) => entry
                .set_password(s.expose())
                .map(|()| None)
                .map_err(|e| describe(&e)),
            Op::Erase => match entry.delete_credential() {
                Ok(()) | Err(keyring::Error::NoEntry) => Ok(None),
                Err(e) => Err(describe(&e)),
            },
        }
    })
    .await?;
    result.map_err(AuthError::Store)
}

#[cfg(not(feature = "keyring"))]
async fn keyring_call(_key: &str, _op: Op) -> Result<Option<Secret>, AuthError> {
    keyring_available().await.map(|()| None)
}

/// A keyring error in words, without anything secret (keyring errors carry none).
#[cfg(feature = "keyring")]
fn describe(e: &keyring::Error) -> String {
    match e {
        keyring::Error::NoStorageAccess(_) => {
            "the keyring refused access (is it locked? an unlock prompt cannot be shown here)"
                .into()
        }
        keyring::Error::NoDefaultStore => {
            "no Secret Service provider answered on the session bus".into()
        }
        keyring::Error::PlatformFailure(inner) => {
            let text = inner.to_string();
            if text.contains("ServiceUnknown") || text.contains("org.freedesktop.secrets") {
                "no Secret Service provider (gnome-keyring, KeePassXC, KWallet) runs on the session bus".into()
            } else {
                format!("the keyring failed: {}", crate::text::shown_message(&text))
            }
        }
        other => crate::text::shown_message(&other.to_string()),
    }
}

#[cfg(feature = "keyring")]
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, AuthError> {
    match tokio::time::timeout(KEYRING_TIMEOUT, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(AuthError::Store(format!("the keyring task failed: {e}"))),
        Err(_) => Err(AuthError::Store(format!(
            "the keyring did not answer within {} s (a locked keyring waiting for a password prompt?)",
            KEYRING_TIMEOUT.as_secs()
        ))),
    }
}

/// The explicit opt-in file store: one JSON object, mode 0600, atomic writes.
mod file {
    use std::collections::HashMap;
    use std::path::Path;

    use crate::auth::AuthError;

    pub fn load(path: &Path) -> Result<HashMap<String, String>, AuthError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                AuthError::Store(format!(
                    "{} is not a valid secrets file: {e}",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HashMap::new()),
            Err(e) => Err(AuthError::Store(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
        }
    }

    /// Created 0600 (never narrowed afterwards), replaced atomically.
    pub fn save(path: &Path, all: &HashMap<String, String>) -> Result<(), AuthError> {
        let bytes = serde_json::to_vec(all).map_err(|e| AuthError::Store(e.to_string()))?;
        crate::paths::write_atomic(path, &bytes)
            .map_err(|e| AuthError::Store(format!("cannot write {}: {e}", path.display())))
    }

    /// Held across a whole read-modify-write, so two processes refreshing two servers'
    /// tokens never lose one of the rotated refresh tokens.
    pub fn lock(path: &Path) -> Result<std::fs::File, AuthError> {
        crate::paths::lock_file(&path.with_extension("lock"))
            .map_err(|e| AuthError::Store(format!("cannot lock {}: {e}", path.display())))
    }
}

/// A vault shared by replicas, in memory (for tests).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct MemoryVault(Mutex<HashMap<(String, String), String>>);

#[cfg(test)]
impl TokenVault for MemoryVault {
    fn get(&self, upstream: &str, sub: &str) -> crate::auth::vault::Kept {
        let kept = lock(&self.0).get(&(upstream.into(), sub.into())).cloned();
        Box::pin(async move { kept.map(|t| (Secret::new(t), std::time::SystemTime::now())) })
    }
    fn put(&self, upstream: &str, sub: &str, token: &Secret, _: std::time::SystemTime) {
        let row = (upstream.into(), sub.into());
        lock(&self.0).insert(row, token.expose().to_owned());
    }
    fn forget(&self, upstream: &str, sub: &str) {
        lock(&self.0).remove(&(upstream.into(), sub.into()));
    }
    fn keep(
        &self,
        upstream: &str,
        sub: &str,
        token: &Secret,
        until: std::time::SystemTime,
    ) -> crate::auth::vault::Done {
        self.put(upstream, sub, token, until);
        Box::pin(async { Ok(()) })
    }
    fn erase(&self, upstream: &str, sub: &str) -> crate::auth::vault::Done {
        self.forget(upstream, sub);
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_and_file_stores_round_trip_and_erase() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for store in [Store::memory(), Store::File(d.path().join("secrets.json"))] {
            store.available().await.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(store.read("k").await.ok().flatten(), None);
            store
                .write("k", &Secret::new("v1"))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            store
                .write("k", &Secret::new("v2"))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                store.read("k").await.ok().flatten(),
                Some(Secret::new("v2"))
            );
            store.erase("k").await.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(store.read("k").await.ok().flatten(), None);
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.path().join("secrets.json"))
            .map(|m| m.permissions().mode() & 0o777)
            .ok();
        assert_eq!(mode, Some(0o600));
    }

    /// Two replicas' stores of one user over one vault: what one signs in or out is what
    /// the other reads next, whatever it held in memory; another user reads nothing.
    #[tokio::test]
    async fn a_users_sign_in_over_a_vault_is_the_vaults_on_every_replica() {
        let vault: Arc<dyn TokenVault> = Arc::new(MemoryVault::default());
        let replica = || Store::User(UserSecrets::new("ada", Some(vault.clone())));
        let (one, two) = (replica(), replica());
        assert!(one.shared() && !Store::memory().shared());
        let read = |s: &Store| {
            let s = s.clone();
            async move { s.read("acct").await.ok().flatten() }
        };
        one.write("acct", &Secret::new("t1"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&two).await, Some(Secret::new("t1")));
        // Signed in anew at one: the other reads the new sign-in, not what it held.
        one.write("acct", &Secret::new("t2"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&two).await, Some(Secret::new("t2")));
        // Signed out at one: gone at the other too.
        one.erase("acct").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&two).await, None);
        assert_eq!(read(&one).await, None);
        two.write("acct", &Secret::new("t3"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let bob = Store::User(UserSecrets::new("bob", Some(vault.clone())));
        assert_eq!(read(&bob).await, None);
    }
}
