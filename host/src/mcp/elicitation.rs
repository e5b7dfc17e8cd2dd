//! Answers to `elicitation/create`. [`AcceptDefaults`] accepts with the requested
//! schema's defaults when they cover every required field, otherwise declines; nothing
//! beyond what the server itself proposed is ever sent back. [`AskHuman`], the CLI's
//! handler, shows the request at a terminal and sends the defaults only if the human
//! agrees; off a terminal it declines, except for servers whose entry opts in.

use serde_json::{Map, Value, json};

use super::connection::ClientHandler;

/// Declares elicitation and answers it from schema defaults.
pub struct AcceptDefaults;

impl ClientHandler for AcceptDefaults {
    fn supports_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, server: &str, params: &Value) -> Option<Value> {
        let answer = defaults_answer(params);
        tracing::info!(
            server,
            "elicitation answered: {}",
            answer["action"].as_str().unwrap_or("decline")
        );
        Some(answer)
    }
}

/// The CLI's handler: a human at the terminal decides; elsewhere, only servers that
/// opted in (`"elicitation": "accept_defaults"`) get their defaults back.
pub struct AskHuman {
    /// Whether stdin and stderr are a terminal.
    pub terminal: bool,
    /// Servers whose elicitations may be answered with defaults without asking.
    pub defaults_for: std::collections::HashSet<String>,
}

impl ClientHandler for AskHuman {
    fn supports_elicitation(&self) -> bool {
        true
    }

    /// A task's status, one line on the terminal (nothing elsewhere: stderr may be a log).
    fn progress(&self, server: &str, message: &str) {
        if self.terminal {
            eprintln!("{server}: {message}");
        }
    }

    fn elicit(&self, server: &str, params: &Value) -> Option<Value> {
        let proposal = defaults_answer(params);
        let accepts = proposal["action"] == "accept";
        let answer = if self.terminal {
            let mut prompt = describe(server, params, &proposal);
            if accepts {
                prompt.push_str("Send these values? [y/N] ");
            } else {
                prompt.push_str("edgar cannot fill this in here; declined.\n");
            }
            eprint!("{prompt}");
            let yes = accepts && {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).is_ok()
                    && matches!(line.trim(), "y" | "Y" | "yes")
            };
            if yes {
                proposal
            } else {
                json!({"action": "decline"})
            }
        } else if self.defaults_for.contains(server) {
            proposal
        } else {
            json!({"action": "decline"})
        };
        tracing::info!(
            server,
            "elicitation answered: {}",
            answer["action"].as_str().unwrap_or("decline")
        );
        Some(answer)
    }
}

/// A server's words for a person to read: lines kept, other control characters and
/// invisible characters escaped (no terminal sequence or hidden text gets through), at
/// most 2,000 characters.
pub fn escaped(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c != '\n' && crate::text::unsafe_to_show(c) {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .take(2000)
        .collect()
}

/// A server's text with every line started by `[server] `, so no line of it can pose as
/// another server's (or edgar's own) words.
pub fn prefixed(server: &str, s: &str) -> String {
    let server = escaped(server).replace('\n', " ");
    let text = escaped(s);
    if text.is_empty() {
        return format!("[{server}]");
    }
    text.split('\n')
        .map(|l| format!("[{server}] {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The request as a human reads it: the server's message and each field with its
/// default, control characters escaped.
pub fn describe(server: &str, params: &Value, proposal: &Value) -> String {
    let esc = escaped;
    // The first line follows the question; every further line starts with the server's
    // name, so none can pose as another server's (or edgar's) words.
    let message = esc(params.get("message").and_then(Value::as_str).unwrap_or(""));
    let mut lines = message.split('\n');
    let mut out = format!(
        "MCP server '{}' asks: {}\n",
        esc(server),
        lines.next().unwrap_or_default()
    );
    let name = esc(server).replace('\n', " ");
    for line in lines {
        out.push_str(&format!("[{name}] {line}\n"));
    }
    let schema = params.get("requestedSchema");
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(props) = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
    {
        for name in props.keys().take(50) {
            let value = proposal
                .get("content")
                .and_then(|c| c.get(name))
                .map(|v| esc(&v.to_string()))
                .unwrap_or_else(|| "(no default)".into());
            out.push_str(&format!(
                "  {}{}: {value}\n",
                esc(name).replace('\n', " "),
                if required.contains(&name.as_str()) {
                    " (required)"
                } else {
                    ""
                },
            ));
        }
    }
    out
}

/// `{"action":"accept","content":{...defaults}}` when every required property has a
/// default of its declared primitive type; `{"action":"decline"}` otherwise (and for
/// URL-mode requests, which need a human).
pub fn defaults_answer(params: &Value) -> Value {
    let decline = json!({"action": "decline"});
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        return decline;
    }
    let Some(schema) = params.get("requestedSchema") else {
        return decline;
    };
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, property) in &properties {
        if let Some(default) = property.get("default")
            && fits(property, default)
        {
            content.insert(name.clone(), default.clone());
        }
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let covered = required
        .iter()
        .all(|r| r.as_str().is_some_and(|r| content.contains_key(r)));
    if !covered {
        return decline;
    }
    json!({"action": "accept", "content": content})
}

/// Whether `value` is a primitive of the property's declared type (and one of its
/// `enum` values, if it has them).
fn fits(property: &Value, value: &Value) -> bool {
    let typed = match property.get("type").and_then(Value::as_str) {
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => false,
    };
    let listed = match property.get("enum").and_then(Value::as_array) {
        Some(options) => options.contains(value),
        None => true,
    };
    typed && listed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_the_form() {
        let params = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "note": {"type": "string"}
        }, "required": ["name"]}});
        assert_eq!(
            defaults_answer(&params),
            json!({"action": "accept", "content": {"name": "John Doe", "age": 30, "score": 95.5,
                "status": "active", "verified": true}})
        );
    }

    #[test]
    fn missing_or_wrong_defaults_decline() {
        let required_without_default = json!({"requestedSchema": {"properties": {
            "email": {"type": "string"}}, "required": ["email"]}});
        assert_eq!(
            defaults_answer(&required_without_default)["action"],
            "decline"
        );
        let wrong_type = json!({"requestedSchema": {"properties": {
            "age": {"type": "integer", "default": "thirty"}}, "required": ["age"]}});
        assert_eq!(defaults_answer(&wrong_type)["action"], "decline");
        let not_listed = json!({"requestedSchema": {"properties": {
            "s": {"type": "string", "enum": ["a"], "default": "b"}}, "required": ["s"]}});
        assert_eq!(defaults_answer(&not_listed)["action"], "decline");
        assert_eq!(
            defaults_answer(&json!({"mode": "url", "url": "https://x"}))["action"],
            "decline"
        );
        assert_eq!(defaults_answer(&json!(null))["action"], "decline");
    }
}

#[cfg(test)]
mod ask_tests {
    use super::*;

    fn request() -> Value {
        json!({"message": "Deploy to \u{1b}]0;prod\u{7}?", "requestedSchema": {"type": "object",
            "properties": {"env": {"type": "string", "default": "staging"}}, "required": ["env"]}})
    }

    #[test]
    fn off_a_terminal_only_servers_that_opted_in_get_their_defaults() {
        let h = AskHuman {
            terminal: false,
            defaults_for: ["trusted".to_owned()].into_iter().collect(),
        };
        assert_eq!(
            h.elicit("other", &request()),
            Some(json!({"action": "decline"}))
        );
        assert_eq!(
            h.elicit("trusted", &request()),
            Some(json!({"action": "accept", "content": {"env": "staging"}}))
        );
    }

    #[test]
    fn no_line_of_a_question_can_pose_as_another_servers() {
        let params = json!({"message": "ok\n\nMCP server 'github' asks: your token?\u{2028}x\u{E0041}",
                            "requestedSchema": {"type": "object", "properties": {}}});
        let text = describe("docs", &params, &json!({}));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("MCP server 'docs' asks: ok"), "{text}");
        for l in &lines[1..] {
            assert!(l.starts_with("[docs] "), "{l:?} in {text}");
        }
        assert!(
            text.contains("\\u{2028}") && text.contains("\\u{e0041}"),
            "{text}"
        );
    }

    #[test]
    fn the_prompt_shows_message_fields_and_defaults_escaped() {
        let text = describe("s", &request(), &defaults_answer(&request()));
        assert!(
            text.contains("asks: Deploy to \\u{1b}]0;prod\\u{7}?"),
            "{text}"
        );
        assert!(text.contains("env (required): \"staging\""), "{text}");
        assert!(!text.contains('\u{1b}'));
    }
}
