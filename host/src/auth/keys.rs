//! Provider keys (`edgar login PROVIDER`): found in a fixed order, so a stored key can
//! never quietly override what was exported in this shell:
//!
//! 1. the provider's environment variable (`<NAME>_API_KEY` unless configured);
//! 2. the key a previous `edgar login` stored;
//! 3. the provider's `api_key_command`, run without a shell, with a timeout.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::AsyncReadExt;

use super::store::Store;
use super::{AuthError, Secret};

/// Longest an `api_key_command` may run.
pub const KEY_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// Most output read from an `api_key_command`.
const MAX_COMMAND_OUTPUT: u64 = 64 << 10;

/// One provider's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    pub name: String,
    /// The environment variable checked first.
    pub env: String,
    /// argv of a command printing the key (no shell).
    pub command: Option<Vec<String>>,
}

/// `config.json` in the user's config dir: providers and the credential store choice.
#[derive(Debug, Default, Deserialize)]
struct RawConfig {
    #[serde(default)]
    providers: BTreeMap<String, RawProvider>,
    #[serde(default)]
    credential_store: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawProvider {
    env: Option<String>,
    api_key_command: Option<CommandSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum CommandSpec {
    Argv(Vec<String>),
    Line(String),
}

/// Where keys come from and go to.
#[derive(Debug, Clone)]
pub struct Keys {
    providers: BTreeMap<String, Provider>,
    pub store: Store,
}

/// Which source won, for `edgar account`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Env(String),
    Stored,
    Command,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Env(var) => write!(f, "environment variable {var}"),
            Source::Stored => f.write_str("the key stored by `edgar login`"),
            Source::Command => f.write_str("api_key_command"),
        }
    }
}

impl Keys {
    /// Reads `config.json` from `config_dir` (absent is fine). Only the user's own
    /// config can name a command to run; a project cannot.
    pub fn load(config_dir: Option<&Path>) -> Result<Keys, AuthError> {
        let raw: RawConfig = match config_dir.map(|d| d.join("config.json")) {
            Some(path) => match std::fs::read(&path) {
                Ok(bytes) => serde_json::from_slice(&bytes)
                    .map_err(|e| AuthError::Config(format!("{}: {e}", path.display())))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => RawConfig::default(),
                Err(e) => return Err(AuthError::Config(format!("{}: {e}", path.display()))),
            },
            None => RawConfig::default(),
        };
        let store = match raw.credential_store.as_deref() {
            None | Some("keyring") => Store::Keyring,
            Some("file") => match config_dir {
                Some(d) => Store::File(d.join("credentials.json")),
                None => {
                    return Err(AuthError::Config(
                        "\"credential_store\": \"file\" needs a config directory".into(),
                    ));
                }
            },
            Some(other) => {
                return Err(AuthError::Config(format!(
                    "credential_store {other:?} is not \"keyring\" or \"file\""
                )));
            }
        };
        let providers = raw
            .providers
            .into_iter()
            .map(|(name, p)| {
                let command = p.api_key_command.map(|c| match c {
                    CommandSpec::Argv(v) => v,
                    CommandSpec::Line(l) => l.split_whitespace().map(str::to_owned).collect(),
                });
                let env = p.env.unwrap_or_else(|| default_env(&name));
                (name.clone(), Provider { name, env, command })
            })
            .collect();
        Ok(Keys { providers, store })
    }

    pub fn with_store(store: Store) -> Keys {
        Keys {
            providers: BTreeMap::new(),
            store,
        }
    }

    /// The provider's configuration; an unconfigured one uses `<NAME>_API_KEY`.
    pub fn provider(&self, name: &str) -> Provider {
        self.providers
            .get(name)
            .cloned()
            .unwrap_or_else(|| Provider {
                name: name.to_owned(),
                env: default_env(name),
                command: None,
            })
    }

    pub fn configured(&self) -> impl Iterator<Item = &Provider> {
        self.providers.values()
    }

    /// The key for `name`: environment, then stored, then `api_key_command`.
    pub async fn sign_in(&self, name: &str) -> Result<(Secret, Source), AuthError> {
        self.sign_in_with(name, &|var| std::env::var(var).ok())
            .await
    }

    /// [`Keys::sign_in`] with the environment read through `env`.
    pub async fn sign_in_with(
        &self,
        name: &str,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<(Secret, Source), AuthError> {
        let p = self.provider(name);
        let mut tried = Vec::new();
        match env(&p.env) {
            Some(v) if !v.trim().is_empty() => {
                return Ok((Secret::new(v.trim()), Source::Env(p.env)));
            }
            _ => tried.push(format!("{} is not set", p.env)),
        }
        match self.store.read(&store_key(name)).await {
            Ok(Some(s)) => return Ok((s, Source::Stored)),
            Ok(None) => tried.push("nothing is stored (`edgar login` stores one)".into()),
            Err(e) => tried.push(format!("the store is unusable: {e}")),
        }
        match &p.command {
            Some(argv) => run_command(name, argv).await.map(|s| (s, Source::Command)),
            None => {
                tried.push("no api_key_command is configured".into());
                Err(AuthError::NoKey {
                    provider: name.to_owned(),
                    tried: tried.join("; "),
                })
            }
        }
    }

    /// Stores a key for `name`, and notes the name among those stored.
    pub async fn login(&self, name: &str, key: &Secret) -> Result<(), AuthError> {
        check_provider_name(name)?;
        self.store.available().await?;
        self.store.write(&store_key(name), key).await?;
        self.note(name, true).await;
        Ok(())
    }

    /// Erases the stored key for `name` (and checks it is gone), and its name from those
    /// stored.
    pub async fn logout(&self, name: &str) -> Result<(), AuthError> {
        check_provider_name(name)?;
        self.store.available().await?;
        self.store.erase(&store_key(name)).await?;
        self.note(name, false).await;
        Ok(())
    }

    /// The providers whose keys `edgar login` stored, sorted. A keyring cannot be
    /// listed, so the store keeps their names (never a key) under `providers:stored`; a
    /// key stored by an edgar before it is found by name only.
    pub async fn stored(&self) -> Result<Vec<String>, AuthError> {
        let Some(list) = self.store.read(STORED_NAMES).await? else {
            return Ok(Vec::new());
        };
        let mut names: Vec<String> = list
            .expose()
            .lines()
            .filter(|n| check_provider_name(n).is_ok())
            .map(str::to_owned)
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Notes `name` as stored or not. The key itself is already stored or erased: a
    /// list that cannot be kept costs only its listing, said as a warning.
    async fn note(&self, name: &str, stored: bool) {
        let noted = async {
            let mut names = self.stored().await?;
            if names.iter().any(|n| n == name) == stored {
                return Ok(());
            }
            names.retain(|n| n != name);
            if stored {
                names.push(name.to_owned());
                names.sort();
            }
            if names.is_empty() {
                self.store.erase(STORED_NAMES).await
            } else {
                self.store
                    .write(STORED_NAMES, &Secret::new(names.join("\n")))
                    .await
            }
        };
        if let Err(e) = noted.await {
            tracing::warn!("the list of stored keys' names could not be updated: {e}");
        }
    }
}

/// The store's entry listing the providers with a stored key (names only).
const STORED_NAMES: &str = "providers:stored";

fn store_key(provider: &str) -> String {
    format!("provider:{provider}")
}

fn default_env(name: &str) -> String {
    format!("{}_API_KEY", name.to_uppercase().replace('-', "_"))
}

fn check_provider_name(name: &str) -> Result<(), AuthError> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    {
        return Err(AuthError::Config(
            "a provider name is 1 to 64 characters of [A-Za-z0-9_-]".into(),
        ));
    }
    Ok(())
}

async fn run_command(provider: &str, argv: &[String]) -> Result<Secret, AuthError> {
    secret_command(argv)
        .await
        .map_err(|reason| AuthError::KeyCommand {
            provider: provider.to_owned(),
            reason,
        })
}

/// Runs `argv` (no shell), returning its trimmed stdout as a secret; failures report
/// the exit status, never the output.
pub(crate) async fn secret_command(argv: &[String]) -> Result<Secret, String> {
    let fail = |reason: String| reason;
    let Some((program, args)) = argv.split_first() else {
        return Err(fail("the command is empty".into()));
    };
    // Run in a private empty directory, never the one edgar was started in: a program
    // named without a path, or a launcher (`python -m`, `npx`), would load a cloned
    // repository's code from there.
    let workdir = crate::workdir::Workdir::new()
        .map_err(|e| fail(format!("cannot make a private working directory: {e}")))?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(workdir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("cannot run {}: {e}", crate::text::shown(program))))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| fail("no stdout".into()))?;
    let run = async {
        let mut out = Vec::new();
        (&mut stdout)
            .take(MAX_COMMAND_OUTPUT)
            .read_to_end(&mut out)
            .await?;
        let status = child.wait().await?;
        Ok::<_, std::io::Error>((out, status))
    };
    let (out, status) = match tokio::time::timeout(KEY_COMMAND_TIMEOUT, run).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return Err(fail(format!("reading its output failed: {e}"))),
        Err(_) => {
            return Err(fail(format!(
                "it did not finish within {} s",
                KEY_COMMAND_TIMEOUT.as_secs()
            )));
        }
    };
    if !status.success() {
        return Err(fail(format!("it exited with {status}")));
    }
    let text = String::from_utf8(out)
        .map_err(|_| fail("it printed something that is not UTF-8".into()))?;
    let key = text.trim();
    if key.is_empty() {
        return Err(fail("it printed nothing".into()));
    }
    Ok(Secret::new(key))
}

#[cfg(test)]
mod tests;
