//! The team gateway: `serve --http --gateway-config FILE` as an OAuth protected resource
//! (RFC 9728) in front of a whole team. Every request carries an access token of the
//! company's identity provider, checked here ([`token`]); it runs as that user, sees and
//! calls what the Cedar policy permits ([`policy`]), within the rate limits ([`limits`]),
//! counted in `/metrics` ([`metrics`]) and written to the audit trail under the user's
//! name. This module knows nothing of HTTP framing (`gateway/http.rs` does) and nothing
//! of MCP (the gateway does).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

pub mod browser;
pub mod config;
pub mod introspect;
pub mod limits;
pub mod log_levels;
pub mod metrics;
pub mod policy;
pub mod tls;
pub mod token;

pub use config::TeamConfig;
pub use token::{Principal, Refusal};

use crate::sync::lock;
use limits::Limits;
use metrics::Metrics;
use policy::Policy;
use token::Verifier;

/// What can keep a team gateway from starting.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    #[error("the gateway config {}: {reason}", path.display())]
    Config { path: PathBuf, reason: String },
    #[error("the policy file {}: {reason}", path.display())]
    Policy { path: PathBuf, reason: String },
    #[error("the identity provider's keys: {0}")]
    Keys(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

/// Users and servers a search has asked to sign in already, at most this many: a
/// search asks once, then goes on without the server (a call still asks).
const MAX_ASKED: usize = 10_000;

/// A user's sign-in finished at the callback: whose (`sub`) and its elicitation id,
/// told to their sessions' standing streams.
pub type SignedIn = (Arc<str>, Arc<str>);

/// The channel replicas tell each other of finished sign-ins on (`state::Notices`).
pub const SIGNED_IN_CHANNEL: &str = "edgar_signed_in";

/// How long a search waits for the database to say whether it asked a user already,
/// before it goes by this process's memory.
const ASK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Who a search asked to sign in to what, in this process: the whole memory without
/// shared state, and what a search falls back on when the database cannot be reached.
#[derive(Default)]
pub struct Asked(std::sync::Mutex<std::collections::HashSet<(String, String)>>);

impl Asked {
    /// `true` the first time for `user` and `server`.
    fn first(&self, user: &str, server: &str) -> bool {
        let mut asked = lock(&self.0);
        if asked.len() >= MAX_ASKED {
            asked.clear();
        }
        asked.insert((user.to_owned(), server.to_owned()))
    }

    fn forget(&self, user: &str, server: &str) {
        lock(&self.0).remove(&(user.to_owned(), server.to_owned()));
    }
}

/// Everything the team gateway decides with, shared by every request.
pub struct Team {
    pub config: TeamConfig,
    pub verifier: Verifier,
    pub policy: Policy,
    pub limits: Limits,
    /// Each user's own `logging/setLevel`, filtering what their calls bring back.
    pub log_levels: log_levels::LogLevels,
    pub metrics: Metrics,
    /// The audit trail replicas share, when the config names one: `/readyz` says not
    /// ready while it cannot be written.
    pub shared_audit: Option<crate::trust::audit::AuditLog>,
    /// What users' searches found, shared by the replicas (with shared state).
    pub shared_found: Option<Arc<crate::state::SharedFound>>,
    /// The key client session ids are sealed with when replicas share state (else each
    /// process makes its own).
    pub sessions_key: Option<[u8; 32]>,
    /// Users' own sign-ins to the servers they sign in to themselves
    /// (`"grant": "user_sign_in"`), and the callback that finishes them.
    pub sign_ins: Option<Arc<crate::auth::mcp::user_sign_in::UserSignIns>>,
    /// Who a search asked to sign in to what already.
    asked: Asked,
    /// Who is at the browser of a user's own sign-in (`browser_client`).
    pub browser: Option<browser::Browser>,
    /// Sign-ins finished, at this replica's callback or another's, for their users'
    /// standing streams.
    pub signed_in: tokio::sync::broadcast::Sender<SignedIn>,
    /// Where replicas sharing state tell each other of finished sign-ins.
    pub notices: Option<crate::state::Notices>,
}

impl Team {
    /// Loads the policy and fetches the issuer's keys: a gateway that cannot do either
    /// does not start (and says which, and where).
    pub async fn start(config: TeamConfig) -> Result<Team, TeamError> {
        let policy = Policy::load(&config.policy)?;
        let verifier = Verifier::new(&config);
        let keys = verifier.load().await?;
        tracing::info!(
            keys,
            policies = policy.len(),
            "team gateway: the issuer's keys and the policy are loaded"
        );
        Ok(Team {
            limits: Limits::new(&config.rate_limits),
            log_levels: Default::default(),
            metrics: Metrics::default(),
            verifier,
            policy,
            config,
            shared_audit: None,
            shared_found: None,
            sessions_key: None,
            sign_ins: None,
            asked: Default::default(),
            browser: None,
            signed_in: tokio::sync::broadcast::channel(64).0,
            notices: None,
        })
    }

    /// Tells `sub`'s standing streams, here and at the other replicas, that their
    /// sign-in `id` finished. The other replicas are told in a task of its own: the
    /// user's browser does not wait for the database (a failure is logged).
    pub fn tell_signed_in(&self, sub: &str, id: &str) {
        let _ = self.signed_in.send((sub.into(), id.into()));
        if let Some(notices) = self.notices.clone() {
            let text = json!({"sub": sub, "id": id}).to_string();
            tokio::spawn(async move {
                if let Err(e) = notices.tell(&text).await {
                    tracing::warn!("the other replicas are not told of a finished sign-in: {e}");
                }
            });
        }
    }

    /// Whether a search should ask `user` to sign in to `server`: the first time only,
    /// at every replica together when they share state (else in this process).
    pub async fn ask_first(&self, user: &str, server: &str) -> bool {
        let local = self.asked.first(user, server);
        let Some(shared) = &self.shared_found else {
            return local;
        };
        let shared = tokio::time::timeout(ASK_WAIT, shared.ask_first(user, server));
        match shared.await {
            Ok(Ok(first)) => first,
            Ok(Err(e)) => {
                tracing::warn!("whether a search asked already is not known: {e}");
                local
            }
            Err(_) => {
                tracing::warn!("whether a search asked already is not known: no answer in time");
                local
            }
        }
    }

    /// Forgets that a search asked `user` about `server` (they signed out): their next
    /// search asks again.
    pub async fn forget_asked(&self, user: &str, server: &str) -> Result<(), String> {
        self.asked.forget(user, server);
        match &self.shared_found {
            Some(shared) => shared
                .forget_asked(user, server)
                .await
                .map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Passes the finished sign-ins other replicas tell of to this replica's streams,
    /// for as long as the process runs (nothing without shared state).
    pub fn hear_other_replicas(&self) {
        let Some(notices) = &self.notices else {
            return;
        };
        let (mut heard, told) = (notices.hear(), self.signed_in.clone());
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let text = match heard.recv().await {
                    Ok(text) => text,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                };
                let Ok(said) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if let (Some(sub), Some(id)) = (said["sub"].as_str(), said["id"].as_str()) {
                    let _ = told.send((sub.into(), id.into()));
                }
            }
        });
    }

    /// The protected resource metadata document (RFC 9728 §2).
    pub fn resource_metadata(&self) -> Value {
        let mut doc = json!({
            "resource": self.config.resource.as_str(),
            "authorization_servers": self.config.authorization_servers,
            "bearer_methods_supported": ["header"],
            "resource_name": "edgar MCP gateway",
        });
        if !self.config.scopes_supported.is_empty() {
            doc["scopes_supported"] = json!(self.config.scopes_supported);
        }
        doc
    }

    /// The `WWW-Authenticate` value for a refusal (RFC 6750 §3, RFC 9728 §5.1).
    pub fn challenge(&self, refusal: &Refusal) -> String {
        challenge_value(
            &self.config.metadata_url(),
            refusal,
            &self.config.scopes_supported,
        )
    }
}

/// The `WWW-Authenticate` value for a refusal. The refusal's reason may quote the token
/// (a JWT header's `alg`, say), so it is written in RFC 6750's quoted-string alphabet
/// (printable ASCII but `"` and `\`); a value outside that would make the header invalid,
/// and the client would get its 401 without being told where to sign in.
fn challenge_value(metadata: &str, refusal: &Refusal, scopes_supported: &[String]) -> String {
    let quoted = |s: &str| -> String {
        s.chars()
            .map(|c| match c {
                '"' | '\\' => '\'',
                ' '..='~' => c,
                _ => '?',
            })
            .collect()
    };
    let scope = |scopes: &[String]| quoted(&scopes.join(" "));
    let mut value = format!("Bearer resource_metadata=\"{}\"", quoted(metadata));
    match refusal {
        Refusal::Missing | Refusal::Unavailable(_) => {}
        Refusal::Invalid(why) => {
            value.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{}\"",
                quoted(why)
            ));
        }
        Refusal::Scope(missing) => {
            value.push_str(&format!(
                ", error=\"insufficient_scope\", scope=\"{}\"",
                scope(missing)
            ));
        }
    }
    if matches!(refusal, Refusal::Missing) && !scopes_supported.is_empty() {
        value.push_str(&format!(", scope=\"{}\"", scope(scopes_supported)));
    }
    value
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("resource", &self.config.resource.as_str())
            .field("issuer", &self.config.issuer)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;
    use proptest::prelude::*;

    use super::*;
    use crate::auth::bearer::Challenge;

    proptest! {
        /// Whatever a refusal's reason holds, the challenge is a valid header value
        /// that a client's parser reads back: where to sign in, the error, and the
        /// reason in the quoted-string alphabet.
        #[test]
        fn every_challenge_is_a_header_a_client_reads_back(
            why in any::<String>(),
            scopes in proptest::collection::vec("[!#-\\[\\]-~]{1,12}", 0..4),
            kind in 0..4u8,
        ) {
            let metadata = "https://gw.example/.well-known/oauth-protected-resource/mcp";
            let refusal = match kind {
                0 => Refusal::Missing,
                1 => Refusal::Invalid(why.clone()),
                2 => Refusal::Scope(scopes.clone()),
                _ => Refusal::Unavailable(why.clone()),
            };
            let value = challenge_value(metadata, &refusal, &scopes);
            prop_assert!(HeaderValue::from_str(&value).is_ok(), "not a header value: {value:?}");
            let read = Challenge::parse([value.as_str()]).unwrap_or_default();
            prop_assert_eq!(read.resource_metadata.as_deref(), Some(metadata));
            match refusal {
                Refusal::Invalid(_) => {
                    prop_assert_eq!(read.error.as_deref(), Some("invalid_token"));
                    let description = read.error_description.unwrap_or_default();
                    prop_assert_eq!(description.chars().count(), why.chars().count());
                    prop_assert!(description.chars().all(|c| (' '..='~').contains(&c) && c != '"' && c != '\\'));
                }
                Refusal::Scope(missing) => {
                    prop_assert!(read.insufficient_scope());
                    prop_assert_eq!(read.scope.unwrap_or_default(), missing.join(" "));
                }
                Refusal::Missing if !scopes.is_empty() => {
                    prop_assert_eq!(read.scope.unwrap_or_default(), scopes.join(" "));
                }
                _ => prop_assert_eq!(read.error, None),
            }
        }
    }
}
