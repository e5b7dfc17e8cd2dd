//! Asking the person behind a call: while a `tools/call` made within [`ASKER`]'s scope
//! runs, what its server asks of the client (`elicitation/create`,
//! `sampling/createMessage`) goes to that caller first, not to the session's handler.
//! `edgar mcp serve --http` sets it around each call of a client that declared it can
//! answer, so the question travels on the event stream of the request that caused it.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

/// What a caller said to one question: its result object, or its refusal (sent back to
/// the server as a JSON-RPC error).
pub type Answer = Result<Value, String>;

/// Asks the caller of a call `(server, method, params)`; `None` when this caller cannot
/// be asked that (it did not declare the capability), so the session's handler decides.
type Ask = dyn Fn(&str, &str, Value) -> BoxFuture<'static, Option<Answer>> + Send + Sync;

/// One caller that can be asked, and who it is (a team user's `sub`, empty for the one
/// local user): a question is never routed to a caller other than the one whose call
/// caused it.
#[derive(Clone)]
pub struct Asker {
    who: Arc<str>,
    ask: Arc<Ask>,
}

tokio::task_local! {
    /// Set around a call by a caller that can answer its server's questions.
    pub static ASKER: Asker;
}

impl Asker {
    pub fn new(
        who: &str,
        ask: impl Fn(&str, &str, Value) -> BoxFuture<'static, Option<Answer>> + Send + Sync + 'static,
    ) -> Asker {
        Asker {
            who: who.into(),
            ask: Arc::new(ask),
        }
    }

    /// Asks `method` of the caller for `server`.
    pub fn ask(
        &self,
        server: &str,
        method: &str,
        params: Value,
    ) -> BoxFuture<'static, Option<Answer>> {
        (self.ask)(server, method, params)
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
        Asker::new(who, move |_, _, _| {
            let me = me.clone();
            Box::pin(async move { Some(Ok(Value::String(me))) })
        })
    }

    #[tokio::test]
    async fn a_question_goes_only_to_the_one_caller_whose_calls_run() {
        let mut running = HashMap::new();
        assert!(Asker::pick(&running).is_none());
        running.insert(3, asker("ada"));
        running.insert(7, asker("ada"));
        let picked = Asker::pick(&running).map(|a| a.ask("s", "m", Value::Null));
        let got = match picked {
            Some(f) => f.await,
            None => None,
        };
        assert_eq!(got, Some(Ok(Value::String("ada".into()))));
        running.insert(5, asker("bob"));
        assert!(Asker::pick(&running).is_none(), "two callers: ambiguous");
    }
}
