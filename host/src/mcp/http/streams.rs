//! Event streams: reading a POST's stream to its answer (resumed with `Last-Event-ID`
//! when it ends early), and the standalone GET stream that carries what the server
//! sends on its own, reopened while it stays healthy.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderValue;

use crate::mcp::connection::{Event, Outbound};
use crate::mcp::protocol::Incoming;
use crate::text::shown;

use super::request::{check_status, send_with_auth};
use super::wire::{Body, Reply};
use super::{
    DEFAULT_RETRY, DRAIN, HEALTHY_STREAM, MAX_MESSAGE_BYTES, MAX_RETRY, MAX_STREAM_BYTES, Shared,
    event_stream, lock, wire,
};

/// Whether `messages` (a message or batch) hold the answer to request `want`.
pub(super) fn answers(messages: &[Incoming], want: Option<u64>) -> bool {
    messages
        .iter()
        .any(|m| matches!(m, Incoming::Response { id, .. } if *id == want))
}

/// How an event stream ended.
#[derive(Debug, Default)]
pub(super) struct StreamEnd {
    pub(super) answered: bool,
    pub(super) last_id: Option<String>,
    pub(super) retry: Option<Duration>,
    pub(super) not_json: usize,
    pub(super) broken: Option<String>,
}

impl StreamEnd {
    pub(super) fn describe(&self) -> String {
        let mut out = String::new();
        if let Some(b) = &self.broken {
            out.push_str(&format!(" ({})", shown(b)));
        }
        if self.not_json > 0 {
            out.push_str(&format!("; {} of its events were not JSON", self.not_json));
        }
        out
    }
}

impl Shared {
    /// Reads an event stream, delivering each message, until it ends or carries the
    /// answer to `want`.
    pub(super) async fn read_stream(
        &self,
        mut response: reqwest::Response,
        want: Option<u64>,
        message: &Outbound,
    ) -> Result<StreamEnd, Reply> {
        let mut parser = event_stream::EventStream::new(MAX_MESSAGE_BYTES);
        let mut end = StreamEnd::default();
        let mut read = 0usize;
        loop {
            let next = if end.answered {
                // The server should end the stream after the answer; reading to its end
                // lets the connection go back to the pool, but only briefly.
                match tokio::time::timeout(DRAIN, response.chunk()).await {
                    Ok(next) => next,
                    Err(_) => break,
                }
            } else {
                response.chunk().await
            };
            let chunk = match next {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    end.broken = Some(e.without_url().to_string());
                    break;
                }
            };
            read += chunk.len();
            if read > MAX_STREAM_BYTES {
                end.broken = Some(format!("it carried more than {MAX_STREAM_BYTES} bytes"));
                break;
            }
            let mut messages = Vec::new();
            parser
                .feed(&chunk, |e| {
                    if e.event.is_empty() || e.event == "message" {
                        messages.push(e.data)
                    }
                })
                .map_err(|e| Reply::Failed(e.to_string()))?;
            for data in messages {
                if data.trim().is_empty() {
                    continue;
                }
                let messages = match crate::mcp::protocol::decode(data.as_bytes()) {
                    Ok(m) => m,
                    Err(_) => {
                        end.not_json += 1;
                        continue;
                    }
                };
                let answers = want.is_some() && answers(&messages, want);
                self.note_initialized(message, &messages);
                self.emit(Event::Message(messages)).await;
                if answers {
                    end.answered = true;
                }
            }
        }
        end.last_id = parser.last_id().map(str::to_owned);
        end.retry = parser.retry().map(Duration::from_millis);
        Ok(end)
    }

    /// Opens a GET event stream, resuming after `last_id` if given.
    pub(super) async fn get_stream(
        &self,
        last_id: Option<&str>,
    ) -> Result<reqwest::Response, Reply> {
        let last_id = last_id
            .map(HeaderValue::from_str)
            .transpose()
            .map_err(|_| Reply::Failed("its event id is not a valid header".into()))?;
        let session = self.session();
        let response = send_with_auth(self.auth.as_ref(), None, || {
            let mut get = self
                .request(Method::GET, &self.url)
                .header("accept", "text/event-stream");
            if let Some(s) = &session {
                get = get.header("mcp-session-id", s.clone());
            }
            if let Some(id) = &last_id {
                get = get.header("last-event-id", id.clone());
            }
            get
        })
        .await?;
        check_status(&response)?;
        match wire::body_kind(&response) {
            Body::EventStream => Ok(response),
            other => Err(Reply::Failed(format!(
                "its GET answered {} instead of an event stream",
                other.describe()
            ))),
        }
    }

    /// Opens the standalone GET stream for this session (once per session epoch).
    pub(super) fn listen(self: &Arc<Self>) {
        let epoch = self.epoch.load(Ordering::SeqCst);
        let mut listening = lock(&self.listening);
        if listening.as_ref().is_some_and(|(e, _)| *e == epoch) {
            return;
        }
        if let Some((_, old)) = listening.take() {
            old.abort();
        }
        let me = self.clone();
        let handle = tokio::spawn(async move { me.listen_loop().await }).abort_handle();
        *listening = Some((epoch, handle));
    }

    pub(super) async fn listen_loop(&self) {
        let mut last_id: Option<String> = None;
        let mut failures = 0;
        let nothing = Outbound::none();
        while failures < 3 {
            let response = match self.get_stream(last_id.as_deref()).await {
                Ok(r) => r,
                Err(Reply::Status { status, .. }) if matches!(status, 400 | 404 | 405) => {
                    tracing::debug!(
                        server = self.server,
                        "the server offers no GET stream (HTTP {status})"
                    );
                    return;
                }
                Err(e) => {
                    tracing::debug!(server = self.server, "GET stream: {}", e.reason());
                    failures += 1;
                    tokio::time::sleep(DEFAULT_RETRY * failures).await;
                    continue;
                }
            };
            let opened = std::time::Instant::now();
            match self.read_stream(response, None, &nothing).await {
                Ok(end) => {
                    // A stream that lived a while was healthy: servers close idle streams.
                    if opened.elapsed() >= HEALTHY_STREAM {
                        failures = 0;
                    }
                    failures += 1;
                    last_id = end.last_id.or(last_id);
                    let wait = end.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY);
                    tokio::time::sleep(wait).await;
                }
                Err(e) => {
                    tracing::debug!(server = self.server, "GET stream: {}", e.reason());
                    return;
                }
            }
        }
    }
}
