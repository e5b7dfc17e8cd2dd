//! Who may see and call what, in Cedar: the administrator's policy file, checked at
//! start against [`SCHEMA`] (strict validation, so a misspelt attribute or action is an
//! error with its line, not a rule that never matches), and asked per user and tool.
//! Nothing is permitted unless a `permit` says so and no `forbid` applies.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::str::FromStr;

use cedar_policy::{
    Authorizer, Context, Decision as CedarDecision, Entities, Entity, EntityId, EntityTypeName,
    EntityUid, PolicySet, Request, RestrictedExpression, Schema, ValidationMode, Validator,
};
use miette::Diagnostic;

use super::TeamError;
use super::token::Principal;
use crate::guard::SanitizedTool;

/// The entities and actions a policy speaks of. A tool's hints carry the MCP defaults
/// when the server gave none (not read-only, destructive, not idempotent, open world):
/// a policy that trusts `readOnlyHint` trusts what a server claims, which the guard has
/// checked only for shape. Prompts and resources carry the same hints, fixed to what
/// getting or reading is (read-only, not destructive, idempotent, closed world), so a
/// rule written for every action (`when { resource.readOnlyHint }`) holds for them too.
/// Signing in to a `user_sign_in` server (`SignIn::"server"`) keeps a token for the user
/// and reaches beyond the gateway: not read-only, not destructive, idempotent, open world.
pub const SCHEMA: &str = r#"
entity User = { groups: Set<String>, scopes: Set<String> };
entity Server;
entity Tool in [Server] = {
  server: String,
  tool: String,
  readOnlyHint: Bool,
  destructiveHint: Bool,
  idempotentHint: Bool,
  openWorldHint: Bool,
};
entity Prompt in [Server] = {
  server: String,
  prompt: String,
  readOnlyHint: Bool,
  destructiveHint: Bool,
  idempotentHint: Bool,
  openWorldHint: Bool,
};
entity Resource in [Server] = {
  server: String,
  uri: String,
  readOnlyHint: Bool,
  destructiveHint: Bool,
  idempotentHint: Bool,
  openWorldHint: Bool,
};
action list_tools, call_tool appliesTo { principal: [User], resource: [Tool] };
action list_prompts, get_prompt appliesTo { principal: [User], resource: [Prompt] };
entity SignIn in [Server] = {
  server: String,
  readOnlyHint: Bool,
  destructiveHint: Bool,
  idempotentHint: Bool,
  openWorldHint: Bool,
};
action list_resources, read_resource appliesTo { principal: [User], resource: [Resource] };
action sign_in appliesTo { principal: [User], resource: [SignIn] };
"#;

/// What a policy decides about one tool, prompt or resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Seeing the tool in `tools/list` and `tool_search`.
    ListTools,
    /// Calling it.
    CallTool,
    /// Seeing the prompt in `prompts/list`.
    ListPrompts,
    /// Getting it (or completing its arguments).
    GetPrompt,
    /// Seeing the resource (or template) in `resources/list`.
    ListResources,
    /// Reading it (or subscribing to it, or completing its template).
    ReadResource,
    /// Signing in to a server the gateway's users sign in to themselves
    /// (`"grant": "user_sign_in"`), and being asked to.
    SignIn,
}

impl Action {
    const ALL: [Action; 7] = [
        Action::ListTools,
        Action::CallTool,
        Action::ListPrompts,
        Action::GetPrompt,
        Action::ListResources,
        Action::ReadResource,
        Action::SignIn,
    ];

    fn id(self) -> &'static str {
        match self {
            Action::ListTools => "list_tools",
            Action::CallTool => "call_tool",
            Action::ListPrompts => "list_prompts",
            Action::GetPrompt => "get_prompt",
            Action::ListResources => "list_resources",
            Action::ReadResource => "read_resource",
            Action::SignIn => "sign_in",
        }
    }
}

/// What a decision is about: a tool, or one of a server's prompts or resources (by
/// the server's own name or URI; a template by its URI template).
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Tool(&'a SanitizedTool),
    Prompt {
        server: &'a str,
        name: &'a str,
    },
    Resource {
        server: &'a str,
        uri: &'a str,
    },
    /// Signing in to the server.
    SignIn {
        server: &'a str,
    },
}

impl Target<'_> {
    fn server(&self) -> &str {
        match self {
            Target::Tool(t) => t.server(),
            Target::Prompt { server, .. }
            | Target::Resource { server, .. }
            | Target::SignIn { server } => server,
        }
    }
}

/// Allowed, or denied by the named policies (none named: nothing permitted it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(Vec<String>),
}

impl Decision {
    pub fn allowed(&self) -> bool {
        *self == Decision::Allow
    }

    /// The denial in words: which policy, or that none permits it.
    pub fn reason(&self) -> String {
        match self {
            Decision::Allow => "allowed".into(),
            Decision::Deny(by) if by.is_empty() => {
                "no policy permits it (the gateway denies by default)".into()
            }
            Decision::Deny(by) => format!("forbidden by policy {}", by.join(", ")),
        }
    }
}

/// The loaded policy file.
pub struct Policy {
    set: PolicySet,
    authorizer: Authorizer,
    user_type: EntityTypeName,
    tool_type: EntityTypeName,
    prompt_type: EntityTypeName,
    resource_type: EntityTypeName,
    sign_in_type: EntityTypeName,
    server_type: EntityTypeName,
    /// Each [`Action`]'s uid, in [`Action::ALL`]'s order.
    actions: Vec<EntityUid>,
}

impl Policy {
    /// Reads `path`, parses and validates it; an error names the line and column.
    pub fn load(path: &Path) -> Result<Policy, TeamError> {
        let text = crate::paths::read_capped(path, 1 << 20)
            .map_err(|e| bad(path, e.to_string()))?
            .ok_or_else(|| bad(path, "no such file".into()))?;
        let text = String::from_utf8(text).map_err(|_| bad(path, "not UTF-8".into()))?;
        Policy::parse(&text).map_err(|reason| bad(path, reason))
    }

    /// Parses and validates policy text (errors as `line:column: message`).
    pub fn parse(text: &str) -> Result<Policy, String> {
        let set = PolicySet::from_str(text).map_err(|e| located(text, &e))?;
        let (schema, _) = Schema::from_cedarschema_str(SCHEMA)
            .map_err(|e| format!("edgar's own Cedar schema does not parse: {e}"))?;
        let result = Validator::new(schema).validate(&set, ValidationMode::Strict);
        if let Some(e) = result.validation_errors().next() {
            return Err(located(text, e));
        }
        let name =
            |n: &str| EntityTypeName::from_str(n).map_err(|e| format!("entity type {n}: {e}"));
        let action_type = name("Action")?;
        let action =
            |id: &str| EntityUid::from_type_name_and_id(action_type.clone(), EntityId::new(id));
        Ok(Policy {
            set,
            authorizer: Authorizer::new(),
            user_type: name("User")?,
            tool_type: name("Tool")?,
            prompt_type: name("Prompt")?,
            resource_type: name("Resource")?,
            sign_in_type: name("SignIn")?,
            server_type: name("Server")?,
            actions: Action::ALL.iter().map(|a| action(a.id())).collect(),
        })
    }

    /// How many policies the file holds (said at start).
    pub fn len(&self) -> usize {
        self.set.policies().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `who` may do `action` on `tool`.
    pub fn decide(&self, who: &Principal, action: Action, tool: &SanitizedTool) -> Decision {
        self.decide_on(who, action, Target::Tool(tool))
    }

    /// Whether `who` may do `action` on `target`.
    pub fn decide_on(&self, who: &Principal, action: Action, target: Target<'_>) -> Decision {
        match self.ask(who, action, target) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("the policy could not be evaluated: {e}; denied");
                Decision::Deny(Vec::new())
            }
        }
    }

    fn ask(&self, who: &Principal, action: Action, target: Target<'_>) -> Result<Decision, String> {
        let user =
            EntityUid::from_type_name_and_id(self.user_type.clone(), EntityId::new(&who.sub));
        let server_name = target.server();
        let server =
            EntityUid::from_type_name_and_id(self.server_type.clone(), EntityId::new(server_name));
        let set = |v: &[String]| {
            RestrictedExpression::new_set(v.iter().cloned().map(RestrictedExpression::new_string))
        };
        let user_entity = Entity::new(
            user.clone(),
            HashMap::from([
                ("groups".to_owned(), set(&who.groups)),
                ("scopes".to_owned(), set(&who.scopes)),
            ]),
            HashSet::new(),
        )
        .map_err(|e| e.to_string())?;
        let string = |v: &str| RestrictedExpression::new_string(v.to_owned());
        let flag = RestrictedExpression::new_bool;
        // Hints: a tool's as its server gave them (MCP's defaults for those it did
        // not); a prompt's or resource's, what getting or reading is.
        let (kind, id, own, hints) = match target {
            Target::Tool(tool) => {
                let h = tool.hints();
                (
                    &self.tool_type,
                    format!("{server_name}__{}", tool.tool()),
                    Some(("tool", tool.tool())),
                    [
                        h.read_only.unwrap_or(false),
                        h.destructive.unwrap_or(true),
                        h.idempotent.unwrap_or(false),
                        h.open_world.unwrap_or(true),
                    ],
                )
            }
            Target::Prompt { name, .. } => (
                &self.prompt_type,
                format!("{server_name}__{name}"),
                Some(("prompt", name)),
                [true, false, true, false],
            ),
            Target::Resource { uri, .. } => (
                &self.resource_type,
                format!("{server_name}/{uri}"),
                Some(("uri", uri)),
                [true, false, true, false],
            ),
            Target::SignIn { .. } => (
                &self.sign_in_type,
                server_name.to_owned(),
                None,
                [false, false, true, true],
            ),
        };
        let resource = EntityUid::from_type_name_and_id(kind.clone(), EntityId::new(id));
        let [read_only, destructive, idempotent, open_world] = hints;
        let target_entity = Entity::new(
            resource.clone(),
            HashMap::from([
                ("server".to_owned(), string(server_name)),
                ("readOnlyHint".to_owned(), flag(read_only)),
                ("destructiveHint".to_owned(), flag(destructive)),
                ("idempotentHint".to_owned(), flag(idempotent)),
                ("openWorldHint".to_owned(), flag(open_world)),
            ])
            .into_iter()
            .chain(own.map(|(k, v)| (k.to_owned(), string(v))))
            .collect(),
            HashSet::from([server.clone()]),
        )
        .map_err(|e| e.to_string())?;
        let entities = Entities::from_entities(
            [
                user_entity,
                target_entity,
                Entity::new_no_attrs(server, HashSet::new()),
            ],
            None,
        )
        .map_err(|e| e.to_string())?;
        let index = Action::ALL.iter().position(|a| *a == action);
        let action = index
            .and_then(|i| self.actions.get(i))
            .cloned()
            .ok_or_else(|| format!("no Cedar action for {action:?}"))?;
        let request = Request::new(user, action, resource, Context::empty(), None)
            .map_err(|e| e.to_string())?;
        let response = self
            .authorizer
            .is_authorized(&request, &self.set, &entities);
        if let Some(e) = response.diagnostics().errors().next() {
            tracing::warn!("a policy failed to evaluate (it is skipped): {e}");
        }
        if response.decision() == CedarDecision::Allow {
            return Ok(Decision::Allow);
        }
        // Denied: the forbids that applied, by their `@id` when they have one.
        let by = response
            .diagnostics()
            .reason()
            .map(|id| {
                self.set
                    .annotation(id, "id")
                    .map_or_else(|| id.to_string(), |a| format!("\"{a}\" ({id})"))
            })
            .collect();
        Ok(Decision::Deny(by))
    }
}

impl Action {
    /// The Cedar action's name, for audit lines.
    pub fn name(self) -> &'static str {
        self.id()
    }

    /// What doing it is, in words ("edgar's policy does not let you VERB X").
    pub fn verb(self) -> &'static str {
        match self {
            Action::ListTools => "see the tool",
            Action::CallTool => "call",
            Action::ListPrompts => "see the prompt",
            Action::GetPrompt => "get the prompt",
            Action::ListResources => "see the resource",
            Action::ReadResource => "read",
            Action::SignIn => "sign in to",
        }
    }
}

fn bad(path: &Path, reason: String) -> TeamError {
    TeamError::Policy {
        path: path.to_owned(),
        reason,
    }
}

/// A Cedar diagnostic as `line:column: message (help)`, from its first label.
fn located(text: &str, e: &(impl Diagnostic + std::fmt::Display)) -> String {
    let offset = e.labels().and_then(|mut l| l.next()).map(|l| l.offset());
    let mut message = e.to_string();
    if let Some(help) = e.help() {
        message = format!("{message} ({help})");
    }
    // A parse error's own text says little; its related errors say what was wrong.
    if let Some(related) = e.related()
        && let Some(first) = related.into_iter().next()
    {
        message = format!("{message}: {first}");
    }
    match offset {
        Some(at) => {
            let before = text.get(..at).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("{line}:{column}: {message}")
        }
        None => message,
    }
}

#[cfg(test)]
mod tests;
