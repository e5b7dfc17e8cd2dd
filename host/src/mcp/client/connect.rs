//! Connecting: the transport a server's entry names (stdio, Streamable HTTP, legacy
//! SSE) with its sign-in, and the protocol era settled on the new connection.

use std::sync::Arc;

use serde_json::json;

use crate::auth::mcp::McpAuth;
use crate::config::{ProtocolChoice, ServerSpec, Transport};
use crate::mcp::McpError;
use crate::mcp::cache::{Era, now};
use crate::mcp::connection::{Connection, Context};
use crate::mcp::era::{self, Hello, Negotiated};
use crate::mcp::http::Http;
use crate::mcp::http::legacy::Legacy;
use crate::mcp::protocol::{MODERN, PROTOCOL};
use crate::mcp::stdio::{Spawn, Stdio};
use crate::text::shown;

use super::{SessionInner, hints};
use crate::sync::lock;

pub(super) enum TransportHandle {
    Stdio(Stdio),
    Http(Http),
    Legacy(Legacy),
}

impl TransportHandle {
    pub(super) fn stderr_tail(&self) -> String {
        match self {
            TransportHandle::Stdio(s) => s.stderr_tail(),
            TransportHandle::Http(_) | TransportHandle::Legacy(_) => String::new(),
        }
    }

    pub(super) async fn close(&mut self) {
        match self {
            TransportHandle::Stdio(s) => s.close().await,
            TransportHandle::Http(h) => h.close().await,
            TransportHandle::Legacy(l) => l.close().await,
        }
    }
}

impl SessionInner {
    /// The server's sign-in, when the session has a credential store.
    pub(super) fn authorizer(
        &self,
        spec: &ServerSpec,
    ) -> Option<Arc<dyn crate::mcp::http::Authorizer>> {
        // Per user behind a team gateway: nothing stored, each user's token exchanged
        // (kept by the connection's authorizer for as long as it lives).
        if spec.oauth.grant == crate::config::Grant::TokenExchange {
            return match crate::auth::mcp::exchange::PerUser::new(spec) {
                Ok(a) => Some(Arc::new(a.with_vault(self.opts.token_vault.clone()))),
                Err(e) => {
                    tracing::warn!(server = spec.name, "no sign-in: {e}");
                    None
                }
            };
        }
        // Per user behind a team gateway, each signing in themselves: the gateway's.
        if spec.oauth.grant == crate::config::Grant::UserSignIn {
            let signs_in = self.opts.user_sign_ins.as_ref()?.server(&spec.name)?;
            return Some(signs_in);
        }
        let store = self.opts.credentials.clone()?;
        let mut all = lock(&self.sign_ins);
        if let Some(a) = all.get(&spec.name) {
            return Some(a.clone());
        }
        let locks = self.opts.cache_dir.as_ref().map(|d| d.join("locks"));
        match McpAuth::new(spec, store, self.opts.browser) {
            Ok(a) => {
                let a = a.with_lock_dir(locks);
                let a = Arc::new(a);
                all.insert(spec.name.clone(), a.clone());
                Some(a)
            }
            Err(e) => {
                tracing::debug!(server = spec.name, "no sign-in: {e}");
                None
            }
        }
    }

    pub(super) fn connect(
        &self,
        spec: &ServerSpec,
    ) -> Result<(TransportHandle, Connection), McpError> {
        if let Transport::Http { url, headers } | Transport::Sse { url, headers } = &spec.transport
            && !headers.is_empty()
            && !crate::net::is_https_or_loopback(url)
        {
            return Err(McpError::Start {
                server: spec.name.clone(),
                reason: format!(
                    "refusing to send its configured headers ({}) in clear text to a plain http URL on another host; use https",
                    headers
                        .keys()
                        .map(|k| shown(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let ctx = Context {
            roots: vec![self.opts.cwd.clone()],
            handler: self.opts.handler.clone(),
            news: Some(self.news.clone()),
        };
        match &spec.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
                env_inherit,
            } => {
                let log = self
                    .opts
                    .cache_dir
                    .as_ref()
                    .map(|d| d.join("logs").join(format!("{}.log", spec.name)));
                let (stdio, link) = Stdio::spawn(Spawn {
                    server: &spec.name,
                    command,
                    args,
                    env,
                    env_inherit: *env_inherit,
                    // An approved project entry runs in its project (the approval says
                    // so); everything else in a private empty directory.
                    cwd: cwd.as_deref().or(spec.project.as_deref()),
                    log,
                    sandbox: match &spec.sandbox {
                        crate::config::Sandbox::On(p) => Some(p),
                        _ => None,
                    },
                    project: spec.project.as_deref(),
                })
                .map_err(|reason| McpError::Start {
                    server: spec.name.clone(),
                    reason,
                })?;
                // A confined server's start records the profile it runs under.
                if matches!(spec.sandbox, crate::config::Sandbox::On(_)) {
                    self.audit(
                        "start",
                        json!({"server": spec.name,
                               "confinement": hints::confinement_line_found(spec, stdio.installs())}),
                    );
                }
                Ok((
                    TransportHandle::Stdio(stdio),
                    Connection::start(&spec.name, link, ctx),
                ))
            }
            Transport::Http { url, headers } => {
                let (http, link) = Http::start(&spec.name, url, headers, self.authorizer(spec))
                    .map_err(|reason| McpError::Start {
                        server: spec.name.clone(),
                        reason,
                    })?;
                Ok((
                    TransportHandle::Http(http),
                    Connection::start(&spec.name, link, ctx),
                ))
            }
            Transport::Sse { url, headers } => {
                let (legacy, link) = Legacy::start(&spec.name, url, headers, self.authorizer(spec))
                    .map_err(|reason| McpError::Start {
                        server: spec.name.clone(),
                        reason,
                    })?;
                Ok((
                    TransportHandle::Legacy(legacy),
                    Connection::start(&spec.name, link, ctx),
                ))
            }
        }
    }

    /// Settles the protocol era (`era::negotiate`), from the era this server spoke
    /// last time if the cache remembers it.
    pub(super) async fn negotiate(
        &self,
        spec: &ServerSpec,
        conn: &Connection,
    ) -> Result<Negotiated, McpError> {
        let hello = Hello {
            elicitation: self.opts.handler.supports_elicitation(),
            sampling: self.opts.handler.supports_sampling(),
        };
        let known = match spec.protocol {
            ProtocolChoice::Auto => self.cache.read_era(spec).map(|e| e.version),
            ProtocolChoice::Handshake => Some(PROTOCOL[0].to_owned()),
            ProtocolChoice::Stateless => Some(MODERN[0].to_owned()),
        };
        let fixed = spec.protocol != ProtocolChoice::Auto;
        let negotiated = era::negotiate(
            &spec.name,
            conn,
            &hello,
            known.as_deref(),
            fixed,
            spec.startup_timeout,
        )
        .await?;
        if spec.protocol == ProtocolChoice::Auto
            && known.as_deref() != Some(negotiated.version.as_str())
        {
            self.cache.write_era(
                spec,
                &Era {
                    version: negotiated.version.clone(),
                    at: now(),
                },
            );
        }
        Ok(negotiated)
    }
}
