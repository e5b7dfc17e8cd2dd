//! The audit trail in PostgreSQL: one chain for every replica. Each replica's writer
//! takes the lines queued since its last write and appends them in one transaction that
//! holds the head row's lock, so `seq` has no gap or duplicate however many replicas
//! write (group commit: a busy replica pays one round of locking for many lines). A
//! write whose outcome was lost (the connection dropped at `COMMIT`) is retried by the
//! lines' ids, never written twice. While the database cannot be reached the writer
//! says why ([`audit::SharedTrail::unavailable`]), probes it every [`PROBE_EVERY`], and recovers
//! by itself; while idle it checks the database every [`CHECK_EVERY`], so `/readyz` is
//! right before a call finds out.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::{Client, Statement};

use super::database::db_error;
use super::{Database, StateError};
use crate::trust::audit::chain::{self, Checker, Event};
use crate::trust::audit::{self, AuditKey};

/// Lines waiting for the writer; past this, appends are refused at once (a flood must
/// not grow memory while the database is away).
const QUEUE: usize = 8192;
/// Most lines one transaction appends.
const MAX_BATCH: usize = 512;
/// Longest a line waits to be written before its caller is told it was not.
const LINE_DEADLINE: Duration = Duration::from_secs(5);
/// How often an unreachable database is tried again while nothing is queued.
pub const PROBE_EVERY: Duration = Duration::from_millis(500);
/// How often a reachable one is checked while nothing is queued.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// A line waiting to be written.
struct Pending {
    /// Unique per line: a retried write finds the lines an unacknowledged one committed.
    id: String,
    event: Event,
    reply: oneshot::Sender<Result<u64, String>>,
    deadline: Instant,
}

/// The writer's handle: what replicas' code appends through.
pub struct Trail {
    tx: mpsc::Sender<Pending>,
    /// Why the last write or probe failed; `None` while writes succeed.
    down: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Trail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trail").finish_non_exhaustive()
    }
}

impl Trail {
    /// Starts the writer on the current runtime: lines chained under `key` into `db`.
    pub fn start(db: Database, key: AuditKey) -> Arc<Trail> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let down = Arc::new(Mutex::new(None));
        tokio::spawn(write_lines(db, key, rx, down.clone()));
        Arc::new(Trail { tx, down })
    }
}

impl audit::SharedTrail for Trail {
    fn append(&self, event: Event) -> oneshot::Receiver<Result<u64, String>> {
        let (reply, answer) = oneshot::channel();
        let mut id = [0u8; 16];
        if let Err(e) = getrandom::fill(&mut id) {
            let _ = reply.send(Err(format!("no randomness for the line's id: {e}")));
            return answer;
        }
        let pending = Pending {
            id: crate::digest::hex(&id),
            event,
            reply,
            deadline: Instant::now() + LINE_DEADLINE,
        };
        if let Err(e) = self.tx.try_send(pending) {
            let why = match &e {
                mpsc::error::TrySendError::Full(_) => {
                    "the audit queue is full (the database is slow or away)"
                }
                mpsc::error::TrySendError::Closed(_) => "the audit writer has stopped",
            };
            let _ = e.into_inner().reply.send(Err(why.into()));
        }
        answer
    }

    fn unavailable(&self) -> Option<String> {
        self.down.lock().ok().and_then(|d| d.clone())
    }
}

/// The writer: batches, writes, retries until each line's deadline, probes while down.
async fn write_lines(
    db: Database,
    key: AuditKey,
    mut rx: mpsc::Receiver<Pending>,
    down: Arc<Mutex<Option<String>>>,
) {
    let mut client: Option<Link> = None;
    let set_down = |why: Option<String>| {
        if let Ok(mut d) = down.lock() {
            match (&*d, &why) {
                (None, Some(w)) => tracing::warn!(
                    "the shared audit trail cannot be written: {w}; tool calls are refused until it can"
                ),
                (Some(_), None) => tracing::info!("the shared audit trail is written again"),
                _ => {}
            }
            *d = why;
        }
    };
    loop {
        // Probed while idle too: `/readyz` (and so the proxy) learns the database went
        // away before a call has to.
        let is_down = down.lock().map(|d| d.is_some()).unwrap_or(false);
        let every = if is_down { PROBE_EVERY } else { CHECK_EVERY };
        let first = tokio::select! {
            p = rx.recv() => p,
            () = tokio::time::sleep(every) => {
                match probe(&db, &mut client).await {
                    Ok(()) => set_down(None),
                    Err(e) => set_down(Some(e.to_string())),
                }
                continue;
            }
        };
        let Some(first) = first else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let mut retrying = false;
        while !batch.is_empty() {
            let written = match connected(&db, &mut client).await {
                Ok(c) => write(c, &key, &batch, retrying).await,
                Err(e) => Err(e),
            };
            match written {
                Ok(seqs) => {
                    set_down(None);
                    for (p, seq) in batch.drain(..).zip(seqs) {
                        let _ = p.reply.send(Ok(seq));
                    }
                }
                Err(e) => {
                    let why = e.to_string();
                    set_down(Some(why.clone()));
                    if client.as_ref().is_some_and(|l| l.client.is_closed()) {
                        client = None;
                    }
                    retrying = true;
                    let now = Instant::now();
                    let (late, waiting): (Vec<Pending>, Vec<Pending>) =
                        batch.drain(..).partition(|p| p.deadline <= now);
                    for p in late {
                        if p.reply.is_closed() {
                            tracing::warn!(event = %p.event.event, "an audit line could not be written: {why}");
                        }
                        let _ = p.reply.send(Err(why.clone()));
                    }
                    batch = waiting;
                    if !batch.is_empty() {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        }
    }
}

/// The writer's connection and its statements, prepared once per connection: a
/// statement given as text would be prepared again, a round trip, at every use.
struct Link {
    client: Client,
    head: Statement,
    insert: Statement,
    advance: Statement,
    /// The lines appended after the head only if it is still `$7`, `$8`, and the head
    /// moved to `$5`, `$6`: one statement, so one round trip, and nothing written when
    /// another replica moved the head first.
    chained: Statement,
    /// The head as this connection last wrote it (`None` until then, and after any
    /// failure): most often still the head, when no other replica wrote since.
    known: Option<(i64, String)>,
    /// Another replica wrote between this connection's last two writes: its next write
    /// takes the head's lock at once rather than try `chained` and likely miss.
    contended: bool,
}

impl Link {
    async fn open(db: &Database) -> Result<Link, StateError> {
        let client = db.connect().await?;
        let (head, insert, advance, chained) = futures_util::try_join!(
            client.prepare("SELECT seq, hash FROM edgar_audit_head WHERE one FOR UPDATE"),
            client.prepare(
                "INSERT INTO edgar_audit (seq, id, line, hash)
                 SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[])"
            ),
            client.prepare("UPDATE edgar_audit_head SET seq = $1, hash = $2 WHERE one"),
            client.prepare(
                "WITH moved AS (
                     UPDATE edgar_audit_head SET seq = $5, hash = $6
                     WHERE one AND seq = $7 AND hash = $8 RETURNING 1)
                 INSERT INTO edgar_audit (seq, id, line, hash)
                 SELECT l.* FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[]) AS l, moved"
            ),
        )
        .map_err(db_error)?;
        Ok(Link {
            client,
            head,
            insert,
            advance,
            chained,
            known: None,
            contended: false,
        })
    }
}

/// The writer's connection, made again when there is none or it closed.
async fn connected<'a>(
    db: &Database,
    link: &'a mut Option<Link>,
) -> Result<&'a mut Link, StateError> {
    if link.as_ref().is_none_or(|l| l.client.is_closed()) {
        *link = Some(Link::open(db).await?);
    }
    link.as_mut()
        .ok_or_else(|| StateError::Database("no connection".into()))
}

async fn probe(db: &Database, link: &mut Option<Link>) -> Result<(), StateError> {
    let c = connected(db, link).await?;
    let r = c.client.simple_query("SELECT 1").await.map_err(db_error);
    if r.is_err() {
        *link = None;
    }
    r.map(|_| ())
}

/// Appends `batch` after the head in one transaction; each line's sequence number. A
/// retry first finds the lines an earlier, unacknowledged attempt committed.
///
/// One round trip when the head is still the one this connection wrote last
/// (`Link::chained`); otherwise two, each pipelined: `BEGIN` with the head's lock, then
/// the lines, the new head and `COMMIT` (the lines' links are made here, under the
/// trail's key, so they need the head first). A failed statement rolls the transaction
/// back.
async fn write(
    link: &mut Link,
    key: &AuditKey,
    batch: &[Pending],
    retrying: bool,
) -> Result<Vec<u64>, StateError> {
    let written = append(link, key, batch, retrying).await;
    if written.is_err() && !link.client.is_closed() {
        // Nothing half-done is kept; a connection that cannot roll back is dropped.
        let _ = link.client.batch_execute("ROLLBACK").await;
    }
    written
}

async fn append(
    link: &mut Link,
    key: &AuditKey,
    batch: &[Pending],
    retrying: bool,
) -> Result<Vec<u64>, StateError> {
    // Taken: kept again only after a write that is known to have committed.
    let known = link.known.take();
    if let (false, false, Some((seq, prev))) = (retrying, link.contended, &known) {
        let c = Chained::after(*seq, prev.clone(), key, batch, &Default::default());
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
            &c.seqs, &c.ids, &c.lines, &c.hashes, &c.seq, &c.prev, seq, prev,
        ];
        let inserted = link
            .client
            .execute(&link.chained, &params)
            .await
            .map_err(db_error)?;
        if inserted == c.seqs.len() as u64 {
            link.known = Some((c.seq, c.prev));
            return Ok(c.out);
        }
        if inserted != 0 {
            return Err(StateError::Database(format!(
                "the audit lines were not all written ({inserted} of {} lines)",
                c.seqs.len()
            )));
        }
        // Another replica moved the head: nothing was written; under its lock below.
    }
    let client = &link.client;
    let (_, head) = futures_util::try_join!(
        client.batch_execute("BEGIN"),
        client.query_one(&link.head, &[]),
    )
    .map_err(db_error)?;
    let (seq, prev): (i64, String) = (head.get(0), head.get(1));
    // Whether another replica wrote since this connection last did (unknown after a
    // failure: not assumed).
    link.contended = known.is_some_and(|(s, h)| s != seq || h != prev);
    let mut already = std::collections::HashMap::new();
    if retrying {
        let ids: Vec<&str> = batch.iter().map(|p| p.id.as_str()).collect();
        for row in client
            .query(
                "SELECT id, seq FROM edgar_audit WHERE id = ANY($1)",
                &[&ids],
            )
            .await
            .map_err(db_error)?
        {
            already.insert(row.get::<_, String>(0), row.get::<_, i64>(1));
        }
    }
    let c = Chained::after(seq, prev, key, batch, &already);
    if c.seqs.is_empty() {
        client.batch_execute("COMMIT").await.map_err(db_error)?;
        return Ok(c.out);
    }
    // Sent together. `COMMIT` after a failed statement only rolls back, without an
    // error: each statement's own outcome counts, and the rows it touched.
    let lines_params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&c.seqs, &c.ids, &c.lines, &c.hashes];
    let head_params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&c.seq, &c.prev];
    let (inserted, advanced, committed) = futures_util::join!(
        client.execute(&link.insert, &lines_params),
        client.execute(&link.advance, &head_params),
        client.batch_execute("COMMIT"),
    );
    let (inserted, advanced) = (inserted.map_err(db_error)?, advanced.map_err(db_error)?);
    committed.map_err(db_error)?;
    if inserted != c.seqs.len() as u64 || advanced != 1 {
        return Err(StateError::Database(format!(
            "the audit lines were not all written ({inserted} of {} lines, head {advanced})",
            c.seqs.len()
        )));
    }
    link.known = Some((c.seq, c.prev));
    Ok(c.out)
}

/// A batch's lines chained after a head: the columns to insert (without the lines
/// `already` written, by id), each line's sequence number, and the new head.
struct Chained<'a> {
    seqs: Vec<i64>,
    ids: Vec<&'a str>,
    lines: Vec<String>,
    hashes: Vec<String>,
    out: Vec<u64>,
    seq: i64,
    prev: String,
}

impl<'a> Chained<'a> {
    fn after(
        mut seq: i64,
        mut prev: String,
        key: &AuditKey,
        batch: &'a [Pending],
        already: &std::collections::HashMap<String, i64>,
    ) -> Chained<'a> {
        let (mut seqs, mut ids, mut lines, mut hashes) = (vec![], vec![], vec![], vec![]);
        let mut out = Vec::with_capacity(batch.len());
        for p in batch {
            if let Some(s) = already.get(&p.id) {
                out.push(*s as u64);
                continue;
            }
            seq += 1;
            let (text, hash) = chain::link(seq as u64, &prev, &p.event, Some(key));
            seqs.push(seq);
            ids.push(p.id.as_str());
            lines.push(text);
            prev = hash.clone();
            hashes.push(hash);
            out.push(seq as u64);
        }
        Chained {
            seqs,
            ids,
            lines,
            hashes,
            out,
            seq,
            prev,
        }
    }
}

/// Checks the whole shared chain under `key`: the number of lines, or the first bad one.
pub async fn verify(db: &Database, key: &AuditKey) -> Result<u64, StateError> {
    use futures_util::TryStreamExt;
    let client = db.connect().await?;
    let tampered = |(line, reason): chain::Break| StateError::Tampered { line, reason };
    // One snapshot: lines appended while this reads are neither half-seen nor missed by
    // the head comparison.
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(db_error)?;
    let mut checker = Checker::new(Some(key.clone()), true);
    let rows = client
        .query_raw(
            "SELECT line FROM edgar_audit ORDER BY seq",
            std::iter::empty::<i64>(),
        )
        .await
        .map_err(db_error)?;
    futures_util::pin_mut!(rows);
    while let Some(row) = rows.try_next().await.map_err(db_error)? {
        let text: &str = row.get(0);
        let text = (text.len() <= chain::MAX_LINE_BYTES).then_some(text);
        checker.next(text).map_err(tampered)?;
    }
    let (count, last) = checker.finish().map_err(tampered)?;
    let head = client
        .query_one("SELECT seq, hash FROM edgar_audit_head WHERE one", &[])
        .await
        .map_err(db_error)?;
    let (seq, hash): (i64, String) = (head.get(0), head.get(1));
    let _ = client.batch_execute("COMMIT").await;
    if seq as u64 > count {
        return Err(tampered((
            count as usize + 1,
            format!("the trail ends after {count} lines, but {seq} were written (truncated)"),
        )));
    }
    if seq as u64 != count || hash != last {
        return Err(tampered((
            count as usize,
            "the last line is not the one last written".into(),
        )));
    }
    Ok(count)
}

/// The last `n` events, oldest first.
pub async fn tail(db: &Database, n: usize) -> Result<Vec<Value>, StateError> {
    let client = db.connect().await?;
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    let rows = client
        .query(
            "SELECT line FROM (SELECT seq, line FROM edgar_audit ORDER BY seq DESC LIMIT $1) t ORDER BY seq",
            &[&n],
        )
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| {
            serde_json::from_str(r.get::<_, &str>(0))
                .unwrap_or_else(|_| serde_json::json!({"event": "unreadable line"}))
        })
        .collect())
}
