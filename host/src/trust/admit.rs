//! What of the config runs: trust judges what `config::read` found, from above. The
//! user's servers run as written; a project entry runs only once a human approved it in
//! exactly its current form, never replaces a user's server of the same name, and never
//! when it asks for something no project may (`config::project::refusal`). Then the
//! administrator's policy has the last word on every server, whoever wrote it.

use std::path::Path;

use super::approval::Approvals;
use super::policy::{Policy, ProjectServers};
use crate::config::{
    self, Config, ConfigError, ConfigPaths, Held, Hold, example_server, project, raw_kind,
};
use crate::guard::AdapterSource;

/// Reads the policy, the user file, then the project file, and keeps what may run. When
/// no file exists, the embedded example server (`default_command`) is the configuration.
pub fn load(paths: &ConfigPaths, default_command: Option<&Path>) -> Result<Config, ConfigError> {
    let policy = match &paths.policy {
        Some(file) => Some(policy(file)?),
        None => None,
    };
    let written = config::read(paths)?;
    for note in &written.notes {
        tracing::warn!("{note}");
    }
    let mut merged = written.user;
    let mut held = Vec::new();
    if !written.project.is_empty() {
        let approvals = Approvals::load(paths.state.as_deref());
        let deny = policy
            .as_ref()
            .is_some_and(|p| p.project_servers == ProjectServers::Deny);
        for entry in written.project {
            let kind = raw_kind(&entry.raw);
            let why = if let Some(user) = merged.get(&entry.name) {
                Hold::Shadowed {
                    by: user.source.clone(),
                }
            } else if let Some((field, reason)) = project::refusal(&entry.raw) {
                Hold::Refused { field, reason }
            } else if deny {
                Hold::Blocked {
                    rule: "project_servers: \"deny\"".into(),
                }
            } else if approvals.is_approved(&written.project_dir, &entry.name, &entry.digest) {
                let spec = entry.spec()?;
                merged.insert(spec.name.clone(), spec);
                continue;
            } else {
                // Field errors are reported now, without reading the environment.
                entry.check_shape()?;
                Hold::NeedsApproval(Box::new(entry.clone()))
            };
            held.push(Held {
                name: entry.name,
                kind,
                source: paths.project.clone(),
                why,
            });
        }
    }
    let is_default = written.files.is_empty();
    if is_default && let Some(command) = default_command {
        let spec = example_server(command, &written.project_dir);
        merged.insert(spec.name.clone(), spec);
    }
    let mut servers = Vec::with_capacity(merged.len());
    for mut spec in merged.into_values() {
        if let Some(p) = &policy {
            if let Some(rule) = p.blocks(&spec) {
                held.push(Held {
                    name: spec.name.clone(),
                    kind: spec.transport.kind(),
                    source: spec.source.clone(),
                    why: Hold::Blocked { rule },
                });
                continue;
            }
            spec.tool_policy = p.tools();
            // What the policy allowed is what loads: the bytes checked now.
            if p.allowed_adapters.is_some()
                && let AdapterSource::File(path) = &spec.adapter
                && let Ok(sha) = spec.adapter.digest()
            {
                spec.adapter = AdapterSource::Pinned(path.clone(), sha);
            }
        }
        servers.push(spec);
    }
    held.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Config {
        servers,
        held,
        files: written.files,
        is_default,
        project_dir: written.project_dir,
    })
}

/// The policy at `file`, or a config error naming it: a policy that cannot be read
/// allows nothing.
pub fn policy(file: &Path) -> Result<Policy, ConfigError> {
    Policy::load(file).map_err(|e| ConfigError {
        file: file.to_owned(),
        server: None,
        field: None,
        message: match e {
            super::TrustError::File { message, .. } => message,
            other => other.to_string(),
        },
    })
}
