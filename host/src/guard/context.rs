//! Prompts and resources through the guard: each item of a server's `prompts/list`,
//! `resources/list` or `resources/templates/list` goes to the adapter's `context`
//! interface (or, for an adapter without one, the reference adapter's), and the host
//! re-checks what comes back: the name or URI is the very one the server listed (the
//! host asks the server for it again, so an adapter cannot send one prompt's or
//! resource's request to another), names are short single lines, words bounded and made
//! visible, a media type is one. Contents are content blocks and go through
//! [`Adapter::to_result`] like a tool result's.

use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::bindings::{ContextItem, context_wit};
use super::check::{self, shown};
use super::findings::{self, Finding};
use super::{Adapter, GUARD_BATCH_DEADLINE, GuardError, MAX_TOOL_JSON_BYTES, Subject};

pub use super::bindings::ContextKind;

/// Longest name or title (bytes): a name is how an item is asked for again.
pub const MAX_NAME_BYTES: usize = 256;
/// Longest description (bytes).
const MAX_DESCRIPTION_BYTES: usize = 8 << 10;
/// Most arguments of one prompt.
const MAX_ARGUMENTS: usize = 64;
/// Longest resource URI or URI template (bytes).
pub const MAX_URI_BYTES: usize = 2048;
/// Longest media type (bytes).
const MAX_MIME_TYPE_BYTES: usize = 127;

/// One argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptArgument {
    pub name: String,
    pub description: String,
    pub required: bool,
}

/// A prompt's descriptor, as the adapter accepted it and the host checked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedPrompt {
    /// The server's own name for it.
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub arguments: Vec<PromptArgument>,
}

/// A resource's (or template's) descriptor, as the adapter accepted it and the host
/// checked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedResource {
    /// The server's own URI (or URI template) for it.
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
}

/// One accepted list item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guarded {
    Prompt(GuardedPrompt),
    Resource(GuardedResource),
}

impl ContextKind {
    /// What an item of this kind is called in messages.
    fn noun(self) -> &'static str {
        match self {
            ContextKind::Prompt => "prompt",
            ContextKind::Resource => "resource",
            ContextKind::Template => "resource template",
        }
    }

    /// The key of the item's JSON the host routes by.
    fn key(self) -> &'static str {
        match self {
            ContextKind::Prompt => "name",
            ContextKind::Resource => "uri",
            ContextKind::Template => "uriTemplate",
        }
    }
}

impl Adapter {
    /// Whether the adapter accepts prompts and resources itself (exports
    /// `edgar:schema/context`); when not, callers use the built-in adapter's.
    pub fn contextual(&self) -> bool {
        self.pre.contextual()
    }

    /// Accepts each item (JSON text) of one list of `kind` from `server`, in one
    /// sandboxed instance (a fresh one after any failure) within
    /// [`GUARD_BATCH_DEADLINE`]; one result per item. An adapter without `context` is
    /// refused here: the caller picks the built-in one for it.
    pub fn accept_context(
        &self,
        server: &str,
        kind: ContextKind,
        items: &[String],
    ) -> Vec<Result<Guarded, GuardError>> {
        let mut session = self.session();
        session.batch_ends = Some(Instant::now() + GUARD_BATCH_DEADLINE);
        items
            .iter()
            .map(|json| {
                let listed = listed(json, kind);
                let subject = Subject {
                    server: Some(server.to_owned()),
                    tool: listed.clone(),
                    kind: Some(kind.noun()),
                };
                if session.batch_spent() {
                    return Err(GuardError::Failed {
                        subject,
                        reason: format!(
                            "ran past its {} s limit for one list; not examined",
                            GUARD_BATCH_DEADLINE.as_secs()
                        ),
                    });
                }
                if json.len() > MAX_TOOL_JSON_BYTES {
                    return Err(GuardError::TooLarge {
                        subject,
                        what: "the definition",
                        size: json.len(),
                        limit: MAX_TOOL_JSON_BYTES,
                    });
                }
                let out = session
                    .call(&subject, |g, s| g.context(s, kind, server, json))?
                    .ok_or_else(|| GuardError::Failed {
                        subject: subject.clone(),
                        reason: "the adapter has no edgar:schema/context".into(),
                    })?
                    .map_err(|message| GuardError::Rejected {
                        subject: subject.clone(),
                        kind: "refused",
                        message: check::shown_message(&message),
                    })?;
                checked(out, kind, listed.as_deref())
                    .map_err(|reason| GuardError::BadOutput { subject, reason })
            })
            .collect()
    }

    /// The findings on `texts` (an accepted item's words, as a reader reads them), in
    /// one sandboxed instance; `item` names the item in errors. An adapter without
    /// `scan` finds nothing.
    pub fn scan_texts(
        &self,
        server: &str,
        item: &str,
        texts: &[&str],
    ) -> Result<Vec<Finding>, GuardError> {
        if !self.scans() {
            return Ok(Vec::new());
        }
        let mut session = self.session();
        let subject = Subject {
            server: Some(server.to_owned()),
            tool: Some(item.to_owned()),
            kind: Some("item"),
        };
        let mut out = Vec::new();
        for text in texts {
            let raw = session
                .call(&subject, |g, s| g.scan_text(s, text))?
                .unwrap_or_default();
            out.extend(
                findings::check(raw, findings::Scanned::Text(text)).map_err(|reason| {
                    GuardError::BadOutput {
                        subject: subject.clone(),
                        reason,
                    }
                })?,
            );
        }
        Ok(out)
    }
}

/// The adapter's output, checked against what the server listed.
fn checked(out: ContextItem, kind: ContextKind, listed: Option<&str>) -> Result<Guarded, String> {
    let routed = |got: &str| match listed {
        Some(l) if l == got => Ok(()),
        Some(l) => Err(format!(
            "it changed the server's {} {} to {}; requests must keep the server's own",
            kind.key(),
            shown(l),
            shown(got)
        )),
        None => Err(format!(
            "the server's {} has no {}, yet the adapter accepted it",
            kind.noun(),
            kind.key()
        )),
    };
    match (out, kind) {
        (ContextItem::Prompt(p), ContextKind::Prompt) => {
            routed(&p.name)?;
            Ok(Guarded::Prompt(prompt(p)?))
        }
        (ContextItem::Resource(r), ContextKind::Resource | ContextKind::Template) => {
            routed(&r.uri)?;
            Ok(Guarded::Resource(resource(r)?))
        }
        _ => Err("the adapter answered for another kind of item".into()),
    }
}

fn prompt(p: context_wit::AcceptedPrompt) -> Result<GuardedPrompt, String> {
    name(&p.name, "name")?;
    if p.arguments.len() > MAX_ARGUMENTS {
        return Err(format!(
            "{} arguments, over {MAX_ARGUMENTS}",
            p.arguments.len()
        ));
    }
    let mut arguments: Vec<PromptArgument> = Vec::with_capacity(p.arguments.len());
    for a in p.arguments {
        name(&a.name, "argument name")?;
        if arguments.iter().any(|b| b.name == a.name) {
            return Err(format!("two arguments are named {}", shown(&a.name)));
        }
        arguments.push(PromptArgument {
            description: words(&a.description)?,
            name: a.name,
            required: a.required,
        });
    }
    Ok(GuardedPrompt {
        title: title(p.title)?,
        description: words(&p.description)?,
        name: p.name,
        arguments,
    })
}

fn resource(r: context_wit::AcceptedResource) -> Result<GuardedResource, String> {
    well_formed_uri(&r.uri)?;
    name(&r.name, "name")?;
    if let Some(m) = &r.mime_type
        && !is_mime_type(m)
    {
        return Err(format!("the media type {} is not one", shown(m)));
    }
    Ok(GuardedResource {
        title: title(r.title)?,
        description: words(&r.description)?,
        uri: r.uri,
        name: r.name,
        mime_type: r.mime_type,
        size: r.size,
    })
}

/// A name: 1 to [`MAX_NAME_BYTES`] bytes, no control character.
fn name(s: &str, what: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > MAX_NAME_BYTES || s.chars().any(char::is_control) {
        return Err(format!(
            "the {what} {} is empty, over {MAX_NAME_BYTES} bytes or has control characters",
            shown(s)
        ));
    }
    Ok(())
}

fn title(t: Option<String>) -> Result<Option<String>, String> {
    if let Some(t) = &t {
        name(t, "title")?;
    }
    Ok(t)
}

/// Words for a reader: at most [`MAX_DESCRIPTION_BYTES`], invisible characters made
/// visible (a reviewer reads what the model would).
fn words(s: &str) -> Result<String, String> {
    if s.len() > MAX_DESCRIPTION_BYTES {
        return Err(format!(
            "a description of {} bytes, over {MAX_DESCRIPTION_BYTES}",
            s.len()
        ));
    }
    Ok(crate::text::visible(s))
}

/// A URI (or URI template): a scheme (a letter, then letters, digits, `+-.`), a colon,
/// then no whitespace or control character, at most [`MAX_URI_BYTES`].
pub fn well_formed_uri(s: &str) -> Result<(), String> {
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
        return Err(format!("the uri {} is not well-formed", shown(s)));
    }
    Ok(())
}

/// `type/subtype[; parameters]`, printable ASCII without quotes or backslashes.
fn is_mime_type(m: &str) -> bool {
    m.len() <= MAX_MIME_TYPE_BYTES
        && m.split_once('/')
            .is_some_and(|(t, s)| !t.is_empty() && !s.is_empty())
        && m.bytes()
            .all(|b| (b.is_ascii_graphic() || b == b' ') && !matches!(b, b'"' | b'\\'))
}

/// The name or URI the server listed the item under: what requests about it carry.
fn listed(json: &str, kind: ContextKind) -> Option<String> {
    match serde_json::from_str::<Value>(json).ok()?.get(kind.key())? {
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
