//! The conformance suite's list-change hook (with `--conformance` only):
//! `test_trigger_tool_change` adds a tool, or takes it away again, and says so
//! (`notifications/tools/list_changed`), tagged for the client's `subscriptions/listen`
//! stream when it opened one; `test_trigger_prompt_change` does the same for a prompt
//! (`notifications/prompts/list_changed`); `test_touch_resource` says a resource changed
//! (`notifications/resources/updated`, to a client that subscribed to it with
//! `resources/subscribe` or a listen request's `resourceSubscriptions`) and the resource
//! list with it (`notifications/resources/list_changed`).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::protocol;

/// The tool that changes the list.
pub(super) const TRIGGER: &str = "test_trigger_tool_change";

/// The tool that changes the prompt list, and whether the extra prompt is listed now.
pub(super) const PROMPT_TRIGGER: &str = "test_trigger_prompt_change";
static PROMPT_ADDED: AtomicBool = AtomicBool::new(false);

/// The prompts the prompt trigger added.
pub(super) fn prompts() -> Vec<Value> {
    match PROMPT_ADDED.load(Ordering::SeqCst) {
        true => {
            vec![json!({"name": "test_added_prompt", "description": "A prompt the trigger added."})]
        }
        false => Vec::new(),
    }
}

/// The tool that says a resource changed.
pub(super) const TOUCH: &str = "test_touch_resource";

/// The URIs a client subscribed to (`resources/subscribe`, or a listen request's
/// `resourceSubscriptions`): the touch tells only of these.
static WATCHED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

fn watched() -> std::sync::MutexGuard<'static, BTreeSet<String>> {
    WATCHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether the extra tool is listed now (one server process, one list).
static ADDED: AtomicBool = AtomicBool::new(false);

/// What request `id` of `method` is for this hook: the messages to write before its
/// answer (or instead of one), and whether it is answered by them alone (a listen
/// request stays open). `listening` is the listen request whose stream hears changes.
pub(super) fn hook(
    method: &str,
    id: &Value,
    params: &Value,
    listening: &mut Option<Value>,
) -> (Vec<Vec<u8>>, bool) {
    match method {
        "subscriptions/listen" => {
            let wants = params["notifications"]["toolsListChanged"] == true;
            if wants {
                *listening = Some(id.clone());
            }
            let uris: Vec<&str> = params["notifications"]["resourceSubscriptions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            watched().extend(uris.iter().map(|u| (*u).to_owned()));
            let ack = protocol::notification(
                "notifications/subscriptions/acknowledged",
                json!({"_meta": {protocol::META_SUBSCRIPTION_ID: id},
                       "notifications": {"toolsListChanged": wants, "resourceSubscriptions": uris}}),
            );
            (vec![ack], true)
        }
        "resources/subscribe" | "resources/unsubscribe" => {
            if let Some(uri) = params["uri"].as_str() {
                if method == "resources/subscribe" {
                    watched().insert(uri.to_owned());
                } else {
                    watched().remove(uri);
                }
            }
            (Vec::new(), false)
        }
        "tools/call" if params["name"] == TOUCH => {
            // A resource changed, and with it the resource list.
            let uri = params["arguments"]["uri"].as_str().unwrap_or("");
            let mut notes = Vec::new();
            if watched().contains(uri) {
                let updated = json!({"uri": uri});
                notes.push(protocol::notification(
                    "notifications/resources/updated",
                    updated,
                ));
            }
            let listed = protocol::notification("notifications/resources/list_changed", json!({}));
            notes.push(listed);
            (notes, false)
        }
        "tools/call" if params["name"] == TRIGGER || params["name"] == PROMPT_TRIGGER => {
            let (added, method) = if params["name"] == TRIGGER {
                (&ADDED, "notifications/tools/list_changed")
            } else {
                (&PROMPT_ADDED, "notifications/prompts/list_changed")
            };
            added.fetch_xor(true, Ordering::SeqCst);
            let note = match listening {
                Some(sub) => json!({"_meta": {protocol::META_SUBSCRIPTION_ID: sub}}),
                None => json!({}),
            };
            (vec![protocol::notification(method, note)], false)
        }
        _ => (Vec::new(), false),
    }
}

/// The descriptors this hook adds to the tool list: the trigger, and the tool it adds
/// while added.
pub(super) fn tools() -> Vec<Value> {
    let mut out = vec![
        json!({"name": TRIGGER,
        "description": "Adds a tool to this server's list, or takes it away again, and says so.",
        "inputSchema": {"type": "object", "properties": {}}}),
        json!({"name": PROMPT_TRIGGER,
        "description": "Adds a prompt to this server's list, or takes it away again, and says so.",
        "inputSchema": {"type": "object", "properties": {}}}),
        json!({"name": TOUCH,
        "description": "Says the resource at a URI changed (and the resource list with it).",
        "inputSchema": {"type": "object", "properties": {"uri": {"type": "string"}},
                        "required": ["uri"]}}),
    ];
    if ADDED.load(Ordering::SeqCst) {
        out.push(
            json!({"name": "test_added_tool", "description": "A tool the trigger added.",
                        "inputSchema": {"type": "object", "properties": {}}}),
        );
    }
    out
}

/// The answer of the trigger and of the tool it adds; `None` for any other tool.
pub(super) fn call(name: &str) -> Option<Value> {
    let text = match name {
        TRIGGER => "The tool list changed.",
        TOUCH => "The resource changed.",
        PROMPT_TRIGGER => "The prompt list changed.",
        "test_added_tool" if ADDED.load(Ordering::SeqCst) => "Added, and answering.",
        _ => return None,
    };
    Some(json!({"content": [{"type": "text", "text": text}], "isError": false}))
}
