//! A team user's own sign-in to a server the gateway's users sign in to themselves
//! (`"grant": "user_sign_in"`, `auth::mcp::user_sign_in`): asked for with URL-mode
//! elicitation (MCP 2025-11-25), as the error -32042 whose `data` holds the
//! authorization URL, when their call needs it or when their search could not include
//! the server's tools without it. Only a client that declared `elicitation.url` is
//! given the URL (a model never sees it), and only a user the policy lets `sign_in`.
//! The gateway's callback (`http/team_routes.rs`) finishes it; the client then asks again.

use serde_json::json;

use super::calls::text_result;
use super::questions::DECLARED;
use super::team::Team;
use super::team::policy::{Action, Target};
use super::{Caller, Gateway, Refused, Reply};
use crate::mcp::client::ServerState;

/// URL-mode elicitation required (MCP 2025-11-25).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// The notification that elicitation `id` is complete (MCP 2025-11-25).
pub fn completed(id: &str) -> Vec<u8> {
    crate::mcp::protocol::notification(
        "notifications/elicitation/complete",
        json!({ "elicitationId": id }),
    )
}

impl Gateway {
    /// The answer to `caller`'s request that needs them signed in to `servers`: the
    /// URL-mode elicitation (-32042) when their client takes it and the policy lets
    /// them, else a tool error saying why not.
    pub(super) async fn sign_in_needed(
        &self,
        team: &Team,
        caller: &Caller,
        servers: &[String],
    ) -> Reply {
        let (Some(sign_ins), Caller::User(user)) = (&team.sign_ins, caller) else {
            return Ok(text_result("a sign-in is needed", true));
        };
        let sub = &user.principal.sub;
        let mut elicitations = Vec::new();
        for server in servers {
            let target = Target::SignIn { server };
            if let Err(refused) = self.check(caller, Action::SignIn, target, server) {
                return Ok(text_result(&refused.message, true));
            }
            if !DECLARED.try_with(|d| d.url).unwrap_or(false) {
                return Ok(text_result(
                    &format!(
                        "'{server}' needs you to sign in to it yourself, and your MCP client did not declare URL-mode elicitation (MCP 2025-11-25), by which the gateway sends you to its sign-in page; use a client that does"
                    ),
                    true,
                ));
            }
            let started = match sign_ins.start(server, sub).await {
                // The company's sign-in first, when the gateway checks who is at the
                // browser (`browser_client`).
                Ok(mut started) => match &team.browser {
                    Some(b) => b
                        .first_the_company(&started.url, sub, &started.id)
                        .await
                        .map(|url| {
                            started.url = url;
                            started
                        }),
                    None => Ok(started),
                },
                Err(e) => Err(e.to_string()),
            };
            match started {
                Ok(started) => {
                    self.session
                        .audit("sign_in_asked", json!({"server": server, "id": started.id}));
                    elicitations.push(json!({
                        "mode": "url",
                        "elicitationId": started.id,
                        "url": started.url.as_str(),
                        "message": format!("Sign in to '{server}' (an MCP server behind edgar's gateway) as yourself: the gateway keeps the token for you alone."),
                    }));
                }
                Err(e) => {
                    tracing::warn!(server, "a user's sign-in cannot begin: {e}");
                    return Ok(text_result(
                        &format!("signing in to '{server}' cannot begin now: {e}"),
                        true,
                    ));
                }
            }
        }
        let names = servers.join("', '");
        Err(Refused {
            code: URL_ELICITATION_REQUIRED,
            message: format!("sign in to '{names}' first, then ask again"),
            data: Some(json!({ "elicitations": elicitations })),
        })
    }

    /// Servers `caller`'s search could not include until they sign in: signed in to per
    /// user, their tools not known yet, the policy letting this user sign in, not asked
    /// by a search before, and a client that takes URL-mode elicitation.
    pub(super) async fn sign_ins_wanted(&self, team: &Team, caller: &Caller) -> Vec<String> {
        let (Some(sign_ins), Caller::User(user)) = (&team.sign_ins, caller) else {
            return Vec::new();
        };
        if !DECLARED.try_with(|d| d.url).unwrap_or(false) {
            return Vec::new();
        }
        let mut wanted = Vec::new();
        // Only these servers' states are read (from small cache files), none other's.
        for name in sign_ins.servers() {
            let Some(status) = self.session.status_of(name) else {
                continue;
            };
            let unknown = matches!(
                status.state,
                ServerState::NeverStarted | ServerState::NeedsLogin
            );
            if !unknown {
                continue;
            }
            let name = name.to_owned();
            let target = Target::SignIn { server: &name };
            if !self.permits_on(caller, Action::SignIn, target).allowed()
                || sign_ins.signed_in(&name, &user.principal.sub).await
                || !team.ask_first(&user.principal.sub, &name).await
            {
                continue;
            }
            wanted.push(name);
        }
        wanted
    }
}
