//! What an approval of a project entry is bound to: its text as written, the project
//! directory and its identity, the adapter's bytes, the project's code files it runs and
//! the values of the variables it takes. `trust::approval` stores approvals of this
//! digest; config computes it while reading a project file, before anything runs.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::digest::{canonical_json, sha256_hex};

/// Bumped when what an entry digest covers changes: older approvals then match nothing.
const DIGEST_VERSION: u32 = 2;

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
}
