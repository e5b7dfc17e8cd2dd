//! What a team gateway serves besides MCP: its protected resource metadata (RFC 9728,
//! at the well-known path with and without the resource's path), users' own sign-ins
//! to upstreams (the callback, and `POST /oauth/sign-out` with the user's bearer
//! token), `/healthz` (the
//! process answers), `/readyz` (the issuer's keys are in hand and, with shared state, the audit trail
//! can be written) and `/metrics` (from
//! loopback or the addresses the config lists only: tool names are the team's business).

use std::net::SocketAddr;

use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, StatusCode};

use super::{Body, Reply, status, with_body};
use crate::auth::AuthError;
use crate::gateway::Gateway;
use crate::gateway::team::config::TeamConfig;
use crate::gateway::team::{Team, metrics};

const METADATA: &str = "/.well-known/oauth-protected-resource";

/// Where a user's browser comes back from an upstream's sign-in page.
const CALLBACK_PATH: &str = crate::auth::mcp::user_sign_in::CALLBACK_PATH;
/// Where a user signs out of the upstreams they signed in to themselves.
const SIGN_OUT_PATH: &str = "/oauth/sign-out";
/// Where it comes back from the company's sign-in first.
const IDENTITY_PATH: &str = crate::gateway::team::browser::IDENTITY_PATH;

/// The path MCP is served at: the resource URL's.
pub fn mcp_path(config: &TeamConfig) -> String {
    match config.resource.path() {
        "" => "/".into(),
        p => p.to_owned(),
    }
}

/// The answer when `req` is for one of these paths.
pub async fn respond(
    team: &Team,
    req: &Request<Body>,
    peer: SocketAddr,
    gateway: &Gateway,
) -> Option<Reply> {
    let path = req.uri().path();
    let suffixed = format!("{METADATA}{}", mcp_path(&team.config).trim_end_matches('/'));
    let reply = match path {
        _ if path == METADATA || path == suffixed => {
            if req.method() != Method::GET {
                return Some(status(StatusCode::METHOD_NOT_ALLOWED, "GET only"));
            }
            let body = team.resource_metadata().to_string().into_bytes();
            let mut r = with_body(StatusCode::OK, "application/json", body);
            // Browser-based clients read it from another origin; it holds nothing secret.
            r.headers_mut().insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
            r
        }
        CALLBACK_PATH if team.sign_ins.is_some() => {
            if req.method() != Method::GET {
                return Some(status(StatusCode::METHOD_NOT_ALLOWED, "GET only"));
            }
            signed_in(team, req, gateway).await
        }
        SIGN_OUT_PATH if team.sign_ins.is_some() => {
            if req.method() != Method::POST {
                let mut r = status(StatusCode::METHOD_NOT_ALLOWED, "POST only");
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("POST"));
                return Some(r);
            }
            signed_out(team, req, peer, gateway).await
        }
        IDENTITY_PATH if team.sign_ins.is_some() => {
            if req.method() != Method::GET {
                return Some(status(StatusCode::METHOD_NOT_ALLOWED, "GET only"));
            }
            identified(team, req.uri().query().unwrap_or("")).await
        }
        "/healthz" => status(StatusCode::OK, "ok"),
        "/readyz" => {
            let down = team.shared_audit.as_ref().and_then(|a| a.unavailable());
            if let Some(why) = down {
                status(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("not ready: the shared audit trail cannot be written ({why})"),
                )
            } else if team.verifier.ready().await {
                status(StatusCode::OK, "ready")
            } else {
                status(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "not ready: the identity provider's keys are not in hand",
                )
            }
        }
        "/metrics" => {
            let ip = peer.ip();
            if !ip.is_loopback() && !team.config.metrics_from.contains(&ip) {
                return Some(status(
                    StatusCode::FORBIDDEN,
                    "metrics are served to loopback and the config's metrics_from only",
                ));
            }
            let text = team.metrics.render(&gateway.session.status());
            with_body(StatusCode::OK, metrics::CONTENT_TYPE, text.into_bytes())
        }
        _ => return None,
    };
    Some(reply)
}

/// The browser back from a user's sign-in to an upstream (its `query`): finished, the
/// tokens kept for that user and an audit line under their name; or why not. A page for
/// a person, plain text, never stored or sent on as a referrer.
async fn signed_in(team: &Team, req: &Request<Body>, gateway: &Gateway) -> Reply {
    let Some(sign_ins) = &team.sign_ins else {
        return status(StatusCode::NOT_FOUND, "not found");
    };
    let query = req.uri().query().unwrap_or("");
    let cookies = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok());
    // Only the browser the company's sign-in showed to be the user's (when checked).
    let proven = |sub: &str, id: &str| {
        match &team.browser {
        Some(b) if !b.proves(cookies, sub, id) => Err(AuthError::Redirect(
            "this browser did not sign in to the company as the user this sign-in is for; ask your MCP client again, in your own browser".into(),
        )),
        _ => Ok(()),
    }
    };
    let mut reply = match sign_ins.finish(query, proven).await {
        Ok(done) => {
            let line = || {
                gateway.session.audit(
                    "signed_in",
                    serde_json::json!({"server": done.server, "id": done.id}),
                )
            };
            crate::trust::audit::ACTOR.sync_scope(done.sub.clone(), line);
            gateway.session.signed_in(&done.server);
            // Their sessions' standing streams hear it, on every replica.
            team.tell_signed_in(&done.sub, &done.id);
            status(
                StatusCode::OK,
                &format!(
                    "Signed in to '{}'. You can close this page and go back to your MCP client.",
                    done.server
                ),
            )
        }
        Err(e) => {
            tracing::info!("a sign-in did not finish: {e}");
            status(
                StatusCode::BAD_REQUEST,
                &format!("The sign-in did not finish: {e}"),
            )
        }
    };
    private(&mut reply);
    reply
}

/// A user's sign-out (`?server=NAME`, or every server they sign in to themselves),
/// as the bearer token shows who: their tokens revoked where the upstream's
/// authorization server offers it and erased on every replica, an audit line each.
/// JSON: for each server, whether a sign-in was kept and whether it was revoked, or
/// why its sign-out failed (then 503).
async fn signed_out(
    team: &Team,
    req: &Request<Body>,
    peer: SocketAddr,
    gateway: &Gateway,
) -> Reply {
    let Some(sign_ins) = &team.sign_ins else {
        return status(StatusCode::NOT_FOUND, "not found");
    };
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let principal = match team.verifier.check(authorization).await {
        Ok(p) => p,
        Err(refusal) => return super::challenge(team, &refusal, Some(peer)),
    };
    let query = req.uri().query().unwrap_or("");
    let asked = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "server")
        .map(|(_, v)| v.into_owned());
    let servers: Vec<String> = match asked {
        Some(s) if sign_ins.signs_in(&s) => vec![s],
        Some(s) => {
            let text = format!(
                "'{}' is not a server this gateway's users sign in to themselves",
                crate::text::shown(&s)
            );
            return status(StatusCode::NOT_FOUND, &text);
        }
        None => sign_ins.servers().map(str::to_owned).collect(),
    };
    let sub = principal.sub.as_str();
    let mut out = Vec::new();
    let mut failed = false;
    // Each server is tried, whatever another's outcome: a failure midway must not leave
    // the rest signed in unsaid. Any failure answers 503; signing out again is safe.
    for server in servers {
        let (kept, revoked) = match sign_ins.sign_out(&server, sub).await {
            Ok(done) => (done.erased, revoked_word(&done.revoked)),
            Err(e) => {
                // The cause (a database's own words, say) is the administrator's, in
                // the log; the user learns what failed and what to do.
                tracing::warn!(server, user = sub, "a sign-out failed: {e}");
                failed = true;
                let error = format!(
                    "signing out of '{server}' failed: the gateway could not erase the sign-in (its log says why); try again"
                );
                out.push(serde_json::json!({"server": server, "error": error}));
                continue;
            }
        };
        if let Err(e) = team.forget_asked(sub, &server).await {
            // Signed out all the same; only their next search will not ask at once.
            tracing::warn!(server, user = sub, "a search's ask is not forgotten: {e}");
        }
        let line = || {
            let fields = serde_json::json!({"server": server, "revoked": revoked});
            gateway.session.audit("signed_out", fields);
        };
        crate::trust::audit::ACTOR.sync_scope(sub.to_owned(), line);
        out.push(serde_json::json!({"server": server, "was_signed_in": kept, "revoked": revoked}));
    }
    let body = serde_json::json!({ "signed_out": out })
        .to_string()
        .into_bytes();
    let code = if failed {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let mut reply = with_body(code, "application/json", body);
    private(&mut reply);
    reply
}

/// A revocation's outcome, in one word for JSON and the audit trail (a failure's
/// reason is logged, not sent).
fn revoked_word(revoked: &crate::auth::mcp::Revoked) -> &'static str {
    use crate::auth::mcp::Revoked;
    match revoked {
        Revoked::Yes => "revoked",
        Revoked::NotOffered => "not_offered",
        Revoked::Failed(why) => {
            tracing::warn!("a signed-out token was not revoked: {why}");
            "failed"
        }
        Revoked::NothingToRevoke => "nothing_kept",
    }
}

/// The browser back from the company's sign-in: on to the upstream's sign-in page with
/// the cookie that lets the callback keep the user's tokens; or why not.
async fn identified(team: &Team, query: &str) -> Reply {
    let Some(browser) = &team.browser else {
        return status(StatusCode::NOT_FOUND, "not found");
    };
    let mut reply = match browser.identified(query, &team.verifier).await {
        Ok((upstream, cookie)) => {
            match (
                HeaderValue::from_str(&upstream),
                HeaderValue::from_str(&cookie),
            ) {
                (Ok(location), Ok(cookie)) => {
                    let mut r = status(StatusCode::FOUND, "on to the server's sign-in page");
                    r.headers_mut().insert(header::LOCATION, location);
                    r.headers_mut().insert(header::SET_COOKIE, cookie);
                    r
                }
                _ => status(
                    StatusCode::BAD_REQUEST,
                    "the sign-in link cannot be followed",
                ),
            }
        }
        Err(why) => {
            tracing::info!("a sign-in's browser was not shown to be its user's: {why}");
            status(
                StatusCode::BAD_REQUEST,
                &format!(
                    "The sign-in did not go on: {}",
                    crate::text::shown_message(&why)
                ),
            )
        }
    };
    private(&mut reply);
    reply
}

/// A sign-in page: never stored, never sent on as a referrer, never sniffed.
fn private(reply: &mut Reply) {
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ] {
        reply
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
}
