//! What the guard's findings lead to, by the server's `FindingActions` (the policy's, or
//! the defaults): a tool with a finding whose action is `quarantine` is held back like a
//! rug pull, with the finding as its change, until a human approves exactly that tool
//! (`PinStore::check_with_findings`); `warn` logs; every finding acted on is audited
//! (its rule and place, never the text). In a result, a secret is masked or the call
//! blocked, and invisible text is masked, before the model reads it.

use std::collections::BTreeMap;

use serde_json::json;

use crate::config::{ArgumentAction, FindingAction, FindingActions, SecretAction, ServerSpec};
use crate::guard::findings::{Finding, FindingKind, Severity, mask};
use crate::guard::{Adapter, ContentBlock, GuardError, SanitizedTool, ToolOutput};
use crate::mcp::McpError;
use crate::text::shown;
use crate::trust::audit::AuditLog;
use crate::trust::pins::Quarantined;

fn action(spec: &ServerSpec, severity: Severity) -> FindingAction {
    let a = spec.tool_policy.findings;
    match severity {
        Severity::High => a.high,
        Severity::Medium => a.medium,
        Severity::Low => a.low,
    }
}

/// The tools whose findings say to hold them back (tool name -> the finding in words),
/// from `scans` (one per tool, from `Adapter::scan_tools`). Every finding acted on is
/// audited; a `warn` one is logged.
pub(super) fn judge(
    spec: &ServerSpec,
    scans: Vec<(String, Result<Vec<Finding>, GuardError>)>,
    audit: Option<&AuditLog>,
) -> BTreeMap<String, String> {
    judge_as(spec, "tool", scans, audit)
}

/// [`judge`] for items of another `noun` (`prompt`, `resource`): the audit line names
/// the item under that key.
pub(super) fn judge_as(
    spec: &ServerSpec,
    noun: &str,
    scans: Vec<(String, Result<Vec<Finding>, GuardError>)>,
    audit: Option<&AuditLog>,
) -> BTreeMap<String, String> {
    let mut flagged = BTreeMap::new();
    for (tool, scanned) in scans {
        let found = match scanned {
            Ok(found) => found,
            Err(e) => {
                // A server can make a scan fail (a tool list past the time limit, input
                // an adapter chokes on), so an unscanned item is judged as a high
                // finding would be: held back by default, never offered as clean.
                let act = action(spec, Severity::High);
                if act != FindingAction::Ignore
                    && let Some(audit) = audit
                {
                    let mut line = json!({"server": spec.name, "kind": "unscanned",
                           "severity": "high", "rule": "scan-failed", "path": "",
                           "action": if act == FindingAction::Quarantine { "quarantine" } else { "warn" }});
                    line[noun] = json!(tool);
                    audit.note("finding", line);
                }
                // The adapter's failure is its text: shown on one line, bounded.
                let why = format!(
                    "high unscanned (scan-failed): {}",
                    crate::text::shown_message(&e.to_string())
                );
                match act {
                    FindingAction::Quarantine => {
                        flagged.insert(tool, why);
                    }
                    FindingAction::Warn => {
                        tracing::warn!(server = spec.name, "{noun} {}: {why}", shown(&tool));
                    }
                    FindingAction::Ignore => {}
                }
                continue;
            }
        };
        for f in &found {
            let act = action(spec, f.severity);
            if act == FindingAction::Ignore {
                continue;
            }
            if let Some(audit) = audit {
                let mut line = json!({"server": spec.name, "kind": f.kind.as_str(),
                       "severity": f.severity.as_str(), "rule": f.rule, "path": f.path,
                       "action": if act == FindingAction::Quarantine { "quarantine" } else { "warn" }});
                line[noun] = json!(tool);
                audit.note("finding", line);
            }
            if act == FindingAction::Quarantine {
                flagged.entry(tool.clone()).or_insert_with(|| f.line());
            } else {
                tracing::warn!(server = spec.name, "{noun} {}: {}", shown(&tool), f.line());
            }
        }
    }
    flagged
}

/// Without a pin store (no human can approve anything), a flagged tool is simply held
/// back, with its finding as its change.
pub(super) fn hold_back(
    tools: Vec<SanitizedTool>,
    flagged: &BTreeMap<String, String>,
) -> (Vec<SanitizedTool>, Vec<Quarantined>) {
    let mut held = Vec::new();
    let offered = tools
        .into_iter()
        .filter_map(|t| match flagged.get(t.tool()) {
            Some(f) => {
                held.push(Quarantined {
                    name: t.name().to_owned(),
                    tool: t.tool().to_owned(),
                    change: format!("the guard found {f}"),
                });
                None
            }
            None => Some(t),
        })
        .collect();
    (offered, held)
}

/// What a result's screening needs to know of its call: owned, so it can run off the
/// async workers with the result.
pub(super) struct Screen {
    pub(super) actions: FindingActions,
    pub(super) server: String,
    pub(super) tool: String,
    pub(super) name: String,
    pub(super) audit: Option<AuditLog>,
}

impl Screen {
    /// The result with its findings applied: secrets masked (or the call blocked) and
    /// invisible text masked. Other findings are audited and left for the model to read
    /// as the data they are.
    pub(super) fn apply(
        &self,
        adapter: &Adapter,
        mut out: ToolOutput,
    ) -> Result<ToolOutput, McpError> {
        let found = adapter
            .scan_output(&self.server, &self.tool, &out)
            .map_err(McpError::from)?;
        for (i, findings) in found {
            for f in &findings {
                if let Some(audit) = &self.audit {
                    audit.note(
                        "result_finding",
                        json!({"server": self.server, "tool": self.tool, "kind": f.kind.as_str(),
                               "severity": f.severity.as_str(), "rule": f.rule}),
                    );
                }
            }
            let secret =
                |f: &&Finding| f.kind == FindingKind::Secret && f.severity >= Severity::Medium;
            if let Some(f) = findings.iter().find(secret)
                && self.actions.secret_in_result == SecretAction::Block
            {
                return Err(McpError::Blocked {
                    server: self.server.clone(),
                    rule: format!(
                        "findings.secret_in_result (the result of {} carries {})",
                        self.name, f.message
                    ),
                });
            }
            let masked: Vec<&Finding> = findings
                .iter()
                .filter(|f| {
                    secret(f)
                        || (f.kind == FindingKind::InvisibleText && f.severity == Severity::High)
                })
                .collect();
            if masked.is_empty() {
                continue;
            }
            if let Some(ContentBlock::Text { text }) = out.content.get_mut(i) {
                tracing::warn!(
                    server = self.server,
                    "the result of {} carried {} finding(s) the model will not read: {}",
                    shown(&self.tool),
                    masked.len(),
                    masked
                        .iter()
                        .map(|f| f.rule.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                *text = mask(text, &masked);
            }
        }
        Ok(out)
    }
}

/// Shortest argument string scanned for a secret: every rule's shortest key is longer.
const MIN_SECRET_LEN: usize = 16;

/// The string values of a call's arguments long enough to hold a secret, with their
/// JSON pointers (at most a few thousand, as the arguments were validated).
pub(super) fn argument_strings(args: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(v: &serde_json::Value, path: &mut String, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::String(s) if s.len() >= MIN_SECRET_LEN => {
                out.push((path.clone(), s.clone()));
            }
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("/{i}"));
                    walk(item, path, out);
                    path.truncate(len);
                }
            }
            serde_json::Value::Object(map) => {
                for (k, item) in map {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    walk(item, path, out);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(args, &mut String::new(), &mut out);
    out
}

/// Secrets in a call's arguments, found by the guard's own rules before anything is
/// sent: the policy's `secret_in_arguments` blocks the call (the default) or lets it go
/// with a warning. Each is audited by rule and argument, never by value. `strings` is
/// [`argument_strings`] of the arguments.
pub(super) fn screen_arguments(
    adapter: &Adapter,
    spec: &ServerSpec,
    tool: &str,
    name: &str,
    strings: &[(String, String)],
    audit: Option<&AuditLog>,
) -> Result<(), McpError> {
    if strings.is_empty() || !adapter.scans() {
        return Ok(());
    }
    let output = ToolOutput {
        is_error: false,
        content: strings
            .iter()
            .map(|(_, text)| ContentBlock::Text { text: text.clone() })
            .collect(),
    };
    let found = adapter
        .scan_output(&spec.name, tool, &output)
        .map_err(McpError::from)?;
    let action = spec.tool_policy.findings.secret_in_arguments;
    for (i, findings) in found {
        let Some(f) = findings
            .iter()
            .find(|f| f.kind == FindingKind::Secret && f.severity >= Severity::Medium)
        else {
            continue;
        };
        let argument = strings.get(i).map_or("", |(p, _)| p.as_str());
        if let Some(audit) = audit {
            audit.note(
                "argument_finding",
                json!({"server": spec.name, "tool": tool, "rule": f.rule, "argument": argument,
                       "action": if action == ArgumentAction::Block { "block" } else { "allow" }}),
            );
        }
        let what = format!(
            "the argument {} of {} carries {}",
            shown(if argument.is_empty() { "/" } else { argument }),
            name,
            f.message
        );
        if action == ArgumentAction::Block {
            return Err(McpError::Blocked {
                server: spec.name.clone(),
                rule: format!("findings.secret_in_arguments ({what}; the call was not sent)"),
            });
        }
        tracing::warn!(server = spec.name, "{what}; sent as the policy allows");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerSpec;
    use crate::guard::Subject;

    fn failed() -> Result<Vec<Finding>, GuardError> {
        Err(GuardError::Failed {
            subject: Subject::default(),
            reason: "trapped\n\u{1b}[2J in $adapter".into(),
        })
    }

    #[test]
    fn a_tool_whose_scan_failed_is_judged_as_a_high_finding_would_be() {
        let mut spec = ServerSpec::http("s", "https://example.com/mcp");
        let flagged = judge(
            &spec,
            vec![("t".into(), failed()), ("u".into(), Ok(Vec::new()))],
            None,
        );
        assert_eq!(flagged.keys().collect::<Vec<_>>(), ["t"]);
        assert!(flagged["t"].contains("unscanned") && flagged["t"].contains("trapped"));
        // What the adapter said is shown, never obeyed by the terminal.
        assert!(
            !flagged["t"].chars().any(char::is_control),
            "{}",
            flagged["t"]
        );
        spec.tool_policy.findings.high = FindingAction::Warn;
        assert!(judge(&spec, vec![("t".into(), failed())], None).is_empty());
    }
}
