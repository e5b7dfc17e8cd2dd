//! Who is believed, and on what evidence: a human's approval of project config (bound to
//! a digest of its content), pins of what each server said about its tools, an
//! administrator's policy, and a tamper-evident audit trail of every decision and call.
//!
//! Config a user did not write (a cloned repository's `.mcp.json`) is held back by
//! `config` until [`approval::Approvals`] has its digest; the session quarantines a tool
//! whose description or schema differs from its [`pins`]; [`policy::Policy`] is the
//! ceiling neither user nor project config can raise; [`audit::AuditLog`] records it all.

pub mod approval;
pub mod audit;
pub mod pins;
pub mod policy;

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// A trust store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{}: {message}", file.display())]
    File { file: PathBuf, message: String },
    /// The audit trail does not verify: the first line that is wrong, and why.
    #[error("{}: line {line}: {reason}", file.display())]
    Tampered {
        file: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{0}")]
    Refused(String),
}

impl TrustError {
    pub(crate) fn file(file: &Path, message: impl std::fmt::Display) -> TrustError {
        TrustError::File {
            file: file.to_owned(),
            message: message.to_string(),
        }
    }
}

/// JSON with object keys sorted (by their UTF-8 bytes) and no insignificant whitespace:
/// the same value always hashes the same, whatever order a file or a server used.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    // Only serde_json's own (UTF-8) output and ASCII punctuation were written.
    String::from_utf8(out).unwrap_or_default()
}

fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

/// sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::guard::hex(&Sha256::digest(bytes))
}

/// Where edgar keeps what it must not lose with the cache (approvals, pins, the audit
/// trail): `$EDGAR_STATE_DIR`, else `$XDG_STATE_HOME/edgar`, else `~/.local/state/edgar`.
pub fn state_dir() -> Option<PathBuf> {
    let var = crate::paths::absolute_var;
    if let Some(dir) = var("EDGAR_STATE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_STATE_HOME") {
        return Some(PathBuf::from(dir).join("edgar"));
    }
    var("HOME").map(|h| PathBuf::from(h).join(".local").join("state").join("edgar"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_ignores_key_order_and_whitespace() {
        let a: Value = serde_json::from_str(r#"{"b": [1, {"y": 2, "x": "é"}], "a": null}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        let b = json!({"a": null, "b": [1, {"x": "é", "y": 2}]});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&b), r#"{"a":null,"b":[1,{"x":"é","y":2}]}"#);
        assert_ne!(
            canonical_json(&json!([1, 2])),
            canonical_json(&json!([2, 1]))
        );
    }
}
