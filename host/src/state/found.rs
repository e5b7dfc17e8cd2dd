//! What each user's searches found, shared by the replicas: a user who searched on one
//! replica calls the tool on another, or lists their tools there, without searching
//! again. Names only (each replica has the tools themselves from its own catalog),
//! keyed by the user's subject. Queries share one pipelined connection, made again
//! when it closes.

use std::sync::Arc;

use tokio::sync::Mutex;
use tokio_postgres::Client;

use super::database::db_error;
use super::{Database, StateError};

/// Most names one user's row set grows by in one write (a search returns a few).
const MAX_NAMES_PER_WRITE: usize = 256;

/// The found tools table, and the connection to it.
pub struct SharedFound {
    db: Database,
    client: Mutex<Option<Arc<Client>>>,
}

impl std::fmt::Debug for SharedFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedFound").field("db", &self.db).finish()
    }
}

impl SharedFound {
    pub fn new(db: Database) -> SharedFound {
        SharedFound {
            db,
            client: Mutex::new(None),
        }
    }

    async fn client(&self) -> Result<Arc<Client>, StateError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = Arc::new(self.db.connect().await?);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Records that `user` found `names`.
    pub async fn add(&self, user: &str, names: &[String]) -> Result<(), StateError> {
        let names: Vec<&str> = names
            .iter()
            .take(MAX_NAMES_PER_WRITE)
            .map(String::as_str)
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        self.client()
            .await?
            .execute(
                "INSERT INTO edgar_found (principal, tool) SELECT $1, unnest($2::text[])
                 ON CONFLICT DO NOTHING",
                &[&user, &names],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Every tool name `user` has found.
    pub async fn names(&self, user: &str) -> Result<Vec<String>, StateError> {
        let rows = self
            .client()
            .await?
            .query(
                "SELECT tool FROM edgar_found WHERE principal = $1 ORDER BY tool",
                &[&user],
            )
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
