//! MCP server configuration: the `mcpServers` JSON that Claude Code (`.mcp.json`),
//! Claude Desktop and Cursor use, read from the project and the user, merged with the
//! project winning, `${VAR}` expanded, and validated into [`ServerSpec`]s.
//!
//! Reading config does no I/O beyond the two files: it stores a command to run, never a
//! connection to hold.

pub mod bound;
pub mod edit;
mod expand;
pub mod foreign;
mod parse;
mod policy;
pub mod project;
mod spec;
mod unknown;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::guard::AdapterSource;
use bound::{Bound, entry_digest};

pub use expand::expand;
pub use parse::{MAX_NET_HOSTS, check_name, raw_kind, read_file, read_project_file};
pub use policy::{ArgumentAction, FindingAction, FindingActions, Rules, SecretAction, ToolPolicy};
pub use spec::{
    Grant, HostPort, IdToken, IdentityProvider, Net, OAuthClient, ProtocolChoice, Sandbox,
    SandboxProfile, ServerSpec, Transport, Written, example_server,
};

use parse::{Document, from_env, no_env, parse_document, parse_server, string};

/// Default time for a server to start and answer `initialize` and `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time for one tool call.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);
/// Default time for a call the server runs as a task (MCP tasks extension).
pub const DEFAULT_TASK_DEADLINE: Duration = Duration::from_secs(3600);
/// Largest config file read.
const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// The name of the embedded default server, configured when no config file exists.
pub const EXAMPLE_SERVER: &str = "workspace";

/// A config problem, naming the file, the server and the field.
#[derive(Debug, thiserror::Error)]
#[error("{}{}{}: {message}", file.display(), server.as_ref().map(|s| format!(": server '{s}'")).unwrap_or_default(), field.as_ref().map(|f| format!(": field '{f}'")).unwrap_or_default())]
pub struct ConfigError {
    pub file: PathBuf,
    pub server: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

/// The merged configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The servers a session may run, in a stable order: by name. Trusted (the user's
    /// own, or approved) and allowed by the policy.
    pub servers: Vec<ServerSpec>,
    /// Entries that are configured but may not run, and why. A session never sees them.
    pub held: Vec<Held>,
    /// The files that were read.
    pub files: Vec<PathBuf>,
    /// True when no file existed and the embedded default was used.
    pub is_default: bool,
    /// The project directory (canonical where it can be resolved).
    pub project_dir: PathBuf,
}

/// A configured entry that does not run.
#[derive(Debug, Clone)]
pub struct Held {
    pub name: String,
    pub kind: &'static str,
    pub source: PathBuf,
    pub why: Hold,
}

/// Why an entry is held back.
#[derive(Debug, Clone)]
pub enum Hold {
    /// A project entry no human has approved in exactly this form.
    NeedsApproval(Box<ProjectEntry>),
    /// A project entry with the name of one of the user's servers: the user's wins.
    Shadowed { by: PathBuf },
    /// The administrator's policy forbids it.
    Blocked { rule: String },
    /// A project entry asks for something no project may (`config::project::refusal`):
    /// no approval can make it run.
    Refused { field: String, reason: String },
}

/// A project's server entry as written, not expanded: what an approval covers.
#[derive(Clone)]
pub struct ProjectEntry {
    pub name: String,
    pub project: PathBuf,
    pub file: PathBuf,
    pub raw: Map<String, Value>,
    /// The adapter component it would load (its own `adapter`, else the project's
    /// `schemaAdapter`), with the sha256 of its bytes or why they cannot be read.
    pub adapter: Option<(PathBuf, Result<String, String>)>,
    /// The project's own code it runs (`project::code_files`), hashed.
    pub code: Vec<project::CodeFile>,
    /// The environment variables its command, arguments and URL use (their values at
    /// approval are bound into `digest`, never kept).
    pub variables: Vec<String>,
    /// What an approval of this entry is bound to.
    pub digest: String,
}

impl fmt::Debug for ProjectEntry {
    /// The raw entry may hold literal secrets: only its name and digest are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProjectEntry")
            .field("name", &self.name)
            .field("file", &self.file)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

impl ProjectEntry {
    /// Checks the entry's fields without expanding anything (every `${VAR}` stands for
    /// a placeholder), so a broken project file is reported before anyone approves it.
    pub fn check_shape(&self) -> Result<(), ConfigError> {
        let base = self.file.parent().unwrap_or(Path::new("."));
        parse_server(&self.name, &self.raw, &self.file, base, &no_env)
            .map(drop)
            .map_err(|(field, message)| ConfigError {
                file: self.file.clone(),
                server: Some(self.name.clone()),
                field: Some(field.into()),
                message,
            })
    }

    /// The entry expanded and validated, as it would run once approved. Expands
    /// `${VAR}` from the environment: call it only for a human deciding, or after
    /// approval.
    pub fn spec(&self) -> Result<ServerSpec, ConfigError> {
        let base = self.file.parent().unwrap_or(Path::new("."));
        let mut spec = parse_server(&self.name, &self.raw, &self.file, base, &from_env).map_err(
            |(field, message)| ConfigError {
                file: self.file.clone(),
                server: Some(self.name.clone()),
                field: Some(field.into()),
                message,
            },
        )?;
        // The adapter runs only with the bytes the approval covered.
        match &self.adapter {
            Some((path, Ok(sha))) => {
                spec.adapter = AdapterSource::Pinned(path.clone(), sha.clone())
            }
            Some((path, Err(_))) => spec.adapter = AdapterSource::File(path.clone()),
            None => {}
        }
        spec.project = Some(self.project.clone());
        // A project's stdio server is confined unless its entry says otherwise.
        if spec.sandbox == Sandbox::Unset && matches!(spec.transport, Transport::Stdio { .. }) {
            spec.sandbox = Sandbox::On(SandboxProfile {
                implied: true,
                ..SandboxProfile::default()
            });
        }
        Ok(spec)
    }
}

/// Where config lives for a session.
#[derive(Debug, Clone)]
pub struct ConfigPaths {
    /// `$EDGAR_CONFIG`, else `$XDG_CONFIG_HOME/edgar/mcp.json`.
    pub user: Option<PathBuf>,
    /// `.mcp.json` in the project directory.
    pub project: PathBuf,
    /// edgar's state directory, where approvals are kept; `None` approves nothing.
    pub state: Option<PathBuf>,
    /// The administrator's policy file, if one applies.
    pub policy: Option<PathBuf>,
}

impl ConfigPaths {
    /// The paths for a session whose project directory is `project_dir`.
    pub fn for_project(project_dir: &Path) -> ConfigPaths {
        // A relative `$EDGAR_CONFIG` is ignored: read from the directory edgar runs in, a
        // repository's file would be trusted as the user's own.
        let user = crate::paths::absolute_var("EDGAR_CONFIG")
            .map(PathBuf::from)
            .or_else(|| crate::paths::config_dir().map(|d| d.join("mcp.json")));
        ConfigPaths {
            user,
            project: project_dir.join(".mcp.json"),
            state: crate::paths::state_dir(),
            policy: crate::paths::policy_file(),
        }
    }
}

/// What the config files say, before anyone judged it: the user's servers (trusted as
/// written), and the project's entries (unexpanded, each with the digest an approval of
/// it must carry). `trust::admit` decides what of it runs.
#[derive(Debug, Default)]
pub struct Configured {
    /// The user's servers, by name.
    pub user: BTreeMap<String, ServerSpec>,
    /// The project file's entries, in file order.
    pub project: Vec<ProjectEntry>,
    /// The files that were read.
    pub files: Vec<PathBuf>,
    /// The project directory (canonical where it can be resolved).
    pub project_dir: PathBuf,
    /// Keys the files have that edgar does not read and that were probably meant for
    /// one it does, each starting with its file (`unknown::notes`).
    pub notes: Vec<String>,
}

/// Reads the user file, then the project file, judging nothing (see [`Configured`]).
pub fn read(paths: &ConfigPaths) -> Result<Configured, ConfigError> {
    let project_dir = paths.project.parent().unwrap_or(Path::new("."));
    let project_dir = project_dir
        .canonicalize()
        .unwrap_or_else(|_| project_dir.to_owned());
    let mut written = Configured::default();
    if let Some(file) = &paths.user
        && let Some(doc) = read_file(file)?
    {
        written.files.push(file.clone());
        let parsed = parse_document(file, &doc)?;
        let at = file.display();
        written
            .notes
            .extend(parsed.notes.iter().map(|n| format!("{at}: {n}")));
        for mut s in parsed.servers {
            if let (Some(a), AdapterSource::Builtin) = (&parsed.adapter, &s.adapter) {
                s.adapter = a.clone();
            }
            written.user.insert(s.name.clone(), s);
        }
    }
    if let Some(doc) = read_project_file(&paths.project)? {
        written.files.push(paths.project.clone());
        let (entries, notes) = project_entries(&paths.project, &project_dir, &doc)?;
        written.project = entries;
        let at = paths.project.display();
        written
            .notes
            .extend(notes.iter().map(|n| format!("{at}: {n}")));
    }
    written.project_dir = project_dir;
    Ok(written)
}

impl Config {
    pub fn server(&self, name: &str) -> Option<&ServerSpec> {
        self.servers.iter().find(|s| s.name == name)
    }

    pub fn held(&self, name: &str) -> Option<&Held> {
        self.held.iter().find(|h| h.name == name)
    }
}

/// The entries of a project file, unexpanded, each with the digest an approval of it
/// must carry, and the file's notes on keys edgar does not read. Reads the adapter
/// components they name (to bind their bytes).
fn project_entries(
    file: &Path,
    project_dir: &Path,
    doc: &Value,
) -> Result<(Vec<ProjectEntry>, Vec<String>), ConfigError> {
    let document = Document::read(file, doc)?;
    let base = file.parent().unwrap_or(Path::new("."));
    let mut out = Vec::with_capacity(document.entries.len());
    let mut identity = None;
    for (name, entry) in document.entries {
        let err = |field: &str, message: String| ConfigError {
            file: file.to_owned(),
            server: Some(name.clone()),
            field: Some(field.into()),
            message,
        };
        let adapter = match string(entry, "adapter").map_err(|(f, m)| err(f, m))? {
            Some(p) => Some(base.join(p)),
            None => document.adapter.clone(),
        };
        // Bounded, regular files only: this runs before anyone approved the entry.
        let adapter = adapter.map(|path| {
            let sha = crate::guard::read_component(&path).map(|b| crate::digest::sha256_hex(&b));
            (path, sha)
        });
        let code = project::code_files(project_dir, entry);
        let code_bound: Vec<(String, String)> = code
            .iter()
            .map(|c| {
                let sha = match &c.sha256 {
                    Ok(s) => s.clone(),
                    Err(e) => format!("unreadable: {e}"),
                };
                (c.path.clone(), sha)
            })
            .collect();
        let identity = identity.get_or_insert_with(|| project::identity(project_dir));
        let variables = project::variables(entry, &from_env);
        let digest = entry_digest(
            project_dir,
            name,
            entry,
            Bound {
                adapter: adapter
                    .as_ref()
                    .map(|(p, sha)| (p.as_path(), sha.as_deref().unwrap_or("unreadable"))),
                code: &code_bound,
                identity: Some(identity),
                variables: &variables,
            },
        );
        out.push(ProjectEntry {
            name: name.clone(),
            project: project_dir.to_owned(),
            file: file.to_owned(),
            raw: entry.clone(),
            adapter,
            code,
            variables: variables.into_iter().map(|(n, _)| n).collect(),
            digest,
        });
    }
    Ok((out, document.notes))
}

#[cfg(test)]
mod tests;
