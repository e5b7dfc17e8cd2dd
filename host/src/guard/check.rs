//! The host's own checks of adapter output. The adapter decides policy; these enforce
//! the invariants whatever the adapter is: names match the allowed pattern and never
//! shadow a built-in, schemas are object schemas that compile with no remote
//! resolution, blocks are well formed and within size.

use base64::Engine as _;
use serde_json::Value;

use super::bindings::wit;
use super::{ContentBlock, Dropped, Hints, ToolOutput};
pub(crate) use crate::text::{shown, shown_message};

/// The harness's own tools; no server tool may be named like one, in any letter case.
pub const BUILTIN_TOOLS: &[&str] = &["tool_search"];

const MAX_NAME_LEN: usize = 64;
const MAX_TOOL_NAME_BYTES: usize = 4096;
const MAX_DESCRIPTION_BYTES: usize = 8 << 10;
const MAX_TITLE_BYTES: usize = 1024;
const MAX_SCHEMA_BYTES: usize = 256 << 10;
const MAX_DROPPED: usize = 256;
/// Losses listed for one lowered schema (the reference adapter lists up to 500 and
/// counts the rest).
const MAX_LOSSES: usize = 1024;
/// A lowered schema may outgrow the accepted one: inlined `$ref`s repeat subschemas.
const MAX_LOWERED_BYTES: usize = 1 << 20;
const MAX_DROPPED_TEXT: usize = 1024;
const MAX_TEXT_BYTES: usize = 1 << 20;
const MAX_MEDIA_BYTES: usize = 8 << 20;
const MAX_OUTPUT_BYTES: usize = 8 << 20;
const MAX_BLOCKS: usize = 1024;
const MAX_URI_BYTES: usize = 8 << 10;
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];
const AUDIO_PREFIX: &str = "audio/";

/// A model-visible name: `[A-Za-z0-9_-]{1,64}`, not a built-in.
pub(crate) fn name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!(
            "the name is {} bytes; it must be 1 to {MAX_NAME_LEN}",
            name.len()
        ));
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        return Err(format!(
            "the name {} has characters outside [A-Za-z0-9_-]",
            shown(name)
        ));
    }
    if BUILTIN_TOOLS.iter().any(|b| b.eq_ignore_ascii_case(name)) {
        return Err(format!("the name {name} would shadow a built-in tool"));
    }
    Ok(())
}

/// A model-visible name carries its server's prefix: it is `HEAD__REST`, where HEAD is
/// the server's name (with `_` runs collapsed and trimmed, as a sanitizer would), or, for
/// a hashed name (two or more `__`), at least the first 20 characters of it. So an
/// adapter for one server can never claim another server's names, and, since every
/// server tool's name holds `__`, never a built-in tool's name without one
/// ([`crate::guard::may_be_builtin`]).
/// Digits of the hash a hashed name ends with (the reference adapter's `NAME_HASH_HEX`).
const NAME_HASH_HEX: usize = 10;

/// A hashed name whose server part is cut (a server name over 20 characters: two such
/// servers can share the cut) must end with the hash of its own server and tool (FNV-1a
/// over `server 0xff tool`, as the reference adapter computes it), so one server's
/// adapter can never claim a name another server's tool has. Names that carry the whole
/// server name are bound by [`prefixed`] alone.
pub(crate) fn bound(name: &str, server: &str, tool: &str) -> Result<(), String> {
    let head = name.split("__").next().unwrap_or_default();
    let hashed = name.matches("__").count() >= 2;
    let whole = head == server || head == clean_server(server);
    if !hashed || whole {
        return Ok(());
    }
    let want = format!(
        "{:0width$x}",
        fnv1a(server, tool) >> (64 - 4 * NAME_HASH_HEX),
        width = NAME_HASH_HEX
    );
    if name.rsplit("__").next() == Some(want.as_str()) {
        Ok(())
    } else {
        Err(format!(
            "the name {} cuts the name of server {} but does not end with the hash of that server's own tool ({want}); another server could claim it",
            shown(name),
            shown(server)
        ))
    }
}

/// 64-bit FNV-1a over `server`, a 0xff separator and `tool`.
fn fnv1a(server: &str, tool: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in server.bytes().chain([0xff]).chain(tool.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A server name as a sanitizer leaves it: `_` runs collapsed, leading and trailing `_`
/// removed.
fn clean_server(server: &str) -> String {
    let mut clean = String::with_capacity(server.len());
    for c in server.chars() {
        if c == '_' && (clean.is_empty() || clean.ends_with('_')) {
            continue;
        }
        clean.push(c);
    }
    clean.trim_end_matches('_').to_owned()
}

pub(crate) fn prefixed(name: &str, server: &str) -> Result<(), String> {
    /// The shortest server part a hashed name may keep (the reference adapter's cut).
    const MIN_HASHED_PREFIX: usize = 20;
    let clean = clean_server(server);
    let clean = clean.as_str();
    let head = name.split("__").next().unwrap_or_default();
    let hashed = name.matches("__").count() >= 2;
    let ok = !head.is_empty()
        && name.len() > head.len() + 2
        && (head == server
            || head == clean
            || (hashed
                && clean.starts_with(head)
                && head.len() >= clean.len().min(MIN_HASHED_PREFIX)));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the name {} does not carry the prefix of server {}",
            shown(name),
            shown(server)
        ))
    }
}

/// An adapter's accepted tool, parsed and checked.
pub(super) struct Checked {
    pub tool: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub hints: Hints,
    pub dropped: Vec<Dropped>,
}

pub(super) fn accepted(t: wit::AcceptedTool) -> Result<Checked, String> {
    if t.name.is_empty() || t.name.len() > MAX_TOOL_NAME_BYTES {
        return Err("the tool name is empty or too long".into());
    }
    if t.description.len() > MAX_DESCRIPTION_BYTES {
        return Err(format!(
            "the description is over {MAX_DESCRIPTION_BYTES} bytes"
        ));
    }
    let input_schema = parse_schema(&t.input_schema, "input")?;
    schema_shape(&input_schema)?;
    compile(&input_schema)?;
    let output_schema = match t.output_schema {
        Some(s) => {
            let v = parse_schema(&s, "output")?;
            schema_shape(&v).map_err(|e| format!("output {e}"))?;
            Some(v)
        }
        None => None,
    };
    if t.hints
        .title
        .as_ref()
        .is_some_and(|s| s.len() > MAX_TITLE_BYTES)
    {
        return Err(format!("the title is over {MAX_TITLE_BYTES} bytes"));
    }
    if t.dropped.len() > MAX_DROPPED
        || t.dropped
            .iter()
            .any(|d| d.path.len() + d.reason.len() > MAX_DROPPED_TEXT)
    {
        return Err("the list of dropped items is too long".into());
    }
    Ok(Checked {
        tool: t.name,
        description: t.description,
        input_schema,
        output_schema,
        hints: Hints {
            title: t.hints.title,
            read_only: t.hints.read_only,
            destructive: t.hints.destructive,
            idempotent: t.hints.idempotent,
            open_world: t.hints.open_world,
        },
        dropped: t.dropped.into_iter().map(dropped).collect(),
    })
}

/// A drop or loss note as shown to a user: the adapter wrote it, so control and
/// invisible formatting characters become spaces before it reaches a terminal.
fn dropped(d: wit::Dropped) -> Dropped {
    Dropped {
        path: shown_message(&d.path),
        reason: shown_message(&d.reason),
    }
}

/// A lowered schema's JSON and losses, within the host's limits.
pub(super) fn lowered(l: wit::LoweredSchema) -> Result<(Value, Vec<Dropped>), String> {
    if l.input_schema.len() > MAX_LOWERED_BYTES {
        return Err(format!(
            "the lowered schema is over {MAX_LOWERED_BYTES} bytes"
        ));
    }
    let schema = serde_json::from_str(&l.input_schema)
        .map_err(|e| format!("the lowered schema is not JSON: {e}"))?;
    if l.losses.len() > MAX_LOSSES
        || l.losses
            .iter()
            .any(|d| d.path.len() + d.reason.len() > MAX_DROPPED_TEXT)
    {
        return Err("the list of losses is too long".into());
    }
    let losses = l.losses.into_iter().map(dropped).collect();
    Ok((schema, losses))
}

fn parse_schema(text: &str, which: &str) -> Result<Value, String> {
    if text.len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "the {which} schema is over {MAX_SCHEMA_BYTES} bytes"
        ));
    }
    serde_json::from_str(text).map_err(|e| format!("the {which} schema is not JSON: {e}"))
}

/// The cheap structural checks: a JSON object whose `type` is `"object"`.
pub(crate) fn schema_shape(schema: &Value) -> Result<(), String> {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => Ok(()),
        _ => Err("schema is not an object schema (`type` must be \"object\")".into()),
    }
}

/// Compiles the schema as JSON Schema 2020-12. Remote references cannot resolve: the
/// `jsonschema` crate is built without its HTTP and file resolvers.
pub(crate) fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
        .map_err(|e| {
            format!(
                "the input schema does not compile: {}",
                shown_message(&e.to_string())
            )
        })
}

pub(super) fn output(out: wit::ToolOutput) -> Result<ToolOutput, String> {
    if out.blocks.len() > MAX_BLOCKS {
        return Err(format!(
            "{} content blocks, over the limit of {MAX_BLOCKS}",
            out.blocks.len()
        ));
    }
    let mut total = 0usize;
    let mut content = Vec::with_capacity(out.blocks.len());
    for (i, block) in out.blocks.into_iter().enumerate() {
        let (block, size) = content_block(block).map_err(|e| format!("block {i}: {e}"))?;
        total += size;
        if total > MAX_OUTPUT_BYTES {
            return Err(format!(
                "the blocks add up to over {MAX_OUTPUT_BYTES} bytes"
            ));
        }
        content.push(block);
    }
    Ok(ToolOutput {
        is_error: out.is_error,
        content,
    })
}

fn content_block(block: wit::ContentBlock) -> Result<(ContentBlock, usize), String> {
    Ok(match block {
        wit::ContentBlock::Text(text) => {
            limit(&text, MAX_TEXT_BYTES, "text")?;
            let n = text.len();
            (ContentBlock::Text { text }, n)
        }
        wit::ContentBlock::Image(m) => {
            if !IMAGE_TYPES.contains(&m.mime_type.as_str()) {
                return Err(format!("image type {} is not allowed", shown(&m.mime_type)));
            }
            let n = media(&m.data)?;
            (
                ContentBlock::Image {
                    mime_type: m.mime_type,
                    data: m.data,
                },
                n,
            )
        }
        wit::ContentBlock::Audio(m) => {
            if !m.mime_type.starts_with(AUDIO_PREFIX) || !is_token(&m.mime_type) {
                return Err(format!("audio type {} is not allowed", shown(&m.mime_type)));
            }
            let n = media(&m.data)?;
            (
                ContentBlock::Audio {
                    mime_type: m.mime_type,
                    data: m.data,
                },
                n,
            )
        }
        wit::ContentBlock::ResourceLink(l) => {
            uri(&l.uri)?;
            limit(&l.name, MAX_TITLE_BYTES, "resource name")?;
            if let Some(d) = &l.description {
                limit(d, MAX_DESCRIPTION_BYTES, "resource description")?;
            }
            mime_opt(l.mime_type.as_deref())?;
            let n = l.uri.len() + l.name.len();
            (
                ContentBlock::ResourceLink {
                    uri: l.uri,
                    name: l.name,
                    description: l.description,
                    mime_type: l.mime_type,
                },
                n,
            )
        }
        wit::ContentBlock::Embedded(r) => {
            uri(&r.uri)?;
            mime_opt(r.mime_type.as_deref())?;
            let (text, blob, n) = match r.contents {
                wit::ResourceContents::Text(t) => {
                    limit(&t, MAX_TEXT_BYTES, "resource text")?;
                    let n = t.len();
                    (Some(t), None, n)
                }
                wit::ResourceContents::Blob(b) => {
                    let n = media(&b)?;
                    (None, Some(b), n)
                }
            };
            (
                ContentBlock::Resource {
                    resource: super::ResourceContents {
                        uri: r.uri,
                        mime_type: r.mime_type,
                        text,
                        blob,
                    },
                },
                n,
            )
        }
    })
}

fn limit(s: &str, max: usize, what: &str) -> Result<(), String> {
    if s.len() > max {
        return Err(format!(
            "{what} of {} bytes is over the {max}-byte limit",
            s.len()
        ));
    }
    Ok(())
}

/// Checks base64 media decodes and fits; returns its encoded size.
fn media(data: &str) -> Result<usize, String> {
    if data.len() / 4 * 3 > MAX_MEDIA_BYTES {
        return Err(format!("media over the {MAX_MEDIA_BYTES}-byte limit"));
    }
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("media data is not valid base64: {e}"))?;
    Ok(data.len())
}

fn uri(u: &str) -> Result<(), String> {
    if u.is_empty() || u.len() > MAX_URI_BYTES || u.chars().any(char::is_control) {
        return Err("a resource uri is empty, too long or has control characters".into());
    }
    Ok(())
}

fn mime_opt(m: Option<&str>) -> Result<(), String> {
    match m {
        Some(m) if !is_token(m) => Err(format!("mime type {} is malformed", shown(m))),
        _ => Ok(()),
    }
}

fn is_token(m: &str) -> bool {
    !m.is_empty() && m.len() <= 200 && m.bytes().all(|c| c.is_ascii_graphic())
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    #[test]
    fn a_cut_server_name_binds_the_name_to_that_servers_own_hash() {
        let (a, b) = ("github-enterprise-corp-a", "github-enterprise-corp-b");
        for tool in ["create issue", "delete/repo", "x__y", &"long".repeat(20)] {
            let name = guest_schema::tool_name(a, tool).unwrap_or_else(|r| panic!("{r:?}"));
            assert_eq!(name.matches("__").count(), 2, "hashed: {name}");
            assert!(
                prefixed(&name, a).is_ok() && prefixed(&name, b).is_ok(),
                "{name}"
            );
            assert!(
                bound(&name, a, tool).is_ok(),
                "the reference adapter's hash: {name}"
            );
            assert!(bound(&name, b, tool).is_err(), "{b} may not claim {name}");
            assert!(
                bound(&name, a, "other").is_err(),
                "another tool may not claim {name}"
            );
        }
        // A clean name carries the whole server name: another server cannot claim it.
        let clean = guest_schema::tool_name(a, "x").unwrap_or_else(|r| panic!("{r:?}"));
        assert!(prefixed(&clean, b).is_err(), "{clean}");
        // Names that carry the whole server name need no hash.
        assert!(bound("short__x__0000000000", "short", "x").is_ok());
        assert!(bound("gh__list", "gh", "list").is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_server_tool_can_take_a_name_a_harness_may_use_for_a_builtin() {
        for builtin in ["tool_search", "read_file", "web-fetch", "github"] {
            assert!(crate::guard::may_be_builtin(builtin));
            for server in ["github", "read_file", "tool_search", "a"] {
                assert!(prefixed(builtin, server).is_err(), "{builtin} via {server}");
            }
        }
        assert!(!crate::guard::may_be_builtin("github__list"));
        assert!(!crate::guard::may_be_builtin("has space"));
    }

    #[test]
    fn a_name_carries_its_servers_prefix() {
        for (name, server, ok) in [
            ("github__list", "github", true),
            ("github__list_issues__0123456789", "github", true),
            ("a_b__x", "a__b_", true),
            ("slack__post", "github", false),
            ("git__list", "github", false),
            (
                "abcdefghijklmnopqrst__x__0123456789",
                "abcdefghijklmnopqrstuvwxyz",
                true,
            ),
            (
                "abcdefghij__x__0123456789",
                "abcdefghijklmnopqrstuvwxyz",
                false,
            ),
            ("list_issues", "github", false),
            ("__x", "github", false),
            ("github", "github", false),
            ("github__", "github", false),
        ] {
            assert_eq!(prefixed(name, server).is_ok(), ok, "{name} for {server}");
        }
    }

    #[test]
    fn names() {
        assert!(name("github__create_issue").is_ok());
        assert!(name("").is_err());
        assert!(name(&"x".repeat(65)).is_err());
        assert!(name("has space").is_err());
        assert!(name("tool_search").is_err());
        assert!(name("TOOL_SEARCH").is_err());
        assert!(name("naïve").is_err());
    }

    #[test]
    fn schemas_must_be_object_schemas_that_compile() {
        let ok = serde_json::json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}});
        assert!(schema_shape(&ok).is_ok() && compile(&ok).is_ok());
        assert!(schema_shape(&serde_json::json!({"type": "array"})).is_err());
        let remote = serde_json::json!({"type": "object", "$ref": "http://127.0.0.1:9/x.json"});
        assert!(compile(&remote).is_err());
        let file = serde_json::json!({"type": "object", "$ref": "file:///etc/passwd"});
        assert!(compile(&file).is_err());
    }
}
