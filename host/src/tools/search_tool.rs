//! `ToolSearch`: the built-in `tool_search` tool as a session sees it. It ranks the
//! catalog (cached schemas; servers without a cache entry are discovered, concurrently,
//! each under its own deadline), returns schemas best first while they fit in the
//! reserve (one that does not is named and skipped), says so in the `FOUND` text, and remembers what was found: those
//! tools are directly callable for the rest of the session.
//!
//! While no server runs, the index of the cached catalog is loaded from its file
//! ([`search::store`]) instead of rebuilt; a complete catalog's index is written there.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Value, json};

use crate::guard::{Dropped, Provider, SanitizedTool};
use crate::mcp::client::Session;
use crate::sync::lock;
use crate::tools::search::{self, MAX_MATCHES, SearchIndex, semantic, store};

/// The built-in tool's name (no server tool may take it).
pub const TOOL_SEARCH: &str = "tool_search";

/// The built-in tool's definition, always in the prompt with its full schema.
pub fn definition() -> Value {
    json!({
        "name": TOOL_SEARCH,
        "description": "Find tools by what they do. The tools listed by name only have no schema yet: \
            describe the task in plain words (for example \"create a GitHub issue\" or \"read a PDF\"), or give a \
            tool's exact name. Matching tools' schemas are returned and those tools become callable.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What the tool should do, or a tool's name"}},
            "required": ["query"]
        }
    })
}

/// What one search returns: the `FOUND` text, the schemas, and the names that matched
/// but did not fit.
#[derive(Debug, Clone, Serialize)]
pub struct SearchReply {
    pub query: String,
    /// The text the model reads first.
    pub found: String,
    pub tools: Vec<Returned>,
    /// Names that matched but did not fit in the reserve, best first.
    pub not_fitted: Vec<String>,
    /// One line per server that could not be searched.
    pub unavailable: Vec<String>,
    pub reserve: usize,
}

/// A returned tool, with its schema.
#[derive(Debug, Clone, Serialize)]
pub struct Returned {
    pub name: String,
    pub server: String,
    pub tool: String,
    pub score: f32,
    /// The accepted schema's tokens (what the reserve counts).
    pub tokens: usize,
    pub schema: Value,
    /// Set when the schema was lowered for a provider: what was lost, or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lowering: Option<Lowering>,
}

/// How a returned schema was lowered for a provider.
#[derive(Debug, Clone, Serialize)]
pub struct Lowering {
    pub provider: Provider,
    /// The rules the schema meets (`generic` from an adapter without provider profiles).
    pub profile: Provider,
    pub losses: Vec<Dropped>,
    /// Why the schema could not be lowered; the accepted schema is returned instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SearchReply {
    /// The reply as the model receives it: the `FOUND` text, then one schema per line.
    pub fn text(&self) -> String {
        let mut out = self.found.clone();
        for t in &self.tools {
            out.push('\n');
            out.push_str(&t.schema.to_string());
        }
        out
    }
}

/// Whose search it is: the user whose found tools it grows ("" for the one local user),
/// the tools they may see, and whether they may read which servers could not be
/// searched and why (a team's users may not: names and failures are the gateway's).
pub struct Scope<'a> {
    pub user: &'a str,
    pub allowed: &'a (dyn Fn(&SanitizedTool) -> bool + Sync),
    pub failures_shown: bool,
}

/// The session's search state: the index (rebuilt only when the catalog changes) and
/// the tools found so far.
pub struct ToolSearch {
    reserve: usize,
    state: Mutex<State>,
    /// Hears how many tools are about to be embedded (a CLI shows it; first search only).
    progress: Arc<dyn Fn(usize) + Send + Sync>,
    /// "Not searched" lines already logged for a search that may not show them.
    told: Mutex<HashSet<String>>,
}

#[derive(Default)]
struct State {
    index: Option<(u64, Arc<SearchIndex>, Vec<String>)>,
    /// What each user's searches found; the index is shared.
    found: Found,
}

/// Users whose found tools are kept at once (a team gateway's memory stays bounded
/// however many users come and go).
const MAX_FOUND_USERS: usize = 1024;

/// What each user's searches found, by user ("" for the one local user). Past
/// [`MAX_FOUND_USERS`] the user who searched least recently is forgotten (their tools
/// are callable again after their next search); the local user never is.
#[derive(Default)]
struct Found {
    by_user: HashMap<String, (u64, BTreeMap<String, SanitizedTool>)>,
    tick: u64,
}

impl Found {
    fn get(&self, user: &str) -> Option<&BTreeMap<String, SanitizedTool>> {
        self.by_user.get(user).map(|(_, f)| f)
    }

    /// `user`'s found tools, to grow with a search (which makes them the most recent).
    fn for_search(&mut self, user: &str) -> &mut BTreeMap<String, SanitizedTool> {
        self.tick += 1;
        if !self.by_user.contains_key(user) && self.by_user.len() >= MAX_FOUND_USERS {
            let oldest = self
                .by_user
                .iter()
                .filter(|(u, _)| !u.is_empty())
                .min_by_key(|(_, (tick, _))| *tick)
                .map(|(u, _)| u.clone());
            if let Some(u) = oldest {
                self.by_user.remove(&u);
            }
        }
        let entry = self.by_user.entry(user.to_owned()).or_default();
        entry.0 = self.tick;
        &mut entry.1
    }
}

impl ToolSearch {
    /// A search that returns at most `reserve` tokens of schema per call.
    pub fn new(reserve: usize) -> ToolSearch {
        ToolSearch {
            reserve,
            state: Mutex::new(State::default()),
            progress: Arc::new(|_| {}),
            told: Mutex::default(),
        }
    }

    /// Calls `progress` with the number of tools to embed before an index build embeds
    /// any (only tools not in the vector cache are embedded).
    pub fn on_embedding(mut self, progress: impl Fn(usize) + Send + Sync + 'static) -> ToolSearch {
        self.progress = Arc::new(progress);
        self
    }

    /// Why the semantic stage is off, when it is (said once by whoever shows it).
    pub fn semantic_off() -> Option<String> {
        semantic::off()
    }

    /// Replaces each returned schema with its lowering for `provider`, by each tool's
    /// server's adapter. A tool whose lowering fails keeps its accepted schema and says
    /// why. Calls are still validated with the accepted schema.
    pub async fn lower(&self, session: &Session, reply: &mut SearchReply, provider: Provider) {
        for r in &mut reply.tools {
            let found = self
                .lock()
                .found
                .get("")
                .and_then(|f| f.get(&r.name).cloned());
            let Some(tool) = found else {
                continue;
            };
            let lowering = match session.lower(&tool, provider).await {
                Ok(l) => {
                    r.schema["input_schema"] = l.input_schema().clone();
                    Lowering {
                        provider,
                        profile: l.profile(),
                        losses: l.losses().to_vec(),
                        error: None,
                    }
                }
                Err(e) => Lowering {
                    provider,
                    profile: Provider::Generic,
                    losses: Vec::new(),
                    error: Some(e.to_string()),
                },
            };
            r.lowering = Some(lowering);
        }
    }

    /// Adds `tools` to what `user` found (their searches on another replica found them).
    pub fn remember(&self, user: &str, tools: Vec<SanitizedTool>) {
        let mut state = self.lock();
        let found = state.found.for_search(user);
        for t in tools {
            found.insert(t.name().to_owned(), t);
        }
    }

    /// Tools found in this session, callable by name, with their schemas.
    pub fn found(&self) -> Vec<SanitizedTool> {
        self.found_by("")
    }

    /// Tools `user`'s searches found.
    pub fn found_by(&self, user: &str) -> Vec<SanitizedTool> {
        self.lock()
            .found
            .get(user)
            .map(|f| f.values().cloned().collect())
            .unwrap_or_default()
    }

    /// How many tools `user`'s searches found.
    pub fn found_count(&self, user: &str) -> usize {
        self.lock().found.get(user).map_or(0, BTreeMap::len)
    }

    /// Whether `user`'s searches found a tool named `name` (nothing is cloned).
    pub fn has_found(&self, user: &str, name: &str) -> bool {
        self.lock()
            .found
            .get(user)
            .is_some_and(|f| f.contains_key(name))
    }

    /// The tool `user`'s searches found under `name`, if any.
    pub fn found_tool(&self, user: &str, name: &str) -> Option<SanitizedTool> {
        self.lock().found.get(user)?.get(name).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The index for the session's current catalog, building it if the catalog changed.
    async fn index(&self, session: &Session) -> (Arc<SearchIndex>, Vec<String>) {
        let generation = session.generation();
        if let Some((g, index, unavailable)) = &self.lock().index
            && *g == generation
        {
            return (index.clone(), unavailable.clone());
        }
        let before = session.generation();
        // The index kept for the chosen encoder is read while the encoder loads (the
        // first time on a machine the bundled one expands and keeps its weights), both
        // off the async threads; the encoder's own id decides which index is right.
        let chosen = semantic::chosen_id();
        let read = |model: &'static str| {
            let kept = session.search_index(model);
            tokio::task::spawn_blocking(move || {
                kept.and_then(|(path, key)| store::load(&path, &key))
            })
        };
        let early = read(chosen);
        let model = tokio::task::spawn_blocking(|| match semantic::encoder() {
            Ok(loaded) => loaded.id,
            Err(_) => semantic::WORDS_ID,
        })
        .await
        .unwrap_or(semantic::WORDS_ID);
        let kept = if model == chosen {
            early.await
        } else {
            read(model).await
        };
        if let Ok(Some(index)) = kept {
            tracing::debug!(tools = index.len(), "search index loaded from its file");
            let index = Arc::new(index);
            self.lock().index = Some((before, index.clone(), Vec::new()));
            return (index, Vec::new());
        }
        let catalog = session.catalog_within(session.prompt_budget()).await;
        let pending = !catalog.pending.is_empty();
        let mut unavailable: Vec<String> = catalog
            .failures
            .iter()
            .map(|e| crate::text::shown_message(&e.to_string()))
            .collect();
        if let Some(line) = crate::tools::pending_line(&catalog.pending) {
            unavailable.push(line);
        }
        let tools = catalog.tools;
        let progress = self.progress.clone();
        // Only a whole catalog read from the cache is kept: nothing failed, nothing is
        // still starting, no server running.
        let keep = (unavailable.is_empty() && !pending)
            .then(|| session.search_index(model))
            .flatten();
        let cache = session.cache().clone();
        let index = match tokio::task::spawn_blocking(move || {
            let index = build(tools, &*progress);
            if let Some((path, key)) = keep {
                match store::write(&index, &path, &key) {
                    Ok(()) => {
                        tracing::debug!(tools = index.len(), "search index kept in its file");
                        cache.prune_search_indexes();
                    }
                    Err(e) => tracing::warn!("cannot keep the search index: {e}"),
                }
            }
            index
        })
        .await
        {
            Ok(i) => Arc::new(i),
            Err(_) => Arc::new(SearchIndex::new(Vec::new())),
        };
        // Discovery bumps the generation; store the one after it, which describes this
        // catalog, unless servers are still starting: then the one before, so the index
        // is rebuilt once any of them is ready.
        let generation = if pending {
            before
        } else {
            session.generation()
        };
        self.lock().index = Some((generation, index.clone(), unavailable.clone()));
        (index, unavailable)
    }

    /// Runs one search.
    pub async fn search(&self, session: &Session, query: &str) -> SearchReply {
        let everything = Scope {
            user: "",
            allowed: &|_| true,
            failures_shown: true,
        };
        self.search_for(session, query, &everything).await
    }

    /// Runs one search as `scope` says: among the tools it admits, growing its user's
    /// found tools only.
    pub async fn search_for(
        &self,
        session: &Session,
        query: &str,
        scope: &Scope<'_>,
    ) -> SearchReply {
        let (user, allowed) = (scope.user, scope.allowed);
        // Nothing to look for: no server is started and nothing is embedded for it.
        if query.trim().is_empty() {
            let found = found_text("", query, &[], &[], &[], 0, self.reserve);
            return SearchReply {
                query: query.to_owned(),
                found,
                tools: Vec::new(),
                not_fitted: Vec::new(),
                unavailable: Vec::new(),
                reserve: self.reserve,
            };
        }
        // The query is embedded (the encoder loaded first, once per process) on a
        // blocking thread while the catalog's index is made ready here: on two cores
        // the one waits for the other no longer than the longer of the two.
        let q = query.to_owned();
        let embedding = tokio::task::spawn_blocking(move || {
            let loaded = semantic::encoder().as_ref().ok()?;
            let vectors = loaded.encoder.embed(&[q.as_str()], semantic::QUERY_TOKENS);
            vectors.ok().and_then(|mut v| v.pop())
        });
        let (index, unavailable) = self.index(session).await;
        let unavailable = if scope.failures_shown || unavailable.is_empty() {
            unavailable
        } else {
            // Said once each in the gateway's log, where its administrator reads it.
            let mut told = lock(&self.told);
            for u in &unavailable {
                if told.insert(u.clone()) {
                    tracing::warn!("not searched (the user is not told which or why): {u}");
                }
            }
            vec![format!(
                "{} of the gateway's servers could not be searched now; its log says which and why.",
                unavailable.len()
            )]
        };
        let query_shown = crate::text::shown(query);
        let query_vector = if index.has_vectors() {
            embedding.await.ok().flatten()
        } else {
            None
        };
        let admitted = |limit: usize| -> (Vec<(usize, f32)>, bool) {
            let ranked = index.rank_with(query, query_vector.as_deref(), limit);
            let all = ranked.len();
            let kept: Vec<(usize, f32)> = ranked
                .into_iter()
                .filter(|&(i, _)| index.tool(i).is_some_and(allowed))
                .collect();
            let hidden = kept.len() < all;
            (kept, hidden)
        };
        // A policy that hides some of the best matches: rank the whole catalog instead,
        // so the user still gets the best of what they may see.
        let mut ranked = match admitted(MAX_MATCHES) {
            (_, true) => admitted(index.len()).0,
            (kept, false) => kept,
        };
        ranked.truncate(MAX_MATCHES);
        let mut tools = Vec::new();
        let mut not_fitted = Vec::new();
        let mut used = 0usize;
        for &(i, score) in &ranked {
            let Some(t) = index.tool(i) else { continue };
            let tokens = index.schema_tokens(i);
            // A schema too large for what is left is named, not returned, and the
            // next ones are still tried: one large tool does not crowd out the rest.
            if used + tokens <= self.reserve {
                used += tokens;
                tools.push(Returned {
                    name: t.name().into(),
                    server: t.server().into(),
                    tool: t.tool().into(),
                    score,
                    tokens,
                    schema: search::schema_json(t),
                    lowering: None,
                });
            } else {
                not_fitted.push(format!("{} ({tokens} tokens)", t.name()));
            }
        }
        {
            let mut state = self.lock();
            let found = state.found.for_search(user);
            for &(i, _) in &ranked {
                if let Some(t) = index.tool(i)
                    && tools.iter().any(|r| r.name == t.name())
                {
                    found.insert(t.name().to_owned(), t.clone());
                }
            }
        }
        let found = found_text(
            &query_shown,
            query,
            &tools,
            &not_fitted,
            &unavailable,
            index.len(),
            self.reserve,
        );
        SearchReply {
            query: query.to_owned(),
            found,
            tools,
            not_fitted,
            unavailable,
            reserve: self.reserve,
        }
    }
}

/// The lexical index over `tools`, with their semantic vectors when an encoder is in use
/// (from the vector cache, embedding only tools it lacks). An encoder that fails leaves
/// the index lexical, said once in the log.
fn build(tools: Vec<SanitizedTool>, progress: &dyn Fn(usize)) -> SearchIndex {
    let vectors = match semantic::encoder() {
        Ok(loaded) => match semantic::tool_vectors(loaded, &tools, progress) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("semantic search is off for this catalog: {e}");
                None
            }
        },
        Err(_) => None,
    };
    let index = SearchIndex::new(tools);
    match vectors {
        Some(v) => index.with_vectors(v),
        None => index,
    }
}

/// The `FOUND` text: what matched, that the schemas follow and the tools are now
/// callable, what did not fit, and which servers could not be searched.
fn found_text(
    shown: &str,
    query: &str,
    tools: &[Returned],
    not_fitted: &[String],
    unavailable: &[String],
    catalog: usize,
    reserve: usize,
) -> String {
    let mut out = String::new();
    let matched = tools.len() + not_fitted.len();
    if query.trim().is_empty() {
        out.push_str("The query is empty. Describe what the tool should do, for example \"send a Slack message\", or give a tool's exact name.");
    } else if catalog == 0 {
        out.push_str("No tools are available to search: no MCP server provided any.");
    } else if matched == 0 {
        out.push_str(&format!(
            "No tool matches {shown}. Rephrase with the action and the thing acted on (for example \"delete a file\", \"list calendar events\"), or name the service (github, slack, postgres)."
        ));
    } else if tools.is_empty() {
        out.push_str(&format!(
            "{matched} tools match {shown}, but none fits in this search's budget of {reserve} tokens: {}. Search again more narrowly, for example by one tool's exact name.",
            not_fitted.join(", ")
        ));
    } else {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let plural = if matched == 1 { "" } else { "s" };
        if tools.len() == 1 {
            out.push_str(&format!(
                "Found {matched} tool{plural} matching {shown}. The schema of the best match follows; it is now callable directly by name: {}.",
                names[0]
            ));
        } else {
            out.push_str(&format!(
                "Found {matched} tool{plural} matching {shown}. The schemas of these {} follow, best match first; they are now callable directly by name: {}.",
                tools.len(),
                names.join(", ")
            ));
        }
        if !not_fitted.is_empty() {
            out.push_str(&format!(
                " {} more matched but did not fit in this search's budget of {reserve} tokens: {}. Search again by name to get one of them.",
                not_fitted.len(),
                not_fitted.join(", ")
            ));
        }
    }
    for u in unavailable {
        out.push_str(&format!("\nNot searched: {u}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_tools_are_kept_for_the_most_recent_users_and_always_the_local_one() {
        let mut found = Found::default();
        found.for_search("");
        for i in 0..MAX_FOUND_USERS + 10 {
            found.for_search(&format!("user-{i}"));
            if i == MAX_FOUND_USERS / 2 {
                // An early user who searches again stays.
                found.for_search("user-0");
            }
        }
        assert_eq!(found.by_user.len(), MAX_FOUND_USERS);
        assert!(found.get("").is_some());
        assert!(found.get("user-0").is_some());
        assert!(found.get("user-1").is_none());
        assert!(
            found
                .get(&format!("user-{}", MAX_FOUND_USERS + 9))
                .is_some()
        );
    }
}
