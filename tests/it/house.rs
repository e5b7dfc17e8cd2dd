//! The house rules ARCHITECTURE.md states, checked on the source: no import circle
//! between modules, no file in `mcp/` over `MAX_MCP_FILE_LINES`, and the ranking
//! (`tools/search*`) importing nothing from the session.
//!
//! A module is a file. An edge runs from a file to the file whose module a path names
//! (`use crate::a::b::Item` names `a/b.rs` if it exists, else `a.rs`), through `use`
//! trees and inline `crate::`/`super::` paths. A module and its own submodules are one
//! room (a parent re-exporting its children, a child using its parent's types), so edges
//! between them are not counted; test files and inline test modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longest file in `host/src/mcp/`, in lines.
const MAX_MCP_FILE_LINES: usize = 600;

type Module = Vec<String>;

/// Which crate a file belongs to: the binary's glue (`main.rs`, `cli.rs`, `commands/`)
/// or the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Crate {
    Lib,
    Bin,
}

struct Source {
    krate: Crate,
    module: Module,
    path: PathBuf,
    text: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src")
}

fn sources() -> Vec<Source> {
    let root = src_dir();
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs")
                || path.file_name().and_then(|n| n.to_str()) == Some("tests.rs")
            {
                continue;
            }
            let rel = path.strip_prefix(&root).unwrap_or_else(|e| panic!("{e}"));
            let mut module: Module = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().map(String::as_str) == Some("mod") {
                module.pop();
            }
            let krate = match module.first().map(String::as_str) {
                Some("main" | "cli" | "commands") => Crate::Bin,
                _ => Crate::Lib,
            };
            if matches!(module.as_slice(), [m] if m == "lib" || m == "main") {
                module.clear();
            }
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
            out.push(Source {
                krate,
                module,
                path,
                text,
            });
        }
    }
    out
}

/// The file's code without line comments and without its inline test module.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if (t.starts_with("#[cfg(test)]") || t.starts_with("#[cfg(all(test"))
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod "))
        {
            break;
        }
        let line = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path a `use` tree names, segment by segment (`a::{b, c::d}` is `a::b`, `a::c::d`).
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], prefix, out);
        return;
    }
    if let Some((head, rest)) = tree.split_once("::")
        && head.trim().chars().all(is_ident)
    {
        let mut p = prefix.to_vec();
        p.push(head.trim().to_owned());
        expand(rest, &p, out);
        return;
    }
    let mut p = prefix.to_vec();
    let name: String = tree.chars().take_while(|&c| is_ident(c)).collect();
    if !name.is_empty() {
        p.push(name);
    }
    if !p.is_empty() {
        out.push(p);
    }
}

/// Every module path the code names: `use` trees and inline `crate::`, `super::` and
/// `edgar_host::` paths.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + 4..];
        if before.is_some_and(is_ident) {
            continue;
        }
        if let Some(end) = rest.find(';') {
            expand(&rest[..end], &[], &mut out);
        }
    }
    for root in ["crate::", "super::", "edgar_host::"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(root) {
            let start = at + i;
            at = start + root.len();
            if code[..start].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let path: String = code[start..]
                .chars()
                .take_while(|&c| is_ident(c) || c == ':')
                .collect();
            out.push(
                path.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            );
        }
    }
    out
}

/// The module graph: for each file, the files it imports (outside its own room).
fn graph(sources: &[Source]) -> BTreeMap<(Crate, Module), BTreeSet<(Crate, Module)>> {
    let known: BTreeSet<(Crate, Module)> = sources
        .iter()
        .map(|s| (s.krate, s.module.clone()))
        .collect();
    let mut edges: BTreeMap<(Crate, Module), BTreeSet<(Crate, Module)>> = BTreeMap::new();
    for s in sources {
        let from = (s.krate, s.module.clone());
        let targets = edges.entry(from.clone()).or_default();
        for path in named_paths(&code(&s.text)) {
            let Some(head) = path.first() else { continue };
            let (krate, rest): (Crate, Vec<String>) = match head.as_str() {
                "crate" => (s.krate, path[1..].to_vec()),
                "edgar_host" => (Crate::Lib, path[1..].to_vec()),
                "self" => (s.krate, [s.module.clone(), path[1..].to_vec()].concat()),
                "super" => {
                    let mut base = s.module.clone();
                    let mut p = path.as_slice();
                    while p.first().map(String::as_str) == Some("super") {
                        base.pop();
                        p = &p[1..];
                    }
                    (s.krate, [base, p.to_vec()].concat())
                }
                _ => continue,
            };
            if krate != s.krate {
                continue;
            }
            let Some(target) = (0..=rest.len())
                .rev()
                .map(|n| (krate, rest[..n].to_vec()))
                .find(|m| known.contains(m))
            else {
                continue;
            };
            let (a, b) = (&s.module, &target.1);
            if a.starts_with(b) || b.starts_with(a) {
                continue;
            }
            targets.insert(target);
        }
    }
    edges
}

/// The strongly connected components with more than one module (Tarjan).
fn circles(
    edges: &BTreeMap<(Crate, Module), BTreeSet<(Crate, Module)>>,
) -> Vec<Vec<(Crate, Module)>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<(Crate, Module), BTreeSet<(Crate, Module)>>,
        index: BTreeMap<&'a (Crate, Module), usize>,
        low: BTreeMap<&'a (Crate, Module), usize>,
        stack: Vec<&'a (Crate, Module)>,
        on_stack: BTreeSet<&'a (Crate, Module)>,
        found: Vec<Vec<(Crate, Module)>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, n: &'a (Crate, Module)) {
            let i = self.index.len();
            self.index.insert(n, i);
            self.low.insert(n, i);
            self.stack.push(n);
            self.on_stack.insert(n);
            for w in self.edges.get(n).into_iter().flatten() {
                let Some((w, _)) = self.edges.get_key_value(w) else {
                    continue;
                };
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[n].min(self.low[w]);
                    self.low.insert(n, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[n].min(self.index[w]);
                    self.low.insert(n, low);
                }
            }
            if self.low[n] == self.index[n] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == n {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for n in edges.keys() {
        if !walk.index.contains_key(n) {
            walk.visit(n);
        }
    }
    walk.found
}

fn name(m: &(Crate, Module)) -> String {
    if m.1.is_empty() {
        format!("{:?}", m.0).to_lowercase()
    } else {
        m.1.join("::")
    }
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let sources = sources();
    assert!(sources.len() > 50, "the source tree was not found");
    let edges = graph(&sources);
    let found: Vec<String> = circles(&edges)
        .iter()
        .map(|c| {
            let mut names: Vec<String> = c.iter().map(name).collect();
            names.sort();
            names.join(" <-> ")
        })
        .collect();
    assert!(
        found.is_empty(),
        "import circles (ARCHITECTURE.md says which way each layer may import):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_circle_check_sees_a_circle() {
    // Two files importing each other, one through a `use` tree and one inline, and a
    // child using its parent (one room, no circle).
    let source = |module: &str, text: &str| Source {
        krate: Crate::Lib,
        module: module.split('/').map(str::to_owned).collect(),
        path: PathBuf::from(module),
        text: text.to_owned(),
    };
    let sources = [
        source("a", "use crate::{b::{X, Y}, c};\n"),
        source("b", "fn f() { crate::a::g() } // crate::c::h\n"),
        source("c", "#[cfg(test)]\nmod tests { use crate::a::Z; }\n"),
        source("a/d", "use super::Q;\n"),
    ];
    let edges = graph(&sources);
    let found = circles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    let mut names: Vec<String> = found[0].iter().map(name).collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn no_file_in_the_session_layer_is_longer_than_the_house_allows() {
    let long: Vec<String> = sources()
        .iter()
        .filter(|s| s.krate == Crate::Lib && s.module.first().map(String::as_str) == Some("mcp"))
        .filter_map(|s| {
            let n = s.text.lines().count();
            (n > MAX_MCP_FILE_LINES).then(|| format!("{} ({n} lines)", s.path.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split by job (ARCHITECTURE.md): {}",
        long.join(", ")
    );
}

#[test]
fn the_ranking_imports_nothing_from_the_session() {
    let sources = sources();
    let edges = graph(&sources);
    let mut wrong = Vec::new();
    for ((krate, module), targets) in &edges {
        let ranking = *krate == Crate::Lib
            && module.len() >= 2
            && module[0] == "tools"
            && module[1].starts_with("search")
            && module[1] != "search_tool";
        for (_, t) in targets {
            if ranking && t.first().map(String::as_str) == Some("mcp") {
                wrong.push(format!("{} -> {}", module.join("::"), t.join("::")));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
