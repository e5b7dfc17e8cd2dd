//! `edgar mcp serve` on stdio: newline-delimited JSON from one client, each request run
//! as a task of its own (so `notifications/cancelled` can stop it), answers and news
//! written by one writer task in the order they are sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::{Caller, Gateway, questions};
use crate::mcp::ask::ASKER;
use crate::mcp::protocol::{self, Incoming, MAX_MESSAGE_BYTES};
use crate::sync::lock;

/// How long the answers to what a client asked before the end of its input may take.
const FINISH_AFTER_EOF: std::time::Duration = std::time::Duration::from_secs(5);

/// The requests being answered, by id (`notifications/cancelled` aborts one), and a
/// signal each gives once its answer is queued.
#[derive(Default)]
struct InFlight {
    tasks: Mutex<HashMap<String, AbortHandle>>,
    done: tokio::sync::Notify,
}

impl Gateway {
    /// Serves MCP on `input`/`output` (newline-delimited JSON) until `input` ends. What
    /// was asked before the end is still answered if the answer comes within
    /// `FINISH_AFTER_EOF` (5 s) and the client still reads; requests running after that are
    /// stopped (their upstream calls cancelled).
    pub async fn serve<R, W>(self: &Arc<Self>, input: R, output: W) -> std::io::Result<()>
    where
        R: AsyncBufRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::channel::<Vec<u8>>(64);
        let writer = tokio::spawn(write_all(rx, output));
        let forward = self.forward_news(tx.clone());
        let running: Arc<InFlight> = Arc::default();
        // What the client said at `initialize` it can answer of upstream servers' questions.
        let mut answers = questions::Answers::default();
        let mut input = input;
        let mut line = Vec::new();
        let result = loop {
            line.clear();
            // Capped like every reader of edgar's: a longer line ends the session.
            let limit = MAX_MESSAGE_BYTES as u64;
            let n = match (&mut input)
                .take(limit + 1)
                .read_until(b'\n', &mut line)
                .await
            {
                Ok(n) => n,
                Err(e) => break Err(e),
            };
            if n == 0 {
                break Ok(());
            }
            if n as u64 > limit {
                break Err(std::io::Error::other(
                    "a request line is over the message size limit",
                ));
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let messages = match protocol::decode(&line) {
                Ok(m) => m,
                Err(reason) => {
                    let reply = protocol::error_response(
                        &Value::Null,
                        protocol::refusal_code(&line),
                        &reason,
                    );
                    let _ = tx.send(reply).await;
                    continue;
                }
            };
            for m in messages {
                self.dispatch(m, &tx, &running, &mut answers).await;
            }
        };
        // A script that pipes its requests in and then reads the answers gets them; once
        // a write to the client fails (it stopped reading), nothing more is waited for.
        if result.is_ok() {
            let deadline = tokio::time::Instant::now() + FINISH_AFTER_EOF;
            loop {
                let done = running.done.notified();
                if lock(&running.tasks).is_empty() || writer.is_finished() {
                    break;
                }
                tokio::select! {
                    () = done => {}
                    () = tokio::time::sleep_until(deadline) => break,
                }
            }
        }
        for (_, task) in lock(&running.tasks).drain() {
            task.abort();
        }
        forward.abort();
        drop(tx);
        let _ = writer.await;
        result
    }

    async fn dispatch(
        self: &Arc<Self>,
        message: Incoming,
        tx: &mpsc::Sender<Vec<u8>>,
        running: &Arc<InFlight>,
        answers: &mut questions::Answers,
    ) {
        match message {
            Incoming::Request { id, method, params } if method == "subscriptions/listen" => {
                // Never answered: it stays open until the client cancels it, and carries
                // the notifications it asked for (tool list changes, here).
                let listened = self.listened(&Caller::Local, &id, &params);
                if let Some(news) = listened.news {
                    lock(&self.watchers).push((id.clone(), news));
                }
                lock(&self.holding).push((id.clone(), listened.held));
                if listened.tools {
                    lock(&self.listeners).push(id);
                }
                // Acknowledged once its servers are subscribed, without holding up what
                // the client sends meanwhile.
                let (tx, subscribing) = (tx.clone(), listened.subscribing);
                tokio::spawn(async move {
                    let _ = tx.send(subscribing.done().await).await;
                });
            }
            Incoming::Request { id, method, params } => {
                if method == "initialize" {
                    *answers = questions::Answers::declared(&params["capabilities"]);
                }
                // What upstream servers ask while this runs goes to the client, if it can
                // answer.
                let asker = answers
                    .any()
                    .then(|| self.questions.asker("", *answers, tx.clone()));
                let key = id.to_string();
                let (me, tx2, running2) = (self.clone(), tx.clone(), running.clone());
                let key2 = key.clone();
                // Held while spawning, so the task's own removal comes after this insert.
                let mut tasks = lock(&running.tasks);
                let task = tokio::spawn(async move {
                    let answer = me.answer(&Caller::Local, &id, &method, params, &tx2);
                    let answer = async move {
                        match asker {
                            Some(asker) => ASKER.scope(asker, answer).await,
                            None => answer.await,
                        }
                    };
                    // The request's audit lines are written once its answer is out.
                    let (reply, lines) = crate::trust::audit::deferring(answer).await;
                    lock(&running2.tasks).remove(&key2);
                    let _ = tx2.send(reply).await;
                    running2.done.notify_one();
                    // The writer goes first (woken from here, it would run after this).
                    tokio::task::yield_now().await;
                    drop(lines);
                });
                tasks.insert(key, task.abort_handle());
            }
            Incoming::Notification { method, params } => {
                if method == "notifications/cancelled"
                    && let Some(id) = params.get("requestId")
                {
                    lock(&self.listeners).retain(|l| l != id);
                    lock(&self.watchers).retain(|(l, _)| l != id);
                    lock(&self.holding).retain(|(l, _)| l != id);
                    if let Some(task) = lock(&running.tasks).remove(&id.to_string()) {
                        task.abort();
                    }
                }
            }
            Incoming::Refused { id, reason } => {
                let _ = tx
                    .send(protocol::error_response(&id, -32600, &reason))
                    .await;
            }
            // Answers to the questions upstream servers asked the client.
            Incoming::Response {
                id: Some(id),
                outcome,
            } => {
                self.questions.answered_raw("", id, outcome);
            }
            Incoming::Response { id: None, .. } => {}
        }
    }
}

async fn write_all<W: AsyncWrite + Unpin>(mut rx: mpsc::Receiver<Vec<u8>>, mut out: W) {
    while let Some(mut message) = rx.recv().await {
        message.push(b'\n');
        if out.write_all(&message).await.is_err() || out.flush().await.is_err() {
            // The client is gone; the read side ends soon after.
            return;
        }
    }
}
