//! The conformance suite's list-change hook (with `--conformance` only):
//! `test_trigger_tool_change` adds a tool, or takes it away again, and says so
//! (`notifications/tools/list_changed`), tagged for the client's `subscriptions/listen`
//! stream when it opened one.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::protocol;

/// The tool that changes the list.
pub(super) const TRIGGER: &str = "test_trigger_tool_change";

/// Whether the extra tool is listed now (one server process, one list).
static ADDED: AtomicBool = AtomicBool::new(false);

/// The `_meta` key that ties a notification to its subscription.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

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
            let ack = protocol::notification(
                "notifications/subscriptions/acknowledged",
                json!({"_meta": {SUBSCRIPTION_ID: id}, "notifications": {"toolsListChanged": wants}}),
            );
            (vec![ack], true)
        }
        "tools/call" if params["name"] == TRIGGER => {
            ADDED.fetch_xor(true, Ordering::SeqCst);
            let note = match listening {
                Some(sub) => json!({"_meta": {SUBSCRIPTION_ID: sub}}),
                None => json!({}),
            };
            let note = protocol::notification("notifications/tools/list_changed", note);
            (vec![note], false)
        }
        _ => (Vec::new(), false),
    }
}

/// The descriptors this hook adds to the tool list: the trigger, and the tool it adds
/// while added.
pub(super) fn tools() -> Vec<Value> {
    let mut out = vec![json!({"name": TRIGGER,
        "description": "Adds a tool to this server's list, or takes it away again, and says so.",
        "inputSchema": {"type": "object", "properties": {}}})];
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
        "test_added_tool" if ADDED.load(Ordering::SeqCst) => "Added, and answering.",
        _ => return None,
    };
    Some(json!({"content": [{"type": "text", "text": text}], "isError": false}))
}
