//! Passing upstream servers' news on to clients: a resource a client subscribed to
//! changed, a resource or prompt list changed (search-first, where only running
//! servers' are listed, a server starting changes both); only what a client asked to
//! hear (a team's user subscribes only to what the policy lets them read): a client of the handshake era
//! hears the list changes unasked and the updates of the URIs it subscribed to
//! (`resources/subscribe`, kept per caller); a `subscriptions/listen` stream hears what
//! its filter names (`promptsListChanged`, `resourcesListChanged`,
//! `resourceSubscriptions`), tagged with its subscription id. URIs are served ones:
//! the upstream's own in transparent mode, `edgar://server/...` otherwise.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Duration;

use super::{Caller, Exposure, Gateway, META_SUBSCRIPTION_ID, Reply};
use crate::mcp::news::{Change, News};
use crate::mcp::protocol::{self, INVALID_PARAMS};
use crate::sync::lock;
use crate::text::shown;

/// Most URIs one caller (or one listen stream) watches.
const MAX_WATCHED: usize = 256;

/// How long news waits after a server started for the starts that come with it, so a
/// client re-lists once for a search that started many servers, not once per server.
const SETTLE: Duration = Duration::from_millis(100);
/// Most pieces of news told together.
const MAX_GATHERED: usize = 256;

/// Longest a listen stream's acknowledgement waits for the upstream subscriptions it
/// names (as long as a server may take to start): one not in place by then is left out
/// of the acknowledgement, and subscribed behind it if it comes later.
const ACK_WAIT: Duration = Duration::from_secs(30);

/// A listen stream's acknowledgement, sent once the upstream subscriptions it names
/// are in place, so a client that acts on it misses no update (a lazily started server
/// takes a while to be subscribed); it lists only the URIs whose subscription is.
#[must_use]
pub(crate) struct Subscribing {
    /// The acknowledgement's params, every watched URI listed.
    ack: Value,
    /// Each subscription under way, by served URI: whether it took.
    under_way: Vec<(String, JoinHandle<bool>)>,
}

impl Subscribing {
    /// Waits for every subscription, at most [`ACK_WAIT`] in all: the acknowledgement,
    /// without the URIs whose subscription failed or is not in place yet.
    pub(crate) async fn done(self) -> Vec<u8> {
        let Subscribing { mut ack, under_way } = self;
        let deadline = tokio::time::Instant::now() + ACK_WAIT;
        let mut missing = HashSet::new();
        for (served, handle) in under_way {
            match tokio::time::timeout_at(deadline, handle).await {
                Ok(Ok(true)) => {}
                _ => {
                    missing.insert(served);
                }
            }
        }
        if let Some(listed) = ack["notifications"]["resourceSubscriptions"].as_array_mut() {
            listed.retain(|u| u.as_str().is_none_or(|u| !missing.contains(u)));
        }
        protocol::notification("notifications/subscriptions/acknowledged", ack)
    }
}

/// A `subscriptions/listen` request taken: see [`Gateway::listened`].
pub(crate) struct Listened {
    /// It asked for tool list changes.
    pub tools: bool,
    pub news: Option<Wants>,
    /// Its acknowledgement, once its upstream subscriptions are in place.
    pub subscribing: Subscribing,
    pub held: Held,
}

/// Upstream resource subscriptions, counted by holder (each caller that subscribed to a
/// URI, each listen stream naming it): a server is asked to watch a URI when its first
/// holder comes and to stop when its last goes.
#[derive(Default)]
pub(crate) struct Upstream(std::sync::Mutex<HashMap<(String, String), usize>>);

impl Upstream {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), usize>> {
        lock(&self.0)
    }

    /// Counts a holder of `server`'s `uri`; true for the first.
    fn hold(&self, server: &str, uri: &str) -> bool {
        let mut all = self.lock();
        let n = all.entry((server.to_owned(), uri.to_owned())).or_default();
        *n += 1;
        *n == 1
    }

    /// Lets a holder go; true for the last.
    fn release(&self, server: &str, uri: &str) -> bool {
        let mut all = self.lock();
        let key = (server.to_owned(), uri.to_owned());
        match all.get_mut(&key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                all.remove(&key);
                true
            }
            None => false,
        }
    }

    /// How many URIs are watched upstream.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// A listen stream's hold on the upstream subscriptions it named: let go when the
/// stream ends (dropped), unsubscribing each server it was the last holder of.
pub(crate) struct Held {
    session: Arc<crate::mcp::client::Session>,
    upstream: Arc<Upstream>,
    uris: Vec<Holding>,
}

/// One URI a listen stream holds at its server. Its count is let go once: by the
/// stream's end, or before that by its subscription failing (whichever takes `live`).
struct Holding {
    server: String,
    uri: String,
    live: Arc<AtomicBool>,
}

impl Holding {
    /// Lets the hold go unless it is gone already; true if it was the last holder.
    fn release(&self, upstream: &Upstream) -> bool {
        self.live.swap(false, Ordering::AcqRel) && upstream.release(&self.server, &self.uri)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let last: Vec<_> = std::mem::take(&mut self.uris)
            .into_iter()
            .filter(|h| h.release(&self.upstream))
            .collect();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if last.is_empty() {
            return;
        }
        let session = self.session.clone();
        runtime.spawn(async move {
            for Holding { server, uri, .. } in last {
                let params = json!({"uri": uri});
                if let Err(e) = session
                    .acknowledge(&server, "resources/unsubscribe", params)
                    .await
                {
                    tracing::debug!(server, "the upstream subscription stays: {e}");
                }
            }
        });
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
    /// Records a `resources/subscribe` (or, with `on` false, an unsubscribe); whether
    /// it changed anything (not for a URI already subscribed, or one past the cap).
    pub(crate) fn set(&self, who: &str, uri: &str, on: bool) -> bool {
        let mut all = lock(&self.0);
        let mine = all.entry(who.to_owned()).or_default();
        if !on {
            mine.remove(uri)
        } else if mine.len() < MAX_WATCHED {
            mine.insert(uri.to_owned())
        } else {
            false
        }
    }

    /// What a handshake-era client of `who` hears: both lists, and its URIs.
    pub(crate) fn wants(&self, who: &str) -> Wants {
        let all = lock(&self.0);
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
    pub(crate) fn listened(&self, caller: &Caller, id: &Value, params: &Value) -> Listened {
        let filter = &params["notifications"];
        let tools = filter["toolsListChanged"] == true;
        let mut honoured = json!({"toolsListChanged": tools});
        let mut news = Some(Wants::of_filter(filter)).filter(|w| *w != Wants::default());
        // Only URIs whose server this caller may read, and which a shared process
        // serves (a per-user one's updates reach no stream), are watched.
        let (under_way, held) = match news.as_mut() {
            Some(w) => {
                w.uris.retain(|u| self.watchable(caller, u).is_some());
                self.watch_upstream(&w.uris)
            }
            None => (Vec::new(), self.held(Vec::new())),
        };
        if let Some(w) = &news {
            honoured["resourcesListChanged"] = json!(w.resources_list);
            honoured["promptsListChanged"] = json!(w.prompts_list);
            honoured["resourceSubscriptions"] = json!(w.uris.iter().collect::<BTreeSet<_>>());
        }
        let ack = json!({"_meta": {(META_SUBSCRIPTION_ID): id}, "notifications": honoured});
        Listened {
            tools,
            news,
            subscribing: Subscribing { ack, under_way },
            held,
        }
    }

    /// The server and its own URI behind served `uri`, if `caller` may watch it.
    fn watchable(&self, caller: &Caller, uri: &str) -> Option<(String, String)> {
        let (server, own) = self.served(uri)?;
        let route = json!({"uri": own});
        self.check_passed_on(caller, &server, "resources/subscribe", &route)
            .ok()?;
        Some((server, own))
    }

    /// `caller`'s `resources/subscribe` (`on`) or `resources/unsubscribe` of a served
    /// URI: recorded for the caller, and passed to the server only when the caller is
    /// its first holder (or its last, to unsubscribe), so one client's unsubscribe
    /// never ends another's updates.
    pub(super) async fn subscription(&self, caller: &Caller, params: &Value, on: bool) -> Reply {
        let asked = params["uri"].as_str().unwrap_or("");
        let Some((server, own)) = self.served(asked) else {
            return Err((INVALID_PARAMS, format!("no resource at {}", shown(asked))).into());
        };
        let method = if on {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        self.check_passed_on(caller, &server, method, &json!({"uri": own}))?;
        if !self.subscribed.set(caller.key(), asked, on) {
            return Ok(json!({}));
        }
        let upstream = if on {
            self.upstream.hold(&server, &own)
        } else {
            self.upstream.release(&server, &own)
        };
        if upstream
            && let Err(e) = self
                .session
                .acknowledge(&server, method, json!({"uri": own}))
                .await
        {
            // Not in place: as if it had not been asked.
            if on {
                self.subscribed.set(caller.key(), asked, false);
                self.upstream.release(&server, &own);
            }
            return Err(super::content::upstream(e));
        }
        Ok(json!({}))
    }

    /// Asks the servers behind served `uris` to watch them for a listen stream (in each
    /// server's era: `Session::acknowledge`), where no one else has them watched
    /// already: each subscription under way, by served URI, and the hold kept until the
    /// stream ends. A subscription that fails lets its hold go at once, so the next
    /// holder asks the server again.
    fn watch_upstream(&self, uris: &HashSet<String>) -> (Vec<(String, JoinHandle<bool>)>, Held) {
        // A served URI names its server (`edgar://SERVER/...` with `--expose all`); one
        // that names no configured server subscribes nothing.
        let mut under_way = Vec::new();
        let mut held = Vec::new();
        for (served, (server, uri)) in uris.iter().filter_map(|u| Some((u, self.served(u)?))) {
            let live = Arc::new(AtomicBool::new(true));
            if self.upstream.hold(&server, &uri) {
                let (session, upstream) = (self.session.clone(), self.upstream.clone());
                let hold = Holding {
                    server: server.clone(),
                    uri: uri.clone(),
                    live: live.clone(),
                };
                let subscribed = tokio::spawn(async move {
                    let params = json!({"uri": hold.uri});
                    let asked = session.acknowledge(&hold.server, "resources/subscribe", params);
                    match asked.await {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::debug!(server = hold.server, "no upstream subscription: {e}");
                            hold.release(&upstream);
                            false
                        }
                    }
                });
                under_way.push((served.clone(), subscribed));
            }
            held.push(Holding { server, uri, live });
        }
        (under_way, self.held(held))
    }

    fn held(&self, uris: Vec<Holding>) -> Held {
        Held {
            session: self.session.clone(),
            upstream: self.upstream.clone(),
            uris,
        }
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
                    Ok(n) => gathered(&mut heard, n).await,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                };
                let mut out = Vec::new();
                let watchers = me
                    .watchers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                for news in &news {
                    if me.initialized.load(Ordering::Relaxed) {
                        out.extend(me.told(news, &me.subscribed.wants(""), None));
                    }
                    for (id, wants) in &watchers {
                        out.extend(me.told(news, wants, Some(id)));
                    }
                }
                for m in once_each(out) {
                    if tx.send(m).await.is_err() {
                        return;
                    }
                }
            }
        })
    }

    /// What a stream of `who` watching `watch` hears of `news`, each notification once.
    pub(crate) fn tell(&self, who: &str, watch: &Watch, news: &[News]) -> Vec<Vec<u8>> {
        let wants = match &watch.wants {
            Some(w) => Cow::Borrowed(w),
            None => Cow::Owned(self.subscribed.wants(who)),
        };
        let told = news
            .iter()
            .flat_map(|n| self.told(n, &wants, watch.subscription.as_ref()));
        once_each(told.collect())
    }

    /// The notifications a client that `wants` these hears of `news` (on listen stream
    /// `subscription`, if one). A server that started changes both lists where only
    /// running servers' are served (search-first).
    pub(crate) fn told(
        &self,
        news: &News,
        wants: &Wants,
        subscription: Option<&Value>,
    ) -> Vec<Vec<u8>> {
        if let Exposure::Transparent(one) = &self.exposure
            && **one != *news.server
        {
            return Vec::new();
        }
        let tagged = |method: &str, mut params: Value| {
            if let Some(id) = subscription {
                params["_meta"] = json!({(META_SUBSCRIPTION_ID): id});
            }
            protocol::notification(method, params)
        };
        const RESOURCES: &str = "notifications/resources/list_changed";
        const PROMPTS: &str = "notifications/prompts/list_changed";
        let mut out = Vec::new();
        match &news.change {
            Change::ResourceUpdated(uri) => {
                let served = self.served_uri(&news.server, uri);
                if wants.uris.contains(&served) {
                    out.push(tagged(
                        "notifications/resources/updated",
                        json!({"uri": served}),
                    ));
                }
            }
            Change::ResourcesListChanged if wants.resources_list => {
                out.push(tagged(RESOURCES, json!({})));
            }
            Change::PromptsListChanged if wants.prompts_list => {
                out.push(tagged(PROMPTS, json!({})));
            }
            Change::Started if self.exposure == Exposure::Search => {
                if wants.prompts_list {
                    out.push(tagged(PROMPTS, json!({})));
                }
                if wants.resources_list {
                    out.push(tagged(RESOURCES, json!({})));
                }
            }
            _ => {}
        }
        out
    }
}

/// `first` and what is heard with it: after a server started, what comes within
/// [`SETTLE`] (servers discovered together start together, and each start changes the
/// same two lists); otherwise what is already queued.
pub(crate) async fn gathered(heard: &mut broadcast::Receiver<News>, first: News) -> Vec<News> {
    if first.change == Change::Started {
        tokio::time::sleep(SETTLE).await;
    }
    let mut all = vec![first];
    while all.len() < MAX_GATHERED {
        match heard.try_recv() {
            Ok(n) => all.push(n),
            Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => break,
        }
    }
    all
}

/// The notifications in order, each told once (a list changed once is enough).
fn once_each(messages: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut seen = HashSet::new();
    messages
        .into_iter()
        .filter(|m| seen.insert(m.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::client::{Session, SessionOptions};
    use crate::tools::search_tool::ToolSearch;

    fn gateway(exposure: Exposure) -> Arc<Gateway> {
        let opts = SessionOptions::new(std::env::temp_dir(), None);
        let session = Arc::new(Session::new(&crate::config::Config::default(), opts));
        Gateway::new(session, ToolSearch::new(1000), exposure)
    }

    fn methods(told: &[Vec<u8>]) -> Vec<String> {
        told.iter()
            .map(|m| {
                let v: Value = serde_json::from_slice(m).unwrap_or_else(|e| panic!("{e}"));
                v["method"].as_str().unwrap_or_default().to_owned()
            })
            .collect()
    }

    #[test]
    fn a_started_server_changes_both_lists_only_where_running_servers_are_listed() {
        let started = News {
            server: "s".into(),
            change: Change::Started,
        };
        let both = Wants {
            resources_list: true,
            prompts_list: true,
            uris: HashSet::new(),
        };
        let search = gateway(Exposure::Search);
        assert_eq!(
            methods(&search.told(&started, &both, None)),
            [
                "notifications/prompts/list_changed",
                "notifications/resources/list_changed"
            ]
        );
        let prompts_only = Wants {
            resources_list: false,
            ..both.clone()
        };
        assert_eq!(
            methods(&search.told(&started, &prompts_only, None)),
            ["notifications/prompts/list_changed"]
        );
        // With every server listed (or one), a start changes no list.
        for exposure in [Exposure::All, Exposure::Transparent("s".into())] {
            assert!(gateway(exposure).told(&started, &both, None).is_empty());
        }
    }

    #[test]
    fn news_heard_together_is_told_once() {
        let watch = |tx: &broadcast::Sender<News>| Watch {
            wants: None,
            heard: tx.subscribe(),
            subscription: None,
        };
        let (tx, _) = broadcast::channel(16);
        let search = gateway(Exposure::Search);
        let mut w = watch(&tx);
        let start = |s: &str| News {
            server: s.into(),
            change: Change::Started,
        };
        for s in ["b", "c"] {
            let _ = tx.send(start(s));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let all = rt.block_on(gathered(&mut w.heard, start("a")));
        assert_eq!(all.len(), 3);
        let told = search.tell("", &w, &all);
        assert_eq!(
            methods(&told),
            [
                "notifications/prompts/list_changed",
                "notifications/resources/list_changed"
            ]
        );
    }

    #[test]
    fn an_upstream_subscription_lasts_from_its_first_holder_to_its_last() {
        let up = Arc::new(Upstream::default());
        assert!(up.hold("s", "a"), "the first holder subscribes");
        assert!(!up.hold("s", "a"), "a second does not");
        assert!(up.hold("t", "a"), "another server's URI is its own");
        assert!(!up.release("s", "a"), "one holder is left");
        assert!(up.release("s", "a"), "the last unsubscribes");
        assert!(!up.release("s", "a"), "nothing is held any more");
        assert_eq!(up.len(), 1);
        // A listen stream lets go of what it held when it ends, even with no runtime
        // to tell the server in (a gateway shutting down).
        let search = gateway(Exposure::Search);
        assert!(search.upstream.hold("s", "b"));
        let held = Held {
            session: search.session.clone(),
            upstream: search.upstream.clone(),
            uris: vec![Holding {
                server: "s".into(),
                uri: "b".into(),
                live: Arc::new(AtomicBool::new(true)),
            }],
        };
        drop(held);
        assert_eq!(search.upstream.len(), 0);
    }

    /// A subscription the server did not take is not acknowledged, and its hold is let
    /// go at once: the next listen stream asks the server again.
    #[test]
    fn an_acknowledgement_lists_only_the_subscriptions_in_place() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let _in = rt.enter();
        // The one server it serves is not configured: every subscription fails.
        let gone = gateway(Exposure::Transparent("gone".into()));
        let params = json!({"notifications": {"resourceSubscriptions": ["file:///a"]}});
        for id in [1, 2] {
            let listened = gone.listened(&Caller::Local, &json!(id), &params);
            assert_eq!(listened.subscribing.under_way.len(), 1, "asked again");
            let ack = rt.block_on(listened.subscribing.done());
            let ack: Value = serde_json::from_slice(&ack).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
            assert_eq!(
                ack["params"]["notifications"]["resourceSubscriptions"],
                json!([]),
                "{ack}"
            );
            assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], id);
            assert_eq!(gone.upstream.len(), 0, "its hold is let go");
            // The stream's end lets go of nothing more.
            drop(listened.held);
            assert_eq!(gone.upstream.len(), 0);
        }
    }

    #[test]
    fn a_caller_subscribes_to_a_uri_once() {
        let subscribed = Subscribed::default();
        assert!(subscribed.set("ada", "u", true));
        assert!(!subscribed.set("ada", "u", true));
        assert!(subscribed.set("bob", "u", true));
        assert!(subscribed.set("ada", "u", false));
        assert!(!subscribed.set("ada", "u", false));
        for i in 1..MAX_WATCHED {
            subscribed.set("bob", &format!("u{i}"), true);
        }
        assert!(!subscribed.set("bob", "one too many", true));
    }
}
