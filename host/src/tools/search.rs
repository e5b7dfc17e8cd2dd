//! `tool_search`: the built-in tool the model calls to find tools by what they do. The
//! prompt carries tool names only; a search returns the best matches' schemas, best
//! first, up to [`RESERVE`] tokens, and from then on those tools are callable.
//!
//! Ranking is BM25F over a tool's name (identifier words), title, server, description
//! and parameters, with stemming and query-side synonyms; an exact tool name in the
//! query puts that tool first. Ranking does no I/O; [`store`] keeps a built index on
//! disk so a warm process loads it instead of rebuilding it.

pub mod model;
pub mod postings;
pub mod semantic;
pub mod store;
pub mod text;
pub mod wordpiece;

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Serialize;
use serde_json::Value;

use self::postings::Postings;
use crate::guard::SanitizedTool;
use crate::guard::ToolName;
use crate::tools::tokens;

/// The default most tokens of schema one search may return.
pub const RESERVE: usize = 3000;
/// The most tools one search considers (returned or named).
pub const MAX_MATCHES: usize = 10;
/// Matches scoring below this fraction of the best are not reported.
const MIN_RELATIVE_SCORE: f32 = 0.25;
/// Longest query read; the rest is ignored (a model's query is a sentence).
pub const MAX_QUERY_BYTES: usize = 1000;

/// BM25 saturation.
const K1: f32 = 1.2;
/// Weight of a synonym relative to the word the query used: high in a tool's name (its
/// verb and object are what a person paraphrases), low elsewhere.
const SYNONYM_IN_NAME: f32 = 0.8;
const SYNONYM_ELSEWHERE: f32 = 0.3;
/// How much matching all of the query's words counts over matching one.
const COORDINATION: f32 = 0.5;
/// Reciprocal rank fusion's constant (the usual 60): how little rank 1 outweighs rank 10.
const RRF_K: f32 = 60.0;
/// How deep each ranking goes into the fusion.
const FUSION_DEPTH: usize = 50;
/// Cosine below which a tool is not semantically related to the query at all.
const MIN_SIMILARITY: f32 = 0.2;
/// Multiplier for tools of a server the query names.
const SERVER_BOOST: f32 = 1.5;

/// One indexed field: its weight and its length normalization.
struct Field {
    weight: f32,
    b: f32,
}

const NAME: Field = Field {
    weight: 3.0,
    b: 0.3,
};
const TITLE: Field = Field {
    weight: 1.5,
    b: 0.3,
};
const SERVER: Field = Field {
    weight: 1.0,
    b: 0.0,
};
const DESCRIPTION: Field = Field {
    weight: 1.0,
    b: 0.75,
};
const PARAMS: Field = Field {
    weight: 0.6,
    b: 0.75,
};
const FIELDS: [Field; 5] = [NAME, TITLE, SERVER, DESCRIPTION, PARAMS];

/// An index over a catalog of sanitized tools, built once per catalog (or loaded from
/// [`store`]).
pub struct SearchIndex {
    /// Each tool's names, in index order: all that ranking needs.
    names: Vec<ToolName>,
    /// The tools themselves, read only for the ones a search returns.
    bodies: Bodies,
    /// term -> (tool, BM25F-weighted frequency in the name, and in the other fields)
    postings: Postings,
    /// Lower-cased model name -> tool (`server/tool` and `server__tool` are looked up
    /// through `by_tool` when a query has them).
    exact: HashMap<String, u32>,
    /// Lower-cased server's own tool name -> tools of that name (several servers share some).
    by_tool: HashMap<String, Vec<u32>>,
    /// Lower-cased server-name words -> tools of that server.
    servers: HashMap<String, Vec<u32>>,
    /// Schema tokens, counted on first use.
    tokens: Vec<OnceLock<usize>>,
    /// The tools' semantic vectors, [`model::DIM`] floats each, when the model ran.
    vectors: Option<Vectors>,
}

/// The tools' semantic vectors: computed here, or used in place in a mapped index file.
enum Vectors {
    Held(Vec<f32>),
    InPlace(store::Floats),
}

impl Vectors {
    fn floats(&self) -> &[f32] {
        match self {
            Vectors::Held(v) => v,
            Vectors::InPlace(f) => f.get(),
        }
    }
}

/// Where the tools' full definitions are: in memory (a built index), or in the index
/// file, decoded one by one when a search returns them.
enum Bodies {
    Held(Vec<SanitizedTool>),
    Stored(store::Stored),
}

/// One ranked tool.
#[derive(Debug, Clone, Serialize)]
pub struct Match {
    pub name: String,
    pub server: String,
    pub tool: String,
    pub score: f32,
}

impl SearchIndex {
    pub fn new(tools: Vec<SanitizedTool>) -> SearchIndex {
        let n = tools.len();
        let mut field_terms: Vec<[Vec<String>; 5]> = Vec::with_capacity(n);
        for t in &tools {
            field_terms.push(fields(t));
        }
        let mut avg = [0f32; 5];
        for ft in &field_terms {
            for (i, f) in ft.iter().enumerate() {
                avg[i] += f.len() as f32;
            }
        }
        for a in &mut avg {
            *a = (*a / n.max(1) as f32).max(1.0);
        }
        let mut postings: HashMap<String, Vec<(u32, f32, f32)>> = HashMap::new();
        for (doc, ft) in field_terms.iter().enumerate() {
            let mut weighted: HashMap<&str, (f32, f32)> = HashMap::new();
            for (i, terms) in ft.iter().enumerate() {
                let field = &FIELDS[i];
                let norm = 1.0 - field.b + field.b * terms.len() as f32 / avg[i];
                for term in terms {
                    let w = weighted.entry(term.as_str()).or_default();
                    if i == 0 {
                        w.0 += field.weight / norm;
                    } else {
                        w.1 += field.weight / norm;
                    }
                }
            }
            for (term, (name, rest)) in weighted {
                let posting = (doc as u32, name, rest);
                match postings.get_mut(term) {
                    Some(list) => list.push(posting),
                    None => {
                        postings.insert(term.to_owned(), vec![posting]);
                    }
                }
            }
        }
        let names = tools
            .iter()
            .map(|t| ToolName {
                name: t.name().to_owned(),
                server: t.server().to_owned(),
                tool: t.tool().to_owned(),
            })
            .collect();
        let tokens = (0..n).map(|_| OnceLock::new()).collect();
        SearchIndex::from_parts(
            names,
            Bodies::Held(tools),
            Postings::Built(postings),
            tokens,
        )
    }

    /// The index over parts built here or read by [`store`]: what is cheap to derive
    /// (inverse document frequencies, the name maps) is derived, not stored.
    fn from_parts(
        names: Vec<ToolName>,
        bodies: Bodies,
        postings: Postings,
        tokens: Vec<OnceLock<usize>>,
    ) -> SearchIndex {
        let mut exact = HashMap::new();
        let mut by_tool: HashMap<String, Vec<u32>> = HashMap::new();
        let mut servers: HashMap<String, Vec<u32>> = HashMap::new();
        // A server's words, split once per server (its tools are usually together).
        let mut server_words: Option<(&str, Vec<String>)> = None;
        for (i, t) in names.iter().enumerate() {
            let i = i as u32;
            exact.entry(t.name.to_lowercase()).or_insert(i);
            by_tool.entry(t.tool.to_lowercase()).or_default().push(i);
            if server_words.as_ref().is_none_or(|(s, _)| *s != t.server) {
                let mut words = text::words(&t.server);
                words.push(t.server.to_lowercase());
                server_words = Some((&t.server, words));
            }
            for w in server_words.iter().flat_map(|(_, w)| w) {
                match servers.get_mut(w.as_str()) {
                    Some(list) => list.push(i),
                    None => {
                        servers.insert(w.clone(), vec![i]);
                    }
                }
            }
        }
        for list in servers.values_mut() {
            list.dedup();
        }
        SearchIndex {
            names,
            bodies,
            postings,
            exact,
            by_tool,
            servers,
            tokens,
            vectors: None,
        }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// A tool's names (cheap: what ranking and listing need).
    pub fn names(&self, i: usize) -> &ToolName {
        &self.names[i]
    }

    /// A tool's full definition; `None` if a stored one cannot be read back or fails
    /// the guard's checks (said in the log).
    pub fn tool(&self, i: usize) -> Option<&SanitizedTool> {
        match &self.bodies {
            Bodies::Held(tools) => tools.get(i),
            Bodies::Stored(stored) => stored.get(i, self.names.get(i)?),
        }
    }

    /// Tokens of a tool's schema as returned by a search (o200k_base); 0 for a tool that
    /// cannot be read.
    pub fn schema_tokens(&self, i: usize) -> usize {
        *self.tokens[i].get_or_init(|| self.tool(i).map_or(0, |t| tokens::count(&schema_text(t))))
    }

    /// Attaches the tools' semantic vectors ([`semantic::tool_vectors`], in tool order).
    pub fn with_vectors(self, vectors: Vec<f32>) -> SearchIndex {
        self.with(Vectors::Held(vectors))
    }

    /// Attaches vectors read in place from an index file.
    fn with_stored_vectors(self, vectors: store::Floats) -> SearchIndex {
        self.with(Vectors::InPlace(vectors))
    }

    /// Attaches `vectors` when there is one for each tool.
    fn with(mut self, vectors: Vectors) -> SearchIndex {
        if vectors.floats().len() == self.names.len() * model::DIM {
            self.vectors = Some(vectors);
        }
        self
    }

    pub fn has_vectors(&self) -> bool {
        self.vectors.is_some()
    }

    /// Tools matching `query`, best first, at most `limit`, as (index, score): by words
    /// only.
    pub fn rank(&self, query: &str, limit: usize) -> Vec<(usize, f32)> {
        self.rank_with(query, None, limit)
    }

    /// Tools matching `query`, best first: the lexical ranking fused with the semantic one
    /// (reciprocal rank fusion) when the index has vectors and `query_vector` is given.
    /// A tool named in the query comes first either way.
    pub fn rank_with(
        &self,
        query: &str,
        query_vector: Option<&[f32]>,
        limit: usize,
    ) -> Vec<(usize, f32)> {
        let query = clip(query);
        let (mut scores, named) = self.lexical(query);
        let semantic = match (&self.vectors, query_vector) {
            // A query with no word (punctuation, emoji) has no meaning to compare.
            (Some(v), Some(q)) if q.len() == model::DIM && !text::terms(query).is_empty() => {
                Some(self.dense(v.floats(), q))
            }
            _ => None,
        };
        if let Some(dense) = semantic {
            let mut lexical: Vec<(usize, f32)> = scores
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, s)| *s > 0.0)
                .collect();
            self.top(&mut lexical, FUSION_DEPTH);
            if let Some(&(_, best)) = lexical.first() {
                lexical.retain(|&(_, s)| s >= best * MIN_RELATIVE_SCORE);
            }
            scores = vec![0f32; self.names.len()];
            for list in [&lexical, &dense] {
                for (rank, &(i, _)) in list.iter().enumerate() {
                    scores[i] += 1.0 / (RRF_K + rank as f32 + 1.0);
                }
            }
        }
        // A tool named exactly (alone or inside the query) goes first: by its model name
        // or `server/tool`, then by the server's own tool name (shared names keep their order).
        let top = scores.iter().copied().fold(0f32, f32::max);
        for (i, tier) in named {
            let s = &mut scores[i as usize];
            *s = s.max(top * tier + 1000.0 * tier + *s);
        }
        let mut ranked: Vec<(usize, f32)> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .collect();
        self.top(&mut ranked, limit);
        if let Some(&(_, best)) = ranked.first() {
            ranked.retain(|&(_, s)| s >= best * MIN_RELATIVE_SCORE);
        }
        ranked
    }

    /// Inverse document frequency of a term in `df` tools (BM25's, never negative).
    fn idf(&self, df: usize) -> f32 {
        let (n, df) = (self.names.len() as f32, df as f32);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Best score first; ties by name, so a ranking never depends on hash order.
    fn sort(&self, ranked: &mut [(usize, f32)]) {
        ranked.sort_by(|a, b| self.order(a, b));
    }

    /// The best `k` of `ranked`, sorted, without sorting the rest.
    fn top(&self, ranked: &mut Vec<(usize, f32)>, k: usize) {
        if k == 0 {
            ranked.clear();
        } else if ranked.len() > k {
            ranked.select_nth_unstable_by(k - 1, |a, b| self.order(a, b));
            ranked.truncate(k);
        }
        self.sort(ranked);
    }

    fn order(&self, a: &(usize, f32), b: &(usize, f32)) -> std::cmp::Ordering {
        b.1.total_cmp(&a.1)
            .then_with(|| self.names[a.0].name.cmp(&self.names[b.0].name))
    }

    /// The tools whose vectors are closest to the query's, best first, at most
    /// [`FUSION_DEPTH`], none below [`MIN_SIMILARITY`].
    fn dense(&self, vectors: &[f32], q: &[f32]) -> Vec<(usize, f32)> {
        let mut out: Vec<(usize, f32)> = vectors
            .chunks_exact(model::DIM)
            .map(|v| model::dot_product(v, q))
            .enumerate()
            .filter(|(_, s)| *s >= MIN_SIMILARITY)
            .collect();
        self.top(&mut out, FUSION_DEPTH);
        out
    }

    /// BM25F scores of every tool, and the tools the query names (with their tier).
    fn lexical(&self, query: &str) -> (Vec<f32>, Vec<(u32, f32)>) {
        // Each distinct query word contributes its best match per tool: the word itself,
        // or one of its synonyms (weighted down, more so outside the name, and never more
        // informative than the word asked for). Taking the best rather than the sum keeps a
        // word with many synonyms from counting many times.
        let n = self.names.len();
        let mut scores = vec![0f32; n];
        let mut matched = vec![0u16; n];
        let mut best = vec![0f32; n];
        let mut touched: Vec<u32> = Vec::new();
        let words = text::words(query);
        let mut seen = std::collections::HashSet::new();
        let mut distinct = 0u16;
        for word in &words {
            let Some(term) = text::term(word) else {
                continue;
            };
            if !seen.insert(term.clone()) {
                continue;
            }
            distinct += 1;
            let own_idf = self.postings.get(&term).map(|p| self.idf(p.len()));
            let candidates = std::iter::once((&term, 1.0, 1.0)).chain(
                text::synonyms(&term)
                    .iter()
                    .map(|s| (s, SYNONYM_IN_NAME, SYNONYM_ELSEWHERE)),
            );
            for (t, in_name, elsewhere) in candidates {
                let Some(list) = self.postings.get(t) else {
                    continue;
                };
                let idf = self.idf(list.len());
                let idf = own_idf.map_or(idf, |own| own.min(idf));
                for (doc, name, rest) in list.iter() {
                    let Some(b) = best.get_mut(doc as usize) else {
                        continue;
                    };
                    let tf = in_name * name + elsewhere * rest;
                    let s = idf * tf * (K1 + 1.0) / (tf + K1);
                    if *b == 0.0 {
                        touched.push(doc);
                    }
                    *b = b.max(s);
                }
            }
            for doc in touched.drain(..) {
                let d = doc as usize;
                scores[d] += best[d];
                matched[d] += 1;
                best[d] = 0.0;
            }
        }
        // Tools that match more of the query's words rank higher (a coordination factor).
        if distinct > 1 {
            for (s, m) in scores.iter_mut().zip(&matched) {
                *s *= 1.0 + COORDINATION * f32::from(*m) / f32::from(distinct);
            }
        }
        for word in words.iter().collect::<std::collections::HashSet<_>>() {
            if let Some(docs) = self.servers.get(word.as_str()) {
                for &d in docs {
                    scores[d as usize] *= SERVER_BOOST;
                }
            }
        }
        let lowered = query.trim().to_lowercase();
        let mut named: Vec<(u32, f32)> = Vec::new();
        for candidate in std::iter::once(lowered.as_str()).chain(lowered.split_whitespace()) {
            let candidate =
                candidate.trim_matches(|c: char| matches!(c, '`' | '"' | '\'' | ',' | '.' | '?'));
            if let Some(i) = self.named_exactly(candidate) {
                named.push((i, 2.0));
            }
            // A server's own tool name counts when it looks like an identifier or is the
            // whole query: `create_issue` names a tool; `find` or `show` is just a word.
            let identifier = candidate.contains(['_', '-']) || candidate.len() == lowered.len();
            if identifier {
                for &i in self.by_tool.get(candidate).into_iter().flatten() {
                    named.push((i, 1.0));
                }
            }
        }
        if named.is_empty() {
            named = self.misspelled(&lowered);
        }
        (scores, named)
    }

    /// The tool `candidate` (lower-cased) names exactly: its model name, `server/tool`
    /// or `server__tool`.
    fn named_exactly(&self, candidate: &str) -> Option<u32> {
        if let Some(&i) = self.exact.get(candidate) {
            return Some(i);
        }
        let splits = candidate.split_once('/').into_iter().chain(
            candidate
                .match_indices("__")
                .map(|(k, _)| (&candidate[..k], &candidate[k + 2..])),
        );
        for (server, tool) in splits {
            if let Some(&i) = self
                .by_tool
                .get(tool)
                .into_iter()
                .flatten()
                .find(|&&i| self.names[i as usize].server.to_lowercase() == server)
            {
                return Some(i);
            }
        }
        None
    }

    /// Tools whose name the query misspells: a query of one identifier-like word within a
    /// small edit distance (a typo per eight characters, transpositions counting one) of
    /// a tool's own name, its `server/tool` or its model name. Ranked after exact names.
    fn misspelled(&self, query: &str) -> Vec<(u32, f32)> {
        let q = query.trim_matches(|c: char| matches!(c, '`' | '"' | '\'' | ',' | '.' | '?'));
        let len = q.chars().count();
        if q.contains(char::is_whitespace) || !q.contains(['_', '-', '/']) || len < 5 {
            return Vec::new();
        }
        let max = 1 + len / 8;
        let mut found: Vec<(u32, usize)> = Vec::new();
        let keys = self.exact.iter().map(|(k, &i)| (k.as_str(), i)).chain(
            self.by_tool
                .iter()
                .flat_map(|(k, v)| v.iter().map(move |&i| (k.as_str(), i))),
        );
        for (key, i) in keys {
            if let Some(d) = text::edit_distance(q, key, max) {
                found.push((i, d));
            }
        }
        // `server/tool`: the typos in both parts together.
        if let Some((s, t)) = q.split_once('/') {
            for (i, n) in self.names.iter().enumerate() {
                let Some(ds) = text::edit_distance(s, &n.server.to_lowercase(), max) else {
                    continue;
                };
                if let Some(dt) = text::edit_distance(t, &n.tool.to_lowercase(), max - ds) {
                    found.push((i as u32, ds + dt));
                }
            }
        }
        let Some(best) = found.iter().map(|&(_, d)| d).min() else {
            return Vec::new();
        };
        let mut out: Vec<(u32, f32)> = found
            .into_iter()
            .filter(|&(_, d)| d == best)
            .map(|(i, _)| (i, 0.5))
            .collect();
        out.sort_by_key(|&(i, _)| i);
        out.dedup();
        out
    }
}

/// The query, cut to [`MAX_QUERY_BYTES`] at a char boundary.
fn clip(query: &str) -> &str {
    if query.len() <= MAX_QUERY_BYTES {
        return query;
    }
    let mut end = MAX_QUERY_BYTES;
    while !query.is_char_boundary(end) {
        end -= 1;
    }
    &query[..end]
}

/// A tool's terms per field, in [`FIELDS`] order.
fn fields(t: &SanitizedTool) -> [Vec<String>; 5] {
    let name = text::terms(t.tool());
    let title = t
        .hints()
        .title
        .as_deref()
        .map(text::terms)
        .unwrap_or_default();
    let server = text::terms(t.server());
    let description = text::terms(t.description());
    let mut params = Vec::new();
    if let Some(props) = t
        .input_schema()
        .get("properties")
        .and_then(Value::as_object)
    {
        for (k, v) in props {
            params.extend(text::terms(k));
            if let Some(d) = v.get("description").and_then(Value::as_str) {
                params.extend(text::terms(d));
            }
            // The values a parameter takes name what the tool does (`"action": ["merge",
            // "close"]`), its own or its items'.
            let values = [v.get("enum"), v.get("items").and_then(|i| i.get("enum"))];
            for value in values
                .into_iter()
                .flatten()
                .filter_map(Value::as_array)
                .flatten()
            {
                if let Some(value) = value.as_str() {
                    params.extend(text::terms(value));
                }
            }
        }
    }
    [name, title, server, description, params]
}

/// A tool as a search returns it: what a model needs to call it.
pub fn schema_json(t: &SanitizedTool) -> Value {
    serde_json::json!({"name": t.name(), "description": t.description(), "input_schema": t.input_schema()})
}

pub fn schema_text(t: &SanitizedTool) -> String {
    schema_json(t).to_string()
}

#[cfg(test)]
mod tests;
