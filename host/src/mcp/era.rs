//! Which protocol era a server speaks, settled once per connection: the stateless era
//! (2026-07-28: no handshake, every request stamped with its version in `_meta`) or the
//! handshake era (`initialize`, 2024-11-05 to 2025-11-25).
//!
//! A server whose era is not known is probed with `server/discover` at the newest
//! stateless version. Only positive evidence makes it stateless (a discover result
//! naming a version edgar speaks, or `-32022` naming one); anything else falls back to
//! `initialize`, as the specification's stdio and HTTP backward-compatibility sections
//! and the official SDKs do. A server that names a version edgar speaks gets one
//! corrective re-probe. The era found is remembered (`ToolCache::write_era`), so the
//! next cold start goes straight to it.

use std::time::Duration;

use serde_json::{Value, json};

use super::McpError;
use super::connection::{Connection, Stamp};
use super::protocol::{self, MODERN, PROTOCOL};
use crate::text::shown;

/// How long a `server/discover` probe waits before the server is taken for one of the
/// handshake era that ignores requests it does not know.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What edgar tells a server about itself.
pub(crate) struct Hello {
    /// Whether the harness answers elicitation.
    pub elicitation: bool,
    /// Whether it may answer sampling (a gateway whose clients can).
    pub sampling: bool,
}

impl Hello {
    fn client_info() -> Value {
        json!({"name": "edgar", "title": "edgar", "version": env!("CARGO_PKG_VERSION")})
    }

    /// Roots are answered in the handshake era only: the stateless era asks for them
    /// inside a tool call's input requests, which edgar declines.
    fn capabilities(&self, stateless: bool) -> Value {
        let mut c = if stateless {
            json!({"extensions": {super::task::EXTENSION: {}}})
        } else {
            json!({"roots": {"listChanged": false}})
        };
        if self.elicitation {
            c["elicitation"] = json!({});
        }
        if self.sampling {
            c["sampling"] = json!({});
        }
        c
    }

    pub(crate) fn stamp(&self, version: &str) -> Stamp {
        Stamp::new(version, self.capabilities(true), Self::client_info())
    }
}

/// The era settled: the version spoken and what the server says it is.
#[derive(Debug)]
pub(crate) struct Negotiated {
    pub version: String,
    pub server_info: Value,
}

/// Settles the era of a fresh connection. `known` is the version the server spoke last
/// time, if any: a stateless one is used without a probe, a handshake one goes straight
/// to `initialize` (and, unless the entry `fixed` it, is probed again if the server
/// refuses it with `-32022`).
pub(crate) async fn negotiate(
    server: &str,
    conn: &Connection,
    hello: &Hello,
    known: Option<&str>,
    fixed: bool,
    timeout: Duration,
) -> Result<Negotiated, McpError> {
    match known {
        Some(v) if protocol::is_modern(v) => {
            conn.set_era(Some(hello.stamp(v)));
            return Ok(Negotiated {
                version: v.to_owned(),
                server_info: Value::Null,
            });
        }
        Some(v) if PROTOCOL.contains(&v) => match initialize(server, conn, hello, timeout).await {
            Err(McpError::UnsupportedVersion { .. }) if !fixed => {
                tracing::debug!(server, "it no longer takes the handshake; probing");
            }
            other => return other,
        },
        _ => {}
    }
    probe(server, conn, hello, timeout).await
}

async fn probe(
    server: &str,
    conn: &Connection,
    hello: &Hello,
    timeout: Duration,
) -> Result<Negotiated, McpError> {
    let mut version = MODERN[0];
    for attempt in 0..2 {
        conn.set_era(Some(hello.stamp(version)));
        let answer = conn
            .request("server/discover", json!({}), PROBE_TIMEOUT.min(timeout))
            .await;
        match answer {
            Ok(result) => {
                let supported = strings(&result["supportedVersions"]);
                if let Some(v) = newest_mutual(&supported) {
                    if v != version {
                        conn.set_era(Some(hello.stamp(v)));
                    }
                    let server_info = result
                        .get("_meta")
                        .and_then(|m| m.get(protocol::META_SERVER_INFO))
                        .cloned()
                        .unwrap_or(Value::Null);
                    tracing::debug!(server, version = v, "it speaks the stateless era");
                    return Ok(Negotiated {
                        version: v.to_owned(),
                        server_info,
                    });
                }
                // It answers discover but lists only handshake versions: a handshake
                // server that says so.
            }
            Err(McpError::UnsupportedVersion { supported, .. }) => {
                if let (Some(v), 0) = (newest_mutual(&supported), attempt) {
                    version = v;
                    continue;
                }
                if !supported.is_empty()
                    && !supported.iter().any(|s| PROTOCOL.contains(&s.as_str()))
                {
                    return Err(McpError::Version {
                        server: server.to_owned(),
                        version: supported.join(", "),
                    });
                }
            }
            // Not an era verdict: the process died, the network failed, a sign-in is due.
            Err(e @ (McpError::Closed { .. } | McpError::NeedsLogin { .. })) => return Err(e),
            Err(e) => tracing::debug!(server, "server/discover: {e}; using the handshake"),
        }
        conn.set_era(None);
        match initialize(server, conn, hello, timeout).await {
            // The probe reached a slow server after all and settled it stateless: it
            // names its versions, so probe once more at one of them.
            Err(McpError::UnsupportedVersion { supported, .. }) if attempt == 0 => {
                match newest_mutual(&supported) {
                    Some(v) => version = v,
                    None => {
                        return Err(McpError::Version {
                            server: server.to_owned(),
                            version: supported.join(", "),
                        });
                    }
                }
            }
            other => return other,
        }
    }
    Err(McpError::Protocol {
        server: server.to_owned(),
        reason: "it refused every protocol version edgar offered".into(),
    })
}

/// The `initialize` handshake: the version must be one edgar speaks.
pub(crate) async fn initialize(
    server: &str,
    conn: &Connection,
    hello: &Hello,
    timeout: Duration,
) -> Result<Negotiated, McpError> {
    let params = json!({
        "protocolVersion": PROTOCOL[0],
        "capabilities": hello.capabilities(false),
        "clientInfo": Hello::client_info(),
    });
    let result = conn.request("initialize", params, timeout).await?;
    let Some(version) = result.get("protocolVersion").and_then(Value::as_str) else {
        return Err(McpError::Protocol {
            server: server.to_owned(),
            reason: "its initialize result has no protocolVersion".into(),
        });
    };
    if !PROTOCOL.contains(&version) {
        return Err(McpError::Version {
            server: server.to_owned(),
            version: shown(version),
        });
    }
    let server_info = result.get("serverInfo").cloned().unwrap_or(Value::Null);
    conn.notify("notifications/initialized", Value::Null)
        .await?;
    Ok(Negotiated {
        version: version.to_owned(),
        server_info,
    })
}

/// The newest stateless version in `supported` that edgar speaks.
fn newest_mutual(supported: &[String]) -> Option<&'static str> {
    MODERN
        .iter()
        .copied()
        .find(|m| supported.iter().any(|s| s == m))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .take(16)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
