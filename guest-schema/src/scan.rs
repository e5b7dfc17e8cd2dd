//! Findings: what a tool's words or a result's text may do to the model or to the user,
//! found offline by rules that are data in this file (a third-party adapter brings its
//! own). A tool is scanned as the server sent it (before `to-schema` cleans it), so what
//! the cleaning would hide is still reported; a result is scanned as the text the model
//! would read, so the host can mask a secret by its span.
//!
//! Kinds: invisible or deceptive characters, instructions aimed at the model, shadowing
//! of other tools, exfiltration hints, secrets. Each finding names its rule (and the rule
//! set it comes from, for secrets) and never quotes a secret.

use crate::types::{Finding, FindingKind, Severity};

/// Most findings reported for one tool or one text.
pub const MAX_FINDINGS: usize = 64;
/// Longest string scanned for words (invisible characters and secrets are found in
/// any length); descriptions are far shorter.
const MAX_WORDS_SCANNED: usize = 64 << 10;

/// Scans one tool object from `tools/list`, as JSON text. Not valid JSON: no findings
/// (`to-schema` refuses it).
pub fn scan_tool(_server: &str, tool_json: &str) -> Vec<Finding> {
    use serde::de::DeserializeSeed;
    let mut out = Findings::default();
    let mut de = serde_json::Deserializer::from_str(tool_json);
    match tool::Tool(&mut out)
        .deserialize(&mut de)
        .and_then(|()| de.end())
    {
        Ok(()) => out.0,
        Err(_) => Vec::new(),
    }
}

/// Scans text the model will read (a result's text block). Secrets, invisible
/// characters, and instructions aimed at the model (a result is data, not orders).
pub fn scan_text(text: &str) -> Vec<Finding> {
    let mut out = Findings::default();
    words(text, "", false, &mut out);
    out.0
}

#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn push(
        &mut self,
        kind: FindingKind,
        severity: Severity,
        rule: &str,
        path: &str,
        span: (usize, usize),
        message: String,
    ) {
        if self.0.len() < MAX_FINDINGS {
            self.0.push(Finding {
                kind,
                severity,
                rule: rule.to_owned(),
                path: path.to_owned(),
                start: span.0 as u32,
                end: span.1 as u32,
                message,
            });
        }
    }
}

/// The JSON Schema keywords and type names most strings of a schema are: no rule finds
/// anything in them (a test checks), so they are not scanned.
const SCHEMA_WORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "description",
    "items",
    "enum",
    "default",
    "title",
    "format",
    "additionalProperties",
    "anyOf",
    "oneOf",
    "$schema",
    "string",
    "object",
    "number",
    "integer",
    "boolean",
    "array",
    "null",
];

/// All rules over one string. `describes_tool`: the string describes the tool itself
/// (where addresses and links are reported as exfiltration hints).
fn words(text: &str, path: &str, describes_tool: bool, out: &mut Findings) {
    // Every invisible character this file knows is outside ASCII.
    if !text.is_ascii() {
        invisible(text, path, out);
    }
    let may_match = Prefilter::rules_in(text);
    if may_match & Prefilter::SECRETS != 0 {
        secrets(text, may_match, path, out);
    }
    let text = &text[..crate::text::floor_boundary(text, MAX_WORDS_SCANNED)];
    let exfiltration_hints =
        describes_tool && (may_match & Prefilter::EXFILTRATION != 0 || text.len() >= 80);
    if may_match & Prefilter::PHRASES == 0 && !exfiltration_hints {
        return;
    }
    // ASCII lowercasing keeps every byte offset.
    let lower = text.to_ascii_lowercase();
    for (i, rule) in PHRASES.iter().enumerate() {
        if may_match & (1 << i) == 0 {
            continue;
        }
        if let Some(span) = rule.find(&lower) {
            // A sensitive file only named (a path rule that refuses it) is worth a look;
            // one the text asks to read or pass along is the attack.
            let severity = if rule.id == "sensitive-file" && !asks_to_use(&lower, span) {
                Medium
            } else {
                rule.severity
            };
            out.push(
                rule.kind,
                severity,
                rule.id,
                path,
                span,
                rule.message.to_owned(),
            );
        }
    }
    if exfiltration_hints {
        exfiltration(text, &lower, path, out);
    }
}

/// Which rules may match a string, found in one pass over its bytes (ASCII case
/// ignored): each phrase's first word, each secret rule's prefixes, and what starts an
/// address or a link. A rule whose pattern does not occur cannot match, so only the
/// others run their own, exact, search; most strings of a schema run none.
///
/// The tables are built at compile time: an automaton built at run time (aho-corasick's
/// NFA) cost more per instance than the scan of a whole server's list, since each
/// server's tools get a fresh instance.
struct Prefilter;

/// The exfiltration hints' patterns: addresses and links.
const LINKS: &[&str] = &["@", "http://", "https://"];

/// One bit per rule of the prefilter: the phrases, the secret rules, the private key,
/// the JWT, the links.
const RULES: usize = PHRASES.len() + SECRETS.len() + 3;
const _: () = assert!(RULES <= 128);

/// The patterns of prefilter rule `rule`.
const fn patterns(rule: usize) -> &'static [&'static str] {
    let (p, s) = (PHRASES.len(), SECRETS.len());
    if rule < p {
        PHRASES[rule].words.split_at(1).0
    } else if rule < p + s {
        SECRETS[rule - p].prefixes
    } else if rule == p + s {
        PRIVATE_KEY
    } else if rule == p + s + 1 {
        JWT
    } else {
        LINKS
    }
}

/// For each byte (256: the end of the text), the rules one of whose patterns has it, in
/// either case, at `pos`; a pattern shorter than that takes any byte there.
const fn table(pos: usize) -> [u128; 257] {
    let mut t = [0u128; 257];
    let mut r = 0;
    while r < RULES {
        let pats = patterns(r);
        let mut k = 0;
        while k < pats.len() {
            let b = pats[k].as_bytes();
            if b.len() > pos {
                t[b[pos].to_ascii_lowercase() as usize] |= 1 << r;
                t[b[pos].to_ascii_uppercase() as usize] |= 1 << r;
            } else {
                let mut j = 0;
                while j < t.len() {
                    t[j] |= 1 << r;
                    j += 1;
                }
            }
            k += 1;
        }
        r += 1;
    }
    t
}

static FIRST: [u128; 257] = table(0);
static SECOND: [u128; 257] = table(1);

impl Prefilter {
    /// Bits `0..PHRASES.len()`: the phrases.
    const PHRASES: u128 = (1 << PHRASES.len()) - 1;
    /// Then the secret rules, the private key and the JWT.
    const SECRETS: u128 = ((1 << (SECRETS.len() + 2)) - 1) << PHRASES.len();
    const PRIVATE_KEY: u32 = (PHRASES.len() + SECRETS.len()) as u32;
    const JWT: u32 = Prefilter::PRIVATE_KEY + 1;
    /// Then the addresses and links.
    const EXFILTRATION: u128 = 1 << (Prefilter::JWT + 1);

    /// A bit per rule one of whose patterns occurs in `text`: a rule is a candidate
    /// where both its first two bytes fit, and is checked there in full.
    fn rules_in(text: &str) -> u128 {
        let b = text.as_bytes();
        let mut bits = 0u128;
        for i in 0..b.len() {
            let next = b.get(i + 1).map_or(256, |&c| c as usize);
            let mut candidates = FIRST[b[i] as usize] & SECOND[next] & !bits;
            while candidates != 0 {
                let r = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                let here = &b[i..];
                if patterns(r).iter().any(|p| {
                    here.len() >= p.len() && here[..p.len()].eq_ignore_ascii_case(p.as_bytes())
                }) {
                    bits |= 1 << r;
                }
            }
        }
        bits
    }
}

/// Whether the words around `span` ask the model to read or pass along what it names.
fn asks_to_use(lower: &str, span: (usize, usize)) -> bool {
    const VERBS: [&str; 8] = [
        "read", "cat ", "open", "send", "pass", "include", "upload", "content",
    ];
    let from = crate::text::floor_boundary(lower, span.0.saturating_sub(80));
    let to = crate::text::floor_boundary(lower, span.1 + 80);
    VERBS.iter().any(|v| lower[from..to].contains(v))
}

/// A phrase rule: words in order, each within `gap` bytes of the one before.
struct Phrase {
    id: &'static str,
    kind: FindingKind,
    severity: Severity,
    words: &'static [&'static str],
    gap: usize,
    message: &'static str,
}

impl Phrase {
    fn find(&self, lower: &str) -> Option<(usize, usize)> {
        let first = self.words.first()?;
        let mut from = 0;
        'start: while let Some(i) = lower[from..].find(first) {
            let start = from + i;
            from = start + first.len();
            if !at_word_start(lower, start) {
                continue;
            }
            let mut end = start + first.len();
            for w in &self.words[1..] {
                let window =
                    &lower[end..crate::text::floor_boundary(lower, end + self.gap + w.len())];
                match window.find(w) {
                    Some(j) => end += j + w.len(),
                    None => continue 'start,
                }
            }
            return Some((start, end));
        }
        None
    }
}

fn at_word_start(s: &str, at: usize) -> bool {
    let before = s[..at].chars().next_back();
    let first = s[at..].chars().next();
    // A word starting with punctuation (`<important>`, `~/.ssh`) needs no boundary.
    !first.is_some_and(|c| c.is_alphanumeric()) || !before.is_some_and(|c| c.is_alphanumeric())
}

use FindingKind::{Exfiltration, Instructions, Shadowing};
use Severity::{High, Low, Medium};

/// Instructions aimed at the model and shadowing of other tools, as phrases. Each is
/// taken from a published attack (Invariant Labs' tool-poisoning and shadowing
/// examples, the OWASP LLM prompt-injection cases) and kept narrow enough for real
/// tools (measured on the 2,506 corpus tools: `docs/security.md`).
const PHRASES: &[Phrase] = &[
    Phrase {
        id: "hidden-block",
        kind: Instructions,
        severity: High,
        words: &["<important>"],
        gap: 0,
        message: "an <IMPORTANT> block: instructions for the model inside a description",
    },
    Phrase {
        id: "hidden-block",
        kind: Instructions,
        severity: High,
        words: &["<system>"],
        gap: 0,
        message: "a <system> block: text posing as the system prompt",
    },
    Phrase {
        id: "hidden-block",
        kind: Instructions,
        severity: Medium,
        words: &["<instructions>"],
        gap: 0,
        message: "an <instructions> block aimed at the model",
    },
    Phrase {
        id: "hidden-block",
        kind: Instructions,
        severity: High,
        words: &["<|im_start|>"],
        gap: 0,
        message: "a chat-template marker: text posing as another turn",
    },
    Phrase {
        id: "hidden-block",
        kind: Instructions,
        severity: Medium,
        words: &["<!--"],
        gap: 0,
        message: "an HTML comment: text meant to be read but not shown",
    },
    Phrase {
        id: "conceal-from-user",
        kind: Instructions,
        severity: High,
        words: &["do not", "tell", "user"],
        gap: 24,
        message: "asks the model to keep something from the user",
    },
    Phrase {
        id: "conceal-from-user",
        kind: Instructions,
        severity: High,
        words: &["don't", "tell", "user"],
        gap: 24,
        message: "asks the model to keep something from the user",
    },
    Phrase {
        id: "conceal-from-user",
        kind: Instructions,
        severity: High,
        words: &["not", "mention", "to the user"],
        gap: 40,
        message: "asks the model to keep something from the user",
    },
    Phrase {
        id: "conceal-from-user",
        kind: Instructions,
        severity: High,
        words: &["without", "telling", "user"],
        gap: 16,
        message: "asks the model to act without telling the user",
    },
    Phrase {
        id: "conceal-from-user",
        kind: Instructions,
        severity: High,
        words: &["without", "informing", "user"],
        gap: 16,
        message: "asks the model to act without telling the user",
    },
    Phrase {
        id: "conceal-from-user",
        kind: Instructions,
        severity: High,
        words: &["hide", "from the user"],
        gap: 40,
        message: "asks the model to hide something from the user",
    },
    Phrase {
        id: "conceal-from-user",
        kind: Instructions,
        severity: High,
        words: &["user", "must not", "know"],
        gap: 24,
        message: "asks the model to keep something from the user",
    },
    Phrase {
        id: "conceal-from-user",
        kind: Instructions,
        severity: High,
        words: &["do not", "notify", "user"],
        gap: 24,
        message: "asks the model to keep something from the user",
    },
    Phrase {
        id: "override-instructions",
        kind: Instructions,
        severity: High,
        words: &["ignore", "instructions"],
        gap: 32,
        message: "tells the model to ignore its instructions",
    },
    Phrase {
        id: "override-instructions",
        kind: Instructions,
        severity: High,
        words: &["disregard", "instructions"],
        gap: 32,
        message: "tells the model to disregard its instructions",
    },
    Phrase {
        id: "override-instructions",
        kind: Instructions,
        severity: High,
        words: &["forget", "instructions"],
        gap: 32,
        message: "tells the model to forget its instructions",
    },
    Phrase {
        id: "override-instructions",
        kind: Instructions,
        severity: Low,
        words: &["system prompt"],
        gap: 0,
        message: "speaks of the system prompt",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &["~/.ssh"],
        gap: 0,
        message: "names the user's SSH keys",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &["id_rsa"],
        gap: 0,
        message: "names an SSH private key file",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &["id_ed25519"],
        gap: 0,
        message: "names an SSH private key file",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &[".aws/credentials"],
        gap: 0,
        message: "names the user's cloud credentials file",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &["/etc/shadow"],
        gap: 0,
        message: "names the system's password hashes",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &["mcp.json"],
        gap: 0,
        message: "names an MCP client's configuration (which holds other servers' secrets)",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &["claude_desktop_config"],
        gap: 0,
        message: "names an MCP client's configuration (which holds other servers' secrets)",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &[".git-credentials"],
        gap: 0,
        message: "names stored git credentials",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &[".netrc"],
        gap: 0,
        message: "names stored login credentials",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: Medium,
        words: &["read", ".env"],
        gap: 24,
        message: "asks to read an environment file (where secrets are kept)",
    },
    Phrase {
        id: "sensitive-file",
        kind: Instructions,
        severity: High,
        words: &["contents of", ".env"],
        gap: 24,
        message: "asks for the contents of an environment file (where secrets are kept)",
    },
    Phrase {
        id: "credential-request",
        kind: Instructions,
        severity: High,
        words: &["pass", "private key"],
        gap: 32,
        message: "asks the model to pass along a private key",
    },
    Phrase {
        id: "credential-request",
        kind: Instructions,
        severity: Medium,
        words: &["include", "password"],
        gap: 32,
        message: "asks the model to include a password",
    },
    Phrase {
        id: "credential-request",
        kind: Instructions,
        severity: Medium,
        words: &["send", "credentials"],
        gap: 32,
        message: "asks the model to send credentials",
    },
    Phrase {
        id: "credential-request",
        kind: Instructions,
        severity: Medium,
        words: &["read", "environment variables"],
        gap: 24,
        message: "asks the model to read environment variables",
    },
    Phrase {
        id: "smuggle-argument",
        kind: Instructions,
        severity: High,
        words: &["sidenote"],
        gap: 0,
        message: "a 'sidenote' argument: the published pattern for carrying data out",
    },
    Phrase {
        id: "smuggle-argument",
        kind: Instructions,
        severity: Medium,
        words: &["pass", "content as"],
        gap: 40,
        message: "asks the model to put content into a parameter",
    },
    Phrase {
        id: "smuggle-argument",
        kind: Instructions,
        severity: Medium,
        words: &["contents of", "in the", "argument"],
        gap: 48,
        message: "asks the model to put file contents into an argument",
    },
    Phrase {
        id: "model-addressed",
        kind: Instructions,
        severity: Medium,
        words: &["the assistant must"],
        gap: 0,
        message: "gives the model orders beyond what the tool does",
    },
    Phrase {
        id: "model-addressed",
        kind: Instructions,
        severity: Medium,
        words: &["before using this tool", "read"],
        gap: 48,
        message: "asks the model to read something before using the tool",
    },
    Phrase {
        id: "model-addressed",
        kind: Instructions,
        severity: Low,
        words: &["very important"],
        gap: 0,
        message: "urgency words, common in injected instructions",
    },
    Phrase {
        id: "shadowing",
        kind: Shadowing,
        severity: High,
        words: &["side effect", "tool"],
        gap: 48,
        message: "claims a side effect on another tool",
    },
    Phrase {
        id: "shadowing",
        kind: Shadowing,
        severity: High,
        words: &["when", "this tool is", "available"],
        gap: 24,
        message: "changes behaviour whenever this tool is merely present",
    },
    Phrase {
        id: "shadowing",
        kind: Shadowing,
        severity: High,
        words: &["all", "emails", "to"],
        gap: 24,
        message: "redirects where e-mail goes",
    },
    Phrase {
        id: "shadowing",
        kind: Shadowing,
        severity: High,
        words: &["always", "bcc"],
        gap: 24,
        message: "adds a hidden recipient to e-mail",
    },
    Phrase {
        id: "shadowing",
        kind: Shadowing,
        severity: Medium,
        words: &["other", "tool", "must"],
        gap: 32,
        message: "tells the model how another tool must be used",
    },
    Phrase {
        id: "shadowing",
        kind: Shadowing,
        severity: Medium,
        words: &["when", "calling", "tool", "always"],
        gap: 40,
        message: "changes how the model calls a tool",
    },
    Phrase {
        id: "shadowing",
        kind: Shadowing,
        severity: Medium,
        words: &["mcp_tool_"],
        gap: 0,
        message: "names another server's tool",
    },
];

/// Invisible and deceptive characters, by run: Unicode tags (which spell hidden ASCII),
/// bidirectional controls, zero-width characters and other format characters.
fn invisible(s: &str, path: &str, out: &mut Findings) {
    let mut run: Option<(usize, usize, Class, String)> = None;
    let flush = |run: &mut Option<(usize, usize, Class, String)>, out: &mut Findings| {
        if let Some((start, end, class, hidden)) = run.take() {
            let (rule, severity, what) = class.describe();
            let message = if hidden.is_empty() {
                what.to_owned()
            } else {
                format!("{what}; they spell \"{hidden}\"")
            };
            out.push(
                FindingKind::InvisibleText,
                severity,
                rule,
                path,
                (start, end),
                message,
            );
        }
    };
    let mut before = None;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let class = classify(c, before, chars.peek().map(|p| p.1));
        before = Some(c);
        match (class, &mut run) {
            (Some(class), Some((_, end, current, hidden))) if *current == class => {
                *end = i + c.len_utf8();
                if class == Class::Tag {
                    push_hidden(hidden, c);
                }
            }
            (Some(class), _) => {
                flush(&mut run, out);
                let mut hidden = String::new();
                if class == Class::Tag {
                    push_hidden(&mut hidden, c);
                }
                run = Some((i, i + c.len_utf8(), class, hidden));
            }
            (None, _) => flush(&mut run, out),
        }
    }
    flush(&mut run, out);
}

/// The ASCII a tag character stands for, kept printable and short.
fn push_hidden(hidden: &mut String, c: char) {
    let ascii = (c as u32).wrapping_sub(0xE0000);
    if hidden.len() < 60
        && let Some(a) = char::from_u32(ascii).filter(|a| a.is_ascii_graphic() || *a == ' ')
    {
        hidden.push(a);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Tag,
    Bidi,
    ZeroWidth,
    Format,
}

impl Class {
    fn describe(self) -> (&'static str, Severity, &'static str) {
        match self {
            Class::Tag => (
                "unicode-tags",
                High,
                "Unicode tag characters: invisible, read by models",
            ),
            Class::Bidi => (
                "bidi-controls",
                High,
                "bidirectional controls: the text shown is not the text read",
            ),
            Class::ZeroWidth => ("zero-width", Medium, "zero-width characters"),
            Class::Format => ("invisible-format", Medium, "invisible format characters"),
        }
    }
}

fn classify(c: char, before: Option<char>, after: Option<char>) -> Option<Class> {
    let script = |c: Option<char>| c.is_some_and(|c| !c.is_ascii());
    match c as u32 {
        0xE0000..=0xE007F => Some(Class::Tag),
        0x202A..=0x202E | 0x2066..=0x2069 => Some(Class::Bidi),
        // Joiners belong in emoji sequences and in Indic and Persian words.
        0x200C | 0x200D if script(before) && script(after) => None,
        0x200B..=0x200D | 0x2060 | 0xFEFF => Some(Class::ZeroWidth),
        0x00AD
        | 0x180E
        | 0x2061..=0x2064
        | 0x115F
        | 0x1160
        | 0x3164
        | 0xFFA0
        | 0xE0100..=0xE01EF => Some(Class::Format),
        _ => None,
    }
}

/// A tool name with letters from outside ASCII: look-alike characters (a Cyrillic `а`
/// for a Latin `a`) make one tool pass for another.
fn deceptive_name(name: &str, path: &str, out: &mut Findings) {
    let latin = name.chars().any(|c| c.is_ascii_alphabetic());
    let Some((i, c)) = name
        .char_indices()
        .find(|(_, c)| c.is_alphabetic() && !c.is_ascii())
    else {
        return;
    };
    let lookalike = matches!(c as u32, 0x0370..=0x03FF | 0x0400..=0x04FF | 0xFF00..=0xFFEF);
    let (rule, severity, message) = if latin && lookalike {
        (
            "mixed-script-name",
            High,
            "Latin letters mixed with look-alike Greek, Cyrillic or full-width ones",
        )
    } else {
        (
            "non-ascii-name",
            Medium,
            "letters from outside ASCII in a tool name",
        )
    };
    out.push(
        FindingKind::DeceptiveName,
        severity,
        rule,
        path,
        (i, i + c.len_utf8()),
        message.to_owned(),
    );
}

/// Addresses, links and encoded blobs in a tool's own description: a description has
/// little need of them, an exfiltration instruction does.
fn exfiltration(text: &str, lower: &str, path: &str, out: &mut Findings) {
    const SEND: [&str; 5] = ["send", "forward", "upload", "report to", "copy to"];
    // A verb as a word of its own (`fast_forward` is no request to forward).
    let near_send = |at: usize| {
        let from = crate::text::floor_boundary(lower, at.saturating_sub(80));
        let window = &lower[from..at];
        SEND.iter().any(|v| {
            window.match_indices(v).any(|(i, _)| {
                !window[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
    };
    // E-mail addresses: a word with one `@` and a dot after it.
    let bytes = lower.as_bytes();
    for (at, _) in lower.match_indices('@') {
        // Just after the last character that cannot be in an address (which may be
        // several bytes long: `邮箱support@qq.com`).
        let start = lower[..at]
            .char_indices()
            .rfind(|&(_, c)| !(c.is_ascii_alphanumeric() || "._%+-".contains(c)))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = lower[at + 1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || ".-".contains(c)))
            .map_or(lower.len(), |i| at + 1 + i);
        let domain = lower[at + 1..end].trim_end_matches('.');
        if start == at || !domain.contains('.') || bytes.get(start).is_none() {
            continue;
        }
        if domain.ends_with("example.com") || domain.ends_with("example.org") {
            continue;
        }
        let (severity, message) = if near_send(start) {
            (High, "asks to send something to an e-mail address")
        } else {
            (Low, "an e-mail address in a description")
        };
        out.push(
            Exfiltration,
            severity,
            "address",
            path,
            (start, end),
            message.to_owned(),
        );
    }
    for scheme in ["http://", "https://"] {
        for (at, _) in lower.match_indices(scheme) {
            let end = lower[at..]
                .find(char::is_whitespace)
                .map_or(lower.len(), |i| at + i);
            let host = lower[at + scheme.len()..end]
                .split(['/', ':', '?'])
                .next()
                .unwrap_or("");
            let literal_ip =
                !host.is_empty() && host.chars().all(|c| c.is_ascii_digit() || c == '.');
            let (severity, message) = if near_send(at) {
                (Medium, "asks to send something to a URL")
            } else if literal_ip {
                (Medium, "a link to a bare IP address")
            } else {
                (Low, "a link in a description")
            };
            out.push(
                Exfiltration,
                severity,
                "url",
                path,
                (at, end),
                message.to_owned(),
            );
        }
    }
    // Encoded blobs: long runs of base64 with both cases and digits (hex ids are not).
    // Runs of base64 bytes (every one ASCII, so byte offsets are character boundaries).
    let bytes = text.as_bytes();
    let mut start = None;
    for i in 0..=bytes.len() {
        let b64 = bytes
            .get(i)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='));
        match (b64, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                start = None;
                if i - s < 80 {
                    continue;
                }
                let run = &bytes[s..i];
                let mixed = run.iter().any(u8::is_ascii_digit)
                    && run.iter().any(u8::is_ascii_uppercase)
                    && run.iter().any(u8::is_ascii_lowercase);
                if mixed {
                    out.push(
                        Exfiltration,
                        Medium,
                        "encoded-blob",
                        path,
                        (s, i),
                        format!("{} characters of encoded data in a description", i - s),
                    );
                }
            }
            _ => {}
        }
    }
}

/// A secret rule: a fixed prefix, then a body of `min..=max` characters from `body`.
/// From gitleaks' default rule set (MIT), as named; each must end at a word boundary.
struct Secret {
    id: &'static str,
    severity: Severity,
    prefixes: &'static [&'static str],
    body: fn(u8) -> bool,
    min: usize,
    max: usize,
    what: &'static str,
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}
fn upper32(b: u8) -> bool {
    b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b)
}
fn slack(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}
fn pat(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

const SECRETS: &[Secret] = &[
    Secret {
        id: "aws-access-token (gitleaks)",
        severity: High,
        prefixes: &["AKIA", "ASIA", "ABIA", "ACCA"],
        body: upper32,
        min: 16,
        max: 16,
        what: "an AWS access key ID",
    },
    Secret {
        id: "github-pat (gitleaks)",
        severity: High,
        prefixes: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        body: alnum,
        min: 36,
        max: 36,
        what: "a GitHub token",
    },
    Secret {
        id: "github-fine-grained-pat (gitleaks)",
        severity: High,
        prefixes: &["github_pat_"],
        body: pat,
        min: 82,
        max: 82,
        what: "a GitHub fine-grained token",
    },
    Secret {
        id: "gitlab-pat (gitleaks)",
        severity: High,
        prefixes: &["glpat-"],
        body: token,
        min: 20,
        max: 20,
        what: "a GitLab token",
    },
    Secret {
        id: "slack-token (gitleaks)",
        severity: High,
        prefixes: &["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-"],
        body: slack,
        min: 10,
        max: 255,
        what: "a Slack token",
    },
    Secret {
        id: "gcp-api-key (gitleaks)",
        severity: High,
        prefixes: &["AIza"],
        body: token,
        min: 35,
        max: 35,
        what: "a Google API key",
    },
    Secret {
        id: "stripe-access-token (gitleaks)",
        severity: High,
        prefixes: &["sk_live_", "rk_live_"],
        body: alnum,
        min: 24,
        max: 99,
        what: "a Stripe live key",
    },
    Secret {
        id: "stripe-access-token (gitleaks)",
        severity: Medium,
        prefixes: &["sk_test_", "rk_test_"],
        body: alnum,
        min: 24,
        max: 99,
        what: "a Stripe test key",
    },
    Secret {
        id: "anthropic-api-key (gitleaks)",
        severity: High,
        prefixes: &["sk-ant-api03-", "sk-ant-admin01-"],
        body: token,
        min: 80,
        max: 120,
        what: "an Anthropic API key",
    },
    Secret {
        id: "openai-api-key (gitleaks)",
        severity: High,
        prefixes: &["sk-proj-", "sk-svcacct-", "sk-admin-"],
        body: token,
        min: 40,
        max: 200,
        what: "an OpenAI API key",
    },
    Secret {
        id: "npm-access-token (gitleaks)",
        severity: High,
        prefixes: &["npm_"],
        body: alnum,
        min: 36,
        max: 36,
        what: "an npm token",
    },
    Secret {
        id: "huggingface-access-token (gitleaks)",
        severity: High,
        prefixes: &["hf_"],
        body: alnum,
        min: 34,
        max: 34,
        what: "a Hugging Face token",
    },
];

/// Secrets by the rules above, private keys, and JSON Web Tokens.
/// The secret rules' prefixes, then the private key's and the JWT's.
const PRIVATE_KEY: &[&str] = &["-----BEGIN "];
const JWT: &[&str] = &["eyJ"];

/// The secrets in `s`, given the [`Prefilter`]'s bits for it.
fn secrets(s: &str, may_match: u128, path: &str, out: &mut Findings) {
    let b = s.as_bytes();
    for (i, rule) in SECRETS.iter().enumerate() {
        if may_match & (1 << (PHRASES.len() + i)) == 0 {
            continue;
        }
        for prefix in rule.prefixes {
            for (at, _) in s.match_indices(prefix) {
                if at > 0 && token(b[at - 1]) {
                    continue;
                }
                let body = at + prefix.len();
                let len = b[body..]
                    .iter()
                    .take(rule.max + 1)
                    .take_while(|&&c| (rule.body)(c))
                    .count();
                let end = body + len;
                let bounded = b.get(end).is_none_or(|&c| !token(c));
                if len >= rule.min && len <= rule.max && bounded {
                    out.push(
                        FindingKind::Secret,
                        rule.severity,
                        rule.id,
                        path,
                        (at, end),
                        format!("{} (masked)", rule.what),
                    );
                }
            }
        }
    }
    let private_key = may_match & (1 << Prefilter::PRIVATE_KEY) != 0;
    for (at, _) in s.match_indices(PRIVATE_KEY[0]).filter(|_| private_key) {
        let line_end = s[at..].find('\n').map_or(s.len(), |i| at + i);
        if !s[at..line_end].contains("PRIVATE KEY") {
            continue;
        }
        let end = s[at..]
            .find("-----END ")
            .and_then(|i| {
                s[at + i..]
                    .find("KEY-----")
                    .map(|j| at + i + j + "KEY-----".len())
            })
            .unwrap_or(line_end);
        out.push(
            FindingKind::Secret,
            High,
            "private-key (gitleaks)",
            path,
            (at, end),
            "a private key (masked)".to_owned(),
        );
    }
    let jwt = may_match & (1 << Prefilter::JWT) != 0;
    for (at, _) in s.match_indices(JWT[0]).filter(|_| jwt) {
        if at > 0 && token(b[at - 1]) {
            continue;
        }
        let end = at
            + b[at..]
                .iter()
                .take_while(|&&c| token(c) || c == b'.')
                .count();
        let parts: Vec<&str> = s[at..end].split('.').collect();
        if parts.len() == 3 && parts[1].starts_with("eyJ") && parts.iter().all(|p| p.len() >= 10) {
            out.push(
                FindingKind::Secret,
                Medium,
                "jwt (gitleaks)",
                path,
                (at, end),
                "a JSON Web Token (masked)".to_owned(),
            );
        }
    }
}

mod tool;

#[cfg(test)]
mod tests;
