//! Servers a team gateway runs once per user (`"per_user": true`): each user's calls to
//! them go to a session of that user's own, made on their first call and holding only
//! those servers, so one user's process (its memory, its files, its state) never serves
//! another. The shared session still discovers them once for the search (their tool list
//! is the same for everyone). At most [`MAX_USERS`] users' sessions are open; the one
//! used longest ago is closed to make room, and every one is closed with the gateway.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::mcp::client::Session;
use crate::sync::lock;

/// Users whose per-user servers may run at once.
pub const MAX_USERS: usize = 64;

/// Makes a session of the per-user servers for one user (lazy: it starts nothing).
pub type MakeSession = Box<dyn Fn() -> Session + Send + Sync>;

/// Each user's session of the per-user servers.
pub struct PerUserServers {
    servers: HashSet<String>,
    make: MakeSession,
    open: Mutex<HashMap<String, (Arc<Session>, Instant)>>,
}

impl PerUserServers {
    /// `servers` (by configured name) run per user, in sessions `make` builds.
    pub fn new(servers: impl IntoIterator<Item = String>, make: MakeSession) -> PerUserServers {
        PerUserServers {
            servers: servers.into_iter().collect(),
            make,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `server` runs per user.
    pub fn serves(&self, server: &str) -> bool {
        self.servers.contains(server)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Arc<Session>, Instant)>> {
        lock(&self.open)
    }

    /// `user`'s session if they have one (nothing is made, nobody's is closed).
    pub fn existing(&self, user: &str) -> Option<Arc<Session>> {
        self.lock().get(user).map(|(session, _)| session.clone())
    }

    /// `user`'s session, made now if they have none; a user beyond [`MAX_USERS`] closes
    /// the session used longest ago (in the background: its calls in flight end).
    pub fn session_for(&self, user: &str) -> Arc<Session> {
        let mut open = self.lock();
        if let Some((session, used)) = open.get_mut(user) {
            *used = Instant::now();
            return session.clone();
        }
        if open.len() >= MAX_USERS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(u, _)| u.clone())
            && let Some((session, _)) = open.remove(&oldest)
        {
            tracing::info!(
                user = oldest,
                "closing the per-user servers of the user idle longest"
            );
            tokio::spawn(async move { session.close().await });
        }
        let session = Arc::new((self.make)());
        open.insert(user.to_owned(), (session.clone(), Instant::now()));
        session
    }

    /// How many users' sessions are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes every user's session (their processes reaped).
    pub async fn close(&self) {
        let all: Vec<Arc<Session>> = self.lock().drain().map(|(_, (s, _))| s).collect();
        crate::mcp::client::join_all(all.iter().map(|s| s.close())).await;
    }
}
