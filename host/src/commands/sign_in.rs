//! `edgar mcp login|logout NAME` and the sign-in column of `edgar mcp list`. Tokens
//! never leave the store through here: only scopes and expiry are printed.

use std::process::ExitCode;

use anyhow::{Context, bail};
use edgar_host::auth::Secret;
use edgar_host::auth::assertion::SigningKey;
use edgar_host::auth::mcp::{Browser, McpAuth, Revoked};
use edgar_host::config::{Config, Grant, Transport};
use edgar_host::mcp::cache::{ToolCache, now};
use edgar_host::paths;

use super::context::store;
use serde_json::{Value, json};

/// The configured credential store (`config.json`'s `credential_store`).
fn http_server<'a>(
    config: &'a Config,
    name: &str,
) -> anyhow::Result<&'a edgar_host::config::ServerSpec> {
    let spec = config
        .server(name)
        .with_context(|| format!("no MCP server named '{name}' is configured"))?;
    if matches!(spec.transport, Transport::Stdio { .. }) {
        bail!("'{name}' is a stdio server; only HTTP servers sign in");
    }
    Ok(spec)
}

pub async fn login(
    config: &Config,
    name: &str,
    no_browser: bool,
    fetch: bool,
) -> anyhow::Result<ExitCode> {
    let spec = http_server(config, name)?;
    let store = store()?;
    store.available().await?;
    let browser = if fetch {
        Browser::Fetch
    } else {
        Browser::System { no_browser }
    };
    let auth = McpAuth::new(spec, store.clone(), Some(browser))?;
    let creds = auth.login().await?;
    super::context::audit(
        "sign_in",
        json!({"server": name, "url_digest": &spec.digest()[..16], "scope": creds.scope}),
    );
    // The server may have been remembered as "needs login"; let it start again.
    ToolCache::new(paths::cache_dir().as_deref()).clear_failure(spec);
    println!(
        "signed in to {name}{}{}; stored in {}",
        creds
            .scope
            .as_deref()
            .map(|s| format!(" (scope: {})", edgar_host::text::shown_message(s)))
            .unwrap_or_default(),
        creds
            .expires_at
            .map(|t| format!(", expires {}", until(t)))
            .unwrap_or_default(),
        store.describe()
    );
    Ok(ExitCode::SUCCESS)
}

/// `edgar mcp set-key NAME`: the client's private key into the credential store.
pub async fn set_key(
    config: &Config,
    name: &str,
    file: Option<&std::path::Path>,
    remove: bool,
) -> anyhow::Result<ExitCode> {
    let spec = http_server(config, name)?;
    let store = store()?;
    let entry = edgar_host::auth::mcp::client_key_entry(spec);
    if remove {
        store.erase(&entry).await?;
        println!("erased the stored private key of {name}");
        return Ok(ExitCode::SUCCESS);
    }
    store.available().await?;
    let pem = match file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?,
        None => {
            use std::io::Read as _;
            let mut text = String::new();
            std::io::stdin()
                .take(64 << 10)
                .read_to_string(&mut text)
                .context("cannot read the key from stdin")?;
            text
        }
    };
    // Refused here, not at the first token request.
    let key = SigningKey::from_pem(&pem)?;
    store.write(&entry, &Secret::new(pem)).await?;
    super::context::audit(
        "client_key_stored",
        json!({"server": name, "url_digest": &spec.digest()[..16], "algorithm": key.algorithm()}),
    );
    println!(
        "stored the {} private key of {name} in {}; the file is no longer needed",
        key.algorithm(),
        store.describe()
    );
    if !spec.oauth.private_key_in_store {
        eprintln!(
            "edgar: '{name}' does not use it yet: set \"oauth\": {{\"grant\": \"client_credentials\", \"client_id\": \"...\", \"private_key\": \"store\"}}"
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn logout(config: &Config, name: &str) -> anyhow::Result<ExitCode> {
    let spec = http_server(config, name)?;
    let auth = McpAuth::new(spec, store()?, None)?;
    let out = auth.logout().await?;
    let revoked = matches!(out.revoked, Revoked::Yes);
    super::context::audit(
        "sign_out",
        json!({"server": name, "erased": out.erased, "revoked": revoked}),
    );
    if !out.erased {
        println!("{name} had no stored sign-in");
        return Ok(ExitCode::SUCCESS);
    }
    println!("signed out of {name}; its stored sign-in is erased");
    match out.revoked {
        Revoked::Yes => println!("its tokens are revoked at the authorization server"),
        Revoked::NotOffered => println!(
            "its authorization server offers no revocation: the tokens stay valid there until they expire"
        ),
        Revoked::Failed(why) => {
            eprintln!("edgar: revoking the tokens at the authorization server failed: {why}")
        }
        Revoked::NothingToRevoke => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// A server's sign-in as `edgar mcp list` shows it.
pub enum SignIn {
    SignedIn {
        expires_at: Option<u64>,
        scope: Option<String>,
        renewable: bool,
    },
    None,
    Unknown(String),
    /// Each team gateway user's own token: exchanged from theirs (`token_exchange`), or
    /// from their own sign-in through the gateway (`user_sign_in`).
    PerUser(Grant),
    /// A server whose tokens come without a human (`oauth.grant`).
    Unattended {
        grant: Grant,
        state: Box<SignIn>,
    },
}

impl SignIn {
    pub fn text(&self) -> String {
        match self {
            SignIn::SignedIn {
                expires_at,
                renewable,
                ..
            } => match expires_at {
                Some(t) if *t <= now() && *renewable => {
                    "signed in (token expired; renews on use)".into()
                }
                Some(t) if *t <= now() => "sign-in expired: run `edgar mcp login`".into(),
                Some(t) => format!("signed in, expires {}", until(*t)),
                None => "signed in".into(),
            },
            SignIn::None => "not signed in".into(),
            SignIn::Unknown(_) => "sign-in unknown".into(),
            SignIn::PerUser(Grant::UserSignIn) => {
                "per user: each team gateway user signs in themselves".into()
            }
            SignIn::PerUser(_) => "per user: each team gateway user's own token, exchanged".into(),
            SignIn::Unattended { grant, state } => match **state {
                SignIn::None => format!("{}: token fetched on first use", grant.as_str()),
                SignIn::SignedIn {
                    expires_at: Some(t),
                    ..
                } if t <= now() => {
                    format!("{}: token expired; fetched again on use", grant.as_str())
                }
                ref other => format!("{}: {}", grant.as_str(), other.text()),
            },
        }
    }

    /// Why the sign-in could not be read, if it could not.
    pub fn unknown(&self) -> Option<&str> {
        match self {
            SignIn::Unknown(why) => Some(why),
            SignIn::Unattended { state, .. } => state.unknown(),
            _ => None,
        }
    }

    pub fn json(&self) -> Value {
        match self {
            SignIn::SignedIn {
                expires_at,
                scope,
                renewable,
            } => {
                json!({"state": "signed-in", "expires_at": expires_at, "scope": scope, "renewable": renewable})
            }
            SignIn::None => json!({"state": "none"}),
            SignIn::Unknown(why) => json!({"state": "unknown", "reason": why}),
            SignIn::PerUser(grant) => json!({"state": "per-user", "grant": grant.as_str()}),
            SignIn::Unattended { grant, state } => {
                let mut v = state.json();
                v["grant"] = json!(grant.as_str());
                v
            }
        }
    }
}

/// Every server's sign-in (`None` for stdio servers), read from the store.
pub async fn states(config: &Config) -> Vec<Option<SignIn>> {
    let any_http = config
        .servers
        .iter()
        .any(|s| !matches!(s.transport, Transport::Stdio { .. }));
    if !any_http {
        return config.servers.iter().map(|_| None).collect();
    }
    let store = store();
    let mut out = Vec::new();
    for spec in &config.servers {
        if matches!(spec.transport, Transport::Stdio { .. }) {
            out.push(None);
            continue;
        }
        // Nothing is stored for it: each team user's token is exchanged when they call.
        if spec.oauth.grant.per_user() {
            out.push(Some(SignIn::PerUser(spec.oauth.grant)));
            continue;
        }
        let state = match &store {
            Err(e) => SignIn::Unknown(e.to_string()),
            Ok(store) => match McpAuth::new(spec, store.clone(), None) {
                Err(e) => SignIn::Unknown(e.to_string()),
                Ok(auth) => match auth.stored().await {
                    Ok(Some(c)) => SignIn::SignedIn {
                        expires_at: c.expires_at,
                        scope: c.scope,
                        renewable: c.refresh_token.is_some(),
                    },
                    Ok(None) => SignIn::None,
                    Err(e) => SignIn::Unknown(e.to_string()),
                },
            },
        };
        let state = if spec.oauth.grant.unattended() {
            SignIn::Unattended {
                grant: spec.oauth.grant,
                state: Box::new(state),
            }
        } else {
            state
        };
        out.push(Some(state));
    }
    out
}

/// "in 52 min" / "in 3 h" / "in 2 days".
fn until(t: u64) -> String {
    format!("in {}", edgar_host::text::duration(t.saturating_sub(now())))
}
