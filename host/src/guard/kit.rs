//! The adapter kit's check: runs an adapter over a tool corpus and hostile inputs and
//! says, per invariant of the host's contract, whether it holds. The host enforces each
//! one at run time anyway (a breach costs the tool, not the session); the kit finds
//! them before users do. `edgar guard check` prints the report.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::check::shown;
use super::provider::{Provider, violations};
use super::{
    Adapter, AdapterSource, GUARD_DEADLINE, GUARD_MEMORY_BYTES, Guard, GuardError, LoweredTool,
    SanitizedTool, may_be_builtin,
};

/// One server's tools, each as the JSON text a server would send.
pub struct CorpusServer {
    pub server: String,
    pub tools: Vec<String>,
}

/// Reads every `*.json` in `dir` shaped `{"server": NAME, "tools": [TOOL, ...]}` (the
/// shape of `tests/fixtures/corpus`), sorted by file name.
pub fn read_corpus(dir: &Path) -> Result<Vec<CorpusServer>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let (Some(server), Some(tools)) = (v["server"].as_str(), v["tools"].as_array()) else {
            return Err(format!(
                "{}: not a corpus file (needs \"server\" and \"tools\")",
                path.display()
            ));
        };
        out.push(CorpusServer {
            server: server.to_owned(),
            tools: tools.iter().map(Value::to_string).collect(),
        });
    }
    if out.is_empty() {
        return Err(format!("{}: no corpus files (*.json)", dir.display()));
    }
    Ok(out)
}

/// A few ordinary tools, for a check without a corpus.
pub fn sample_corpus() -> Vec<CorpusServer> {
    let tools = [
        json!({"name": "read_file", "description": "Read a file", "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}),
        json!({"name": "search", "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}, "limit": {"type": "integer", "minimum": 1, "default": 10}, "sort": {"enum": ["asc", "desc"]}}}}),
        json!({"name": "create_event", "inputSchema": {"type": "object", "properties": {"start": {"type": "string", "format": "date-time"}, "attendees": {"type": "array", "items": {"type": "string", "format": "email"}}, "meta": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["start"]}}),
        json!({"name": "update", "inputSchema": {"type": "object", "$defs": {"id": {"type": ["string", "integer"]}}, "properties": {"id": {"$ref": "#/$defs/id"}, "patch": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"op": {"type": "string"}}}]}}}}),
        json!({"name": "no_args", "description": "Takes nothing"}),
    ];
    vec![CorpusServer {
        server: "sample".into(),
        tools: tools.iter().map(Value::to_string).collect(),
    }]
}

/// The outcome of one invariant.
pub struct Check {
    pub name: &'static str,
    pub pass: bool,
    pub detail: String,
}

/// What `check` found, in the order the invariants were checked.
pub struct Report {
    /// The contract version, when the component loaded.
    pub contract: Option<&'static str>,
    pub servers: usize,
    pub tools: usize,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }

    /// The report as the terminal shows it.
    pub fn text(&self) -> String {
        let mut out = match self.contract {
            Some(c) => format!("contract edgar:schema/adapter@{c}; "),
            None => "did not load; ".to_owned(),
        };
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let _ = writeln!(
            out,
            "corpus of {} server{}, {} tool{}",
            self.servers,
            plural(self.servers),
            self.tools,
            plural(self.tools)
        );
        for c in &self.checks {
            let _ = writeln!(
                out,
                "  {}  {:<15} {}",
                if c.pass { "pass" } else { "FAIL" },
                c.name,
                c.detail
            );
        }
        let failed = self.checks.iter().filter(|c| !c.pass).count();
        let _ = write!(
            out,
            "result: {} ({} of {} invariants hold)",
            if failed == 0 { "pass" } else { "fail" },
            self.checks.len() - failed,
            self.checks.len()
        );
        out
    }
}

/// Errors that mean the adapter broke the contract (as opposed to refusing an input).
fn breach(e: &GuardError) -> bool {
    matches!(e, GuardError::Failed { .. } | GuardError::BadOutput { .. })
}

fn first<'a>(errors: impl IntoIterator<Item = &'a GuardError>) -> String {
    errors
        .into_iter()
        .next()
        .map(|e| format!("; first: {e}"))
        .unwrap_or_default()
}

/// Loads the adapter from `source` (the first invariant: it implements a contract the
/// host loads) and, if it loads, runs every other invariant over `corpus`.
pub fn check_source(guard: &Guard, source: &AdapterSource, corpus: &[CorpusServer]) -> Report {
    match guard.adapter(source) {
        Ok(adapter) => check(&adapter, corpus),
        Err(e) => Report {
            contract: None,
            servers: corpus.len(),
            tools: corpus.iter().map(|s| s.tools.len()).sum(),
            checks: vec![Check {
                name: "loads",
                pass: false,
                detail: e.to_string(),
            }],
        },
    }
}

/// Runs every invariant over `corpus` with a loaded `adapter`.
pub fn check(adapter: &Adapter, corpus: &[CorpusServer]) -> Report {
    let tools: usize = corpus.iter().map(|s| s.tools.len()).sum();
    let mut checks = vec![Check {
        name: "loads",
        pass: true,
        detail: format!(
            "exports edgar:schema/adapter@{}{}",
            adapter.contract(),
            if adapter.contract() == "0.1" {
                " (the previous contract: no lower-schema)"
            } else {
                ""
            }
        ),
    }];

    let started = Instant::now();
    let mut slowest = (Duration::ZERO, String::new());
    let mut accepted: Vec<Result<SanitizedTool, GuardError>> = Vec::with_capacity(tools);
    for s in corpus {
        let t0 = Instant::now();
        accepted.extend(adapter.accept_tools(&s.server, &s.tools));
        let per_tool = t0.elapsed() / u32::try_from(s.tools.len().max(1)).unwrap_or(u32::MAX);
        if per_tool > slowest.0 {
            slowest = (per_tool, s.server.clone());
        }
    }
    let accept_time = started.elapsed();
    let ok: Vec<&SanitizedTool> = accepted.iter().filter_map(|r| r.as_ref().ok()).collect();
    let breaches: Vec<&GuardError> = accepted
        .iter()
        .filter_map(|r| r.as_ref().err())
        .filter(|e| breach(e))
        .collect();
    let refused = accepted.iter().filter(|r| r.is_err()).count() - breaches.len();
    checks.push(Check {
        name: "schemas",
        pass: breaches.is_empty(),
        detail: format!(
            "{} accepted, {refused} refused by the adapter, {} outputs refused by the host or failed{}",
            ok.len(),
            breaches.len(),
            first(breaches.iter().copied())
        ),
    });

    checks.push(findings(adapter, corpus));
    checks.push(names(adapter, &ok));
    checks.push(hostile(adapter));
    checks.push(context(adapter));
    let lowered = providers(adapter, &ok, &mut checks);
    checks.push(determinism(adapter, corpus, &accepted, &lowered));

    let mean = accept_time / u32::try_from(tools.max(1)).unwrap_or(u32::MAX);
    checks.push(Check {
        name: "time",
        pass: slowest.0 < GUARD_DEADLINE / 10,
        detail: format!(
            "to-schema and tool-name: {} us per tool on average, {} us on the slowest server ({}); the deadline is {} ms per call",
            mean.as_micros(),
            slowest.0.as_micros(),
            slowest.1,
            GUARD_DEADLINE.as_millis()
        ),
    });
    let peak = adapter.peak_memory();
    checks.push(Check {
        name: "memory",
        pass: peak <= GUARD_MEMORY_BYTES / 2,
        detail: format!(
            "{:.1} MiB of linear memory at most per instance (limit {} MiB; more than half fails here)",
            peak as f64 / f64::from(1 << 20),
            GUARD_MEMORY_BYTES >> 20
        ),
    });
    Report {
        contract: Some(adapter.contract()),
        servers: corpus.len(),
        tools,
        checks,
    }
}

/// Findings: every scan of the corpus comes back and passes the host's checks (spans on
/// the strings they name, short safe lines, a bounded count). An adapter without `scan`
/// passes, saying it reports none.
fn findings(adapter: &Adapter, corpus: &[CorpusServer]) -> Check {
    if !adapter.scans() {
        return Check {
            name: "findings",
            pass: true,
            detail: "no edgar:schema/scan export: the adapter reports no findings".into(),
        };
    }
    let (mut tools, mut flagged, mut by) = (0, 0, [0usize; 3]);
    let mut errors = Vec::new();
    for s in corpus {
        for r in adapter.scan_tools(&s.server, &s.tools) {
            tools += 1;
            match r {
                Ok(found) => {
                    flagged += usize::from(!found.is_empty());
                    for f in found {
                        by[f.severity as usize] += 1;
                    }
                }
                Err(e) => errors.push(e),
            }
        }
    }
    Check {
        name: "findings",
        pass: errors.is_empty(),
        detail: format!(
            "{flagged} of {tools} tools with findings ({} high, {} medium, {} low); {} scans refused by the host or failed{}",
            by[2],
            by[1],
            by[0],
            errors.len(),
            first(&errors)
        ),
    }
}

/// Names: the host already refused any accepted tool whose name breaks the pattern or
/// lacks its server's prefix; here, also injective over the corpus plus pairs built to
/// collide, and never a built-in's.
fn names(adapter: &Adapter, ok: &[&SanitizedTool]) -> Check {
    let mut seen: HashMap<String, (String, String)> = HashMap::new();
    let mut problems = Vec::new();
    let pairs = ok.iter().map(|t| {
        (
            t.server().to_owned(),
            t.tool().to_owned(),
            Ok(t.name().to_owned()),
        )
    });
    let colliding = [
        ("a", "b__c"),
        ("a__b", "c"),
        ("srv", "Tool"),
        ("srv", "tool"),
        ("srv", "to.ol"),
        ("srv", "to-ol"),
        ("srv", "to ol"),
        ("srv", &"x".repeat(200)),
        ("srv", &format!("{}y", "x".repeat(199))),
    ]
    .map(|(s, t)| (s.to_owned(), t.to_owned()));
    let built = colliding.into_iter().map(|(s, t)| {
        let name = adapter.tool_name(&s, &t);
        (s, t, name)
    });
    let mut breaches = 0;
    for (server, tool, name) in pairs.chain(built) {
        let name = match name {
            Ok(n) => n,
            Err(e) => {
                if breach(&e) {
                    breaches += 1;
                    problems.push(e.to_string());
                }
                continue;
            }
        };
        if may_be_builtin(&name) {
            problems.push(format!("{name} could be a built-in's name"));
        }
        if let Some((s0, t0)) = seen.get(&name)
            && (s0, t0) != (&server, &tool)
        {
            problems.push(format!(
                "{name} names both {}/{} and {}/{}",
                shown(s0),
                shown(t0),
                shown(&server),
                shown(&tool)
            ));
        }
        seen.insert(name, (server, tool));
    }
    Check {
        name: "names",
        pass: problems.is_empty(),
        detail: if problems.is_empty() {
            format!(
                "{} names, all [A-Za-z0-9_-]{{1,64}}, prefixed by their server, distinct (9 built to collide included), none a built-in's",
                seen.len()
            )
        } else {
            format!(
                "{} problems ({breaches} refused outputs); first: {}",
                problems.len(),
                problems[0]
            )
        },
    }
}

/// Inputs a hostile server would send: each must end cleaned or refused, never in a
/// trap, a timeout or an output the host refuses.
fn hostile(adapter: &Adapter) -> Check {
    let mut deep = String::from("{\"type\": \"object\"");
    for _ in 0..5000 {
        deep.push_str(", \"properties\": {\"x\": {\"type\": \"object\"");
    }
    deep.push_str(&"}}".repeat(5000));
    deep.push('}');
    let mut doubling = serde_json::Map::new();
    for i in 0..40 {
        let next = format!("#/$defs/d{}", i + 1);
        doubling.insert(
            format!("d{i}"),
            json!({"type": "object", "properties": {"a": {"$ref": next}, "b": {"$ref": next}}}),
        );
    }
    doubling.insert("d40".into(), json!({"type": "string"}));
    let many: serde_json::Map<String, Value> = (0..20_000)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    let mut n = 0;
    let mut schema = |s: Value| {
        n += 1;
        json!({"name": format!("h{n}"), "inputSchema": s}).to_string()
    };
    let tools = [
        "{\"name\": \"x\",".to_owned(),
        "[1, 2, 3]".to_owned(),
        json!({"inputSchema": {"type": "object"}}).to_string(),
        json!({"name": format!("a\u{0}b\u{202e}{}", "c".repeat(4000))}).to_string(),
        format!("{{\"name\": \"deep\", \"inputSchema\": {deep}}}"),
        schema(
            json!({"type": "object", "properties": {"e": {"enum": (0..50_000).collect::<Vec<_>>()}}}),
        ),
        schema(
            json!({"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}),
        ),
        schema(
            json!({"type": "object", "properties": {"x": {"$ref": "https://127.0.0.1:9/s.json"}}}),
        ),
        schema(
            json!({"type": "object", "$defs": doubling, "properties": {"r": {"$ref": "#/$defs/d0"}}}),
        ),
        schema(json!({"type": "object", "properties": many})),
        schema(json!({"type": "string"})),
        schema(
            json!({"type": "object", "properties": {"p": {"type": "string", "pattern": "(a+)+$".repeat(200)}}}),
        ),
        json!({"name": "long", "description": "d".repeat(900_000)}).to_string(),
    ];
    let results = [
        "not json".to_owned(),
        json!({"content": [{"type": "image", "mimeType": "image/png", "data": "%%%"}]}).to_string(),
        json!({"content": [{"type": "image", "mimeType": "image/svg+xml", "data": "aGk="}]}).to_string(),
        json!({"content": (0..5000).map(|i| json!({"type": "text", "text": i.to_string()})).collect::<Vec<_>>()}).to_string(),
        json!({"content": [{"type": "text", "text": "x".repeat(3 << 20)}]}).to_string(),
        json!({"content": [{"type": "resource", "resource": {"uri": "file:///etc/passwd", "blob": "!!"}}], "isError": "yes"}).to_string(),
    ];
    let mut cleaned = 0;
    let mut refused = 0;
    let mut problems = Vec::new();
    let mut note = |r: Result<(), GuardError>| match r {
        Ok(()) => cleaned += 1,
        Err(e) if breach(&e) => problems.push(e.to_string()),
        Err(_) => refused += 1,
    };
    let mut kept = Vec::new();
    for r in adapter.accept_tools("hostile", &tools) {
        note(r.map(|t| kept.push(t)));
    }
    for r in &results {
        note(adapter.to_result("hostile", "t", r).map(|_| ()));
    }
    let kept_refs: Vec<&SanitizedTool> = kept.iter().collect();
    for provider in Provider::ALL {
        for r in adapter.lower_tools(&kept_refs, provider) {
            note(r.map(|_| ()));
        }
    }
    Check {
        name: "hostile inputs",
        pass: problems.is_empty(),
        detail: format!(
            "{} tool lists and results, then lowered: {cleaned} cleaned, {refused} refused, {} trapped, timed out or refused by the host{}",
            tools.len() + results.len(),
            problems.len(),
            problems
                .first()
                .map(|p| format!("; first: {p}"))
                .unwrap_or_default()
        ),
    }
}

/// Prompts and resources: `context` over real-shaped items and hostile ones, each
/// accepted or refused, never a trap, a timeout or an output the host refuses. An
/// adapter without `context` passes, saying the host runs the reference's for it.
fn context(adapter: &Adapter) -> Check {
    use super::context::ContextKind;
    if !adapter.contextual() {
        return Check {
            name: "context",
            pass: true,
            detail: "no edgar:schema/context export: the host runs the reference adapter's for its prompts and resources".into(),
        };
    }
    let args: Vec<Value> = (0..5000)
        .map(|i| json!({"name": format!("a{i}")}))
        .collect();
    let prompts = [
        json!({"name": "simple-prompt", "description": "A prompt without arguments"}).to_string(),
        json!({"name": "args-prompt", "title": "Arguments", "arguments": [
            {"name": "city", "description": "Name of the city", "required": true},
            {"name": "state", "description": "Name of the state"}]})
        .to_string(),
        "{\"name\": \"x\",".to_owned(),
        "[1, 2, 3]".to_owned(),
        json!({"name": format!("a\u{0}b\u{202e}{}", "c".repeat(4000))}).to_string(),
        json!({"name": "many", "arguments": args}).to_string(),
        json!({"name": "twice", "arguments": [{"name": "a"}, {"name": "a"}]}).to_string(),
        json!({"name": "long", "description": "d".repeat(900_000)}).to_string(),
        format!("{}{}", "[".repeat(5000), "]".repeat(5000)),
    ];
    let resources = [
        json!({"uri": "test://static/resource/1", "name": "Resource 1", "mimeType": "text/plain"})
            .to_string(),
        json!({"uri": "not a uri", "name": "spaced"}).to_string(),
        json!({"uri": format!("x://{}", "a".repeat(100_000)), "name": "long"}).to_string(),
        json!({"uri": "test://n", "name": "new\nline", "mimeType": "\"quoted\""}).to_string(),
        json!({"uri": "test://size", "name": "size", "size": -1}).to_string(),
    ];
    let templates = [
        json!({"uriTemplate": "test://static/resource/{id}", "name": "Static"}).to_string(),
        json!({"uri": "test://no-template", "name": "t"}).to_string(),
    ];
    let (mut accepted, mut refused, mut problems) = (0, 0, Vec::new());
    for (kind, items) in [
        (ContextKind::Prompt, &prompts[..]),
        (ContextKind::Resource, &resources[..]),
        (ContextKind::Template, &templates[..]),
    ] {
        for r in adapter.accept_context("hostile", kind, items) {
            match r {
                Ok(_) => accepted += 1,
                Err(e) if breach(&e) => problems.push(e),
                Err(_) => refused += 1,
            }
        }
    }
    Check {
        name: "context",
        pass: problems.is_empty(),
        detail: format!(
            "{} prompts, resources and templates: {accepted} accepted, {refused} refused, {} trapped, timed out or refused by the host{}",
            prompts.len() + resources.len() + templates.len(),
            problems.len(),
            first(&problems)
        ),
    }
}

/// Keywords that constrain a value (annotations such as `description` do not).
const CONSTRAINTS: &[&str] = &[
    "type",
    "enum",
    "const",
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "prefixItems",
    "items",
    "minProperties",
    "maxProperties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "$ref",
];

/// Constraint keywords in a schema, counted through every subschema.
pub fn constraints(schema: &Value) -> usize {
    match schema {
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| {
                let own = usize::from(CONSTRAINTS.contains(&k.as_str()));
                let below = match k.as_str() {
                    "properties" | "$defs" | "definitions" | "patternProperties"
                    | "dependentSchemas" => v
                        .as_object()
                        .map_or(0, |m| m.values().map(constraints).sum()),
                    "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                        v.as_array().map_or(0, |a| a.iter().map(constraints).sum())
                    }
                    "items"
                    | "additionalProperties"
                    | "not"
                    | "if"
                    | "then"
                    | "else"
                    | "contains"
                    | "propertyNames" => constraints(v),
                    _ => 0,
                };
                own + below
            })
            .sum(),
        _ => 0,
    }
}

/// Whether a loss names a constraint keyword (rather than a property or a rewrite).
fn lost_constraint(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .is_some_and(|k| CONSTRAINTS.contains(&k))
}

/// For each provider: every accepted tool lowered, valid for the provider (the host
/// refuses any that is not), and how much was kept.
fn providers(
    adapter: &Adapter,
    ok: &[&SanitizedTool],
    checks: &mut Vec<Check>,
) -> Vec<Vec<Result<LoweredTool, GuardError>>> {
    let mut all = Vec::new();
    let mut parts = Vec::new();
    let mut pass = true;
    for provider in Provider::ALL {
        let lowered = adapter.lower_tools(ok, provider);
        let mut valid = 0;
        let mut total = 0;
        let mut lost = 0;
        let mut changes = 0;
        let mut errors = Vec::new();
        for (t, r) in ok.iter().zip(&lowered) {
            match r {
                Ok(l) => {
                    // The host checked it already; checked again so the report cannot lie.
                    if violations(l.profile(), t.name(), l.input_schema()).is_empty() {
                        valid += 1;
                    }
                    total += constraints(t.input_schema());
                    lost += l
                        .losses()
                        .iter()
                        .filter(|d| lost_constraint(&d.path))
                        .count();
                    changes += l.losses().len();
                }
                Err(e) => errors.push(e),
            }
        }
        let breaches: Vec<&GuardError> = errors.iter().copied().filter(|e| breach(e)).collect();
        pass &= breaches.is_empty() && valid + errors.len() == ok.len();
        let kept = if total == 0 {
            "no constraints".to_owned()
        } else {
            format!(
                "{:.1}% of constraints kept",
                100.0 * (total.saturating_sub(lost)) as f64 / total as f64
            )
        };
        parts.push(format!(
            "{provider}: {valid}/{} valid, {kept}, {changes} changes{}{}",
            ok.len(),
            if errors.len() > breaches.len() {
                format!(", {} refused", errors.len() - breaches.len())
            } else {
                String::new()
            },
            first(breaches)
        ));
        all.push(lowered);
    }
    let generic_only = adapter.contract() == "0.1";
    checks.push(Check {
        name: "providers",
        pass,
        detail: if generic_only {
            format!(
                "the adapter predates lower-schema: every provider gets the generic schema ({})",
                parts.join("; ")
            )
        } else {
            parts.join("; ")
        },
    });
    all
}

/// The same inputs again, on fresh instances, give the same outputs.
fn determinism(
    adapter: &Adapter,
    corpus: &[CorpusServer],
    accepted: &[Result<SanitizedTool, GuardError>],
    lowered: &[Vec<Result<LoweredTool, GuardError>>],
) -> Check {
    let again: Vec<Result<SanitizedTool, GuardError>> = corpus
        .iter()
        .flat_map(|s| adapter.accept_tools(&s.server, &s.tools))
        .collect();
    let same =
        |a: &Result<SanitizedTool, GuardError>, b: &Result<SanitizedTool, GuardError>| match (a, b)
        {
            (Ok(a), Ok(b)) => a == b,
            (Err(a), Err(b)) => a.to_string() == b.to_string(),
            _ => false,
        };
    let mut differ: Vec<String> = accepted
        .iter()
        .zip(&again)
        .filter(|(a, b)| !same(a, b))
        .map(|(a, _)| match a {
            Ok(t) => t.name().to_owned(),
            Err(e) => e.to_string(),
        })
        .collect();
    let ok: Vec<&SanitizedTool> = accepted.iter().filter_map(|r| r.as_ref().ok()).collect();
    for (provider, first_run) in Provider::ALL.into_iter().zip(lowered) {
        for ((t, a), b) in ok
            .iter()
            .zip(first_run)
            .zip(adapter.lower_tools(&ok, provider))
        {
            let equal = match (a, &b) {
                (Ok(a), Ok(b)) => a == b,
                (Err(a), Err(b)) => a.to_string() == b.to_string(),
                _ => false,
            };
            if !equal {
                differ.push(format!("{} for {provider}", t.name()));
            }
        }
    }
    Check {
        name: "determinism",
        pass: differ.is_empty(),
        detail: if differ.is_empty() {
            "a second run on fresh instances gave identical names, schemas and lowerings".into()
        } else {
            format!(
                "{} outputs differ on a second run; first: {}",
                differ.len(),
                differ[0]
            )
        },
    }
}
