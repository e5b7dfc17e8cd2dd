//! A human's approvals of project servers, in `<state>/approvals.json`.
//!
//! An approval names the project directory, the server and the digest of exactly what
//! the entry says (and of the adapter's bytes): any change to the entry, or the same
//! entry in another directory, is a different digest and needs a new approval. A name
//! alone approves nothing.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{TrustError, canonical_json, sha256_hex};

const FILE: &str = "approvals.json";
/// Bumped when what an entry digest covers changes: older approvals then match nothing.
const DIGEST_VERSION: u32 = 2;
/// Largest approvals file read (a few hundred bytes per approval).
const MAX_FILE_BYTES: u64 = 8 << 20;

/// One approved project entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub project: PathBuf,
    pub name: String,
    pub digest: String,
    pub approved_at: u64,
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    format: u32,
    approvals: Vec<Approval>,
}

/// The approvals store. Reading a missing file gives no approvals; so does a corrupt
/// one (with a warning): when in doubt, nothing is approved.
#[derive(Debug, Clone, Default)]
pub struct Approvals {
    file: Option<PathBuf>,
    records: Vec<Approval>,
}

impl Approvals {
    /// The store under `state_dir`; `None` (no home) holds nothing and saves nothing.
    pub fn load(state_dir: Option<&Path>) -> Approvals {
        let Some(dir) = state_dir else {
            return Approvals::default();
        };
        let file = dir.join(FILE);
        let records = match read(&file) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("{e}; no project server is approved until it is fixed or removed");
                Vec::new()
            }
        };
        Approvals {
            file: Some(file),
            records,
        }
    }

    pub fn is_approved(&self, project: &Path, name: &str, digest: &str) -> bool {
        self.records
            .iter()
            .any(|a| a.project == project && a.name == name && a.digest == digest)
    }

    /// The approvals recorded for one project directory.
    pub fn for_project<'a>(&'a self, project: &'a Path) -> impl Iterator<Item = &'a Approval> {
        self.records.iter().filter(move |a| a.project == project)
    }

    /// Records an approval, replacing any earlier one of the same server in the same
    /// project, and saves (under a lock, re-reading first, so two processes never lose
    /// each other's approvals).
    pub fn approve(
        &mut self,
        project: &Path,
        name: &str,
        digest: &str,
        now: u64,
    ) -> Result<(), TrustError> {
        self.update(|records| {
            records.retain(|a| !(a.project == project && a.name == name));
            records.push(Approval {
                project: project.to_owned(),
                name: name.to_owned(),
                digest: digest.to_owned(),
                approved_at: now,
            });
        })
    }

    /// Forgets the approval of `name` in `project`; false when there was none.
    pub fn revoke(&mut self, project: &Path, name: &str) -> Result<bool, TrustError> {
        let mut removed = false;
        self.update(|records| {
            let before = records.len();
            records.retain(|a| !(a.project == project && a.name == name));
            removed = records.len() != before;
        })?;
        Ok(removed)
    }

    fn update(&mut self, change: impl FnOnce(&mut Vec<Approval>)) -> Result<(), TrustError> {
        let Some(file) = self.file.clone() else {
            return Err(TrustError::Refused(
                "no state directory to keep approvals in: set HOME or XDG_STATE_HOME".into(),
            ));
        };
        let _lock = crate::paths::lock_file(&file.with_extension("lock"))
            .map_err(|e| TrustError::file(&file, format!("cannot lock: {e}")))?;
        let mut records = read(&file).unwrap_or_default();
        change(&mut records);
        records.sort_by(|a, b| (&a.project, &a.name).cmp(&(&b.project, &b.name)));
        let out = File {
            format: 1,
            approvals: records.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&out).map_err(|e| TrustError::file(&file, e))?;
        crate::paths::write_atomic(&file, &bytes).map_err(|e| TrustError::file(&file, e))?;
        self.records = records;
        Ok(())
    }
}

fn read(file: &Path) -> Result<Vec<Approval>, TrustError> {
    match crate::paths::read_capped(file, MAX_FILE_BYTES) {
        Ok(None) => Ok(Vec::new()),
        Ok(Some(bytes)) => serde_json::from_slice::<File>(&bytes)
            .map(|f| f.approvals)
            .map_err(|e| TrustError::file(file, format!("not a valid approvals file: {e}"))),
        Err(e) => Err(TrustError::file(file, e)),
    }
}

/// What an approval is bound to besides the entry's text.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bound<'a> {
    /// The schema adapter it would load and the sha256 of its bytes (`None`: built-in).
    pub adapter: Option<(&'a Path, &'a str)>,
    /// The project's own code it runs: relative path and sha256 (or why unreadable).
    pub code: &'a [(String, String)],
    /// What identifies the project directory besides its path.
    pub identity: Option<&'a Value>,
    /// The variables its command, arguments and URL take, with the sha256 of each value.
    pub variables: &'a [(String, String)],
}

/// The digest an approval is bound to: the project directory and its identity, the
/// server's name, its entry exactly as written (canonical JSON, before any `${VAR}`
/// expansion), the sha256 of the schema adapter it would load, and of the project's
/// code files it runs.
pub fn entry_digest(
    project: &Path,
    name: &str,
    entry: &Map<String, Value>,
    bound: Bound<'_>,
) -> String {
    let doc = json!({
        "version": DIGEST_VERSION,
        "project": project.to_string_lossy(),
        "identity": bound.identity,
        "name": name,
        "entry": Value::Object(entry.clone()),
        "adapter": bound.adapter.map(|(path, sha)| json!({"path": path.to_string_lossy(), "sha256": sha})),
        "code": bound.code.iter().map(|(p, sha)| json!([p, sha])).collect::<Vec<_>>(),
        "variables": bound.variables.iter().map(|(n, sha)| json!([n, sha])).collect::<Vec<_>>(),
    });
    sha256_hex(canonical_json(&doc).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn adapter(sha: &'static str) -> Bound<'static> {
        Bound {
            adapter: Some((Path::new("/a.wasm"), sha)),
            ..Bound::default()
        }
    }

    fn code(sha: &str) -> Vec<(String, String)> {
        vec![("server.js".to_owned(), sha.to_owned())]
    }

    #[test]
    fn any_change_to_the_entry_the_directory_or_the_adapter_changes_the_digest() {
        let p = Path::new("/src/app");
        let base = entry(r#"{"command": "sh", "args": ["-c", "echo hi"]}"#);
        let none = Bound::default();
        let d = entry_digest(p, "helper", &base, none);
        assert_eq!(
            d,
            entry_digest(
                p,
                "helper",
                &entry(r#"{"args": ["-c", "echo hi"], "command": "sh"}"#),
                none
            ),
            "key order is not content"
        );
        for other in [
            entry_digest(
                p,
                "helper",
                &entry(r#"{"command": "sh", "args": ["-c", "echo hi!"]}"#),
                none,
            ),
            entry_digest(
                p,
                "helper",
                &entry(r#"{"command": "sh", "args": ["-c", "echo hi"], "env": {"A": "1"}}"#),
                none,
            ),
            entry_digest(Path::new("/src/other"), "helper", &base, none),
            entry_digest(p, "helper2", &base, none),
            entry_digest(p, "helper", &base, adapter("00")),
            entry_digest(
                p,
                "helper",
                &base,
                Bound {
                    code: &code("00"),
                    ..none
                },
            ),
            entry_digest(
                p,
                "helper",
                &base,
                Bound {
                    identity: Some(&json!({"inode": "1:2"})),
                    ..none
                },
            ),
        ] {
            assert_ne!(d, other);
        }
        assert_ne!(
            entry_digest(p, "helper", &base, adapter("00")),
            entry_digest(p, "helper", &base, adapter("01")),
        );
        assert_ne!(
            entry_digest(
                p,
                "helper",
                &base,
                Bound {
                    code: &code("00"),
                    ..none
                }
            ),
            entry_digest(
                p,
                "helper",
                &base,
                Bound {
                    code: &code("01"),
                    ..none
                }
            ),
            "changed code needs a new approval"
        );
        let one = json!({"inode": "1:2", "origin": "git@a:b"});
        let other = json!({"inode": "1:3", "origin": "git@a:b"});
        assert_ne!(
            entry_digest(
                p,
                "helper",
                &base,
                Bound {
                    identity: Some(&one),
                    ..none
                }
            ),
            entry_digest(
                p,
                "helper",
                &base,
                Bound {
                    identity: Some(&other),
                    ..none
                }
            ),
            "another checkout at the same path is another project"
        );
    }

    #[test]
    fn approvals_persist_are_replaced_and_revoked() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = Path::new("/src/app");
        let mut a = Approvals::load(Some(d.path()));
        assert!(!a.is_approved(p, "s", "d1"));
        a.approve(p, "s", "d1", 1).unwrap_or_else(|e| panic!("{e}"));
        a.approve(p, "s", "d2", 2).unwrap_or_else(|e| panic!("{e}"));
        let again = Approvals::load(Some(d.path()));
        assert!(again.is_approved(p, "s", "d2"));
        assert!(
            !again.is_approved(p, "s", "d1"),
            "a new approval replaces the old one"
        );
        assert!(!again.is_approved(Path::new("/src/other"), "s", "d2"));
        let mut again = again;
        assert!(again.revoke(p, "s").unwrap_or_else(|e| panic!("{e}")));
        assert!(!Approvals::load(Some(d.path())).is_approved(p, "s", "d2"));
        std::fs::write(d.path().join(FILE), "{not json").unwrap_or_else(|e| panic!("{e}"));
        assert!(Approvals::load(Some(d.path())).records.is_empty());
    }
}
