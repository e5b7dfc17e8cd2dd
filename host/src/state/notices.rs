//! What one replica tells the others at once, over PostgreSQL's `LISTEN`/`NOTIFY` on one
//! channel: short text notices (a user's sign-in finished at this replica's callback,
//! for their streams on the others). A notice is best effort: one sent while a replica's
//! listening connection is down is not heard there. Each carries its sender's random
//! origin, so a replica does not hear its own.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use super::database::{Pipelined, db_error};
use super::{Database, StateError};

/// Longest notice sent (PostgreSQL takes 8000 bytes).
pub const MAX_NOTICE_BYTES: usize = 7000;

/// How long a lost listening connection waits before connecting again.
const RECONNECT: Duration = Duration::from_secs(1);
/// How long a notice may take to reach the database before it is given up (a hung
/// database must not hold what sent it).
const TELL_WAIT: Duration = Duration::from_secs(5);

/// One channel of notices between replicas.
#[derive(Clone)]
pub struct Notices {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    conn: Pipelined,
    channel: &'static str,
    /// This process's origin, random: the first line of each notice it sends.
    origin: String,
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices")
            .field("channel", &self.inner.channel)
            .finish_non_exhaustive()
    }
}

impl Notices {
    /// Notices on `channel` (a lower-case identifier) of `db`.
    pub fn new(db: Database, channel: &'static str) -> Result<Notices, StateError> {
        let origin = crate::seal::random_key()
            .map_err(|e| StateError::Database(format!("the OS random source failed: {e}")))?;
        Ok(Notices {
            inner: Arc::new(Inner {
                conn: Pipelined::new(db.clone()),
                db,
                channel,
                origin: crate::digest::hex(&origin[..8]),
            }),
        })
    }

    /// Tells every other replica `text` (done when the database has it, given up after
    /// 5 s).
    pub async fn tell(&self, text: &str) -> Result<(), StateError> {
        if text.len() > MAX_NOTICE_BYTES {
            return Err(StateError::Database(format!(
                "a notice over {MAX_NOTICE_BYTES} bytes is not sent"
            )));
        }
        let payload = format!("{}\n{text}", self.inner.origin);
        let sent = async {
            self.inner
                .conn
                .get()
                .await?
                .execute("SELECT pg_notify($1, $2)", &[&self.inner.channel, &payload])
                .await
                .map_err(db_error)
        };
        match tokio::time::timeout(TELL_WAIT, sent).await {
            Ok(sent) => sent.map(drop),
            Err(_) => Err(StateError::Database(format!(
                "the database did not take a notice in {} s",
                TELL_WAIT.as_secs()
            ))),
        }
    }

    /// What the other replicas tell, for as long as the process runs: a task that
    /// listens (connecting again when the connection is lost) and sends each notice's
    /// text on the returned channel.
    pub fn hear(&self) -> broadcast::Receiver<String> {
        let (told, heard) = broadcast::channel::<String>(64);
        let inner = self.inner.clone();
        tokio::spawn(async move {
            loop {
                let tell = |payload: &str| {
                    if let Some(text) = from_others(payload, &inner.origin) {
                        let _ = told.send(text.to_owned());
                    }
                };
                if let Err(e) = inner.db.listen(inner.channel, tell).await {
                    tracing::warn!("not hearing other replicas' notices: {e}");
                }
                if told.receiver_count() == 0 {
                    return;
                }
                tokio::time::sleep(RECONNECT).await;
            }
        });
        heard
    }
}

/// A notice's text, unless `origin` (this process) sent it or it has no origin line.
fn from_others<'a>(payload: &'a str, origin: &str) -> Option<&'a str> {
    let (from, text) = payload.split_once('\n')?;
    (from != origin).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_does_not_hear_its_own_notices() {
        assert_eq!(from_others("abc\nhello", "abc"), None);
        assert_eq!(
            from_others("def\nhello\nthere", "abc"),
            Some("hello\nthere")
        );
        assert_eq!(from_others("no origin line", "abc"), None);
    }
}
