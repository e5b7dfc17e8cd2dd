//! `tool_name`: the namespaced, model-visible name of a server's tool.
//!
//! A name is `server__tool` when both parts are already clean, which keeps names
//! readable and makes the mapping injective (a clean name holds exactly one `__`, and
//! the server part cannot contain one). Anything else is sanitized, cut to fit, and
//! given a hash of the original pair: `server__tool__0123456789`, which holds exactly
//! two `__`, so it can never equal a clean name. No built-in tool name contains `__`,
//! so nothing can shadow one.

use crate::limits::{MAX_NAME_INPUT_BYTES, MAX_NAME_LEN, NAME_HASH_HEX};
use crate::types::{Rejection, RejectionKind};

/// Names of the harness's own tools, which no server tool may take.
pub const BUILTIN_TOOLS: &[&str] = &["tool_search"];

/// Longest server part kept in a hashed name, so the tool part keeps most of the room.
const MAX_HASHED_SERVER: usize = 20;

/// The model-visible name for `tool` on `server`.
pub fn tool_name(server: &str, tool: &str) -> Result<String, Rejection> {
    for (what, s) in [("server", server), ("tool", tool)] {
        if s.is_empty() {
            return Err(Rejection::new(
                RejectionKind::InvalidName,
                format!("the {what} name is empty"),
            ));
        }
        if s.len() > MAX_NAME_INPUT_BYTES {
            return Err(Rejection::new(
                RejectionKind::TooLarge,
                format!(
                    "the {what} name is {} bytes, over the {MAX_NAME_INPUT_BYTES}-byte limit",
                    s.len()
                ),
            ));
        }
    }
    if is_clean(server, false)
        && is_clean(tool, true)
        && server.len() + 2 + tool.len() <= MAX_NAME_LEN
    {
        return Ok(format!("{server}__{tool}"));
    }
    Ok(hashed(server, tool))
}

/// Whether `part` can appear in a name unchanged: only `[A-Za-z0-9_-]`, no `__`, no
/// leading `_`, and (for the server part, which a `__` follows) no trailing `_`.
fn is_clean(part: &str, trailing_underscore_ok: bool) -> bool {
    let b = part.as_bytes();
    b.iter().all(|&c| allowed(c))
        && !part.contains("__")
        && b.first() != Some(&b'_')
        && (trailing_underscore_ok || b.last() != Some(&b'_'))
}

fn allowed(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn hashed(server: &str, tool: &str) -> String {
    let hash = fnv1a(server, tool);
    let server_part = sanitize(server, MAX_HASHED_SERVER, "mcp");
    let room = MAX_NAME_LEN - server_part.len() - 2 - 2 - NAME_HASH_HEX;
    let tool_part = sanitize(tool, room, "tool");
    format!(
        "{server_part}__{tool_part}__{:0width$x}",
        hash >> (64 - 4 * NAME_HASH_HEX),
        width = NAME_HASH_HEX
    )
}

/// Maps disallowed characters to `_`, collapses runs of `_`, trims `_` at both ends and
/// cuts to `max` bytes; never returns an empty string.
fn sanitize(s: &str, max: usize, fallback: &str) -> String {
    let mut out = String::with_capacity(s.len().min(max));
    for c in s.bytes() {
        let c = if allowed(c) { c } else { b'_' };
        if c == b'_' && (out.is_empty() || out.ends_with('_')) {
            continue;
        }
        if out.len() == max {
            break;
        }
        out.push(c as char);
    }
    while out.ends_with('_') {
        out.pop();
    }
    if out.is_empty() {
        out.push_str(fallback);
    }
    out
}

/// FNV-1a over the raw pair, with a separator byte that UTF-8 text can never contain.
fn fnv1a(server: &str, tool: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = server.bytes().chain([0xff]).chain(tool.bytes());
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn ok(server: &str, tool: &str) -> String {
        let name = tool_name(server, tool).unwrap_or_else(|r| panic!("{r:?}"));
        assert!(name.len() <= MAX_NAME_LEN, "{name}");
        assert!(name.bytes().all(allowed), "{name}");
        assert!(!BUILTIN_TOOLS.contains(&name.as_str()));
        name
    }

    #[test]
    fn clean_pairs_are_readable() {
        assert_eq!(ok("github", "create_issue"), "github__create_issue");
        assert_eq!(ok("my-server", "get-thing"), "my-server__get-thing");
        assert_eq!(ok("a", "b_"), "a__b_");
    }

    #[test]
    fn unclean_pairs_get_a_hash() {
        let n = ok("fs", "read file");
        assert!(n.starts_with("fs__read_file__"), "{n}");
        assert_eq!(n.matches("__").count(), 2);
        assert_eq!(ok("fs", "read file"), n, "deterministic");
        let long = ok("server", &"x".repeat(1000));
        assert_eq!(long.len(), MAX_NAME_LEN);
        let uni = ok("srv", "工具");
        assert!(uni.starts_with("srv__tool__"), "{uni}");
    }

    #[test]
    fn cannot_shadow_builtins() {
        let n = ok("tool", "search");
        assert_eq!(n, "tool__search");
        assert_ne!(ok("x", "tool_search"), "tool_search");
    }

    #[test]
    fn rejects_empty_and_oversized_input() {
        assert_eq!(
            tool_name("", "t").map_err(|r| r.kind),
            Err(RejectionKind::InvalidName)
        );
        assert_eq!(
            tool_name("s", "").map_err(|r| r.kind),
            Err(RejectionKind::InvalidName)
        );
        assert_eq!(
            tool_name("s", &"x".repeat(MAX_NAME_INPUT_BYTES + 1)).map_err(|r| r.kind),
            Err(RejectionKind::TooLarge)
        );
    }

    #[test]
    fn distinct_pairs_get_distinct_names() {
        let pairs = [
            ("a__b", "c"),
            ("a", "b__c"),
            ("a", "_b__c"),
            ("a_", "b"),
            ("a", "_b"),
            ("fs", "read file"),
            ("fs", "read-file"),
            ("fs", "read_file"),
            ("fs", "read.file"),
            ("fs", "read/file"),
            ("f s", "read_file"),
            ("fs", "READ_FILE"),
            ("tool", "search"),
            ("tool_search", "x"),
        ];
        let mut seen = HashSet::new();
        for (s, t) in pairs {
            let n = ok(s, t);
            assert!(seen.insert(n.clone()), "{s:?}/{t:?} collided on {n}");
        }
    }

    #[test]
    fn long_names_differing_only_at_the_end_stay_distinct() {
        let base = "x".repeat(80);
        let a = ok("srv", &format!("{base}a"));
        let b = ok("srv", &format!("{base}b"));
        assert_ne!(a, b);
    }
}
