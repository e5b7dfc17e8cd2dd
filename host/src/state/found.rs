//! What each user's searches found, shared by the replicas: a user who searched on one
//! replica calls the tool on another, or lists their tools there, without searching
//! again. Names only (each replica has the tools themselves from its own catalog),
//! keyed by the user's subject. Also which servers a search asked each user to sign in
//! to, so a user is asked once, not once per replica. Queries share one pipelined
//! connection, made again when it closes.

use super::database::{Pipelined, db_error};
use super::{Database, StateError};

/// Most names one user's row set grows by in one write (a search returns a few).
const MAX_NAMES_PER_WRITE: usize = 256;

/// The found tools and asked sign-ins tables, and the connection to them.
#[derive(Debug)]
pub struct SharedFound {
    conn: Pipelined,
}

impl SharedFound {
    pub fn new(db: Database) -> SharedFound {
        SharedFound {
            conn: Pipelined::new(db),
        }
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
        self.conn
            .get()
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
            .conn
            .get()
            .await?
            .query(
                "SELECT tool FROM edgar_found WHERE principal = $1 ORDER BY tool",
                &[&user],
            )
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Records that a search asked `user` to sign in to `server`: `true` the first time
    /// at any replica.
    pub async fn ask_first(&self, user: &str, server: &str) -> Result<bool, StateError> {
        let added = self
            .conn
            .get()
            .await?
            .execute(
                "INSERT INTO edgar_asked (principal, server) VALUES ($1, $2)
                 ON CONFLICT DO NOTHING",
                &[&user, &server],
            )
            .await
            .map_err(db_error)?;
        Ok(added == 1)
    }

    /// Forgets that a search asked `user` about `server` (they signed out): their next
    /// search asks again, at any replica.
    pub async fn forget_asked(&self, user: &str, server: &str) -> Result<(), StateError> {
        self.conn
            .get()
            .await?
            .execute(
                "DELETE FROM edgar_asked WHERE principal = $1 AND server = $2",
                &[&user, &server],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }
}
