//! `to_result`: turns a `CallToolResult` into the harness's ordinary content blocks.
//!
//! Text is kept (head and tail around a marker when oversized), media only in allowed
//! types with base64 that decodes and a size cap, links and embedded resources as
//! typed blocks. Anything else becomes a short text note, so the model learns something
//! was there without the host ever handling an unknown shape.

use serde_json::{Map, Value};

use crate::limits::{
    AUDIO_TYPES, IMAGE_TYPES, MAX_BLOCKS, MAX_MEDIA_BYTES, MAX_OUTPUT_BYTES, MAX_RESULT_JSON_BYTES,
    MAX_TEXT_BYTES, MAX_TITLE_BYTES,
};
use crate::text::{base64_decoded_len, clamp, cut_middle, quote};
use crate::types::{
    ContentBlock, EmbeddedResource, Media, Rejection, RejectionKind, ResourceContents,
    ResourceLink, ToolOutput,
};

/// Longest URI kept in a link or resource.
const MAX_URI_BYTES: usize = 4096;

/// Converts one `CallToolResult` given as JSON text.
pub fn to_result(result_json: &str) -> Result<ToolOutput, Rejection> {
    if result_json.len() > MAX_RESULT_JSON_BYTES {
        return Err(Rejection::new(
            RejectionKind::TooLarge,
            format!(
                "the result is {} bytes, over the {MAX_RESULT_JSON_BYTES}-byte limit",
                result_json.len()
            ),
        ));
    }
    let result: Value = crate::json::parse(result_json).map_err(|e| {
        Rejection::new(
            RejectionKind::InvalidJson,
            format!("the result is not valid JSON: {e}"),
        )
    })?;
    let Value::Object(result) = result else {
        return Err(Rejection::new(
            RejectionKind::InvalidJson,
            "the result is not a JSON object",
        ));
    };
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let content = match result.get("content") {
        Some(Value::Array(items)) => items.as_slice(),
        None | Some(Value::Null) => &[],
        Some(_) => {
            return Err(Rejection::new(
                RejectionKind::InvalidJson,
                "the result's content is not a list",
            ));
        }
    };

    let mut out = Output {
        blocks: Vec::with_capacity(content.len() + 1),
        bytes: 0,
        omitted: 0,
    };
    for item in content {
        out.push(block(item));
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        let has_text = out
            .blocks
            .iter()
            .any(|b| matches!(b, ContentBlock::Text(_)));
        if !has_text {
            let json = serde_json::to_string(structured).unwrap_or_default();
            out.push(ContentBlock::Text(cut_middle(&json, MAX_TEXT_BYTES)));
        }
    }
    if out.omitted > 0 {
        let note = format!(
            "[edgar omitted {} more content blocks: the result is over {MAX_OUTPUT_BYTES} bytes or {MAX_BLOCKS} blocks]",
            out.omitted
        );
        out.blocks.push(ContentBlock::Text(note));
    }
    Ok(ToolOutput {
        is_error,
        blocks: out.blocks,
    })
}

/// The blocks so far, with a running size so the total stays under `MAX_OUTPUT_BYTES`.
struct Output {
    blocks: Vec<ContentBlock>,
    bytes: usize,
    omitted: usize,
}

impl Output {
    fn push(&mut self, block: ContentBlock) {
        let size = block_size(&block);
        // One place is kept for the note that says what was omitted.
        if self.omitted > 0
            || self.bytes + size > MAX_OUTPUT_BYTES
            || self.blocks.len() + 1 >= MAX_BLOCKS
        {
            self.omitted += 1;
            return;
        }
        self.bytes += size;
        self.blocks.push(block);
    }
}

fn block_size(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text(t) => t.len(),
        ContentBlock::Image(m) | ContentBlock::Audio(m) => m.data.len() + m.mime_type.len(),
        ContentBlock::ResourceLink(l) => {
            l.uri.len() + l.name.len() + l.description.as_ref().map_or(0, String::len)
        }
        ContentBlock::Resource(r) => {
            r.uri.len()
                + match &r.contents {
                    ResourceContents::Text(t) | ResourceContents::Blob(t) => t.len(),
                }
        }
    }
}

fn block(item: &Value) -> ContentBlock {
    let Some(obj) = item.as_object() else {
        return note("[edgar omitted a content block that is not a JSON object]");
    };
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => match obj.get("text").and_then(Value::as_str) {
            Some(t) => ContentBlock::Text(cut_middle(t, MAX_TEXT_BYTES)),
            None => note("[edgar omitted a text block without text]"),
        },
        "image" => media(obj, "image", IMAGE_TYPES).map_or_else(note, ContentBlock::Image),
        "audio" => media(obj, "audio", AUDIO_TYPES).map_or_else(note, ContentBlock::Audio),
        "resource_link" => resource_link(obj).map_or_else(note, ContentBlock::ResourceLink),
        "resource" => embedded(obj).map_or_else(note, ContentBlock::Resource),
        other => note(format!(
            "[edgar omitted a content block of unsupported type {}]",
            quote(other, 40)
        )),
    }
}

fn note(text: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(text.into())
}

fn media(obj: &Map<String, Value>, what: &str, allowed: &[&str]) -> Result<Media, String> {
    let mime = obj.get("mimeType").and_then(Value::as_str).unwrap_or("");
    let mime_lower = mime.to_ascii_lowercase();
    if !allowed.contains(&mime_lower.as_str()) {
        return Err(format!(
            "[edgar omitted an {what} of type {}: type not allowed]",
            quote(mime, 60)
        ));
    }
    let data = obj.get("data").and_then(Value::as_str).unwrap_or("");
    match base64_decoded_len(data) {
        None => Err(format!(
            "[edgar omitted an {what} ({mime_lower}): its data is not valid base64]"
        )),
        Some(0) => Err(format!("[edgar omitted an empty {what} ({mime_lower})]")),
        Some(n) if n > MAX_MEDIA_BYTES => Err(format!(
            "[edgar omitted an {what} ({mime_lower}) of {n} bytes: over the {MAX_MEDIA_BYTES}-byte limit]"
        )),
        Some(_) => Ok(Media {
            mime_type: mime_lower,
            data: data.to_owned(),
        }),
    }
}

fn resource_link(obj: &Map<String, Value>) -> Result<ResourceLink, String> {
    let uri = uri(obj).ok_or("[edgar omitted a resource link without a usable uri]")?;
    let name = obj.get("name").and_then(Value::as_str).unwrap_or(&uri);
    Ok(ResourceLink {
        name: clamp(name, MAX_TITLE_BYTES).0,
        description: obj
            .get("description")
            .and_then(Value::as_str)
            .map(|d| clamp(d, MAX_TEXT_BYTES / 10).0),
        mime_type: mime(obj),
        uri,
    })
}

fn embedded(obj: &Map<String, Value>) -> Result<EmbeddedResource, String> {
    let res = obj
        .get("resource")
        .and_then(Value::as_object)
        .ok_or("[edgar omitted an embedded resource without contents]")?;
    let uri = uri(res).ok_or("[edgar omitted an embedded resource without a usable uri]")?;
    let contents = if let Some(t) = res.get("text").and_then(Value::as_str) {
        ResourceContents::Text(cut_middle(t, MAX_TEXT_BYTES))
    } else if let Some(b) = res.get("blob").and_then(Value::as_str) {
        match base64_decoded_len(b) {
            Some(n) if n <= MAX_MEDIA_BYTES => ResourceContents::Blob(b.to_owned()),
            Some(n) => {
                return Err(format!(
                    "[edgar omitted the resource {} of {n} bytes: over the {MAX_MEDIA_BYTES}-byte limit]",
                    quote(&uri, 200)
                ));
            }
            None => {
                return Err(format!(
                    "[edgar omitted the resource {}: its blob is not valid base64]",
                    quote(&uri, 200)
                ));
            }
        }
    } else {
        return Err(format!(
            "[edgar omitted the resource {}: no text or blob]",
            quote(&uri, 200)
        ));
    };
    Ok(EmbeddedResource {
        mime_type: mime(res),
        uri,
        contents,
    })
}

fn uri(obj: &Map<String, Value>) -> Option<String> {
    obj.get("uri")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty() && u.len() <= MAX_URI_BYTES && !u.chars().any(char::is_control))
        .map(str::to_owned)
}

fn mime(obj: &Map<String, Value>) -> Option<String> {
    obj.get("mimeType")
        .and_then(Value::as_str)
        .filter(|m| m.len() <= 200 && m.bytes().all(|c| c.is_ascii_graphic()))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn convert(v: Value) -> ToolOutput {
        to_result(&v.to_string()).unwrap_or_else(|r| panic!("{r:?}"))
    }

    fn texts(out: &ToolOutput) -> Vec<&str> {
        out.blocks
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn text_image_audio_links_and_resources() {
        let out = convert(json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "mimeType": "image/PNG", "data": "aGk="},
            {"type": "audio", "mimeType": "audio/wav", "data": "aGk="},
            {"type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": "text/plain"},
            {"type": "resource", "resource": {"uri": "file:///b", "text": "body"}}
        ]}));
        assert!(!out.is_error);
        assert_eq!(out.blocks.len(), 5);
        assert_eq!(
            out.blocks[1],
            ContentBlock::Image(Media {
                mime_type: "image/png".into(),
                data: "aGk=".into()
            })
        );
        assert!(
            matches!(&out.blocks[3], ContentBlock::ResourceLink(l) if l.uri == "file:///a" && l.name == "a")
        );
        assert!(
            matches!(&out.blocks[4], ContentBlock::Resource(r) if r.contents == ResourceContents::Text("body".into()))
        );
    }

    #[test]
    fn refused_media_and_unknown_blocks_become_notes() {
        let out = convert(json!({"isError": true, "content": [
            {"type": "image", "mimeType": "image/svg+xml", "data": "aGk="},
            {"type": "image", "mimeType": "image/png", "data": "not base64!"},
            {"type": "hologram", "data": 1},
            7
        ]}));
        assert!(out.is_error);
        let t = texts(&out);
        assert!(
            t[0].contains("image/svg+xml") && t[0].contains("not allowed"),
            "{t:?}"
        );
        assert!(t[1].contains("not valid base64"), "{t:?}");
        assert!(t[2].contains("'hologram'"), "{t:?}");
        assert!(t[3].contains("not a JSON object"), "{t:?}");
    }

    #[test]
    fn oversized_text_keeps_head_and_tail() {
        let text = format!("START{}END", "x".repeat(MAX_TEXT_BYTES * 3));
        let out = convert(json!({"content": [{"type": "text", "text": text}]}));
        let t = texts(&out)[0];
        assert!(t.starts_with("START") && t.ends_with("END"));
        assert!(t.contains("[edgar cut "));
        assert!(t.len() < MAX_TEXT_BYTES + 200);
    }

    #[test]
    fn structured_content_becomes_text_only_when_no_text_carries_it() {
        let out = convert(json!({"content": [], "structuredContent": {"temp": 21}}));
        assert_eq!(texts(&out), [r#"{"temp":21}"#]);
        let out = convert(
            json!({"content": [{"type": "text", "text": "{\"temp\":21}"}], "structuredContent": {"temp": 21}}),
        );
        assert_eq!(out.blocks.len(), 1);
    }

    #[test]
    fn total_output_is_bounded() {
        let big = "x".repeat(MAX_TEXT_BYTES);
        let items: Vec<Value> = (0..70)
            .map(|_| json!({"type": "text", "text": big}))
            .collect();
        let out = convert(json!({"content": items}));
        let total: usize = out.blocks.iter().map(block_size).sum();
        assert!(total <= MAX_OUTPUT_BYTES + 200);
        assert!(texts(&out).last().is_some_and(|t| t.contains("omitted")));
    }

    #[test]
    fn the_number_of_blocks_is_bounded() {
        let items: Vec<Value> = (0..5000)
            .map(|i| json!({"type": "text", "text": i.to_string()}))
            .collect();
        let out = convert(json!({"content": items}));
        assert_eq!(out.blocks.len(), MAX_BLOCKS);
        assert!(
            texts(&out)
                .last()
                .is_some_and(|t| t.contains("omitted 4001 more"))
        );
    }

    #[test]
    fn malformed_results_are_rejected() {
        assert_eq!(
            to_result("nope").map_err(|r| r.kind),
            Err(RejectionKind::InvalidJson)
        );
        assert_eq!(
            to_result(r#"{"content": 5}"#).map_err(|r| r.kind),
            Err(RejectionKind::InvalidJson)
        );
        let big = "x".repeat(MAX_RESULT_JSON_BYTES + 1);
        assert_eq!(
            to_result(&big).map_err(|r| r.kind),
            Err(RejectionKind::TooLarge)
        );
    }
}
