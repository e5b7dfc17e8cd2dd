//! The PostgreSQL database replicas share: its URL (never shown with its password),
//! connections (TLS when the URL asks: `sslmode=require`, verified against the system's
//! roots; `prefer`, PostgreSQL's default, uses it when the server offers it), and the
//! schema, migrated at start by whichever replica comes first.

use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::Client;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StateError;

/// Longest a connection may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The advisory lock replicas take while migrating, so two starting at once do not both
/// apply a version.
const MIGRATION_LOCK: i64 = 0x6564_6761_7231; // "edgar1"

/// The schema, one entry per version, applied in order and never edited once released:
/// a change is a new version.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE edgar_audit (
        seq  bigint PRIMARY KEY,
        id   text   NOT NULL UNIQUE,
        line text   NOT NULL,
        hash text   NOT NULL
    );
    CREATE TABLE edgar_audit_head (
        one  boolean PRIMARY KEY DEFAULT true CHECK (one),
        seq  bigint NOT NULL,
        hash text   NOT NULL
    );
    INSERT INTO edgar_audit_head (one, seq, hash)
        VALUES (true, 0, '0000000000000000000000000000000000000000000000000000000000000000');",
    ),
    (
        2,
        "CREATE TABLE edgar_found (
        principal text NOT NULL,
        tool      text NOT NULL,
        found_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (principal, tool)
    );",
    ),
    (
        3,
        "CREATE TABLE edgar_discovery (
        file       text PRIMARY KEY,
        server     text NOT NULL,
        entry      bytea NOT NULL,
        names      bytea NOT NULL,
        mac        text NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now()
    );",
    ),
    (
        4,
        "CREATE TABLE edgar_tokens (
        upstream   text   NOT NULL,
        principal  text   NOT NULL,
        nonce      bytea  NOT NULL,
        sealed     bytea  NOT NULL,
        expires_ms bigint NOT NULL,
        PRIMARY KEY (upstream, principal)
    );",
    ),
    (
        5,
        "CREATE TABLE edgar_pins (
        file  text  PRIMARY KEY,
        bytes bytea NOT NULL,
        mac   text  NOT NULL
    );",
    ),
    (
        6,
        "CREATE TABLE edgar_asked (
        principal text NOT NULL,
        server    text NOT NULL,
        asked_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (principal, server)
    );",
    ),
];

/// Where the shared state lives, and how to reach it.
#[derive(Clone)]
pub struct Database {
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Database {
    /// The database a `postgres://` URL (or key=value string) names.
    pub fn new(url: &str) -> Result<Database, StateError> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(StateError::Url(
                "\"state\" must be a postgres:// URL (a file state needs no \"state\")".into(),
            ));
        }
        // The parser's message may quote the string, password and all.
        let mut config = tokio_postgres::Config::from_str(url).map_err(|_| {
            StateError::Url(
                "not a PostgreSQL URL edgar understands (postgres://user@host:port/database?sslmode=require)"
                    .into(),
            )
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("edgar");
        Ok(Database {
            config,
            tls: tls()?,
        })
    }

    /// `user@host:port/database`, for messages: never the password.
    pub fn describe(&self) -> String {
        let host = self
            .config
            .get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .unwrap_or_else(|| "localhost".into());
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        format!(
            "postgres://{}@{host}:{port}/{}",
            self.config.get_user().unwrap_or(""),
            self.config.get_dbname().unwrap_or("")
        )
    }

    /// A new connection, its I/O driven by a task on the current runtime (it ends when
    /// the client is dropped or the server goes away).
    pub async fn connect(&self) -> Result<Client, StateError> {
        let (client, connection) = self
            .config
            .connect(self.tls.clone())
            .await
            .map_err(db_error)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("a PostgreSQL connection ended: {e}");
            }
        });
        Ok(client)
    }

    /// Listens on `channel` (an identifier of edgar's) until the connection ends, each
    /// notification's payload given to `heard`; `Ok` when the server closed it.
    pub(super) async fn listen(
        &self,
        channel: &str,
        mut heard: impl FnMut(&str),
    ) -> Result<(), StateError> {
        use tokio_postgres::AsyncMessage;
        let (client, mut connection) = self
            .config
            .connect(self.tls.clone())
            .await
            .map_err(db_error)?;
        let sql = format!("LISTEN {channel}");
        let listen = client.batch_execute(&sql);
        tokio::pin!(listen);
        let mut listening = false;
        loop {
            tokio::select! {
                done = &mut listen, if !listening => {
                    done.map_err(db_error)?;
                    listening = true;
                }
                message = std::future::poll_fn(|cx| connection.poll_message(cx)) => match message {
                    Some(Ok(AsyncMessage::Notification(n))) => heard(n.payload()),
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(db_error(e)),
                    None => return Ok(()),
                },
            }
        }
    }

    /// Brings the schema up to this build's version (under an advisory lock), and
    /// refuses a database a newer edgar has migrated past.
    pub async fn migrate(&self) -> Result<(), StateError> {
        let mut client = self.connect().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(db_error)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS edgar_schema (
                version    integer PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await
        .map_err(db_error)?;
        let row = tx
            .query_one("SELECT coalesce(max(version), 0) FROM edgar_schema", &[])
            .await
            .map_err(db_error)?;
        let at: i32 = row.get(0);
        let newest = MIGRATIONS.last().map_or(0, |m| m.0);
        if at > newest {
            return Err(StateError::Database(format!(
                "the schema is at version {at}, newer than this edgar's {newest}: upgrade this replica"
            )));
        }
        for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > at) {
            tx.batch_execute(sql).await.map_err(db_error)?;
            tx.execute("INSERT INTO edgar_schema (version) VALUES ($1)", &[version])
                .await
                .map_err(db_error)?;
            tracing::info!(version, "shared state: schema migrated");
        }
        tx.commit().await.map_err(db_error)
    }
}

/// One connection that concurrent queries share (tokio-postgres pipelines them), made
/// again when it has closed. Not for transactions: the audit writer has its own.
pub struct Pipelined {
    db: Database,
    client: tokio::sync::Mutex<Option<std::sync::Arc<Client>>>,
}

impl Pipelined {
    pub fn new(db: Database) -> Pipelined {
        Pipelined {
            db,
            client: tokio::sync::Mutex::new(None),
        }
    }

    pub async fn get(&self) -> Result<std::sync::Arc<Client>, StateError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = std::sync::Arc::new(self.db.connect().await?);
        *slot = Some(c.clone());
        Ok(c)
    }
}

impl std::fmt::Debug for Pipelined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipelined").field("db", &self.db).finish()
    }
}

/// rustls with ring and the platform's roots, as edgar's HTTPS clients use.
fn tls() -> Result<MakeRustlsConnect, StateError> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_platform_verifier())
        .map_err(|e| StateError::Url(format!("TLS to the database: {e}")))?
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// A database error as a message: its text and causes (a TLS handshake says why it
/// failed), never the connection string.
pub(super) fn db_error(e: tokio_postgres::Error) -> StateError {
    let mut text = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    };
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    StateError::Database(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_described_without_its_password_and_bad_ones_say_why() {
        let db =
            Database::new("postgres://edgar:hunter2-secret@db.internal:6432/gw?sslmode=require")
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(db.describe(), "postgres://edgar@db.internal:6432/gw");
        assert!(!format!("{db:?}").contains("hunter2"));
        for (url, says) in [
            ("mysql://x@y/z", "postgres://"),
            ("/var/lib/edgar", "postgres://"),
            (
                "postgres://u:hunter2-secret@h/d?sslmode=bogus",
                "understands",
            ),
        ] {
            let e = Database::new(url)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }
}
