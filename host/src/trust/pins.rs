//! Tool pins: what the model was shown of each tool (name, title, description, input and
//! output schema, annotations), hashed when the server was first discovered. A later
//! discovery, or a `list_changed`, that shows a different or new tool quarantines it
//! until a human approves the change; a rug pull cannot slip past an earlier approval.
//!
//! Pins live in `<state>/pins/`, apart from the discovery cache, per server name and
//! scope (the user's config, or one project directory): `--refresh`, a deleted cache or
//! a changed command never resets them. A project's committed `.mcp.lock` is one more
//! constraint for the project's own servers that it lists, never a way around review: a
//! tool runs only when it matches both the local pin and the lock (a first discovery
//! pins only what the lock allows, and says so once, in the audit trail and on stderr).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::TrustError;
use crate::config::ServerSpec;
use crate::digest::{canonical_json, sha256_hex};
use crate::guard::SanitizedTool;

const FORMAT: u32 = 1;
/// Largest pin or lock file read (it holds each tool's full view).
const MAX_FILE_BYTES: u64 = 64 << 20;
/// The project file that pins a team's servers.
pub const LOCK_FILE: &str = ".mcp.lock";

/// One tool as pinned: its digest and the view it covers (kept to show a diff).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    pub digest: String,
    pub view: Value,
    pub at: u64,
    /// A human accepted exactly this view (`edgar mcp approve`), rather than its first
    /// discovery pinning it: only such a pin lets a tool the guard flagged through.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
    /// What the guard found in a pending tool, for the human who reviews it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<String>,
}

/// A server's pins, and the changes waiting for a human.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PinFile {
    pub format: u32,
    pub server: String,
    /// The server's launch digest (`ServerSpec::digest`) when last discovered.
    pub launch: String,
    /// By the server's own tool name.
    pub tools: BTreeMap<String, Pin>,
    /// Tools seen but not accepted: changed since pinned, or new.
    #[serde(default)]
    pub pending: BTreeMap<String, Pin>,
    /// Prompts, by the server's own prompt name, pinned apart from tools (a changed
    /// prompt text is a rug pull too). Not part of `.mcp.lock`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, Pin>,
    /// Prompts seen but not accepted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pending_prompts: BTreeMap<String, Pin>,
}

/// A tool held back because it differs from its pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quarantined {
    /// The model-visible name.
    pub name: String,
    /// The server's own name.
    pub tool: String,
    /// What changed, in words ("new tool", "description, input schema changed").
    pub change: String,
}

/// The committed `.mcp.lock`: per server, each tool's pin digest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockFile {
    pub format: u32,
    pub servers: BTreeMap<String, LockedServer>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockedServer {
    pub launch: String,
    pub tools: BTreeMap<String, String>,
    /// Its prompts' digests; absent in a lock written before prompts were locked, which
    /// then constrains tools only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<BTreeMap<String, String>>,
}

/// Why a prompt the project's lock does not list as it is was held back.
const LOCK_CHANGE: &str = "differs from the project's .mcp.lock";

/// The outcome of checking one server's tools against its pins.
#[derive(Debug, Default)]
pub struct Checked {
    pub accepted: Vec<SanitizedTool>,
    pub quarantined: Vec<Quarantined>,
    /// True when this was the server's first discovery: everything was pinned.
    pub first: bool,
    /// Tools that became quarantined in this check (not already waiting).
    pub newly_quarantined: Vec<Quarantined>,
    /// On a first discovery of a server the project's lock lists: the tools pinned
    /// because they matched it (shown once and audited, never silently).
    pub pinned_by_lock: Vec<String>,
}

/// The pin store of one session.
#[derive(Debug)]
pub struct PinStore {
    dir: PathBuf,
    lock_path: Option<PathBuf>,
    lock: OnceLock<Option<LockFile>>,
    shared: Option<std::sync::Arc<dyn SharedPins>>,
}

/// Where pin files are kept for other machines too (a team gateway's replicas share one
/// set of pins, so a rug pull one replica quarantined is not pinned as new by another):
/// read there first, written there after each local write. Blocking, like the files.
pub trait SharedPins: Send + Sync + std::fmt::Debug {
    /// The pin file named `file`, if it is kept there (and intact).
    fn fetch(&self, file: &str) -> Result<Option<Vec<u8>>, String>;
    fn store(&self, file: &str, bytes: &[u8]) -> Result<(), String>;
}

/// What the model sees of a tool: the part a pin covers.
pub fn view(t: &SanitizedTool) -> Value {
    let h = t.hints();
    json!({
        "name": t.name(),
        "title": h.title,
        "description": t.description(),
        "inputSchema": t.input_schema(),
        "outputSchema": t.output_schema(),
        "annotations": {
            "readOnlyHint": h.read_only,
            "destructiveHint": h.destructive,
            "idempotentHint": h.idempotent,
            "openWorldHint": h.open_world,
        },
    })
}

/// sha256 of a view's canonical JSON.
pub fn digest(view: &Value) -> String {
    sha256_hex(canonical_json(view).as_bytes())
}

/// The parts of a view, by key, with the words that name them (a prompt's view has
/// `arguments` where a tool's has schemas).
pub const VIEW_PARTS: [(&str, &str); 7] = [
    ("name", "name"),
    ("title", "title"),
    ("description", "description"),
    ("inputSchema", "input schema"),
    ("outputSchema", "output schema"),
    ("annotations", "annotations"),
    ("arguments", "arguments"),
];

/// Which parts of two views differ, in words.
pub fn what_changed(old: &Value, new: &Value) -> String {
    let parts: Vec<&str> = VIEW_PARTS
        .into_iter()
        .filter(|(k, _)| old.get(k) != new.get(k))
        .map(|(_, words)| words)
        .collect();
    if parts.is_empty() {
        "changed".into()
    } else {
        format!("{} changed", parts.join(", "))
    }
}

impl PinStore {
    /// Pins under `state_dir`; `project_dir`'s `.mcp.lock`, when it exists, pins the
    /// project's servers it lists (read on first use, never at startup).
    pub fn new(state_dir: &Path, project_dir: Option<&Path>) -> PinStore {
        PinStore {
            dir: state_dir.join("pins"),
            lock_path: project_dir.map(|d| d.join(LOCK_FILE)),
            lock: OnceLock::new(),
            shared: None,
        }
    }

    /// Pins kept in `shared` too, which is believed before this machine's files.
    pub fn with_shared(mut self, shared: Option<std::sync::Arc<dyn SharedPins>>) -> PinStore {
        self.shared = shared;
        self
    }

    fn file_name(path: &Path) -> &str {
        path.file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default()
    }

    fn path(&self, spec: &ServerSpec) -> PathBuf {
        let scope = match &spec.project {
            Some(p) => sha256_hex(p.to_string_lossy().as_bytes()),
            None => sha256_hex(b"user"),
        };
        self.dir
            .join(format!("{}-{}.json", spec.name, &scope[..16]))
    }

    /// The server's pins, if it was ever discovered.
    pub fn read(&self, spec: &ServerSpec) -> Result<Option<PinFile>, TrustError> {
        let path = self.path(spec);
        if let Some(shared) = &self.shared {
            let fetched = shared
                .fetch(Self::file_name(&path))
                .map_err(|e| TrustError::file(&path, format!("the shared pins: {e}")))?;
            if let Some(bytes) = fetched {
                // This machine's copy follows the shared one (for `edgar mcp pins`).
                let _ = crate::paths::write_atomic(&path, &bytes);
                return serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                    TrustError::file(&path, format!("not a valid shared pin file: {e}"))
                });
            }
        }
        match crate::paths::read_capped(&path, MAX_FILE_BYTES) {
            Ok(None) => Ok(None),
            Ok(Some(bytes)) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| TrustError::file(&path, format!("not a valid pin file: {e}"))),
            Err(e) => Err(TrustError::file(&path, e)),
        }
    }

    fn write(&self, spec: &ServerSpec, file: &PinFile) -> Result<(), TrustError> {
        let path = self.path(spec);
        let bytes = serde_json::to_vec_pretty(file).map_err(|e| TrustError::file(&path, e))?;
        crate::paths::write_atomic(&path, &bytes).map_err(|e| TrustError::file(&path, e))?;
        if let Some(shared) = &self.shared {
            shared
                .store(Self::file_name(&path), &bytes)
                .map_err(|e| TrustError::file(&path, format!("the shared pins: {e}")))?;
        }
        Ok(())
    }

    /// The project's lock, when it exists and this server is one of its own.
    fn locked(&self, spec: &ServerSpec) -> Result<Option<&LockedServer>, TrustError> {
        if spec.project.is_none() {
            return Ok(None);
        }
        let lock = match self.lock.get() {
            Some(l) => l,
            None => {
                let read = match &self.lock_path {
                    Some(p) => read_lock(p)?,
                    None => None,
                };
                self.lock.get_or_init(|| read)
            }
        };
        Ok(lock.as_ref().and_then(|l| l.servers.get(&spec.name)))
    }

    /// Checks freshly discovered tools against the server's pins: unchanged tools pass,
    /// changed and new ones are quarantined (and kept as pending for `approve`). A first
    /// discovery pins everything, unless the project's lock says otherwise. A pin file
    /// that cannot be read quarantines everything: never trust by default after damage.
    pub fn check(
        &self,
        spec: &ServerSpec,
        tools: Vec<SanitizedTool>,
        now: u64,
    ) -> Result<Checked, TrustError> {
        self.check_with_findings(spec, tools, now, &BTreeMap::new())
    }

    /// [`PinStore::check`], with the tools the guard flagged (tool name -> the finding,
    /// in words): a flagged tool passes only with a pin a human approved for exactly its
    /// view; otherwise it is quarantined with the finding as its change (never pinned by
    /// a first discovery or a lock), and `approve` shows the finding.
    pub fn check_with_findings(
        &self,
        spec: &ServerSpec,
        tools: Vec<SanitizedTool>,
        now: u64,
        flagged: &BTreeMap<String, String>,
    ) -> Result<Checked, TrustError> {
        let _guard = crate::paths::lock_file(&self.path(spec).with_extension("lock"))
            .map_err(|e| TrustError::file(&self.path(spec), e))?;
        let existing = self.read(spec)?;
        let locked = self.locked(spec)?.cloned();
        let first = existing.is_none();
        let mut file = existing.unwrap_or_else(|| PinFile {
            format: FORMAT,
            server: spec.name.clone(),
            ..PinFile::default()
        });
        let before_pending = file.pending.clone();
        let before_tools = file.tools.len();
        let launch = spec.digest();
        let launch_changed = file.launch != launch;
        file.launch = launch;
        let mut out = Checked {
            first,
            ..Checked::default()
        };
        let mut pending = BTreeMap::new();
        for t in tools {
            let v = view(&t);
            let d = digest(&v);
            // Both constraints: the lock (when it lists this server) and the local pin. A
            // tool without a pin is pinned on a first discovery, or when the lock lists it
            // as it is (said once, and audited); a pinned tool must match its pin, whatever
            // the lock says, so a commit that changes both still meets a human.
            let lock_ok = locked
                .as_ref()
                .is_none_or(|l| l.tools.get(t.tool()) == Some(&d));
            let pinned = file.tools.get(t.tool());
            let finding = flagged.get(t.tool());
            let pin_ok = match (pinned, finding) {
                (Some(p), None) => p.digest == d,
                (Some(p), Some(_)) => p.digest == d && p.approved,
                (None, None) => first || locked.is_some(),
                (None, Some(_)) => false,
            };
            if lock_ok && pin_ok {
                if pinned.is_none() {
                    if locked.is_some() {
                        out.pinned_by_lock.push(t.tool().to_owned());
                    }
                    file.tools.insert(
                        t.tool().to_owned(),
                        Pin {
                            digest: d,
                            view: v,
                            at: now,
                            approved: false,
                            finding: None,
                        },
                    );
                }
                out.accepted.push(t);
                continue;
            }
            let change = match (file.tools.get(t.tool()), finding) {
                (Some(p), _) if p.digest != d => what_changed(&p.view, &v),
                (_, Some(f)) => format!("the guard found {f}"),
                (p, None) => match p {
                    _ if locked
                        .as_ref()
                        .is_some_and(|l| l.tools.contains_key(t.tool())) =>
                    {
                        "differs from .mcp.lock".into()
                    }
                    Some(_) => "not in .mcp.lock".into(),
                    None => "new tool".into(),
                },
            };
            let q = Quarantined {
                name: t.name().to_owned(),
                tool: t.tool().to_owned(),
                change,
            };
            if before_pending.get(t.tool()).map(|p| &p.digest) != Some(&d) {
                out.newly_quarantined.push(q.clone());
            }
            out.quarantined.push(q);
            pending.insert(
                t.tool().to_owned(),
                Pin {
                    digest: d,
                    view: v,
                    at: now,
                    approved: false,
                    finding: finding.cloned(),
                },
            );
        }
        let pending_changed = pending.keys().ne(before_pending.keys())
            || pending
                .iter()
                .any(|(k, p)| before_pending.get(k).map(|b| &b.digest) != Some(&p.digest));
        file.pending = pending;
        if first || launch_changed || pending_changed || file.tools.len() != before_tools {
            self.write(spec, &file)?;
        }
        Ok(out)
    }

    /// Checks a server's listed prompts (name and view, as `prompts` shows them) against
    /// their pins: unchanged ones pass, changed and new ones are held back as pending
    /// until `approve`. A server's first listing pins every prompt, as a first discovery
    /// pins its tools. Returns the names that pass, and those held back.
    pub fn check_prompts(
        &self,
        spec: &ServerSpec,
        prompts: &[(String, Value)],
        now: u64,
        flagged: &BTreeMap<String, String>,
    ) -> Result<(Vec<String>, Vec<Quarantined>), TrustError> {
        let _guard = crate::paths::lock_file(&self.path(spec).with_extension("lock"))
            .map_err(|e| TrustError::file(&self.path(spec), e))?;
        // A project's lock that pins prompts constrains them as it does tools: a prompt
        // it does not list as it is passes on no machine, first listing or not.
        let locked = self.locked(spec)?.and_then(|l| l.prompts.clone());
        let lock_ok = |name: &str, d: &str| {
            locked
                .as_ref()
                .is_none_or(|l| l.get(name).is_some_and(|ld| ld == d))
        };
        let found = |name: &str| flagged.get(name).map(|f| format!("the guard found {f}"));
        // The file is made by the server's first tool discovery (which a listing always
        // follows); without it nothing is written here, so that discovery stays a first.
        let Some(mut file) = self.read(spec)? else {
            let (mut passed, mut held) = (Vec::new(), Vec::new());
            for (name, v) in prompts {
                let change = found(name)
                    .or_else(|| (!lock_ok(name, &digest(v))).then(|| LOCK_CHANGE.to_owned()));
                match change {
                    None => passed.push(name.clone()),
                    Some(change) => held.push(Quarantined {
                        name: name.clone(),
                        tool: name.clone(),
                        change,
                    }),
                }
            }
            return Ok((passed, held));
        };
        let first = file.prompts.is_empty() && file.pending_prompts.is_empty();
        let before = (file.prompts.len(), file.pending_prompts.clone());
        let (mut passed, mut held) = (Vec::new(), Vec::new());
        let mut pending = BTreeMap::new();
        for (name, v) in prompts {
            let d = digest(v);
            let finding = flagged.get(name);
            let pin = Pin {
                digest: d.clone(),
                view: v.clone(),
                at: now,
                approved: false,
                finding: finding.cloned(),
            };
            let in_lock = lock_ok(name, &d);
            // A prompt the guard's findings flag passes only as a human approved it.
            match file.prompts.get(name) {
                Some(p) if p.digest == d && in_lock && (finding.is_none() || p.approved) => {
                    passed.push(name.clone())
                }
                None if (first || locked.is_some()) && in_lock && finding.is_none() => {
                    file.prompts.insert(name.clone(), pin);
                    passed.push(name.clone());
                }
                old => {
                    held.push(Quarantined {
                        name: name.clone(),
                        tool: name.clone(),
                        change: match (old, finding) {
                            (Some(p), Some(f)) if p.digest != d => {
                                format!("{}; the guard found {f}", what_changed(&p.view, v))
                            }
                            (_, Some(f)) => format!("the guard found {f}"),
                            (Some(p), None) if p.digest != d => what_changed(&p.view, v),
                            (_, None) if !in_lock => LOCK_CHANGE.into(),
                            (Some(p), None) => what_changed(&p.view, v),
                            (None, None) => "new prompt".into(),
                        },
                    });
                    pending.insert(name.clone(), pin);
                }
            }
        }
        let pending_changed = pending.len() != before.1.len()
            || pending
                .iter()
                .any(|(k, p)| before.1.get(k).map(|b| &b.digest) != Some(&p.digest));
        file.pending_prompts = pending;
        if pending_changed || file.prompts.len() != before.0 {
            self.write(spec, &file)?;
        }
        Ok((passed, held))
    }

    /// Accepts the pending versions of `tools` (all pending ones when `None`) as the new
    /// pins, and with `None` every pending prompt too. Returns what was accepted.
    pub fn accept(
        &self,
        spec: &ServerSpec,
        tools: Option<&[String]>,
    ) -> Result<Vec<String>, TrustError> {
        let _guard = crate::paths::lock_file(&self.path(spec).with_extension("lock"))
            .map_err(|e| TrustError::file(&self.path(spec), e))?;
        let Some(mut file) = self.read(spec)? else {
            return Ok(Vec::new());
        };
        let names: Vec<String> = file
            .pending
            .keys()
            .filter(|k| tools.is_none_or(|t| t.contains(k)))
            .cloned()
            .collect();
        for name in &names {
            if let Some(mut p) = file.pending.remove(name) {
                p.approved = true;
                p.finding = None;
                file.tools.insert(name.clone(), p);
            }
        }
        let mut accepted = names;
        if tools.is_none() {
            for (name, mut p) in std::mem::take(&mut file.pending_prompts) {
                p.approved = true;
                file.prompts.insert(name.clone(), p);
                accepted.push(format!("prompt {name}"));
            }
        }
        if !accepted.is_empty() {
            self.write(spec, &file)?;
        }
        Ok(accepted)
    }
}

/// Reads a `.mcp.lock`; `None` when it does not exist. A lock that exists but cannot be
/// read is an error: it constrains, so it cannot be ignored. A repository's file: a
/// regular file only, never through a link, never blocking on a FIFO.
pub fn read_lock(path: &Path) -> Result<Option<LockFile>, TrustError> {
    match crate::paths::read_regular(path, MAX_FILE_BYTES) {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| TrustError::file(path, format!("not a valid lock file: {e}"))),
        Err(e) => Err(TrustError::file(path, e)),
    }
}

/// Writes a `.mcp.lock` in a stable order (sorted keys, one tool per line), for review
/// and commit.
pub fn write_lock(path: &Path, lock: &LockFile) -> Result<(), TrustError> {
    let mut text = serde_json::to_string_pretty(lock).map_err(|e| TrustError::file(path, e))?;
    text.push('\n');
    // Replaced, never written through: a link committed in its place is not followed.
    crate::paths::write_atomic(path, text.as_bytes()).map_err(|e| TrustError::file(path, e))
}

impl LockedServer {
    /// The lock entry for a server's current pins.
    pub fn from_pins(file: &PinFile) -> LockedServer {
        LockedServer {
            launch: file.launch.clone(),
            tools: file
                .tools
                .iter()
                .map(|(k, p)| (k.clone(), p.digest.clone()))
                .collect(),
            prompts: Some(
                file.prompts
                    .iter()
                    .map(|(k, p)| (k.clone(), p.digest.clone()))
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
