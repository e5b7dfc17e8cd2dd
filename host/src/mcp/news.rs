//! What a running server says changed besides its tools: a resource a client asked to
//! watch (`notifications/resources/updated`), its resource list or its prompt list
//! (`notifications/resources/list_changed`, `notifications/prompts/list_changed`);
//! and that a server started, so what it offers is at hand now. The connection checks
//! each (a URI must be one edgar would read) and the session hands it, named by
//! server, to whoever serves these on (the gateway); nothing is kept, and nobody
//! listening loses nothing.

use std::sync::Arc;

use serde_json::Value;

/// One change a server told of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct News {
    pub server: Arc<str>,
    pub change: Change,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The resource at this URI (the server's own) changed.
    ResourceUpdated(String),
    ResourcesListChanged,
    PromptsListChanged,
    /// The server started (lazily): its prompts and resources can be listed without
    /// starting anything.
    Started,
}

/// The news in a notification of `server`, if it is one and well formed.
pub(crate) fn heard(server: &str, method: &str, params: &Value) -> Option<News> {
    let change = match method {
        "notifications/resources/updated" => {
            let uri = params.get("uri").and_then(Value::as_str)?;
            // As the guard takes a resource descriptor's: bounded, one line, a scheme.
            if crate::guard::context::well_formed_uri(uri).is_err() {
                tracing::debug!(
                    server,
                    "a resource update for a URI that is not one: dropped"
                );
                return None;
            }
            Change::ResourceUpdated(uri.to_owned())
        }
        "notifications/resources/list_changed" => Change::ResourcesListChanged,
        "notifications/prompts/list_changed" => Change::PromptsListChanged,
        _ => return None,
    };
    Some(News {
        server: server.into(),
        change,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_well_formed_news_is_passed_on() {
        let uri = |u: Value| heard("s", "notifications/resources/updated", &json!({"uri": u}));
        assert_eq!(
            uri(json!("file:///a.txt")).map(|n| n.change),
            Some(Change::ResourceUpdated("file:///a.txt".into()))
        );
        for bad in [
            json!(7),
            json!("not a uri"),
            json!("file:///a\u{0}b"),
            json!(format!("file:///{}", "a".repeat(100_000))),
        ] {
            assert_eq!(uri(bad.clone()), None, "{bad}");
        }
        assert_eq!(
            heard("s", "notifications/prompts/list_changed", &Value::Null).map(|n| n.change),
            Some(Change::PromptsListChanged)
        );
        assert_eq!(
            heard("s", "notifications/tools/list_changed", &Value::Null),
            None
        );
    }
}
