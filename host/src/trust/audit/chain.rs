//! One audit line and the chain through the lines, wherever they are kept (a file on one
//! machine, a database a gateway's replicas share): how an event becomes its line and
//! hash, and how a run of lines is checked. Both stores write and verify with these, so
//! a chain means the same thing in either.

use serde_json::{Map, Value, json};

use super::AuditKey;
use crate::digest::sha256_hex;

/// The field a keyed line carries.
pub(super) const MAC_FIELD: &str = "mac";
pub(super) const MAC_NAME: &str = "hmac-sha256";
/// The `prev` of the first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Longest line written, and read back: lines are small; an event that is not keeps its
/// name and size only.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// An event before it has a place in the chain.
#[derive(Debug, Clone)]
pub struct Event {
    /// Unix milliseconds.
    pub time: u64,
    pub event: String,
    /// The user a team gateway's request ran as.
    pub user: Option<String>,
    /// The W3C trace id of the request it belongs to.
    pub trace: Option<String>,
    /// Its details (an object; anything else is left out).
    pub fields: Value,
}

impl Event {
    /// `event` with `fields`, now, as the user the current task runs as (if any).
    pub fn now(event: &str, fields: Value) -> Event {
        Event {
            time: now_millis(),
            event: event.to_owned(),
            user: super::ACTOR.try_with(String::clone).ok(),
            trace: crate::telemetry::current().map(|c| c.trace_id()),
            fields,
        }
    }
}

/// The line for `event` at `seq` after the line hashed `prev`, and its hash (an HMAC
/// under `key` when there is one).
pub fn link(seq: u64, prev: &str, event: &Event, key: Option<&AuditKey>) -> (String, String) {
    let head = |line: &mut Map<String, Value>| {
        line.insert("seq".into(), json!(seq));
        line.insert("time".into(), json!(event.time));
        line.insert("event".into(), json!(event.event));
    };
    let tail = |line: &mut Map<String, Value>| {
        line.insert("prev".into(), json!(prev));
        if key.is_some() {
            line.insert(MAC_FIELD.into(), json!(MAC_NAME));
        }
    };
    let mut line = Map::new();
    head(&mut line);
    if let Some(user) = &event.user {
        line.insert("user".into(), json!(user));
    }
    if let Some(trace) = &event.trace {
        line.insert("trace_id".into(), json!(trace));
    }
    if let Value::Object(f) = &event.fields {
        for (k, v) in f {
            line.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    tail(&mut line);
    let mut text = Value::Object(line).to_string();
    if text.len() + 1 > MAX_LINE_BYTES {
        let mut small = Map::new();
        head(&mut small);
        small.insert("oversized".into(), json!(text.len()));
        tail(&mut small);
        text = Value::Object(small).to_string();
    }
    let hash = match key {
        Some(k) => k.mac(text.as_bytes()),
        None => sha256_hex(text.as_bytes()),
    };
    (text, hash)
}

/// Checks lines in order: numbered from 1, each naming the hash of the one before,
/// keyed from some line on when a key is in hand.
pub struct Checker {
    key: Option<AuditKey>,
    /// A key was configured for this trail, so at least one line must be keyed.
    expect_keyed: bool,
    prev: String,
    count: usize,
    keyed_from: Option<usize>,
}

/// Where a chain breaks: the line (from 1) and why.
pub type Break = (usize, String);

impl Checker {
    pub fn new(key: Option<AuditKey>, expect_keyed: bool) -> Checker {
        Checker {
            key,
            expect_keyed,
            prev: GENESIS.to_owned(),
            count: 0,
            keyed_from: None,
        }
    }

    /// The next line (`None`: one that is too long or not UTF-8).
    pub fn next(&mut self, text: Option<&str>) -> Result<(), Break> {
        self.count += 1;
        let n = self.count;
        let Some(text) = text else {
            return Err((n, "not a line edgar wrote (too long or not UTF-8)".into()));
        };
        let v: Value = serde_json::from_str(text).map_err(|e| (n, format!("not JSON: {e}")))?;
        if v.get("seq").and_then(Value::as_u64) != Some(n as u64) {
            return Err((
                n,
                format!(
                    "sequence number {} where {n} was expected (a line was removed, added or moved)",
                    v.get("seq").unwrap_or(&Value::Null)
                ),
            ));
        }
        if v.get("prev").and_then(Value::as_str) != Some(self.prev.as_str()) {
            return Err((
                n,
                "its prev hash is not the hash of the line before (that line was edited)".into(),
            ));
        }
        let keyed = v.get(MAC_FIELD).and_then(Value::as_str) == Some(MAC_NAME);
        self.prev = match (keyed, &self.key, self.keyed_from) {
            (true, Some(k), _) => {
                self.keyed_from.get_or_insert(n);
                k.mac(text.as_bytes())
            }
            (true, None, _) => {
                return Err((
                    n,
                    "the line is keyed, but this session has no audit key to check it (the keyring is unavailable)".into(),
                ));
            }
            (false, _, Some(from)) => {
                return Err((
                    n,
                    format!(
                        "the line is not keyed, though lines from {from} on are (rewritten by someone without the key)"
                    ),
                ));
            }
            (false, _, None) => sha256_hex(text.as_bytes()),
        };
        Ok(())
    }

    /// The number of lines and the last one's hash, once every line has been checked.
    pub fn finish(self) -> Result<(u64, String), Break> {
        if self.key.is_some() && self.expect_keyed && self.keyed_from.is_none() && self.count > 0 {
            return Err((
                self.count,
                "edgar has an audit key, but no line is keyed (rewritten by someone without the key?)".into(),
            ));
        }
        Ok((self.count as u64, self.prev))
    }
}

pub(super) fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
