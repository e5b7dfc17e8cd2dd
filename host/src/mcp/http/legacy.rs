//! Legacy HTTP+SSE (MCP 2024-11-05), for `type: "sse"` servers: one long GET event
//! stream whose first `endpoint` event names where to POST messages; every answer comes
//! back on the stream.

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::header::HeaderMap;
use reqwest::{Method, Url};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use super::event_stream::EventStream;
use super::wire::{self, Body, Reply};
use super::{
    Authorizer, MAX_MESSAGE_BYTES, MAX_STREAM_BYTES, SEND_TIMEOUT, check_status, link, prepare,
    send_with_auth,
};
use crate::mcp::connection::{Event, Link, Outbound};
use crate::text::shown;

/// A running HTTP+SSE connection.
pub(crate) struct Legacy {
    task: AbortHandle,
    events: mpsc::Sender<Event>,
}

struct Shared {
    server: String,
    client: &'static reqwest::Client,
    url: Url,
    headers: HeaderMap,
    events: mpsc::Sender<Event>,
    auth: Option<Arc<dyn Authorizer>>,
}

impl Legacy {
    /// Starts the connection task; the GET is sent at once, since every message needs
    /// the endpoint it names.
    pub(crate) fn start(
        server: &str,
        url: &str,
        headers: &BTreeMap<String, String>,
        auth: Option<Arc<dyn Authorizer>>,
    ) -> Result<(Legacy, Link), String> {
        let (client, url, headers) = prepare(url, headers)?;
        let (link, out_rx, ev_tx) = link();
        let shared = Arc::new(Shared {
            server: server.to_owned(),
            client,
            url,
            headers,
            events: ev_tx.clone(),
            auth,
        });
        let task = tokio::spawn(run(shared, out_rx)).abort_handle();
        Ok((
            Legacy {
                task,
                events: ev_tx,
            },
            link,
        ))
    }

    pub(crate) async fn close(&mut self) {
        self.task.abort();
        let _ = self
            .events
            .try_send(Event::Closed("edgar closed the connection".into()));
    }
}

impl Drop for Legacy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shared {
    /// Sends what `make` adds to a request for `url`, with the bearer token if any.
    async fn send(
        &self,
        method: Method,
        url: &Url,
        make: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Reply> {
        send_with_auth(self.auth.as_ref(), None, || {
            make(
                self.client
                    .request(method.clone(), url.clone())
                    .headers(self.headers.clone()),
            )
        })
        .await
    }
}

/// Opens the stream, waits for the endpoint, then reads the stream on one task and
/// POSTs each message on its own. Aborting this task ends them all.
async fn run(shared: Arc<Shared>, mut outgoing: mpsc::Receiver<Outbound>) {
    let (endpoint, response, parser) = match open(&shared).await {
        Ok(v) => v,
        Err(reply) => {
            // Every request fails with why the stream could not be opened.
            let reason = reply.reason();
            while let Some(message) = outgoing.recv().await {
                if let Some(id) = message.request {
                    let method = message.method.as_deref().unwrap_or("a request");
                    let error = reply.clone().into_error(&shared.server, method);
                    let _ = shared.events.send(Event::Failed { id, error }).await;
                }
            }
            tracing::debug!(server = shared.server, "event stream: {reason}");
            return;
        }
    };
    let mut tasks = JoinSet::new();
    tasks.spawn(read_messages(shared.clone(), response, parser));
    while let Some(message) = outgoing.recv().await {
        while tasks.try_join_next().is_some() {}
        let shared = shared.clone();
        let endpoint = endpoint.clone();
        // As for Streamable HTTP: nothing is posted before the handshake's last step is
        // answered.
        let in_order = message.is("notifications/initialized");
        let post = async move {
            let post = shared.send(Method::POST, &endpoint, |r| {
                r.header("content-type", "application/json")
                    .body(message.bytes.clone())
            });
            let sent = match tokio::time::timeout(SEND_TIMEOUT, post).await {
                Ok(Ok(r)) => check_status(&r),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(Reply::Failed("its message endpoint did not answer".into())),
            };
            if let (Err(reply), Some(id)) = (sent, message.request) {
                let method = message.method.as_deref().unwrap_or("a request");
                let error = reply.into_error(&shared.server, method);
                let _ = shared.events.send(Event::Failed { id, error }).await;
            }
        };
        if in_order {
            post.await;
        } else {
            tasks.spawn(post);
        }
    }
}

/// GETs the event stream and reads up to the `endpoint` event.
async fn open(shared: &Shared) -> Result<(Url, reqwest::Response, EventStream), Reply> {
    let mut response = shared
        .send(Method::GET, &shared.url, |r| {
            r.header("accept", "text/event-stream")
        })
        .await?;
    check_status(&response)?;
    match wire::body_kind(&response) {
        Body::EventStream => {}
        other => {
            return Err(Reply::Failed(format!(
                "its GET answered {} instead of an event stream",
                other.describe()
            )));
        }
    }
    let mut parser = EventStream::new(MAX_MESSAGE_BYTES);
    let mut read = 0usize;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(Reply::Failed(
                    "its event stream ended before naming an endpoint".into(),
                ));
            }
            Err(e) => {
                return Err(Reply::Failed(format!(
                    "its event stream broke: {}",
                    e.without_url()
                )));
            }
        };
        read += chunk.len();
        if read > MAX_MESSAGE_BYTES {
            return Err(Reply::Failed(
                "no endpoint event in its first 16 MiB".into(),
            ));
        }
        let mut endpoint = None;
        parser
            .feed(&chunk, |e| {
                if e.event == "endpoint" && endpoint.is_none() {
                    endpoint = Some(e.data);
                }
            })
            .map_err(|e| Reply::Failed(e.to_string()))?;
        // Events after the endpoint in the same chunk are messages sent before any
        // request of ours; a 2024-11-05 server has nothing to say before `initialize`.
        if let Some(endpoint) = endpoint {
            let url = shared.url.join(endpoint.trim()).map_err(|_| {
                Reply::Failed(format!("its endpoint {} is not a URL", shown(&endpoint)))
            })?;
            if url.origin() != shared.url.origin() {
                return Err(Reply::Failed(format!(
                    "its endpoint {} is on another origin",
                    shown(url.as_str())
                )));
            }
            return Ok((url, response, parser));
        }
    }
}

/// Delivers the stream's messages until it ends, which ends the connection.
async fn read_messages(
    shared: Arc<Shared>,
    mut response: reqwest::Response,
    mut parser: EventStream,
) {
    let mut read = 0usize;
    let reason = loop {
        let chunk = match response.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break "its event stream ended".to_owned(),
            Err(e) => break format!("its event stream broke: {}", e.without_url()),
        };
        read += chunk.len();
        if read > MAX_STREAM_BYTES * 16 {
            break "its event stream carried more than 1 GiB".to_owned();
        }
        let mut messages = Vec::new();
        if let Err(e) = parser.feed(&chunk, |e| {
            if e.event.is_empty() || e.event == "message" {
                messages.push(e.data);
            }
        }) {
            break e.to_string();
        }
        for data in messages {
            match super::super::protocol::decode(data.as_bytes()) {
                Ok(v) => {
                    let _ = shared.events.send(Event::Message(v)).await;
                }
                Err(what) => tracing::debug!(server = shared.server, "ignoring {what}"),
            }
        }
    };
    let _ = shared.events.send(Event::Closed(reason)).await;
}
