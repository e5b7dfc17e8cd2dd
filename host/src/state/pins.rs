//! The pins the replicas share (`edgar_pins`): one set of pin files for every replica,
//! so a tool one replica quarantined (a changed description, a rug pull) is not pinned
//! as new by another, and a human's approval (`edgar mcp approve NAME --gateway-config
//! FILE`) holds everywhere. Rows are the pin files, by file name, each with an HMAC under
//! a key derived from the state key: a row forged or edited without the key file is not
//! believed (the server's discovery fails, closed).
//!
//! The pin store is called from blocking code (its files are read and written under a
//! file lock), so this runs its own thread with its own runtime and connection, and
//! callers wait for the answer, as they wait for the files.

use std::sync::mpsc;
use std::time::Duration;

use ring::hmac;
use tokio_postgres::Client;

use super::Database;
use super::database::db_error;
use crate::trust::pins::SharedPins;

/// Longest a caller waits for the database.
const WAIT: Duration = Duration::from_secs(10);

type Reply<T> = mpsc::SyncSender<Result<T, String>>;

enum Job {
    Fetch(String, Reply<Option<(Vec<u8>, String)>>),
    Store(String, Vec<u8>, String, Reply<()>),
}

/// The shared pins' handle: jobs to the thread that talks to the database.
pub struct SharedPinFiles {
    jobs: mpsc::Sender<Job>,
    key: hmac::Key,
}

impl std::fmt::Debug for SharedPinFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedPinFiles").finish_non_exhaustive()
    }
}

impl SharedPinFiles {
    /// Starts the thread for `db`; rows authenticated with `key` (see
    /// [`super::StateKey::pins_key`]).
    pub fn start(db: Database, key: [u8; 32]) -> Result<SharedPinFiles, String> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("no runtime for the shared pins: {e}"))?;
        std::thread::Builder::new()
            .name("edgar-shared-pins".into())
            .spawn(move || {
                let mut client: Option<Client> = None;
                while let Ok(job) = rx.recv() {
                    rt.block_on(run(&db, &mut client, job));
                }
            })
            .map_err(|e| format!("no thread for the shared pins: {e}"))?;
        Ok(SharedPinFiles {
            jobs,
            key: hmac::Key::new(hmac::HMAC_SHA256, &key),
        })
    }

    fn message(file: &str, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(file.len() + bytes.len() + 16);
        for part in [file.as_bytes(), bytes] {
            out.extend_from_slice(&(part.len() as u64).to_be_bytes());
            out.extend_from_slice(part);
        }
        out
    }

    fn ask<T>(&self, job: impl FnOnce(Reply<T>) -> Job) -> Result<T, String> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.jobs
            .send(job(tx))
            .map_err(|_| "its thread has stopped".to_owned())?;
        rx.recv_timeout(WAIT)
            .map_err(|_| format!("the database did not answer within {} s", WAIT.as_secs()))?
    }
}

/// Runs `job`, once more on a new connection when the first try fails (the connection
/// is not watched between jobs, so a server restart is noticed here).
async fn run(db: &Database, client: &mut Option<Client>, job: Job) {
    match job {
        Job::Fetch(file, reply) => {
            let mut got = fetch(db, client, &file).await;
            if got.is_err() {
                *client = None;
                got = fetch(db, client, &file).await;
            }
            let _ = reply.send(got);
        }
        Job::Store(file, bytes, mac, reply) => {
            let mut done = store(db, client, &file, &bytes, &mac).await;
            if done.is_err() {
                *client = None;
                done = store(db, client, &file, &bytes, &mac).await;
            }
            let _ = reply.send(done);
        }
    }
}

async fn connected<'a>(
    db: &Database,
    client: &'a mut Option<Client>,
) -> Result<&'a Client, String> {
    if client.as_ref().is_none_or(Client::is_closed) {
        *client = Some(db.connect().await.map_err(|e| e.to_string())?);
    }
    client.as_ref().ok_or_else(|| "no connection".to_owned())
}

async fn fetch(
    db: &Database,
    client: &mut Option<Client>,
    file: &str,
) -> Result<Option<(Vec<u8>, String)>, String> {
    let c = connected(db, client).await?;
    let row = c
        .query_opt(
            "SELECT bytes, mac FROM edgar_pins WHERE file = $1",
            &[&file],
        )
        .await
        .map_err(|e| db_error(e).to_string())?;
    Ok(row.map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, String>(1))))
}

async fn store(
    db: &Database,
    client: &mut Option<Client>,
    file: &str,
    bytes: &[u8],
    mac: &str,
) -> Result<(), String> {
    let c = connected(db, client).await?;
    c.execute(
        "INSERT INTO edgar_pins (file, bytes, mac) VALUES ($1, $2, $3)
         ON CONFLICT (file) DO UPDATE SET bytes = excluded.bytes, mac = excluded.mac",
        &[&file, &bytes, &mac],
    )
    .await
    .map_err(|e| db_error(e).to_string())?;
    Ok(())
}

impl SharedPins for SharedPinFiles {
    fn fetch(&self, file: &str) -> Result<Option<Vec<u8>>, String> {
        let Some((bytes, mac)) = self.ask(|r| Job::Fetch(file.to_owned(), r))? else {
            return Ok(None);
        };
        let tag = crate::digest::from_hex32(&mac).unwrap_or([0; 32]);
        hmac::verify(&self.key, &Self::message(file, &bytes), &tag).map_err(|_| {
            format!("the shared pin file {file} does not carry a valid MAC (written without the state key?); not believed")
        })?;
        Ok(Some(bytes))
    }

    fn store(&self, file: &str, bytes: &[u8]) -> Result<(), String> {
        let mac = crate::digest::hex(hmac::sign(&self.key, &Self::message(file, bytes)).as_ref());
        self.ask(|r| Job::Store(file.to_owned(), bytes.to_vec(), mac, r))
    }
}
