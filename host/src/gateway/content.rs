//! Prompts and resources served through the session (so through the guard), under
//! names and URIs that say whose they are: with `--expose all` every server's,
//! search-first those of the servers running now. A prompt is `SERVER__NAME`; a
//! resource's URI becomes `edgar://SERVER/<its URI, percent-encoded>`, so two servers'
//! URIs never collide and a server cannot answer for another's; completion and
//! subscriptions go to the server they name, in its own terms. Resource templates are
//! served for one server transparently only (their variables would not survive the
//! encoding). Transparently, one server's names and URIs are its own, and completion,
//! logging and subscriptions are passed on as they are.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::team::policy::{Action, Target};
use super::{Caller, Exposure, Gateway, Refused, Reply};
use crate::guard::{ContentBlock, ResourceContents};
use crate::mcp::McpError;
use crate::mcp::protocol::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::text::shown;

/// The scheme and authority prefix of a served resource URI.
const SCHEME: &str = "edgar://";
/// The code servers used for an unknown resource before SEP-2164 settled on -32602.
const RESOURCE_NOT_FOUND: i64 = -32002;

impl Gateway {
    /// Whose prompts and resources a listing shows: search-first, the servers running
    /// now (a listing starts nothing; each server that starts is told as a list
    /// change); otherwise every server served (starting those not yet running).
    async fn listed_servers(&self, caller: &Caller) -> Vec<String> {
        match &self.exposure {
            Exposure::Search => self.running_for(caller).await,
            Exposure::Transparent(one) => vec![one.clone()],
            Exposure::All => self.session.server_names().map(str::to_owned).collect(),
        }
    }

    /// `prompts/list`: each server's prompts, named `SERVER__NAME`, servers asked at once.
    pub(super) async fn prompts_list(&self, caller: &Caller) -> Reply {
        let names = self.listed_servers(caller).await;
        let sessions: Vec<_> = names.iter().map(|n| self.session_of(caller, n)).collect();
        let lists =
            crate::mcp::client::join_all(names.iter().zip(&sessions).map(|(n, s)| s.prompts(n)))
                .await;
        let mut prompts = Vec::new();
        for (server, list) in names.iter().zip(lists) {
            for p in skip_unoffered(server, list) {
                let target = Target::Prompt {
                    server,
                    name: &p.name,
                };
                if !self
                    .permits_on(caller, Action::ListPrompts, target)
                    .allowed()
                {
                    continue;
                }
                let mut v = json!({
                    "name": self.prompt_name(server, &p.name),
                    "description": p.description,
                    "arguments": p.arguments,
                });
                if let Some(t) = p.title {
                    v["title"] = json!(t);
                }
                prompts.push(v);
            }
        }
        Ok(json!({"prompts": prompts}))
    }

    /// `prompts/get` of `SERVER__NAME`: its messages through the guard, one per block.
    pub(super) async fn prompts_get(&self, caller: &Caller, params: &Value) -> Reply {
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        let owner = match &self.exposure {
            Exposure::Transparent(server) => Some((server.clone(), name)),
            _ => self.owner(name, "__"),
        };
        let Some((server, prompt)) = owner else {
            return Err((INVALID_PARAMS, format!("no prompt named {}", shown(name))).into());
        };
        let mut arguments = BTreeMap::new();
        if let Some(Value::Object(args)) = params.get("arguments") {
            for (k, v) in args {
                let Some(v) = v.as_str() else {
                    return Err((
                        INVALID_PARAMS,
                        format!("the argument {} is not a string", shown(k)),
                    )
                        .into());
                };
                arguments.insert(k.clone(), v.to_owned());
            }
        }
        let target = Target::Prompt {
            server: &server,
            name: prompt,
        };
        self.check(caller, Action::GetPrompt, target, name)?;
        let out = self
            .session_of(caller, &server)
            .prompt(&server, prompt, &arguments)
            .await
            .map_err(upstream)?;
        let messages: Vec<Value> = out
            .messages
            .iter()
            .flat_map(|m| {
                m.content
                    .iter()
                    .map(|b| json!({"role": m.role, "content": b}))
            })
            .collect();
        let mut result = json!({"messages": messages});
        if let Some(d) = out.description {
            result["description"] = json!(d);
        }
        Ok(result)
    }

    /// `resources/list`: each server's resources, under `edgar://SERVER/...` URIs.
    pub(super) async fn resources_list(&self, caller: &Caller) -> Reply {
        let names = self.listed_servers(caller).await;
        let sessions: Vec<_> = names.iter().map(|n| self.session_of(caller, n)).collect();
        let lists =
            crate::mcp::client::join_all(names.iter().zip(&sessions).map(|(n, s)| s.resources(n)))
                .await;
        let mut resources = Vec::new();
        for (server, list) in names.iter().zip(lists) {
            for r in skip_unoffered(server, list) {
                let target = Target::Resource {
                    server,
                    uri: &r.uri,
                };
                if r.template
                    || !self
                        .permits_on(caller, Action::ListResources, target)
                        .allowed()
                {
                    continue;
                }
                let mut v = json!({"uri": self.served_uri(server, &r.uri), "name": r.name,
                                   "description": r.description});
                for (key, value) in [
                    ("title", r.title.map(Value::from)),
                    ("mimeType", r.mime_type.map(Value::from)),
                    ("size", r.size.map(Value::from)),
                ] {
                    if let Some(value) = value {
                        v[key] = value;
                    }
                }
                resources.push(v);
            }
        }
        Ok(json!({"resources": resources}))
    }

    /// `resources/read` of a served URI: the server's contents through the guard, their
    /// URIs served again; a note the guard put in a refused content's place keeps the
    /// asked URI.
    pub(super) async fn resources_read(&self, caller: &Caller, params: &Value) -> Reply {
        let asked = params.get("uri").and_then(Value::as_str).unwrap_or("");
        // Not there: -32602 with the URI as the client asked for it in `data`.
        let missing = || {
            Refused::from((INVALID_PARAMS, format!("no resource at {}", shown(asked))))
                .with_data(json!({"uri": asked}))
        };
        let (server, uri) = self.served(asked).ok_or_else(missing)?;
        let target = Target::Resource {
            server: &server,
            uri: &uri,
        };
        self.check(caller, Action::ReadResource, target, asked)?;
        let blocks = self
            .session_of(caller, &server)
            .read(&server, &uri)
            .await
            .map_err(|e| match e {
                McpError::Server {
                    code: INVALID_PARAMS | RESOURCE_NOT_FOUND,
                    ..
                }
                | McpError::NotOffered { .. } => missing(),
                e => upstream(e),
            })?;
        let contents: Vec<Value> = blocks
            .into_iter()
            .filter_map(|b| match b {
                ContentBlock::Resource {
                    resource:
                        ResourceContents {
                            uri,
                            mime_type,
                            text,
                            blob,
                        },
                } => {
                    let mut c = json!({"uri": self.served_uri(&server, &uri)});
                    for (key, value) in [("mimeType", mime_type), ("text", text), ("blob", blob)] {
                        if let Some(value) = value {
                            c[key] = json!(value);
                        }
                    }
                    Some(c)
                }
                ContentBlock::Text { text } => {
                    Some(json!({"uri": asked, "mimeType": "text/plain", "text": text}))
                }
                _ => None,
            })
            .collect();
        Ok(json!({"contents": contents}))
    }

    /// The configured server a served name belongs to (the longest whose name and `sep`
    /// begin it), and the rest.
    pub(super) fn owner<'a>(&self, name: &'a str, sep: &str) -> Option<(String, &'a str)> {
        self.session
            .server_names()
            .filter_map(|s| {
                let rest = name.strip_prefix(s)?.strip_prefix(sep)?;
                Some((s.to_owned(), rest))
            })
            .max_by_key(|(s, _)| s.len())
            .filter(|(_, rest)| !rest.is_empty())
    }

    /// `resources/templates/list`: one server's templates, served transparently; none
    /// otherwise.
    pub(super) async fn templates_list(&self, caller: &Caller) -> Reply {
        let Exposure::Transparent(server) = &self.exposure else {
            return Ok(json!({"resourceTemplates": []}));
        };
        let session = self.session_of(caller, server);
        let list = skip_unoffered(server, session.resources(server).await);
        let templates: Vec<Value> = list
            .into_iter()
            .filter(|r| {
                let target = Target::Resource {
                    server,
                    uri: &r.uri,
                };
                r.template
                    && self
                        .permits_on(caller, Action::ListResources, target)
                        .allowed()
            })
            .map(|r| {
                let mut v =
                    json!({"uriTemplate": r.uri, "name": r.name, "description": r.description});
                if let Some(m) = r.mime_type {
                    v["mimeType"] = json!(m);
                }
                v
            })
            .collect();
        Ok(json!({"resourceTemplates": templates}))
    }

    /// Completion, logging and subscriptions, passed on: to the one server served
    /// transparently as they are; otherwise to the server a prompt's name or a served
    /// URI names, in its own terms (a log level to every running server).
    pub(super) async fn pass_on(&self, caller: &Caller, method: &str, params: &Value) -> Reply {
        let mut params = params.clone();
        if let Some(p) = params.as_object_mut() {
            p.remove("_meta");
        }
        let server = match &self.exposure {
            Exposure::Transparent(server) => server.clone(),
            _ if method == "logging/setLevel" => return self.set_level(params).await,
            _ => self.route(method, &mut params)?,
        };
        self.check_passed_on(caller, &server, method, &params)?;
        let session = self.session_of(caller, &server);
        if method == "completion/complete" {
            return session.complete(&server, params).await.map_err(upstream);
        }
        session
            .acknowledge(&server, method, params)
            .await
            .map_err(upstream)?;
        Ok(json!({}))
    }

    /// The server a completion's reference (a prompt's served name, a served URI) or a
    /// subscription's served URI names, with `params` rewritten in that server's terms.
    fn route(&self, method: &str, params: &mut Value) -> Result<String, Refused> {
        let (field, asked) = if method == "completion/complete" {
            let reference = &params["ref"];
            match reference["type"].as_str() {
                Some("ref/prompt") => ("name", reference["name"].as_str()),
                _ => ("uri", reference["uri"].as_str()),
            }
        } else {
            ("uri", params["uri"].as_str())
        };
        let asked = asked.unwrap_or("");
        let owner = match field {
            "name" => self
                .owner(asked, "__")
                .map(|(server, own)| (server, own.to_owned())),
            _ => self.served(asked),
        };
        let Some((server, own)) = owner else {
            let what = if field == "name" {
                "prompt named"
            } else {
                "resource at"
            };
            return Err((INVALID_PARAMS, format!("no {what} {}", shown(asked))).into());
        };
        let target = if method == "completion/complete" {
            &mut params["ref"]
        } else {
            &mut *params
        };
        target[field] = json!(own);
        Ok(server)
    }

    /// `logging/setLevel` for every running server that takes it (one that does not
    /// is left as it is); a server started later logs at its own level.
    async fn set_level(&self, params: Value) -> Reply {
        let running = self.session.running().await;
        let asked = running.iter().map(|server| {
            self.session
                .acknowledge(server, "logging/setLevel", params.clone())
        });
        for (server, result) in running
            .iter()
            .zip(crate::mcp::client::join_all(asked).await)
        {
            if let Err(e) = result {
                tracing::debug!(server, "its log level is left as it is: {e}");
            }
        }
        Ok(json!({}))
    }

    /// A prompt's served name: its own, transparently; else `SERVER__NAME`.
    fn prompt_name(&self, server: &str, name: &str) -> String {
        match &self.exposure {
            Exposure::Transparent(_) => name.to_owned(),
            _ => format!("{server}__{name}"),
        }
    }

    /// A resource's served URI: its own, transparently; else `edgar://SERVER/` and its
    /// URI percent-encoded.
    pub(super) fn served_uri(&self, server: &str, uri: &str) -> String {
        match &self.exposure {
            Exposure::Transparent(_) => uri.to_owned(),
            _ => served_uri(server, uri),
        }
    }

    /// The server and its own URI behind a served one.
    pub(super) fn served(&self, uri: &str) -> Option<(String, String)> {
        if let Exposure::Transparent(server) = &self.exposure {
            return Some((server.clone(), uri.to_owned()));
        }
        let rest = uri.strip_prefix(SCHEME)?;
        let (server, encoded) = self.owner(rest, "/")?;
        let decoded = form_urlencoded::parse(format!("u={encoded}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())?;
        Some((server, decoded))
    }
}

/// A served resource URI: `edgar://SERVER/` and the server's URI, percent-encoded.
fn served_uri(server: &str, uri: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(uri.as_bytes()).collect();
    format!("{SCHEME}{server}/{encoded}")
}

/// A server's list, or nothing when it offers none (its error says so); any other
/// failure is logged and the server left out of the listing.
fn skip_unoffered<T>(server: &str, list: Result<Vec<T>, McpError>) -> Vec<T> {
    match list {
        Ok(items) => items,
        Err(McpError::Server { code, .. }) if code == METHOD_NOT_FOUND => Vec::new(),
        Err(e) => {
            tracing::warn!(
                server,
                "left out of the listing: {}",
                crate::text::shown_message(&e.to_string())
            );
            Vec::new()
        }
    }
}

/// An upstream failure as a JSON-RPC error: what was asked is wrong, or it failed there.
pub(super) fn upstream(e: McpError) -> Refused {
    if let McpError::MissingCapability { capability, .. } = e {
        return Refused::missing(capability);
    }
    let code = match e {
        McpError::NotOffered { .. } | McpError::InvalidArguments { .. } => INVALID_PARAMS,
        _ => INTERNAL_ERROR,
    };
    (code, crate::text::shown_message(&e.to_string())).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_uri_round_trips_whatever_it_holds() {
        for uri in [
            "demo://resource/static/document/a.md",
            "file:///tmp/a b+c?d=e&f#g",
            "x:%41/é",
        ] {
            let served = served_uri("srv", uri);
            let rest = served.strip_prefix("edgar://srv/").unwrap_or_default();
            assert!(!rest.contains('/') && !rest.contains(' '), "{served}");
            let back = form_urlencoded::parse(format!("u={rest}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned());
            assert_eq!(back.as_deref(), Some(uri));
        }
    }
}
