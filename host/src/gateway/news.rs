//! Passing upstream servers' news on to clients: a resource a client subscribed to
//! changed, a resource or prompt list changed. Only where the gateway serves resources
//! and prompts (`--expose all`, `--transparent`; never to a team, whose policy covers
//! tools only), and only what a client asked to hear: a client of the handshake era
//! hears the list changes unasked and the updates of the URIs it subscribed to
//! (`resources/subscribe`, kept per caller); a `subscriptions/listen` stream hears what
//! its filter names (`promptsListChanged`, `resourcesListChanged`,
//! `resourceSubscriptions`), tagged with its subscription id. URIs are served ones:
//! the upstream's own in transparent mode, `edgar://server/...` otherwise.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Duration;

use super::{Exposure, Gateway, META_SUBSCRIPTION_ID};
use crate::mcp::news::{Change, News};
use crate::mcp::protocol;

/// Most URIs one caller (or one listen stream) watches.
const MAX_WATCHED: usize = 256;

/// Longest a listen stream's acknowledgement waits for the upstream subscriptions it
/// names (a server that is slower still is subscribed behind it).
const ACK_WAIT: Duration = Duration::from_secs(10);

/// The upstream subscriptions a listen stream asked for, under way: its acknowledgement
/// is sent once they are in place, so a client that acts on the acknowledgement misses
/// no update (a lazily started server takes a while to be subscribed).
#[must_use]
pub(crate) struct Subscribing(Vec<JoinHandle<()>>);

impl Subscribing {
    /// Waits for every subscription, at most [`ACK_WAIT`].
    pub(crate) async fn done(self) {
        let all = async {
            for handle in self.0 {
                let _ = handle.await;
            }
        };
        let _ = tokio::time::timeout(ACK_WAIT, all).await;
    }
}

/// What one client (or one listen stream) asked to hear.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Wants {
    pub resources_list: bool,
    pub prompts_list: bool,
    /// Served URIs whose updates it hears.
    pub uris: HashSet<String>,
}

impl Wants {
    /// What a listen request's `notifications` filter asks for.
    pub(crate) fn of_filter(filter: &Value) -> Wants {
        Wants {
            resources_list: filter["resourcesListChanged"] == true,
            prompts_list: filter["promptsListChanged"] == true,
            uris: filter["resourceSubscriptions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .take(MAX_WATCHED)
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// Served URIs each caller subscribed to (`resources/subscribe`), by caller key.
#[derive(Default)]
pub(crate) struct Subscribed(std::sync::Mutex<HashMap<String, HashSet<String>>>);

impl Subscribed {
    /// Records a `resources/subscribe` (or, with `on` false, an unsubscribe).
    pub(crate) fn set(&self, who: &str, uri: &str, on: bool) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mine = all.entry(who.to_owned()).or_default();
        if !on {
            mine.remove(uri);
        } else if mine.len() < MAX_WATCHED {
            mine.insert(uri.to_owned());
        }
    }

    /// What a handshake-era client of `who` hears: both lists, and its URIs.
    pub(crate) fn wants(&self, who: &str) -> Wants {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        Wants {
            resources_list: true,
            prompts_list: true,
            uris: all.get(who).cloned().unwrap_or_default(),
        }
    }
}

/// Where a stream hears news, and what of it.
pub(crate) struct Watch {
    /// What it hears: what its filter named, or (`None`) its caller's subscriptions of
    /// the moment (a handshake-era session's stream).
    pub wants: Option<Wants>,
    pub heard: broadcast::Receiver<News>,
    /// The listen request it answers, which tags each notification.
    pub subscription: Option<Value>,
}

impl Gateway {
    /// The acknowledgement of `subscriptions/listen` request `id` (saying what is
    /// honoured), whether it asked for tool list changes, the news it hears, if any, and
    /// the upstream subscriptions to wait for before acknowledging.
    pub(crate) fn listened(
        &self,
        id: &Value,
        params: &Value,
    ) -> (Vec<u8>, bool, Option<Wants>, Subscribing) {
        let filter = &params["notifications"];
        let tools = filter["toolsListChanged"] == true;
        let mut honoured = json!({"toolsListChanged": tools});
        let news = self
            .serves_news()
            .then(|| Wants::of_filter(filter))
            .filter(|w| *w != Wants::default());
        if let Some(w) = &news {
            honoured["resourcesListChanged"] = json!(w.resources_list);
            honoured["promptsListChanged"] = json!(w.prompts_list);
            honoured["resourceSubscriptions"] = json!(w.uris.iter().collect::<BTreeSet<_>>());
        }
        let subscribing = self.watch_upstream(news.as_ref().map(|w| &w.uris));
        let ack = json!({"_meta": {(META_SUBSCRIPTION_ID): id}, "notifications": honoured});
        let ack = protocol::notification("notifications/subscriptions/acknowledged", ack);
        (ack, tools, news, subscribing)
    }

    /// Records `caller`'s `resources/subscribe` (`on`) or unsubscribe of a served URI.
    pub(crate) fn subscribe(&self, who: &str, params: &Value, on: bool) {
        if let Some(uri) = params["uri"].as_str() {
            self.subscribed.set(who, uri, on);
        }
    }

    /// Asks the servers behind served `uris` to watch them for a listen stream (best
    /// effort, in each server's era: `Session::acknowledge`).
    fn watch_upstream(&self, uris: Option<&HashSet<String>>) -> Subscribing {
        // A served URI names its server (`edgar://SERVER/...` with `--expose all`); one
        // that names no configured server subscribes nothing.
        let uris = uris.into_iter().flatten();
        let mut under_way = Vec::new();
        for (server, uri) in uris.filter_map(|u| self.served(u)) {
            let session = self.session.clone();
            under_way.push(tokio::spawn(async move {
                let params = json!({"uri": uri});
                if let Err(e) = session
                    .acknowledge(&server, "resources/subscribe", params)
                    .await
                {
                    tracing::debug!(server, "no upstream subscription: {e}");
                }
            }));
        }
        Subscribing(under_way)
    }

    /// Passes servers' news to the one client of a stdio gateway, on `tx`: as a
    /// handshake-era client asked (if it greeted us), and on each of its listen
    /// streams.
    pub(crate) fn forward_news(
        self: &Arc<Self>,
        tx: mpsc::Sender<Vec<u8>>,
    ) -> tokio::task::JoinHandle<()> {
        let (me, mut heard) = (self.clone(), self.session.news());
        tokio::spawn(async move {
            loop {
                let news = match heard.recv().await {
                    Ok(n) => n,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                };
                let mut out = Vec::new();
                if me.initialized.load(Ordering::Relaxed) {
                    out.extend(me.told(&news, &me.subscribed.wants(""), None));
                }
                let watchers = me
                    .watchers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                for (id, wants) in &watchers {
                    out.extend(me.told(&news, wants, Some(id)));
                }
                for m in out {
                    if tx.send(m).await.is_err() {
                        return;
                    }
                }
            }
        })
    }

    /// What a stream of `who` watching `watch` hears of `news`, if anything.
    pub(crate) fn tell(&self, who: &str, watch: &Watch, news: &News) -> Option<Vec<u8>> {
        let wants = match &watch.wants {
            Some(w) => Cow::Borrowed(w),
            None => Cow::Owned(self.subscribed.wants(who)),
        };
        self.told(news, &wants, watch.subscription.as_ref())
    }

    /// Whether news is served at all: prompts and resources are, and not to a team.
    pub(crate) fn serves_news(&self) -> bool {
        self.expose_all && self.team.is_none()
    }

    /// The notification a client that `wants` these hears of `news` (on listen stream
    /// `subscription`, if one), if any.
    pub(crate) fn told(
        &self,
        news: &News,
        wants: &Wants,
        subscription: Option<&Value>,
    ) -> Option<Vec<u8>> {
        if !self.serves_news() {
            return None;
        }
        if let Exposure::Transparent(one) = &self.exposure
            && **one != *news.server
        {
            return None;
        }
        let mut params = match &news.change {
            Change::ResourceUpdated(uri) => {
                let served = self.served_uri(&news.server, uri);
                if !wants.uris.contains(&served) {
                    return None;
                }
                json!({"uri": served})
            }
            Change::ResourcesListChanged if wants.resources_list => json!({}),
            Change::PromptsListChanged if wants.prompts_list => json!({}),
            _ => return None,
        };
        if let Some(id) = subscription {
            params["_meta"] = json!({(META_SUBSCRIPTION_ID): id});
        }
        let method = match news.change {
            Change::ResourceUpdated(_) => "notifications/resources/updated",
            Change::ResourcesListChanged => "notifications/resources/list_changed",
            Change::PromptsListChanged => "notifications/prompts/list_changed",
        };
        Some(protocol::notification(method, params))
    }
}
