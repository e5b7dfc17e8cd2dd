//! Prompts and resources: the reference policy for what a server lists of them. A name
//! or URI must be usable as it is (the host asks the server for it again), so a bad one
//! refuses the item; words are cut to the tool limits; a media type that is not one is
//! dropped. Contents are not here: they are content blocks, `to_result`'s job.

use serde_json::Value;

use crate::limits::{
    MAX_CONTEXT_JSON_BYTES, MAX_CONTEXT_NAME_BYTES, MAX_DESCRIPTION_BYTES, MAX_MIME_TYPE_BYTES,
    MAX_PROMPT_ARGUMENTS, MAX_SCHEMA_TEXT_BYTES, MAX_URI_BYTES,
};
use crate::text::{clamp, quote};

/// The WIT `prompt-argument`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    pub name: String,
    pub description: String,
    pub required: bool,
}

/// The WIT `accepted-prompt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedPrompt {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub arguments: Vec<PromptArgument>,
}

/// The WIT `accepted-resource` (a resource, or a template with its URI template).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedResource {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
}

/// Accepts one `prompts/list` item; the error is one line for humans.
pub fn to_prompt(_server: &str, prompt_json: &str) -> Result<AcceptedPrompt, String> {
    let item = object(prompt_json)?;
    let name = usable_name(item.get("name")).ok_or("the prompt has no usable name")?;
    let arguments = match item.get("arguments") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(args)) if args.len() <= MAX_PROMPT_ARGUMENTS => {
            let mut out: Vec<PromptArgument> = Vec::with_capacity(args.len());
            for a in args {
                let arg = usable_name(a.get("name")).ok_or_else(|| {
                    format!(
                        "prompt {}: an argument has no usable name",
                        quote(&name, 80)
                    )
                })?;
                if out.iter().any(|o| o.name == arg) {
                    return Err(format!(
                        "prompt {}: two arguments are named {}",
                        quote(&name, 80),
                        quote(&arg, 80)
                    ));
                }
                out.push(PromptArgument {
                    name: arg,
                    description: words(a.get("description"), MAX_SCHEMA_TEXT_BYTES),
                    required: a.get("required").and_then(Value::as_bool).unwrap_or(false),
                });
            }
            out
        }
        Some(_) => {
            return Err(format!(
                "prompt {}: its arguments are not a list of at most {MAX_PROMPT_ARGUMENTS}",
                quote(&name, 80)
            ));
        }
    };
    Ok(AcceptedPrompt {
        title: name_like(item.get("title")),
        description: words(item.get("description"), MAX_DESCRIPTION_BYTES),
        name,
        arguments,
    })
}

/// Accepts one `resources/list` item.
pub fn to_resource(_server: &str, resource_json: &str) -> Result<AcceptedResource, String> {
    resource(resource_json, "uri")
}

/// Accepts one `resources/templates/list` item: its `uriTemplate` is the accepted URI.
pub fn to_resource_template(
    _server: &str,
    template_json: &str,
) -> Result<AcceptedResource, String> {
    resource(template_json, "uriTemplate")
}

fn resource(json: &str, key: &str) -> Result<AcceptedResource, String> {
    let item = object(json)?;
    let uri = uri(item.get(key))?;
    let name = usable_name(item.get("name"))
        .ok_or_else(|| format!("{} has no usable name", quote(&uri, 120)))?;
    Ok(AcceptedResource {
        name,
        title: name_like(item.get("title")),
        description: words(item.get("description"), MAX_DESCRIPTION_BYTES),
        mime_type: item
            .get("mimeType")
            .and_then(Value::as_str)
            .filter(|m| is_mime_type(m))
            .map(str::to_owned),
        size: item.get("size").and_then(Value::as_u64),
        uri,
    })
}

/// The item as a JSON object, within [`MAX_CONTEXT_JSON_BYTES`].
fn object(json: &str) -> Result<serde_json::Map<String, Value>, String> {
    if json.len() > MAX_CONTEXT_JSON_BYTES {
        return Err(format!(
            "the item has {} bytes, over {MAX_CONTEXT_JSON_BYTES}",
            json.len()
        ));
    }
    match crate::json::parse(json) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err("the item is not a JSON object".into()),
        Err(e) => Err(format!("the item is not JSON ({e})")),
    }
}

/// A name: a string of 1 to [`MAX_CONTEXT_NAME_BYTES`] bytes with no control character.
fn usable_name(v: Option<&Value>) -> Option<String> {
    let s = v?.as_str()?;
    (!s.is_empty() && s.len() <= MAX_CONTEXT_NAME_BYTES && !s.chars().any(char::is_control))
        .then(|| s.to_owned())
}

/// A title: a name's rules, but one that breaks them is dropped, not fatal.
fn name_like(v: Option<&Value>) -> Option<String> {
    usable_name(v)
}

/// Free words (a description): a string, cut to `max` bytes; anything else is empty.
fn words(v: Option<&Value>, max: usize) -> String {
    clamp(v.and_then(Value::as_str).unwrap_or_default(), max).0
}

/// A URI (or URI template): a scheme of a letter then letters, digits, `+-.`, a colon,
/// then no whitespace or control character, at most [`MAX_URI_BYTES`].
fn uri(v: Option<&Value>) -> Result<String, String> {
    let s = v.and_then(Value::as_str).ok_or("the resource has no uri")?;
    if s.len() > MAX_URI_BYTES {
        return Err(format!("a uri of {} bytes, over {MAX_URI_BYTES}", s.len()));
    }
    let scheme_ok = s.split_once(':').is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    if !scheme_ok || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("the uri {} is not well-formed", quote(s, 120)));
    }
    Ok(s.to_owned())
}

/// `type/subtype[; parameters]` of printable ASCII without quotes or backslashes.
fn is_mime_type(m: &str) -> bool {
    m.len() <= MAX_MIME_TYPE_BYTES
        && m.split_once('/')
            .is_some_and(|(t, s)| !t.is_empty() && !s.is_empty())
        && m.bytes()
            .all(|b| (b.is_ascii_graphic() || b == b' ') && !matches!(b, b'"' | b'\\'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_prompt_keeps_its_name_and_bounded_words() {
        let p = to_prompt(
            "s",
            &json!({"name": "greet", "title": "Greet", "description": "x".repeat(5000),
                    "arguments": [{"name": "who", "description": "whom", "required": true},
                                  {"name": "tone"}]})
            .to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.name, "greet");
        assert_eq!(p.title.as_deref(), Some("Greet"));
        assert!(p.description.len() <= MAX_DESCRIPTION_BYTES && p.description.ends_with('…'));
        assert_eq!(p.arguments.len(), 2);
        assert!(p.arguments[0].required && !p.arguments[1].required);
        assert_eq!(p.arguments[1].description, "");
    }

    #[test]
    fn a_prompt_that_cannot_be_asked_for_again_is_refused() {
        let many: Vec<Value> = (0..65).map(|i| json!({"name": format!("a{i}")})).collect();
        for bad in [
            "not json".to_owned(),
            "[]".to_owned(),
            json!({}).to_string(),
            json!({"name": ""}).to_string(),
            json!({"name": "a\nb"}).to_string(),
            json!({"name": 7}).to_string(),
            json!({"name": "n".repeat(300)}).to_string(),
            json!({"name": "p", "arguments": "who"}).to_string(),
            json!({"name": "p", "arguments": many}).to_string(),
            json!({"name": "p", "arguments": [{"description": "no name"}]}).to_string(),
            json!({"name": "p", "arguments": [{"name": "a"}, {"name": "a"}]}).to_string(),
            format!(
                "{{\"name\": \"p\", \"description\": \"{}\"}}",
                "d".repeat(300_000)
            ),
        ] {
            assert!(
                to_prompt("s", &bad).is_err(),
                "{}",
                &bad[..bad.len().min(80)]
            );
        }
        // A title or description of the wrong kind is dropped, not fatal.
        let p = to_prompt(
            "s",
            &json!({"name": "p", "title": 3, "description": []}).to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.title, p.description.as_str()), (None, ""));
    }

    #[test]
    fn a_resource_keeps_its_uri_and_a_real_media_type_only() {
        let r = to_resource(
            "s",
            &json!({"uri": "test://static/1", "name": "one", "mimeType": "text/plain; charset=utf-8",
                    "size": 12})
            .to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.uri.as_str(), r.size), ("test://static/1", Some(12)));
        assert_eq!(r.mime_type.as_deref(), Some("text/plain; charset=utf-8"));
        for m in ["text", "\"a/b\"", "a/", "x/y\u{0}"] {
            let r = to_resource(
                "s",
                &json!({"uri": "a:b", "name": "n", "mimeType": m}).to_string(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.mime_type, None, "{m}");
        }
        let t = to_resource_template(
            "s",
            &json!({"uriTemplate": "file:///{path}", "name": "files"}).to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.uri, "file:///{path}");
        for bad in [
            json!({"name": "n"}),
            json!({"uri": "no-scheme", "name": "n"}),
            json!({"uri": "1x://a", "name": "n"}),
            json!({"uri": "file:///a b", "name": "n"}),
            json!({"uri": format!("x://{}", "a".repeat(3000)), "name": "n"}),
            json!({"uri": "a:b"}),
            json!({"uri": "a:b", "name": ""}),
        ] {
            assert!(to_resource("s", &bad.to_string()).is_err(), "{bad}");
        }
        assert!(
            to_resource_template("s", &json!({"uri": "a:b", "name": "n"}).to_string()).is_err()
        );
    }
}
