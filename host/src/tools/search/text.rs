//! Turning tool text and queries into index terms: identifier splitting (snake, camel,
//! kebab case), lower case, stop words, Snowball (Porter2) stemming, and a small table
//! of synonyms for the words people use when they describe what a tool should do.

use std::collections::HashMap;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Words that carry no meaning for finding a tool.
const STOP_WORDS: &[&str] = &[
    "a",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "by",
    "can",
    "do",
    "does",
    "for",
    "from",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "me",
    "my",
    "of",
    "on",
    "or",
    "our",
    "please",
    "so",
    "some",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "this",
    "to",
    "tool",
    "tools",
    "up",
    "use",
    "using",
    "want",
    "we",
    "what",
    "when",
    "which",
    "with",
    "would",
    "you",
    "your",
    "should",
    "will",
    "i'd",
    "need",
    "let",
    "via",
    "mcp",
    "server",
    "given",
    "specified",
    "specific",
    "provided",
    "optional",
    "e",
    "g",
    "eg",
    "ie",
    "etc",
];

/// Groups of words a person uses interchangeably when describing a tool's job. A query
/// word also matches its group's other words, at a lower weight.
const SYNONYMS: &[&[&str]] = &[
    &[
        "create", "make", "new", "add", "open", "start", "generate", "build", "insert", "register",
    ],
    &[
        "delete",
        "remove",
        "erase",
        "drop",
        "destroy",
        "discard",
        "purge",
        "uninstall",
        "cancel",
    ],
    &[
        "get", "fetch", "retrieve", "read", "obtain", "load", "show", "view", "see", "display",
        "look", "details", "info",
    ],
    &["list", "enumerate", "all", "browse", "which", "index"],
    &[
        "search", "find", "lookup", "query", "locate", "seek", "discover", "match",
    ],
    &[
        "update", "modify", "edit", "change", "set", "patch", "alter", "rename", "replace", "turn",
        "toggle",
    ],
    &[
        "send", "post", "publish", "deliver", "notify", "message", "tell", "reply", "answer",
    ],
    &[
        "issue", "ticket", "bug", "task", "story", "incident", "problem", "defect", "todo",
    ],
    &["pr", "pull", "merge", "request", "mr"],
    &["repo", "repository", "project", "codebase"],
    &["file", "document", "doc", "docs", "documentation", "page"],
    &["folder", "directory", "dir", "path"],
    &[
        "spreadsheet",
        "sheet",
        "sheets",
        "excel",
        "workbook",
        "worksheet",
        "cell",
        "cells",
        "range",
    ],
    &["email", "mail", "gmail", "inbox"],
    &[
        "chat",
        "channel",
        "slack",
        "discord",
        "conversation",
        "thread",
    ],
    &[
        "calendar",
        "event",
        "meeting",
        "appointment",
        "schedule",
        "invite",
        "invitation",
    ],
    &[
        "run", "execute", "exec", "launch", "invoke", "trigger", "perform", "call",
    ],
    &[
        "stop",
        "kill",
        "terminate",
        "halt",
        "abort",
        "pause",
        "mute",
        "silence",
        "disable",
    ],
    &[
        "screenshot",
        "capture",
        "snapshot",
        "image",
        "picture",
        "photo",
    ],
    &[
        "browser", "web", "page", "website", "site", "url", "navigate",
    ],
    &[
        "database", "db", "sql", "table", "tables", "query", "postgres", "sqlite", "mysql",
    ],
    &["log", "logs", "logging", "output", "console", "trace"],
    &[
        "kubernetes",
        "k8s",
        "kubectl",
        "cluster",
        "pod",
        "pods",
        "container",
        "deployment",
    ],
    &[
        "error",
        "errors",
        "failure",
        "fail",
        "failed",
        "exception",
        "crash",
    ],
    &[
        "metric",
        "metrics",
        "stats",
        "statistics",
        "analytics",
        "report",
        "measure",
    ],
    &["deploy", "release", "ship", "publish", "rollout"],
    &["commit", "commits", "history", "changes", "diff"],
    &["comment", "note", "annotation", "feedback", "remark"],
    &[
        "user", "users", "member", "people", "person", "account", "contact", "contacts",
    ],
    &["price", "pricing", "cost", "costs", "billing", "spend"],
    &[
        "chart",
        "graph",
        "plot",
        "diagram",
        "visualize",
        "visualization",
    ],
    &["time", "clock", "date", "now", "timezone", "today"],
    &[
        "place", "places", "location", "address", "nearby", "near", "map", "maps",
    ],
    &[
        "paper", "papers", "article", "articles", "research", "academic",
    ],
    &[
        "alert",
        "alerts",
        "alarm",
        "monitor",
        "monitors",
        "notification",
        "page",
    ],
    &["oncall", "call", "shift", "rotation", "schedule"],
    &["text", "content", "contents", "body"],
    &["click", "tap", "press", "select"],
    &["type", "fill", "input", "enter", "write"],
    &["convert", "transform", "translate", "export", "turn"],
    &[
        "memory",
        "remember",
        "knowledge",
        "graph",
        "entity",
        "entities",
        "fact",
        "facts",
        "observation",
    ],
    &["think", "reason", "reasoning", "plan", "step"],
    &["flag", "flags", "feature", "toggle"],
    &["stock", "ticker", "share", "market", "finance"],
    &["light", "lights", "device", "home", "switch"],
    &[
        "phone", "mobile", "device", "android", "ios", "screen", "app",
    ],
    &["cost", "price"],
    &["folder", "tree", "structure"],
];

/// The terms of a text: words split at case changes, digits and punctuation, lower-cased,
/// stop words removed, stemmed. `camelCase_name-x` gives `camel`, `case`, `name`, `x`.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in words(text) {
        if let Some(t) = term(&word) {
            out.push(t);
        }
    }
    out
}

/// One lower-cased word as an index term, or `None` for a stop word.
pub fn term(word: &str) -> Option<String> {
    if word.is_empty() || STOP_WORDS.contains(&word) {
        return None;
    }
    Some(stem(word))
}

/// Most stems remembered per thread: an index build sees the same few thousand words
/// many times; a hostile catalog of unique words only stops being remembered.
const MAX_REMEMBERED_STEMS: usize = 50_000;

fn stem(word: &str) -> String {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    thread_local! {
        static STEMS: std::cell::RefCell<HashMap<String, String>> = Default::default();
    }
    STEMS.with_borrow_mut(|stems| {
        if let Some(s) = stems.get(word) {
            return s.clone();
        }
        let s = STEMMER
            .get_or_init(|| Stemmer::create(Algorithm::English))
            .stem(word)
            .into_owned();
        if stems.len() < MAX_REMEMBERED_STEMS {
            stems.insert(word.to_owned(), s.clone());
        }
        s
    })
}

/// Lower-cased words, with identifiers split: `getPullRequest` and `get_pull_request`
/// both give `get`, `pull`, `request`.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_alphanumeric() {
            let boundary = match prev {
                Some(p) => {
                    (p.is_lowercase() && c.is_uppercase())
                        || (p.is_alphabetic() && c.is_numeric())
                        || (p.is_numeric() && c.is_alphabetic())
                        // `HTTPServer` -> `http`, `server`
                        || (p.is_uppercase() && c.is_uppercase() && chars.get(i + 1).is_some_and(|n| n.is_lowercase()))
                }
                None => false,
            };
            if boundary && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            cur.extend(c.to_lowercase());
            prev = Some(c);
        } else {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev = None;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The stemmed synonyms of a stemmed term (the term itself excluded).
pub fn synonyms(term: &str) -> &'static [String] {
    static TABLE: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut map: HashMap<String, Vec<String>> = HashMap::new();
        for group in SYNONYMS {
            let stems: Vec<String> = group.iter().map(|w| stem(w)).collect();
            for s in &stems {
                let entry = map.entry(s.clone()).or_default();
                for other in &stems {
                    if other != s && !entry.contains(other) {
                        entry.push(other.clone());
                    }
                }
            }
        }
        map
    });
    table.get(term).map_or(&[], Vec::as_slice)
}

/// The optimal-string-alignment distance between `a` and `b` (insertions, deletions,
/// substitutions and adjacent transpositions), or `None` when it is over `max`.
pub fn edit_distance(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let width = b.len() + 1;
    let mut rows = vec![vec![0usize; width]; 3];
    rows[1] = (0..width).collect();
    for i in 1..=a.len() {
        let (prev2, rest) = rows.split_at_mut(1);
        let (prev, cur) = rest.split_at_mut(1);
        let (prev2, prev, cur) = (&prev2[0], &prev[0], &mut cur[0]);
        cur[0] = i;
        let mut row_min = i;
        for j in 1..width {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(prev2[j - 2] + 1);
            }
            cur[j] = d;
            row_min = row_min.min(d);
        }
        if row_min > max {
            return None;
        }
        rows.rotate_left(1);
    }
    let d = rows[1][b.len()];
    (d <= max).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_split() {
        assert_eq!(words("getPullRequest"), ["get", "pull", "request"]);
        assert_eq!(
            words("create_or_update-file"),
            ["create", "or", "update", "file"]
        );
        assert_eq!(words("HTTPServer v2"), ["http", "server", "v", "2"]);
        assert_eq!(words("API-post-search"), ["api", "post", "search"]);
        assert_eq!(words("ünïcödé 工具"), ["ünïcödé", "工具"]);
    }

    #[test]
    fn terms_are_stemmed_without_stop_words() {
        assert_eq!(
            terms("Searching the repositories"),
            ["search", "repositori"]
        );
        assert_eq!(terms("list_issues"), ["list", "issu"]);
    }

    #[test]
    fn edit_distance_counts_typos_and_transpositions() {
        assert_eq!(edit_distance("create_issue", "create_issue", 2), Some(0));
        assert_eq!(edit_distance("create_isue", "create_issue", 2), Some(1));
        assert_eq!(edit_distance("craete_issue", "create_issue", 2), Some(1));
        assert_eq!(edit_distance("delete_issue", "create_issue", 2), None);
        assert_eq!(edit_distance("ab", "abcdef", 2), None);
        assert_eq!(edit_distance("", "ab", 2), Some(2));
    }

    #[test]
    fn synonyms_are_symmetric_on_stems() {
        assert!(synonyms(&stem("delete")).contains(&stem("remove")));
        assert!(synonyms(&stem("remove")).contains(&stem("delete")));
        assert!(synonyms("zzzz").is_empty());
    }
}
