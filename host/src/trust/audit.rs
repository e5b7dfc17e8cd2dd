//! The audit trail: `<state>/audit.jsonl`, one JSON object per line, each carrying a
//! sequence number and the sha256 of the line before it; `audit.head` holds the last
//! line's number and hash, so a truncated tail is noticed as well as an edited, deleted
//! or reordered line. Records what was decided and what was called: never argument
//! values, results, tokens or keys.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{TrustError, sha256_hex};

const FILE: &str = "audit.jsonl";
const HEAD: &str = "audit.head";
/// The `prev` of the first line.
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Longest line `verify` and `tail` read: lines are written by edgar and are small.
const MAX_LINE_BYTES: usize = 64 << 10;
/// The head's size on disk: its JSON padded with spaces, so each rewrite covers the last.
const HEAD_BYTES: usize = 128;
/// Largest head `read_head` accepts.
const MAX_HEAD_BYTES: u64 = 4096;

/// The last line's number and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Head {
    seq: u64,
    hash: String,
}

/// Appends to, and verifies, one audit trail.
#[derive(Debug, Clone)]
pub struct AuditLog {
    dir: PathBuf,
}

impl AuditLog {
    /// The trail in `state_dir`.
    pub fn new(state_dir: &Path) -> AuditLog {
        AuditLog {
            dir: state_dir.to_owned(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// Appends one event (`event` names it; `fields` are its details), under an exclusive
    /// lock so concurrent edgar processes keep one unbroken chain.
    pub fn record(&self, event: &str, fields: Value) -> Result<(), TrustError> {
        let file = self.path();
        let fail = |e: std::io::Error| TrustError::file(&file, e);
        let _lock = crate::paths::lock_file(&self.dir.join("audit.lock")).map_err(fail)?;
        let (head_file, head) = self.open_head()?;
        let (seq, prev) = match &head {
            Some(h) => (h.seq + 1, h.hash.clone()),
            None => (1, GENESIS.to_owned()),
        };
        let mut line = Map::new();
        line.insert("seq".into(), json!(seq));
        line.insert("time".into(), json!(now_millis()));
        line.insert("event".into(), json!(event));
        if let Value::Object(f) = fields {
            for (k, v) in f {
                line.entry(k).or_insert(v);
            }
        }
        line.insert("prev".into(), json!(prev));
        let text = Value::Object(line).to_string();
        let hash = sha256_hex(text.as_bytes());
        {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&file)
                .map_err(fail)?;
            f.write_all(format!("{text}\n").as_bytes()).map_err(fail)?;
        }
        let mut head =
            serde_json::to_vec(&Head { seq, hash }).map_err(|e| TrustError::file(&file, e))?;
        // Rewritten in place, padded to one fixed size, under the lock: a rename per call
        // makes ext4 write the new file's data back at once, which cost most of a proxied
        // call. Neither this nor the line above is flushed to disk: flushing only one of
        // them would not make the pair consistent after a power loss.
        head.resize(HEAD_BYTES.max(head.len()), b' ');
        let head_path = self.dir.join(HEAD);
        let fail_head = |e: std::io::Error| TrustError::file(&head_path, e);
        use std::os::unix::fs::FileExt;
        head_file.write_all_at(&head, 0).map_err(fail_head)?;
        head_file.set_len(head.len() as u64).map_err(fail_head)
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
    pub fn note(&self, event: &str, fields: Value) {
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
                    None => Ok(0),
                    Some(h) => Err(tampered(
                        1,
                        format!("the trail is gone, but it had {} lines", h.seq),
                    )),
                };
            }
            Err(e) => return Err(TrustError::file(&file, e)),
        };
        let mut prev = GENESIS.to_owned();
        for (i, text) in lines.iter().enumerate() {
            let n = i + 1;
            let Some(text) = text else {
                return Err(tampered(
                    n,
                    "not a line edgar wrote (too long or not UTF-8)".into(),
                ));
            };
            let v: Value =
                serde_json::from_str(text).map_err(|e| tampered(n, format!("not JSON: {e}")))?;
            if v.get("seq").and_then(Value::as_u64) != Some(n as u64) {
                return Err(tampered(
                    n,
                    format!(
                        "sequence number {} where {n} was expected (a line was removed, added or moved)",
                        v.get("seq").unwrap_or(&Value::Null)
                    ),
                ));
            }
            if v.get("prev").and_then(Value::as_str) != Some(prev.as_str()) {
                return Err(tampered(
                    n,
                    "its prev hash is not the hash of the line before (that line was edited)"
                        .into(),
                ));
            }
            prev = sha256_hex(text.as_bytes());
        }
        let count = lines.len() as u64;
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

fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
