//! Where a team gateway's per-user upstream tokens are kept beyond this process (the
//! replicas' shared state): exchanged tokens (`mcp::exchange`) and users' own sign-ins
//! (`mcp::user_sign_in`). The state layer implements it; sign-in only calls it.

use std::future::Future;
use std::pin::Pin;
use std::time::SystemTime;

use super::Secret;

/// A token as a vault gives it back: the token and until when it lives.
pub type Kept = Pin<Box<dyn Future<Output = Option<(Secret, SystemTime)>> + Send>>;

/// A vault's write or erasure, done when it is: why not, if it failed.
pub type Done = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Where tokens are kept beyond this process, by upstream and user. What a vault gives
/// back for one user must never be another's (the state layer seals each token to its
/// upstream and user).
pub trait TokenVault: Send + Sync {
    fn get(&self, upstream: &str, sub: &str) -> Kept;
    /// Keeps `token` until `until` (not waited for).
    fn put(&self, upstream: &str, sub: &str, token: &Secret, until: SystemTime);
    /// Forgets a token the upstream refused (not waited for).
    fn forget(&self, upstream: &str, sub: &str);
    /// Keeps a user's own sign-in until `until`, done when the future is: every
    /// replica that asks after that gets it.
    fn keep(&self, upstream: &str, sub: &str, token: &Secret, until: SystemTime) -> Done;
    /// Erases a user's token for good (a sign-out), done when the future is: every
    /// replica that asks after that is told there is none.
    fn erase(&self, upstream: &str, sub: &str) -> Done;
}
