//! A human's approvals of project servers, in `<state>/approvals.json`.
//!
//! An approval names the project directory, the server and the digest of exactly what
//! the entry says (and of the adapter's bytes): any change to the entry, or the same
//! entry in another directory, is a different digest and needs a new approval. A name
//! alone approves nothing.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::TrustError;

const FILE: &str = "approvals.json";
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

#[cfg(test)]
mod tests {
    use super::*;

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
