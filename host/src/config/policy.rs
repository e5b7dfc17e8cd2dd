//! The administrator's rules as they apply to one server ([`ToolPolicy`]): which tools,
//! prompts and resources pass, the result cap, and what the guard's findings lead to.

/// The part of the policy that applies to one server's tools and results, kept with its
/// [`ServerSpec`](super::ServerSpec) so filtering needs no lookup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
    /// The rules for the server's prompts (`server/prompt` globs).
    pub prompts: Rules,
    /// The rules for the server's resources (`server/URI` globs).
    pub resources: Rules,
    pub max_result_bytes: Option<u64>,
    /// What the guard's findings lead to.
    pub findings: FindingActions,
}

/// What the session does with the guard's findings (policy `"findings"`): per severity
/// on a tool, for a secret in a result and for one in a call's arguments. The defaults
/// hold back a tool with a high finding, warn of a medium one, mask a secret before the
/// model reads it, and send no call that carries one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FindingActions {
    pub high: FindingAction,
    pub medium: FindingAction,
    pub low: FindingAction,
    pub secret_in_result: SecretAction,
    /// A secret in a call's arguments (a key the model was talked into passing along).
    pub secret_in_arguments: ArgumentAction,
}

impl Default for FindingActions {
    fn default() -> FindingActions {
        FindingActions {
            high: FindingAction::Quarantine,
            medium: FindingAction::Warn,
            low: FindingAction::Ignore,
            secret_in_result: SecretAction::Mask,
            secret_in_arguments: ArgumentAction::Block,
        }
    }
}

/// What a finding on a tool leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FindingAction {
    /// The tool is held back (listed as quarantined, with the finding), and audited.
    Quarantine,
    /// The tool is offered; the finding is logged and audited.
    Warn,
    /// Nothing.
    Ignore,
}

/// What a secret found in a tool's result leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretAction {
    /// The secret is replaced by a marker naming its rule before the model reads it.
    Mask,
    /// The call fails with the rule's name; the result is not shown.
    Block,
}

/// What a secret found in a call's arguments leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgumentAction {
    /// The call is not sent; the error names the rule and the argument, never the value.
    Block,
    /// The call is sent; the finding is logged and audited.
    Allow,
}

impl ToolPolicy {
    /// Whether the policy lets the model see and call `server/tool`.
    pub fn allows(&self, server: &str, tool: &str) -> bool {
        allowed(self.allow.as_deref(), &self.deny, server, tool)
    }
}

/// An administrator's allow and deny globs over `server/item` (deny wins; with `allow`,
/// what matches none of it is refused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
}

impl Rules {
    /// Whether `server/item` passes, and if not, the rule list that refused it.
    pub fn check(&self, server: &str, item: &str) -> Result<(), &'static str> {
        if allowed(self.allow.as_deref(), &self.deny, server, item) {
            return Ok(());
        }
        let full = format!("{server}/{item}");
        Err(if self.deny.iter().any(|p| crate::text::glob(p, &full)) {
            "deny"
        } else {
            "allow"
        })
    }
}

fn allowed(allow: Option<&[String]>, deny: &[String], server: &str, item: &str) -> bool {
    if allow.is_none() && deny.is_empty() {
        return true;
    }
    let full = format!("{server}/{item}");
    allow.is_none_or(|a| a.iter().any(|p| crate::text::glob(p, &full)))
        && !deny.iter().any(|p| crate::text::glob(p, &full))
}
