//! Who is believed, and on what evidence: a human's approval of project config (bound to
//! a digest of its content), pins of what each server said about its tools, an
//! administrator's policy, and a tamper-evident audit trail of every decision and call.
//!
//! Config a user did not write (a cloned repository's `.mcp.json`) is held back by
//! `config` until [`approval::Approvals`] has its digest; the session quarantines a tool
//! whose description or schema differs from its [`pins`]; [`policy::Policy`] is the
//! ceiling neither user nor project config can raise; [`audit::AuditLog`] records it all.

pub mod admit;
pub mod approval;
pub mod audit;
pub mod pins;
pub mod policy;

pub use crate::paths::state_dir;

use std::path::{Path, PathBuf};

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
    /// A shared audit trail did not take a line (its database is unreachable).
    #[error("the audit trail cannot be written: {0}")]
    Unwritten(String),
}

impl TrustError {
    pub(crate) fn file(file: &Path, message: impl std::fmt::Display) -> TrustError {
        TrustError::File {
            file: file.to_owned(),
            message: message.to_string(),
        }
    }
}
