//! A team gateway's request as its user: what the policy lets them see, a call checked
//! against the policy and the rate limits before it runs, counted and audited under
//! their name, and a prompt get or resource read checked against the policy; each in
//! the session that runs the server for them.

use std::sync::Arc;

use serde_json::{Value, json};

use super::calls::text_result;
use super::team::Team;
use super::team::metrics::Outcome;
use super::team::policy::{Action, Decision, Target};
use super::{Caller, Exposure, Gateway, Refused, Reply};
use crate::guard::SanitizedTool;
use crate::mcp::McpError;
use crate::mcp::client::Session;
use crate::mcp::connection::ProgressSink;
use crate::mcp::protocol::{INVALID_PARAMS, METHOD_NOT_FOUND};

/// The JSON-RPC error code of a call refused by a rate limit (implementation-defined
/// server error range).
pub const RATE_LIMITED: i64 = -32029;

impl Gateway {
    /// What the policy decides for `caller` (the local user: everything).
    pub(super) fn permits(
        &self,
        caller: &Caller,
        action: Action,
        tool: &SanitizedTool,
    ) -> Decision {
        self.permits_on(caller, action, Target::Tool(tool))
    }

    /// What the policy decides for `caller` about a prompt or resource (the local
    /// user: everything).
    pub(super) fn permits_on(
        &self,
        caller: &Caller,
        action: Action,
        target: Target<'_>,
    ) -> Decision {
        match (&self.team, caller) {
            (Some(team), Caller::User(u)) => team.policy.decide_on(&u.principal, action, target),
            _ => Decision::Allow,
        }
    }

    /// Refuses what the policy does not let `caller` do to `target` (asked for as
    /// `asked`): an error that names the policy, and an audit line.
    pub(super) fn check(
        &self,
        caller: &Caller,
        action: Action,
        target: Target<'_>,
        asked: &str,
    ) -> Result<(), Refused> {
        let decision = self.permits_on(caller, action, target);
        if decision.allowed() {
            return Ok(());
        }
        let reason = decision.reason();
        let mut fields = json!({"action": action.name(), "why": reason});
        match target {
            Target::Tool(t) => {
                fields["server"] = json!(t.server());
                fields["tool"] = json!(t.tool());
            }
            Target::Prompt { server, name } => {
                fields["server"] = json!(server);
                fields["prompt"] = json!(name);
            }
            // As a read's line has it: a digest, never the URI itself.
            Target::Resource { server, uri } => {
                fields["server"] = json!(server);
                fields["uri_sha256"] = json!(self.session.audit_digest(uri.as_bytes()));
            }
            Target::SignIn { server } => fields["server"] = json!(server),
        }
        self.session.audit("denied", fields);
        Err((
            INVALID_PARAMS,
            format!(
                "edgar's policy does not let you {} {}: {reason}",
                action.verb(),
                crate::text::shown(asked)
            ),
        )
            .into())
    }

    /// Checks a completion or a subscription passed on to `server` (its params in the
    /// server's own terms): completing a prompt's arguments needs `get_prompt`, a
    /// resource's or a subscription `read_resource`. A per-user server's resource
    /// updates would reach no one: subscribing to them is refused.
    pub(super) fn check_passed_on(
        &self,
        caller: &Caller,
        server: &str,
        method: &str,
        params: &Value,
    ) -> Result<(), Refused> {
        if self.team.is_none() {
            return Ok(());
        }
        let (action, own, field) = match method {
            "completion/complete" if params["ref"]["type"] == "ref/prompt" => {
                (Action::GetPrompt, &params["ref"]["name"], "name")
            }
            "completion/complete" => (Action::ReadResource, &params["ref"]["uri"], "uri"),
            _ => (Action::ReadResource, &params["uri"], "uri"),
        };
        let own = own.as_str().unwrap_or("");
        let target = if field == "name" {
            Target::Prompt { server, name: own }
        } else {
            Target::Resource { server, uri: own }
        };
        self.check(caller, action, target, own)?;
        if method == "resources/subscribe"
            && self.per_user.as_ref().is_some_and(|p| p.serves(server))
        {
            return Err((
                METHOD_NOT_FOUND,
                format!("the resources of {server}, which runs per user, cannot be subscribed to"),
            )
                .into());
        }
        Ok(())
    }

    /// The session that runs `server` for `caller`: their own for a per-user server,
    /// else the shared one.
    pub(super) fn session_of(&self, caller: &Caller, server: &str) -> Arc<Session> {
        match (&self.per_user, caller) {
            (Some(p), Caller::User(_)) if p.serves(server) => p.session_for(caller.key()),
            _ => self.session.clone(),
        }
    }

    /// The servers running for `caller`: the shared ones running, and their own
    /// per-user ones.
    pub(super) async fn running_for(&self, caller: &Caller) -> Vec<String> {
        let per_user = |s: &str| self.per_user.as_ref().is_some_and(|p| p.serves(s));
        let mut names: Vec<String> = (self.session.running().await.into_iter())
            .filter(|s| !per_user(s))
            .map(str::to_owned)
            .collect();
        // A listing makes no session for a user who has none (which could close
        // another user's to make room).
        if let (Some(p), Caller::User(_)) = (&self.per_user, caller)
            && let Some(mine) = p.existing(caller.key())
        {
            names.extend(
                mine.running()
                    .await
                    .into_iter()
                    .filter(|s| per_user(s))
                    .map(str::to_owned),
            );
        }
        names
    }

    /// A team user's call: the tool found (by this user's searches, or in the catalog
    /// when every tool is served), permitted by the policy, within the limits; then run,
    /// timed and counted. A denial is a tool error that names the policy, and an audit
    /// line; a limit is a JSON-RPC error that says when to retry.
    pub(super) async fn call_as_user(
        &self,
        team: &Arc<Team>,
        caller: &Caller,
        name: &str,
        args: Value,
        progress: Option<ProgressSink>,
    ) -> Reply {
        let Some(tool) = self.resolve(caller, name).await else {
            return Ok(text_result(
                &format!(
                    "no tool named {} has been found in this session: call tool_search first, then call one of the tools it returns",
                    crate::text::shown(name)
                ),
                true,
            ));
        };
        let (server, tool_name) = (tool.server(), tool.tool());
        let decision = self.permits(caller, Action::CallTool, &tool);
        if !decision.allowed() {
            let reason = decision.reason();
            self.session.audit(
                "denied",
                json!({"server": server, "tool": tool_name, "name": tool.name(),
                       "action": Action::CallTool.name(), "why": reason}),
            );
            team.metrics
                .call(server, tool_name, Outcome::Denied, Default::default());
            return Ok(text_result(
                &format!(
                    "edgar's policy does not let you call {}: {reason}",
                    tool.name()
                ),
                true,
            ));
        }
        if let Err(limited) = team.limits.take(caller.key(), tool.name()) {
            team.metrics
                .call(server, tool_name, Outcome::Limited, Default::default());
            let secs = limited.retry_after.as_secs_f64().max(0.001);
            return Err((
                RATE_LIMITED,
                format!(
                    "rate limit reached ({}): retry after {secs:.3} s",
                    limited.which
                ),
            )
                .into());
        }
        let started = std::time::Instant::now();
        let called = match &self.per_user {
            // The user's own process of a per-user server.
            Some(p) if p.serves(server) => {
                let session = p.session_for(caller.key());
                super::calls::call_in(&session, tool.name(), args, progress).await
            }
            _ => super::calls::call_in(&self.session, tool.name(), args, progress).await,
        };
        // A server the user signs in to themselves, and they have not (or no longer).
        if let Err(McpError::NeedsLogin { server: s, .. }) = &called
            && team.sign_ins.as_ref().is_some_and(|u| u.signs_in(s))
        {
            team.metrics
                .call(server, tool_name, Outcome::ToolError, started.elapsed());
            return self
                .sign_in_needed(team, caller, std::slice::from_ref(s))
                .await;
        }
        let result = super::calls::reply_of(called);
        let outcome = match &result {
            Ok(r) if r["isError"] != true => Outcome::Ok,
            _ => Outcome::ToolError,
        };
        team.metrics
            .call(server, tool_name, outcome, started.elapsed());
        result
    }

    /// The tool `name` means for `caller`: one their searches found (here, or on
    /// another replica), or with every tool served, one of the catalog (`SERVER/TOOL`
    /// names one server's own tool).
    async fn resolve(&self, caller: &Caller, name: &str) -> Option<SanitizedTool> {
        if !self.expose_all {
            let found = |g: &Gateway| {
                g.search
                    .found_by(caller.key())
                    .into_iter()
                    .find(|t| t.name() == name)
            };
            if let Some(t) = found(self) {
                return Some(t);
            }
            self.sync_found(caller).await;
            return found(self);
        }
        let catalog = self.session.catalog().await.tools;
        if let Exposure::Transparent(server) = &self.exposure
            && let Some(own) = name
                .strip_prefix(server.as_str())
                .and_then(|n| n.strip_prefix('/'))
        {
            return catalog
                .into_iter()
                .find(|t| t.server() == server && t.tool() == own);
        }
        catalog.into_iter().find(|t| t.name() == name)
    }
}

impl Gateway {
    /// Records what `caller`'s search returned where the other replicas see it.
    pub(super) async fn share_found(&self, caller: &Caller, names: Vec<String>) {
        let (Some(team), Caller::User(_)) = (&self.team, caller) else {
            return;
        };
        let Some(shared) = &team.shared_found else {
            return;
        };
        if let Err(e) = shared.add(caller.key(), &names).await {
            tracing::warn!("what a search found could not be shared with the other replicas: {e}");
        }
    }

    /// Adds what `caller`'s searches on other replicas found to what they may list and
    /// call here (each tool from this replica's own catalog).
    pub(super) async fn sync_found(&self, caller: &Caller) {
        let (Some(team), Caller::User(_)) = (&self.team, caller) else {
            return;
        };
        let Some(shared) = &team.shared_found else {
            return;
        };
        let user = caller.key();
        let names = match shared.names(user).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("what searches on other replicas found could not be read: {e}");
                return;
            }
        };
        let have: std::collections::HashSet<String> = self
            .search
            .found_by(user)
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        let missing: std::collections::HashSet<String> =
            names.into_iter().filter(|n| !have.contains(n)).collect();
        if missing.is_empty() {
            return;
        }
        let tools = self
            .session
            .catalog()
            .await
            .tools
            .into_iter()
            .filter(|t| missing.contains(t.name()))
            .collect();
        self.search.remember(user, tools);
    }
}

#[cfg(test)]
mod tests {
    use super::super::User;
    use super::super::team::Principal;
    use crate::auth::bearer::Subject;

    #[test]
    fn a_users_token_is_never_shown() {
        let token = std::sync::Arc::new(crate::auth::Secret::new("eyJhbGciOi.secret.sig"));
        let user = User {
            principal: Principal {
                sub: "ada".into(),
                groups: vec!["eng".into()],
                scopes: vec![],
            },
            token: token.clone(),
        };
        let subject = Subject {
            sub: "ada".into(),
            token,
        };
        for shown in [format!("{user:?}"), format!("{subject:?}")] {
            assert!(shown.contains("ada"), "{shown}");
            assert!(
                !shown.contains("secret") && !shown.contains("eyJ"),
                "{shown}"
            );
        }
    }
}
