//! Asking the person behind a call: while a `tools/call` made within [`ASKER`]'s scope
//! runs, what its server asks of the client (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`) goes to that caller first, not to the
//! session's handler. `edgar mcp serve` sets it around each call of a client that can
//! answer, so the question reaches the client whose call caused it.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

/// One thing a server asks: its method and params, under the key the server gave it
/// (a stateless server's input request key; any name for a request of its own).
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    pub key: String,
    pub method: String,
    pub params: Value,
}

/// Why a caller gave no answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// It refused, or could not be reached (sent back to the server as an error).
    Failed(String),
    /// It did not declare the capability this question needs (`elicitation`,
    /// `sampling`, `roots`): its request fails with -32021.
    Undeclared(&'static str),
}

/// A caller's answers, one result object per question in order, or its refusal.
pub type Replies = Result<Vec<Value>, Refusal>;

/// Asks the caller of a call `(server, questions)`; `None` when this caller cannot be
/// asked, so the session's handler decides.
type Ask = dyn Fn(&str, Vec<Question>) -> BoxFuture<'static, Option<Replies>> + Send + Sync;

/// One caller that can be asked, and who it is (a team user's `sub`, empty for the one
/// local user): a question is never routed to a caller other than the one whose call
/// caused it.
#[derive(Clone)]
pub struct Asker {
    who: Arc<str>,
    ask: Arc<Ask>,
    /// The question capabilities (`elicitation`, `sampling`, `roots`) the caller
    /// declared, when known: a stateless server is then told only of those, so it asks
    /// only what the caller can answer.
    declares: Option<Arc<[&'static str]>>,
    /// Whether a server may make this caller's call a task (edgar follows it, or hands
    /// it to a caller that takes tasks); `false` for a client of the stateless era
    /// that did not declare the extension, so the server runs the call at once.
    tasks: bool,
}

/// Every capability a server's question needs.
const QUESTION_CAPABILITIES: [&str; 3] = ["elicitation", "sampling", "roots"];

tokio::task_local! {
    /// Set around a call by a caller that can answer its server's questions.
    pub static ASKER: Asker;
}

/// The capability a client declares to be asked `method`, if it is one a server asks.
pub fn capability(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

impl Asker {
    pub fn new(
        who: &str,
        ask: impl Fn(&str, Vec<Question>) -> BoxFuture<'static, Option<Replies>> + Send + Sync + 'static,
    ) -> Asker {
        Asker {
            who: who.into(),
            ask: Arc::new(ask),
            declares: None,
            tasks: true,
        }
    }

    /// The same asker, for a caller that declared exactly `capabilities` among those
    /// a question needs.
    pub fn declaring(self, capabilities: &[&'static str]) -> Asker {
        Asker {
            declares: Some(capabilities.into()),
            ..self
        }
    }

    /// The same asker, for a caller that does not take tasks.
    pub fn without_tasks(self) -> Asker {
        Asker {
            tasks: false,
            ..self
        }
    }

    /// `ours` (the client capabilities this host declares to a server) less the
    /// question capabilities this caller did not declare, and less the tasks extension
    /// when it takes none; `None` when nothing is known to take away.
    pub(crate) fn restrict(&self, ours: &Value) -> Option<Value> {
        if self.declares.is_none() && self.tasks {
            return None;
        }
        let mut out = ours.clone();
        if let Some(o) = out.as_object_mut() {
            if let Some(declares) = &self.declares {
                for c in QUESTION_CAPABILITIES {
                    if !declares.contains(&c) {
                        o.remove(c);
                    }
                }
            }
            if !self.tasks
                && let Some(e) = o.get_mut("extensions").and_then(Value::as_object_mut)
            {
                e.remove(super::protocol::TASKS_EXTENSION);
            }
        }
        Some(out)
    }

    /// Asks the caller `questions` for `server`, all at once.
    pub fn ask(
        &self,
        server: &str,
        questions: Vec<Question>,
    ) -> BoxFuture<'static, Option<Replies>> {
        (self.ask)(server, questions)
    }

    /// The caller to ask among the calls to one server running now, by request id. A
    /// server's request names no call, so it is routed only when that is unambiguous:
    /// every running call that can be asked is the same caller's (then the latest
    /// call's stream carries it). Calls of two callers: nobody is asked.
    pub(crate) fn pick(running: &HashMap<u64, Asker>) -> Option<Asker> {
        let (_, latest) = running.iter().max_by_key(|(id, _)| **id)?;
        running
            .values()
            .all(|a| a.who == latest.who)
            .then(|| latest.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asker(who: &str) -> Asker {
        let me = who.to_owned();
        Asker::new(who, move |_, _| {
            let me = me.clone();
            Box::pin(async move { Some(Ok(vec![Value::String(me)])) })
        })
    }

    #[tokio::test]
    async fn a_question_goes_only_to_the_one_caller_whose_calls_run() {
        let mut running = HashMap::new();
        assert!(Asker::pick(&running).is_none());
        running.insert(3, asker("ada"));
        running.insert(7, asker("ada"));
        let picked = Asker::pick(&running).map(|a| a.ask("s", Vec::new()));
        let got = match picked {
            Some(f) => f.await,
            None => None,
        };
        assert_eq!(got, Some(Ok(vec![Value::String("ada".into())])));
        running.insert(5, asker("bob"));
        assert!(Asker::pick(&running).is_none(), "two callers: ambiguous");
    }

    #[test]
    fn a_server_is_told_only_what_the_caller_can_answer() {
        let tasks = super::super::protocol::TASKS_EXTENSION;
        let ours = serde_json::json!({"elicitation": {"form": {}}, "sampling": {}, "roots": {},
                                      "extensions": {tasks: {}}});
        assert_eq!(asker("ada").restrict(&ours), None, "unknown: unchanged");
        let sampling_only = asker("ada").declaring(&["sampling"]);
        assert_eq!(
            sampling_only.restrict(&ours),
            Some(serde_json::json!({"sampling": {}, "extensions": {tasks: {}}}))
        );
        assert_eq!(
            sampling_only.without_tasks().restrict(&ours),
            Some(serde_json::json!({"sampling": {}, "extensions": {}})),
            "a caller that takes no tasks: the server is not told edgar takes them"
        );
        assert_eq!(
            asker("ada").without_tasks().restrict(&ours),
            Some(
                serde_json::json!({"elicitation": {"form": {}}, "sampling": {}, "roots": {},
                                    "extensions": {}})
            )
        );
    }

    #[test]
    fn each_kind_of_question_names_its_capability() {
        assert_eq!(capability("sampling/createMessage"), Some("sampling"));
        assert_eq!(capability("roots/list"), Some("roots"));
        assert_eq!(capability("tools/list"), None);
    }
}
