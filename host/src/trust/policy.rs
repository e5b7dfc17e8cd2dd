//! An administrator's policy: `/etc/edgar/policy.json` (or, only where that file does not
//! exist, `$EDGAR_POLICY`). User and project config are checked against it and cannot
//! loosen it. A policy file that cannot be read or parsed fails closed: nothing runs.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod matching;

use super::TrustError;
use crate::config::{FindingActions, Rules, ServerSpec, Transport};
use crate::guard::AdapterSource;

pub use crate::config::ToolPolicy;
#[cfg(test)]
use crate::paths::choose_policy as choose;
pub use crate::paths::{SYSTEM_POLICY, policy_file as path};
pub use crate::text::glob;
pub use matching::{Mode, resolve as resolve_program, url_matches};

/// Largest policy file read.
const MAX_POLICY_BYTES: u64 = 1 << 20;

/// What a project's `.mcp.json` may do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProjectServers {
    /// Each entry runs once a human approves it (the default).
    #[default]
    Approve,
    /// No project entry ever runs.
    Deny,
}

/// A server rule: every field given must match. `name` and `command` are globs (`*`,
/// `?`); `command` is matched against the command line (program and arguments,
/// space-separated) with the program as it would really run (see `matching`); `url` is
/// `scheme://host[:port][/path-glob]`, compared parsed, part by part; `source` limits the
/// rule to the user's own entries or to projects' entries. A rule with only a `name`
/// never admits a project entry unless it says `"source": "project"`: a repository
/// chooses its entries' names.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerRule {
    pub name: Option<String>,
    pub command: Option<String>,
    pub url: Option<String>,
    pub source: Option<Source>,
}

/// Where an entry comes from, for [`ServerRule::source`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The user's own config (or the embedded default).
    User,
    /// A project's `.mcp.json`.
    Project,
}

impl fmt::Display for ServerRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = [
            ("name", &self.name),
            ("command", &self.command),
            ("url", &self.url),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v:?}")))
        .chain(self.source.map(|s| format!("source {s:?}")))
        .collect();
        f.write_str(&parts.join(", "))
    }
}

/// The administrator's policy.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// When present, only servers matching one of these run.
    pub allow_servers: Option<Vec<ServerRule>>,
    /// Servers matching any of these never run; deny wins over allow.
    #[serde(default)]
    pub deny_servers: Vec<ServerRule>,
    /// When present, third-party adapter components must have one of these sha256
    /// digests (hex). The built-in adapter is edgar's own and always allowed.
    pub allowed_adapters: Option<Vec<String>>,
    /// HTTP servers must use `https://` (loopback addresses excepted: nothing leaves
    /// the machine).
    #[serde(default)]
    pub require_https: bool,
    #[serde(default)]
    pub project_servers: ProjectServers,
    /// When present, only tools matching one of these `server/tool` globs are offered.
    pub allow_tools: Option<Vec<String>>,
    /// Tools matching any of these `server/tool` globs are never offered or called.
    #[serde(default)]
    pub deny_tools: Vec<String>,
    /// When present, only prompts matching one of these `server/prompt` globs are
    /// offered.
    pub allow_prompts: Option<Vec<String>>,
    /// Prompts matching any of these `server/prompt` globs are never offered or got.
    #[serde(default)]
    pub deny_prompts: Vec<String>,
    /// When present, only resources matching one of these `server/URI` globs (a
    /// template by its URI template) are listed or read.
    pub allow_resources: Option<Vec<String>>,
    /// Resources matching any of these `server/URI` globs are never listed or read.
    #[serde(default)]
    pub deny_resources: Vec<String>,
    /// The largest tool result (bytes of JSON) accepted from any server.
    pub max_result_bytes: Option<u64>,
    /// What the guard's findings lead to (defaults: hold back high, warn of medium,
    /// mask secrets in results).
    #[serde(default)]
    pub findings: FindingActions,
    /// Stdio servers run only confined: an entry without a `"sandbox"` profile, or with
    /// `"sandbox": "off"`, does not start.
    #[serde(default)]
    pub require_sandbox: bool,
    /// What a `"sandbox"` profile may grant at most.
    pub sandbox_limits: Option<SandboxLimits>,
    #[serde(skip)]
    pub file: PathBuf,
}

/// The most a server's `"sandbox"` profile may grant: `write` paths only inside
/// `write_within` (`~/` is the user's home), and no network beyond `net`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxLimits {
    pub write_within: Option<Vec<String>>,
    pub net: Option<NetLimit>,
}

/// The most network a profile may have: `"none"`, `"all"`, or a list of hosts (as a
/// profile writes them, `*.` for a domain's) that the profile's hosts must fall within.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum NetLimit {
    Word(NetWord),
    Hosts(Vec<String>),
}

/// `"none"` or `"all"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetWord {
    None,
    All,
}

impl NetLimit {
    /// What of `net` goes beyond this limit, for the error.
    fn exceeded(&self, net: &crate::config::Net) -> Option<String> {
        use crate::config::Net;
        match (self, net) {
            (_, Net::None) | (NetLimit::Word(NetWord::All), _) => None,
            (_, Net::All) => Some("\"net\": \"all\"".into()),
            (NetLimit::Word(NetWord::None), Net::Hosts(h)) => {
                Some(format!("\"net\" lists {}", h[0]))
            }
            (NetLimit::Hosts(allowed), Net::Hosts(hosts)) => {
                let allowed: Vec<crate::config::HostPort> = allowed
                    .iter()
                    .filter_map(|a| crate::config::HostPort::parse(a).ok())
                    .collect();
                // A listed host is within the limit when a limit host admits it by name
                // (a `*.` profile host only within a `*.` limit of the same or a parent domain).
                hosts
                    .iter()
                    .find(|h| {
                        !allowed.iter().any(|a| {
                            let name = h
                                .host
                                .strip_prefix("*.")
                                .map_or(h.host.clone(), |d| format!("x.{d}"));
                            a.admits(&name, h.port)
                                && (!h.host.starts_with("*.") || a.host.starts_with("*."))
                        })
                    })
                    .map(|h| format!("\"net\" lists {h}"))
            }
        }
    }
}

impl SandboxLimits {
    /// The limit a profile exceeds, if any.
    fn exceeded(&self, profile: &crate::config::SandboxProfile) -> Option<String> {
        if let Some(what) = self.net.as_ref().and_then(|n| n.exceeded(&profile.net)) {
            return Some(format!("sandbox_limits.net (the profile's {what})"));
        }
        if let Some(within) = &self.write_within {
            let home = crate::paths::absolute_var("HOME").map(PathBuf::from);
            let roots: Vec<PathBuf> = within
                .iter()
                .filter_map(
                    |w| match w.strip_prefix("~/").or((w == "~").then_some("")) {
                        Some(rest) => home.as_ref().map(|h| h.join(rest)),
                        None => Some(PathBuf::from(w)),
                    },
                )
                .map(|p| p.canonicalize().unwrap_or(p))
                .collect();
            for w in &profile.write {
                // Compared without `..` and links, so a path cannot climb out lexically.
                let real = w.canonicalize().unwrap_or_else(|_| w.clone());
                let climbs = real
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir));
                if climbs || !roots.iter().any(|r| real.starts_with(r)) {
                    return Some(format!(
                        "sandbox_limits.write_within (the profile writes {})",
                        crate::text::shown(&w.display().to_string())
                    ));
                }
            }
        }
        None
    }
}

impl Policy {
    /// Reads and checks a policy file. Any problem is an error naming the file (and the
    /// line, for JSON errors): a policy that cannot be understood allows nothing.
    pub fn load(file: &Path) -> Result<Policy, TrustError> {
        if !file.is_absolute() {
            return Err(TrustError::file(
                file,
                "the policy path must be absolute (a relative one would be read from the directory edgar runs in)",
            ));
        }
        let bytes = crate::paths::read_capped(file, MAX_POLICY_BYTES)
            .map_err(|e| TrustError::file(file, format!("cannot read the policy: {e}")))?
            .ok_or_else(|| TrustError::file(file, "the policy file does not exist"))?;
        let mut policy: Policy = serde_json::from_slice(&bytes).map_err(|e| {
            TrustError::file(file, format!("line {}: not a valid policy: {e}", e.line()))
        })?;
        policy.file = file.to_owned();
        let rules = policy
            .allow_servers
            .iter()
            .flatten()
            .chain(&policy.deny_servers);
        for rule in rules {
            if rule.name.is_none()
                && rule.command.is_none()
                && rule.url.is_none()
                && rule.source.is_none()
            {
                return Err(TrustError::file(
                    file,
                    "a server rule needs a name, command or url, or a source (to allow nothing, use \"allow_servers\": [])",
                ));
            }
        }
        if let Some(NetLimit::Hosts(hosts)) =
            policy.sandbox_limits.as_ref().and_then(|l| l.net.as_ref())
        {
            for h in hosts {
                crate::config::HostPort::parse(h)
                    .map_err(|e| TrustError::file(file, format!("sandbox_limits.net: {e}")))?;
            }
        }
        for d in policy.allowed_adapters.iter().flatten() {
            if d.len() != 64 || !d.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(TrustError::file(
                    file,
                    format!("allowed_adapters: {d:?} is not a sha256 in hex"),
                ));
            }
        }
        Ok(policy)
    }

    /// The rule that stops this server, if any.
    pub fn blocks(&self, spec: &ServerSpec) -> Option<String> {
        if let Some((i, rule)) = self
            .deny_servers
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches(spec, Mode::Deny))
        {
            return Some(format!("deny_servers[{i}] ({rule})"));
        }
        if let Some(allow) = &self.allow_servers
            && !allow.iter().any(|r| r.matches(spec, Mode::Allow))
        {
            return Some("it matches no allow_servers rule".into());
        }
        if self.require_sandbox
            && matches!(spec.transport, Transport::Stdio { .. })
            && !matches!(spec.sandbox, crate::config::Sandbox::On(_))
        {
            return Some(
                "require_sandbox (its entry has no \"sandbox\" profile, or says \"off\"; add one such as \"sandbox\": {\"read\": [], \"write\": [], \"net\": \"none\"})".into(),
            );
        }
        if let (Some(limits), crate::config::Sandbox::On(profile)) =
            (&self.sandbox_limits, &spec.sandbox)
            && let Some(rule) = limits.exceeded(profile)
        {
            return Some(rule);
        }
        if self.require_https
            && let Transport::Http { url, .. } | Transport::Sse { url, .. } = &spec.transport
            && !crate::net::is_https_or_loopback(url)
        {
            return Some("require_https (the URL is plain http to another host)".into());
        }
        if let (Some(allowed), AdapterSource::File(path) | AdapterSource::Pinned(path, _)) =
            (&self.allowed_adapters, &spec.adapter)
        {
            match spec.adapter.digest() {
                Ok(d) if allowed.iter().any(|a| a.eq_ignore_ascii_case(&d)) => {}
                Ok(d) => {
                    return Some(format!(
                        "allowed_adapters (the adapter {} has sha256 {d})",
                        crate::text::shown(&path.display().to_string())
                    ));
                }
                Err(e) => return Some(format!("allowed_adapters (cannot read the adapter: {e})")),
            }
        }
        None
    }

    /// The tool rules and result cap, for a [`ServerSpec`].
    pub fn tools(&self) -> ToolPolicy {
        ToolPolicy {
            allow: self.allow_tools.clone(),
            deny: self.deny_tools.clone(),
            prompts: Rules {
                allow: self.allow_prompts.clone(),
                deny: self.deny_prompts.clone(),
            },
            resources: Rules {
                allow: self.allow_resources.clone(),
                deny: self.deny_resources.clone(),
            },
            max_result_bytes: self.max_result_bytes,
            findings: self.findings,
        }
    }
}

impl ServerRule {
    fn matches(&self, spec: &ServerSpec, mode: Mode) -> bool {
        let from_project = spec.project.is_some();
        match self.source {
            Some(Source::Project) if !from_project => return false,
            Some(Source::User) if from_project => return false,
            None if mode == Mode::Allow
                && from_project
                && self.command.is_none()
                && self.url.is_none() =>
            {
                return false;
            }
            _ => {}
        }
        if let Some(n) = &self.name
            && !glob(n, &spec.name)
        {
            return false;
        }
        if let Some(c) = &self.command {
            let Transport::Stdio {
                command,
                args,
                env,
                cwd,
                ..
            } = &spec.transport
            else {
                return false;
            };
            let path = env
                .get("PATH")
                .map(std::ffi::OsString::from)
                .or_else(|| std::env::var_os("PATH"));
            let dir = cwd.as_deref().or(spec.project.as_deref());
            let launch = matching::Launch {
                command,
                args,
                resolved: matching::resolve(command, path.as_deref(), dir),
            };
            if !matching::command_matches(c, &launch, mode) {
                return false;
            }
        }
        if let Some(u) = &self.url {
            let (Transport::Http { url, .. } | Transport::Sse { url, .. }) = &spec.transport else {
                return false;
            };
            if !url_matches(u, url) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests;
