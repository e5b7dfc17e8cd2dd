//! The audit trail: `<state>/audit.jsonl`, one JSON object per line, each carrying a
//! sequence number and the sha256 of the line before it; `audit.head` holds the last
//! line's number and hash, so a truncated tail is noticed as well as an edited, deleted
//! or reordered line. Records what was decided and what was called: never argument
//! values, results, tokens or keys.
//!
//! With an [`AuditKey`] (kept in the OS keyring, outside the files a server running as
//! the same user can edit), each line's hash is an HMAC-SHA256 under that key and the
//! line says `"mac": "hmac-sha256"`: a process that can rewrite the files but not read
//! the key can no longer edit a line and recompute the chain. Argument digests are keyed
//! too, so a short argument cannot be found by guessing. A trail may start plain (before
//! a key existed); once a line is keyed, every later line must be.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::TrustError;
use crate::digest::sha256_hex;

pub mod chain;

use crate::sync::lock;
use chain::{Event, GENESIS, MAX_LINE_BYTES};

tokio::task_local! {
    /// The user a team gateway's request runs as: every line written while it runs
    /// (in that task) names them as `user`.
    pub static ACTOR: String;
    /// Lines noted while a gateway's request runs, written once its answer is on its
    /// way (see [`deferring`]).
    static DEFERRED: Deferred;
}

/// Runs `work` with the lines [`AuditLog::note`] writes to a file trail held back until
/// it is done, and returns them with its output: the caller answers first, then drops
/// the [`Deferred`], which writes them (a proxied call's line no longer stands between
/// the server's answer and the client). Lines that must be in the trail before anyone
/// is told (a shared trail's `record_confirmed`) and [`AuditLog::record`]'s are never
/// held back.
pub async fn deferring<F: std::future::Future>(work: F) -> (F::Output, Deferred) {
    let deferred = Deferred::default();
    lock(&LIVE).push(Arc::downgrade(&deferred.0));
    let out = DEFERRED.scope(deferred.clone(), work).await;
    (out, deferred)
}

/// Lines held back by [`deferring`]: written, in order, when the last handle is
/// dropped (also when the request is cancelled after its answer went).
#[derive(Clone, Default)]
pub struct Deferred(Arc<Held>);

#[derive(Default)]
struct Held(Mutex<Vec<(AuditLog, Event)>>);

/// Every request's held lines, so an exit that drops no task can still write them.
static LIVE: Mutex<Vec<std::sync::Weak<Held>>> = Mutex::new(Vec::new());

impl Held {
    fn write_now(&self) {
        let lines = std::mem::take(&mut *lock(&self.0));
        for (log, event) in lines {
            if let Err(e) = log.write(event) {
                tracing::warn!("the audit trail could not be written: {e}");
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.write_now();
        lock(&LIVE).retain(|w| w.strong_count() > 0);
    }
}

/// Writes what every request still running has held back: for an exit on a signal,
/// which ends the process without dropping their tasks.
pub fn write_held() {
    let live: Vec<Arc<Held>> = lock(&LIVE)
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    for held in live {
        held.write_now();
    }
}

/// The audit chain's key: 32 random bytes. Never shown.
#[derive(Clone)]
pub struct AuditKey([u8; 32]);

impl AuditKey {
    pub fn new(bytes: [u8; 32]) -> AuditKey {
        AuditKey(bytes)
    }

    /// The key from its hex form (as stored), if it is one.
    pub fn from_hex(s: &str) -> Option<AuditKey> {
        crate::digest::from_hex32(s).map(AuditKey)
    }

    /// Its hex form, for the credential store.
    pub fn to_hex(&self) -> String {
        crate::digest::hex(&self.0)
    }

    fn mac(&self, bytes: &[u8]) -> String {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.0);
        crate::digest::hex(ring::hmac::sign(&key, bytes).as_ref())
    }
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKey(***)")
    }
}

/// Where a trail's key comes from: asked once, when the first line is written or the
/// trail verified (never at startup); `create` says a missing key may be made.
pub type KeySource = Arc<dyn Fn(bool) -> Option<AuditKey> + Send + Sync>;

const FILE: &str = "audit.jsonl";
const HEAD: &str = "audit.head";
/// The head's size on disk: its JSON padded with spaces, so each rewrite covers the last.
const HEAD_BYTES: usize = 128;
/// Largest head `read_head` accepts.
const MAX_HEAD_BYTES: u64 = 4096;

/// The last line's number and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Head {
    seq: u64,
    hash: String,
    /// The last line was keyed: a writer without the key must not continue the chain.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    keyed: bool,
}

/// Where lines go instead of `audit.jsonl`: a trail a gateway's replicas share, which
/// chains the events it is given in the order it writes them.
pub trait SharedTrail: Send + Sync {
    /// Queues `event`; the answer says when it is written (its sequence number) or why
    /// it could not be.
    fn append(&self, event: Event) -> tokio::sync::oneshot::Receiver<Result<u64, String>>;
    /// Why lines cannot be written now, if they cannot.
    fn unavailable(&self) -> Option<String>;
}

/// Appends to, and verifies, one audit trail.
#[derive(Clone)]
pub struct AuditLog {
    dir: PathBuf,
    source: Option<KeySource>,
    key: Arc<OnceLock<Option<AuditKey>>>,
    shared: Option<Arc<dyn SharedTrail>>,
    /// The trail's files, kept open from one line to the next.
    files: Arc<Mutex<Kept>>,
}

/// The trail's files, kept open between lines: a gateway writes one per call, and
/// opening three files (and making sure of the directory) per line cost a tenth of a
/// proxied call. The lock file is locked for each line; the head and the trail are
/// opened again when either is no longer the file at its path.
#[derive(Default)]
struct Kept {
    lock: Option<std::fs::File>,
    data: Option<Data>,
}

struct Data {
    head: std::fs::File,
    /// The head's length on disk when last read or written.
    head_len: u64,
    trail: std::fs::File,
    /// The (device, inode) of `head` and `trail`, taken when they were opened (an open
    /// file's never changes), and their paths: each line then costs one `stat` per
    /// path, not two calls and two joins.
    opened: Option<[(u64, u64); 2]>,
    paths: [PathBuf; 2],
    /// The lengths of the head and the trail, and the head, after this process's last
    /// line: while both files are still that long, no other process wrote, and the
    /// head need not be read again.
    last: Option<([u64; 2], Head)>,
}

impl Data {
    fn new(dir: &Path, head: std::fs::File, head_len: u64, trail: std::fs::File) -> Data {
        let id = |f: &std::fs::File| rustix::fs::fstat(f).ok().map(|s| (s.st_dev, s.st_ino));
        let opened = id(&head).zip(id(&trail)).map(|(h, t)| [h, t]);
        Data {
            head,
            head_len,
            trail,
            opened,
            paths: [dir.join(HEAD), dir.join(FILE)],
            last: None,
        }
    }

    /// The lengths of the head and the trail, if both files are still the ones at their
    /// paths (neither deleted, renamed away or replaced).
    fn current(&self) -> Option<[u64; 2]> {
        let [head, trail] = self.opened?;
        let there = |path: &Path, (dev, ino): (u64, u64)| {
            rustix::fs::stat(path)
                .ok()
                .filter(|s| s.st_dev == dev && s.st_ino == ino)
                .map(|s| s.st_size as u64)
        };
        Some([there(&self.paths[0], head)?, there(&self.paths[1], trail)?])
    }
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("dir", &self.dir)
            .field("keyed", &self.source.is_some())
            .finish()
    }
}

impl AuditLog {
    /// The trail in `state_dir`, unkeyed (plain sha256 chain).
    pub fn new(state_dir: &Path) -> AuditLog {
        AuditLog {
            dir: state_dir.to_owned(),
            source: None,
            key: Arc::new(OnceLock::new()),
            shared: None,
            files: Arc::default(),
        }
    }

    /// A trail kept by `trail` (a gateway's replicas share it), its lines and argument
    /// digests keyed by `key`.
    pub fn shared(trail: Arc<dyn SharedTrail>, key: AuditKey) -> AuditLog {
        AuditLog {
            dir: PathBuf::new(),
            source: None,
            key: Arc::new(OnceLock::from(Some(key))),
            shared: Some(trail),
            files: Arc::default(),
        }
    }

    /// Whether every call must wait for its line (a shared trail): without one it does
    /// not run.
    pub fn required(&self) -> bool {
        self.shared.is_some()
    }

    /// Why the trail cannot be written now, when it is shared and cannot.
    pub fn unavailable(&self) -> Option<String> {
        self.shared.as_ref().and_then(|t| t.unavailable())
    }

    /// Writes an event and waits until it is in the trail (a shared trail's writer
    /// batches and retries; a file's line is written at once).
    pub async fn record_confirmed(&self, event: &str, fields: Value) -> Result<u64, TrustError> {
        let Some(trail) = &self.shared else {
            return self.record(event, fields).map(|()| 0);
        };
        match trail.append(Event::now(event, fields)).await {
            Ok(Ok(seq)) => Ok(seq),
            Ok(Err(why)) => Err(TrustError::Unwritten(why)),
            Err(_) => Err(TrustError::Unwritten("its writer has stopped".into())),
        }
    }

    /// The trail keyed by what `source` gives (see [`KeySource`]).
    pub fn with_key(mut self, source: KeySource) -> AuditLog {
        if self.shared.is_some() {
            return self;
        }
        self.source = Some(source);
        self.key = Arc::new(OnceLock::new());
        self
    }

    /// The key, asked for once per log (made when missing and `create`).
    fn key(&self, create: bool) -> Option<&AuditKey> {
        if let Some(k) = self.key.get() {
            return k.as_ref();
        }
        let source = self.source.as_ref()?;
        let got = source(create);
        if got.is_none() && create {
            // Said by `edgar audit verify`; a warning here would follow every command
            // on a machine without a keyring.
            tracing::debug!(
                "the audit trail is not keyed (no credential store to keep its key in): lines are chained with plain sha256"
            );
        }
        // Not cached when verification found no key: a later write may make one.
        if got.is_some() || create {
            return self.key.get_or_init(|| got).as_ref();
        }
        None
    }

    /// The directory the trail is in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether this trail has a key to check and continue it with (without making one).
    pub fn is_keyed(&self) -> bool {
        self.key(false).is_some()
    }

    /// A digest of `bytes` for an audit line (a call's arguments): keyed when the trail
    /// is, so it cannot be matched against guesses.
    pub fn digest(&self, bytes: &[u8]) -> String {
        match self.key(true) {
            Some(k) => k.mac(bytes),
            None => sha256_hex(bytes),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// Appends one event (`event` names it; `fields` are its details), under an exclusive
    /// lock so concurrent edgar processes keep one unbroken chain.
    pub fn record(&self, event: &str, fields: Value) -> Result<(), TrustError> {
        self.write(Event::now(event, fields))
    }

    /// Writes `event` (a shared trail's writer is not waited for: it says in the log what
    /// it could not write).
    fn write(&self, event: Event) -> Result<(), TrustError> {
        if let Some(trail) = &self.shared {
            drop(trail.append(event));
            return Ok(());
        }
        let file = self.path();
        let fail = |e: std::io::Error| TrustError::file(&file, e);
        let key = self.key(true).cloned();
        let lock_path = self.dir.join("audit.lock");
        let mut kept = lock(&self.files);
        let kept = &mut *kept;
        let lock = match &kept.lock {
            Some(l) => l,
            None => kept
                .lock
                .insert(crate::paths::open_lock_file(&lock_path).map_err(fail)?),
        };
        crate::paths::lock_exclusive(lock, &lock_path).map_err(fail)?;
        let written = self.write_locked(&mut kept.data, &event, key);
        let _ = rustix::fs::flock(lock, rustix::fs::FlockOperation::Unlock);
        if written.is_err() {
            // Opened afresh next time.
            kept.data = None;
        }
        written
    }

    /// [`AuditLog::record`]'s line, the lock held: the head read, the line appended,
    /// the head rewritten.
    fn write_locked(
        &self,
        data: &mut Option<Data>,
        event: &Event,
        key: Option<AuditKey>,
    ) -> Result<(), TrustError> {
        let file = self.path();
        let fail = |e: std::io::Error| TrustError::file(&file, e);
        let length = data.as_ref().and_then(Data::current);
        if length.is_none() {
            *data = None;
        }
        let head = match data {
            // Nobody wrote since this process did: its head is the head.
            Some(Data {
                last: Some((lengths, head)),
                ..
            }) if Some(*lengths) == length => Some(head.clone()),
            Some(d) => {
                let (bytes, head) = self.head_at(&d.head)?;
                d.head_len = bytes;
                head
            }
            None => {
                let (head_file, head) = self.open_head()?;
                let head_len = head_file.metadata().map(|m| m.len()).unwrap_or(0);
                use std::os::unix::fs::OpenOptionsExt;
                let trail = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(&file)
                    .map_err(fail)?;
                *data = Some(Data::new(&self.dir, head_file, head_len, trail));
                head
            }
        };
        let Some(d) = data.as_mut() else {
            return Err(TrustError::file(&file, "the trail is not open"));
        };
        if key.is_none() && head.as_ref().is_some_and(|h| h.keyed) {
            return Err(TrustError::file(
                &file,
                "the trail is keyed, but this process cannot reach its key (the keyring); not writing a line that would break the chain",
            ));
        }
        let (seq, prev) = match &head {
            Some(h) => (h.seq + 1, h.hash.clone()),
            None => (1, GENESIS.to_owned()),
        };
        let (mut text, hash) = chain::link(seq, &prev, event, key.as_ref());
        text.push('\n');
        // One write of the whole line to a file opened for appending: it lands at the
        // end whatever another process wrote before it took the lock.
        d.trail.write_all(text.as_bytes()).map_err(fail)?;
        let written = Head {
            seq,
            hash,
            keyed: key.is_some(),
        };
        let mut head = serde_json::to_vec(&written).map_err(|e| TrustError::file(&file, e))?;
        // Rewritten in place, padded to one fixed size, under the lock: a rename per call
        // makes ext4 write the new file's data back at once, which cost most of a proxied
        // call. Neither this nor the line above is flushed to disk: flushing only one of
        // them would not make the pair consistent after a power loss.
        head.resize(HEAD_BYTES.max(head.len()), b' ');
        let fail_head = |e: std::io::Error| TrustError::file(&d.paths[0], e);
        use std::os::unix::fs::FileExt;
        d.head.write_all_at(&head, 0).map_err(fail_head)?;
        // Cut only when it shrank (a truncation to the same length still costs ext4
        // work on every line).
        if (head.len() as u64) < d.head_len {
            d.head.set_len(head.len() as u64).map_err(fail_head)?;
        }
        d.head_len = head.len() as u64;
        d.last = length.map(|[_, trail]| ([d.head_len, trail + text.len() as u64], written));
        Ok(())
    }

    /// What the open head file holds (and its length).
    fn head_at(&self, file: &std::fs::File) -> Result<(u64, Option<Head>), TrustError> {
        use std::os::unix::fs::FileExt;
        let path = self.dir.join(HEAD);
        let mut bytes = vec![0u8; MAX_HEAD_BYTES as usize + 1];
        let mut got = 0;
        loop {
            let n = file
                .read_at(&mut bytes[got..], got as u64)
                .map_err(|e| TrustError::file(&path, e))?;
            got += n;
            if n == 0 || got == bytes.len() {
                break;
            }
        }
        bytes.truncate(got);
        Ok((got as u64, parse_head(&path, &bytes)?))
    }

    /// The head file, open for rewriting (created when neither it nor the trail exists),
    /// and what it holds.
    fn open_head(&self) -> Result<(std::fs::File, Option<Head>), TrustError> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join(HEAD);
        let fail = |e: std::io::Error| TrustError::file(&path, e);
        let open = |create: bool| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .mode(0o600)
                .open(&path)
        };
        let mut file = match open(false) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.read_head()?;
                crate::paths::create_private_dir(&self.dir).map_err(fail)?;
                return Ok((open(true).map_err(fail)?, None));
            }
            Err(e) => return Err(fail(e)),
        };
        let mut bytes = Vec::new();
        (&mut file)
            .take(MAX_HEAD_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(fail)?;
        Ok((file, parse_head(&path, &bytes)?))
    }

    /// Records an event, logging (never failing) when the trail cannot be written: an
    /// unwritable trail must be visible, but must not take the user's work down with it.
    /// Inside [`deferring`], a file trail's line waits until the request is answered.
    pub fn note(&self, event: &str, fields: Value) {
        if self.shared.is_none() {
            let mut event = Some(Event::now(event, fields));
            let _ = DEFERRED.try_with(|d| {
                if let Some(event) = event.take() {
                    lock(&d.0.0).push((self.clone(), event));
                }
            });
            if let Some(event) = event
                && let Err(e) = self.write(event)
            {
                tracing::warn!("the audit trail could not be written: {e}");
            }
            return;
        }
        if let Err(e) = self.record(event, fields) {
            tracing::warn!("the audit trail could not be written: {e}");
        }
    }

    fn read_head(&self) -> Result<Option<Head>, TrustError> {
        let path = self.dir.join(HEAD);
        match crate::paths::read_capped(&path, MAX_HEAD_BYTES) {
            Ok(None) => {
                if self.path().exists() {
                    // Continuing after a lost head would hide the loss: refuse to write
                    // until a human looks (`edgar audit verify` says what is wrong).
                    return Err(TrustError::file(
                        &path,
                        "missing while the audit trail exists; run `edgar audit verify`",
                    ));
                }
                Ok(None)
            }
            Ok(Some(bytes)) => parse_head(&path, &bytes),
            Err(e) => Err(TrustError::file(&path, e)),
        }
    }

    /// Checks the whole chain; the number of lines on success, else the first bad line.
    pub fn verify(&self) -> Result<u64, TrustError> {
        let file = self.path();
        let tampered = |line: usize, reason: String| TrustError::Tampered {
            file: file.clone(),
            line,
            reason,
        };
        let head = self.read_head();
        let lines = match std::fs::File::open(&file) {
            Ok(f) => read_lines(f).map_err(|e| TrustError::file(&file, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return match head? {
                    // The key is made when the first line is written, and kept apart
                    // from the trail: with both files gone, it says a trail was here.
                    None if self.key(false).is_some() => Err(tampered(
                        1,
                        "the trail and its head are gone, but its key exists (made when its first line was written): the whole trail was deleted".into(),
                    )),
                    None => Ok(0),
                    Some(h) => Err(tampered(
                        1,
                        format!("the trail is gone, but it had {} lines", h.seq),
                    )),
                };
            }
            Err(e) => return Err(TrustError::file(&file, e)),
        };
        let mut checker = chain::Checker::new(self.key(false).cloned(), self.source.is_some());
        for text in &lines {
            checker
                .next(text.as_deref())
                .map_err(|(n, why)| tampered(n, why))?;
        }
        let (count, prev) = checker.finish().map_err(|(n, why)| tampered(n, why))?;
        match head? {
            Some(h) if h.seq == count && h.hash == prev => Ok(count),
            Some(h) if h.seq > count => Err(tampered(
                lines.len() + 1,
                format!(
                    "the trail ends after {count} lines, but {} were written (truncated)",
                    h.seq
                ),
            )),
            Some(_) => Err(tampered(
                lines.len(),
                "the last line is not the one last written".into(),
            )),
            None if count == 0 => Ok(0),
            None => Err(TrustError::file(
                &self.dir.join(HEAD),
                "missing while the audit trail exists",
            )),
        }
    }

    /// The last `n` events, oldest first.
    pub fn tail(&self, n: usize) -> Result<Vec<Value>, TrustError> {
        let file = self.path();
        let lines = match std::fs::File::open(&file) {
            Ok(f) => read_lines(f).map_err(|e| TrustError::file(&file, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(TrustError::file(&file, e)),
        };
        let start = lines.len().saturating_sub(n);
        Ok(lines[start..]
            .iter()
            .map(|l| {
                l.as_deref()
                    .and_then(|t| serde_json::from_str(t).ok())
                    .unwrap_or_else(|| json!({"event": "unreadable line"}))
            })
            .collect())
    }
}

fn parse_head(path: &Path, bytes: &[u8]) -> Result<Option<Head>, TrustError> {
    if bytes.len() as u64 > MAX_HEAD_BYTES {
        return Err(TrustError::file(path, "corrupt: too large"));
    }
    serde_json::from_slice(bytes)
        .map(Some)
        .map_err(|e| TrustError::file(path, format!("corrupt: {e}")))
}

/// Every line, `None` for one that is too long or not UTF-8.
fn read_lines(f: std::fs::File) -> std::io::Result<Vec<Option<String>>> {
    let mut reader = std::io::BufReader::new(f);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = read_line_capped(&mut reader, &mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        out.push(if buf.len() > MAX_LINE_BYTES {
            None
        } else {
            String::from_utf8(buf.clone()).ok()
        });
    }
}

/// Reads one line, keeping at most `MAX_LINE_BYTES + 1` bytes of it.
fn read_line_capped(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(total);
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = (MAX_LINE_BYTES + 1).saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..take.min(room)]);
        r.consume(take);
        total += take;
        if done {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests;
