//! Keys a config file or a server entry has that edgar does not read. Other clients'
//! keys are normal in a shared file, so an unknown key is no error; but one that is
//! probably a misspelling (`"sandox"`, `"disabled_tool"`) or another client's name for
//! something edgar does differently (`"excludeTools"`) would otherwise be ignored without
//! a word, and with it the confinement or the tool filter its author meant.

use serde_json::{Map, Value};

/// The keys edgar reads at a file's top level.
const FILE_KEYS: &[&str] = &["mcpServers", "schemaAdapter"];

/// The keys edgar reads in a server entry.
const ENTRY_KEYS: &[&str] = &[
    "type",
    "transport",
    "command",
    "args",
    "env",
    "env_inherit",
    "cwd",
    "url",
    "headers",
    "adapter",
    "sandbox",
    "per_user",
    "startup_timeout_sec",
    "tool_timeout_sec",
    "task_deadline_sec",
    "enabled_tools",
    "disabled_tools",
    "oauth",
    "elicitation",
    "protocol",
    "disabled",
    "enabled",
];

/// The keys edgar reads in an entry's `"oauth"` object.
const OAUTH_KEYS: &[&str] = &[
    "client_id",
    "client_secret",
    "client_metadata_url",
    "callback_port",
    "scope",
    "issuer",
    "grant",
    "private_key_file",
    "private_key",
    "token_endpoint",
    "audience",
    "identity",
];

/// The keys edgar reads in `"oauth"`'s `"identity"` object.
const IDENTITY_KEYS: &[&str] = &[
    "token_endpoint",
    "client_id",
    "client_secret",
    "id_token_command",
];

/// Other clients' names for a file's list of servers.
const FILE_FOREIGN: &[(&str, &str)] = &[
    (
        "servers",
        "VS Code's key; edgar reads servers from \"mcpServers\"",
    ),
    (
        "mcp_servers",
        "Codex CLI's key; edgar reads servers from \"mcpServers\"",
    ),
    (
        "context_servers",
        "Zed's key; edgar reads servers from \"mcpServers\"",
    ),
];

/// Other clients' names, in a server entry, for what edgar reads under another key or
/// not at all.
const ENTRY_FOREIGN: &[(&str, &str)] = &[
    (
        "includeTools",
        "Gemini CLI's key; edgar reads \"enabled_tools\"",
    ),
    (
        "excludeTools",
        "Gemini CLI's key; edgar reads \"disabled_tools\"",
    ),
    ("httpUrl", "Gemini CLI's key; edgar reads \"url\""),
    ("serverUrl", "Windsurf's key; edgar reads \"url\""),
    ("timeout", "edgar reads \"tool_timeout_sec\" (seconds)"),
    (
        "startup_timeout_ms",
        "edgar reads \"startup_timeout_sec\" (seconds)",
    ),
    (
        "envFile",
        "edgar does not read an env file; list the variables in \"env\"",
    ),
];

/// Most notes said of one file: a cloned repository's file may hold any number of
/// near-miss keys, and each would be a warning at every command.
const MAX_NOTES: usize = 10;

/// What is worth saying about each key of a file and its entries that edgar does not
/// read: a likely misspelling, or another client's key for something edgar reads
/// elsewhere (at most [`MAX_NOTES`], then how many more). Any other unknown key (another
/// client's own setting) passes in silence.
pub(super) fn notes(root: &Map<String, Value>) -> Vec<String> {
    let mut out = all_notes(root);
    if out.len() > MAX_NOTES {
        let more = out.len() - MAX_NOTES;
        out.truncate(MAX_NOTES);
        out.push(format!("and {more} more keys edgar does not read"));
    }
    out
}

fn all_notes(root: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    note_keys(root, (FILE_KEYS, FILE_FOREIGN), "", &mut out);
    let servers = root.get("mcpServers").and_then(Value::as_object);
    for (name, entry) in servers.into_iter().flatten() {
        let Some(entry) = entry.as_object() else {
            continue;
        };
        let at = format!("server {}: ", crate::text::shown(name));
        note_keys(entry, (ENTRY_KEYS, ENTRY_FOREIGN), &at, &mut out);
        if let Some(oauth) = entry.get("oauth").and_then(Value::as_object) {
            let oauth_at = format!("{at}\"oauth\": ");
            note_keys(oauth, (OAUTH_KEYS, &[]), &oauth_at, &mut out);
            if let Some(identity) = oauth.get("identity").and_then(Value::as_object) {
                let at = format!("{at}\"oauth\".\"identity\": ");
                note_keys(identity, (IDENTITY_KEYS, &[]), &at, &mut out);
            }
        }
    }
    out
}

/// The keys edgar reads at one level, and other clients' keys there worth a word.
type Level<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);

fn note_keys(
    object: &Map<String, Value>,
    (known, foreign): Level,
    at: &str,
    out: &mut Vec<String>,
) {
    for key in object.keys() {
        if known.contains(&key.as_str()) {
            continue;
        }
        let shown = crate::text::shown(key);
        if let Some((_, what)) = foreign.iter().find(|(k, _)| k == key) {
            out.push(format!("{at}key {shown} is ignored: {what}"));
        } else if let Some(meant) = likely_meant(key, known) {
            out.push(format!(
                "{at}key {shown} is ignored: edgar reads no such key; did you mean \"{meant}\"?"
            ));
        }
    }
}

/// The known key `key` is probably a misspelling of: the same once case, `_` and `-`
/// are set aside (`disabledTools`), or within two edits of it; a short key within one
/// edit and with its first letter (`uri` for `url`, but not VS Code's `dev` for `env`).
fn likely_meant<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let plain = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let key = plain(key);
    let mut best: Option<(usize, &str)> = None;
    for k in known {
        let k_plain = plain(k);
        let distance = strsim::damerau_levenshtein(&key, &k_plain);
        let close = match k.len() {
            0..=4 => distance <= 1 && key.chars().next() == k_plain.chars().next(),
            _ => distance <= 2,
        };
        if close && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, k));
        }
    }
    best.map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn notes_of(doc: Value) -> Vec<String> {
        notes(doc.as_object().unwrap_or_else(|| panic!("an object")))
    }

    #[test]
    fn a_misspelled_key_is_named_with_what_was_meant() {
        let cases = [
            ("sandox", "sandbox"),
            ("comand", "command"),
            ("disabled_tool", "disabled_tools"),
            ("disabledTools", "disabled_tools"),
            ("Enabled_Tools", "enabled_tools"),
            ("startup_timeout_secs", "startup_timeout_sec"),
            ("arg", "args"),
            ("uri", "url"),
            ("header", "headers"),
        ];
        for (typo, meant) in cases {
            let got = notes_of(json!({"mcpServers": {"a": {"command": "x", typo: 1}}}));
            assert_eq!(got.len(), 1, "{typo}: {got:?}");
            assert!(got[0].starts_with("server 'a': key"), "{got:?}");
            assert!(got[0].contains(&format!("'{typo}'")), "{got:?}");
            assert!(
                got[0].ends_with(&format!("did you mean \"{meant}\"?")),
                "{got:?}"
            );
        }
    }

    #[test]
    fn another_clients_key_says_what_edgar_reads_instead() {
        let got = notes_of(json!({
            "servers": {},
            "mcpServers": {"g": {"command": "x", "excludeTools": ["rm"], "httpUrl": "https://h"}},
        }));
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(
            got.iter()
                .any(|n| n.starts_with("key 'servers' is ignored: VS Code"))
        );
        assert!(
            got.iter()
                .any(|n| n.contains("'excludeTools'") && n.contains("disabled_tools"))
        );
        assert!(
            got.iter()
                .any(|n| n.contains("'httpUrl'") && n.contains("\"url\""))
        );
    }

    #[test]
    fn known_and_unrelated_keys_pass_in_silence() {
        let got = notes_of(json!({
            "$schema": "x",
            "timeout": 5,
            "mcpServers": {
                "a": {
                    "command": "x", "args": [], "env": {}, "sandbox": {"read": []},
                    "disabled_tools": [], "alwaysAllow": [], "autoApprove": [],
                    "description": "mine", "trust": true, "dev": {}, "timeout_ms": 5,
                },
                "b": {"url": "https://h", "oauth": {"client_id": "c", "scope": "s"}},
                "c": "not an object",
            },
        }));
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn a_file_full_of_near_misses_gets_a_bounded_number_of_notes() {
        let entries: Map<String, Value> = (0..5000)
            .map(|i| (format!("s{i}"), json!({"command": "x", "sandox": {}})))
            .collect();
        let got = notes_of(json!({ "mcpServers": entries }));
        assert_eq!(got.len(), MAX_NOTES + 1, "{got:?}");
        assert_eq!(got[MAX_NOTES], "and 4990 more keys edgar does not read");
    }

    #[test]
    fn oauth_keys_are_checked_too_and_names_are_shown_escaped() {
        let got = notes_of(json!({"mcpServers": {"a\u{1b}[2J": {
            "url": "https://h",
            "oauth": {"client_secrt": "x", "identity": {"token_endpont": "y"}},
        }}}));
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].contains("\"oauth\": key 'client_secrt'"), "{got:?}");
        assert!(got[0].ends_with("\"client_secret\"?"), "{got:?}");
        assert!(
            got[1].contains("\"identity\": key 'token_endpont'"),
            "{got:?}"
        );
        assert!(got.iter().all(|n| !n.contains('\u{1b}')), "{got:?}");
    }
}
