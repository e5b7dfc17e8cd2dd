//! The streams a client holds open: a `subscriptions/listen` stream (the stateless
//! era) and the standalone GET stream of a session (the handshake era), each fed with
//! list changes and the news its caller asked for, as server-sent events, until the
//! client goes away or the gateway shuts down.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{Auth, Front, Reply, SESSION_ID, status};
use crate::gateway::Caller;
use crate::mcp::protocol;

impl Front {
    /// A `subscriptions/listen` stream: the acknowledgement, then a notification each
    /// time this caller's tool list grows or an upstream's served list changes (if it
    /// asked for that), until the client goes away or the gateway shuts down.
    pub(super) fn listen(&self, caller: &Caller, id: &Value, params: &Value) -> Reply {
        let l = self.gateway.listen(caller, id, params);
        let note = l.wants.then(|| crate::gateway::tools_changed(id));
        self.changes(caller, true, note, l)
    }

    /// A standalone GET stream, for a client in a session (the handshake era's way to
    /// hear what is not an answer): `notifications/tools/list_changed` each time its
    /// tool list changes, as a listen stream hears it.
    pub(super) fn standing(&self, caller: &Caller, headers: &HeaderMap) -> Reply {
        if headers.get(SESSION_ID).is_none() {
            let mut r = status(
                StatusCode::METHOD_NOT_ALLOWED,
                "a standalone stream is opened in a session: initialize first",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        }
        let streams = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        if !streams {
            return status(StatusCode::NOT_ACCEPTABLE, "accept text/event-stream");
        }
        let everything = serde_json::json!({"notifications": {"toolsListChanged": true}});
        let mut l = self.gateway.listen(caller, &Value::Null, &everything);
        l.news = Some(self.gateway.session_news());
        if let Auth::Team(team) = &self.auth {
            l.signed_in = Some(team.signed_in.subscribe());
        }
        let note = protocol::notification("notifications/tools/list_changed", Value::Null);
        self.changes(caller, false, Some(note), l)
    }

    /// An event stream of the acknowledgement (if `acknowledged`), then `note` each time `caller`'s found tools grow
    /// (`grown`) or an upstream's served list changes (`upstream`); nothing more when
    /// `note` is `None`. It ends with the client or at shutdown.
    fn changes(
        &self,
        caller: &Caller,
        acknowledged: bool,
        note: Option<Vec<u8>>,
        sources: crate::gateway::Listening,
    ) -> Reply {
        use tokio::sync::broadcast::error::RecvError;
        let crate::gateway::Listening {
            subscribing,
            held,
            mut grown,
            mut upstream,
            mut news,
            mut signed_in,
            ..
        } = sources;
        let (who, mut stop) = (caller.key().to_owned(), self.stop.clone());
        let gateway = self.gateway.clone();
        let (body_tx, body_rx) = mpsc::channel::<Bytes>(16);
        tokio::spawn(async move {
            // The stream's upstream subscriptions end with it.
            let _held = held;
            let ack = subscribing.done().await;
            if acknowledged && body_tx.send(event(&ack)).await.is_err() {
                return;
            }
            loop {
                let tell = tokio::select! {
                    () = body_tx.closed() => return,
                    () = async { let _ = stop.wait_for(|s| *s).await; } => return,
                    heard = grown.recv() => match heard {
                        Ok(whose) => *whose == *who,
                        Err(RecvError::Lagged(_)) => true,
                        Err(RecvError::Closed) => return,
                    },
                    // Servers' resource and prompt news, as this stream asked for it.
                    told = async {
                        match news.as_mut() {
                            Some(w) => w.heard.recv().await,
                            None => std::future::pending().await,
                        }
                    } => {
                        let messages = match (told, news.as_mut()) {
                            (Ok(n), Some(w)) => {
                                let all = crate::gateway::news::gathered(&mut w.heard, n).await;
                                gateway.tell(&who, w, &all)
                            }
                            (Err(RecvError::Closed), _) => {
                                news = None;
                                Vec::new()
                            }
                            _ => Vec::new(),
                        };
                        for m in messages {
                            if body_tx.send(event(&m)).await.is_err() {
                                return;
                            }
                        }
                        false
                    },
                    // This user's sign-in finished: the elicitation is complete.
                    done = async {
                        match signed_in.as_mut() {
                            Some(rx) => rx.recv().await,
                            None => std::future::pending().await,
                        }
                    } => {
                        match done {
                            Ok((sub, id)) if *sub == *who => {
                                let note = crate::gateway::sign_in::completed(&id);
                                if body_tx.send(event(&note)).await.is_err() {
                                    return;
                                }
                            }
                            Err(RecvError::Closed) => signed_in = None,
                            _ => {}
                        }
                        false
                    },
                    changed = async {
                        match upstream.as_mut() {
                            Some(rx) => rx.recv().await,
                            None => std::future::pending().await,
                        }
                    } => match changed {
                        Ok(_) | Err(RecvError::Lagged(_)) => true,
                        Err(RecvError::Closed) => {
                            upstream = None;
                            false
                        }
                    },
                };
                if let (true, Some(note)) = (tell, &note)
                    && body_tx.send(event(note)).await.is_err()
                {
                    return;
                }
            }
        });
        let mut r = Response::new(Streamed(body_rx).boxed());
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r
    }
}

/// One JSON-RPC message as a server-sent event.
pub(super) fn event(message: &[u8]) -> Bytes {
    let mut e = Vec::with_capacity(message.len() + 24);
    e.extend_from_slice(b"event: message\ndata: ");
    e.extend_from_slice(message);
    e.extend_from_slice(b"\n\n");
    Bytes::from(e)
}

/// A response body fed as events happen; it ends when the sender is dropped.
pub(super) struct Streamed(pub(super) mpsc::Receiver<Bytes>);

impl hyper::body::Body for Streamed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(hyper::body::Frame::data(c))))
    }
}
