//! Findings an adapter reports (`scan`), checked like everything else it returns: the
//! span lies on character boundaries of the very string the path names, the rule and
//! message are short single lines made safe to show, and there are at most
//! [`MAX_FINDINGS`]. What the host does with them is the session's (policy) business;
//! masking a secret by its span is here.

use serde::Serialize;
use serde_json::Value;

use super::bindings::scan_wit;

/// Most findings accepted for one tool or one text.
pub const MAX_FINDINGS: usize = 64;
/// Longest rule name and message kept.
const MAX_RULE_BYTES: usize = 80;
const MAX_MESSAGE_BYTES: usize = 300;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }

    /// `low`, `medium` or `high`.
    pub fn parse(s: &str) -> Option<Severity> {
        match s {
            "low" => Some(Severity::Low),
            "medium" => Some(Severity::Medium),
            "high" => Some(Severity::High),
            _ => None,
        }
    }
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    InvisibleText,
    DeceptiveName,
    Instructions,
    Shadowing,
    Exfiltration,
    Secret,
}

impl FindingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::InvisibleText => "invisible-text",
            FindingKind::DeceptiveName => "deceptive-name",
            FindingKind::Instructions => "instructions",
            FindingKind::Shadowing => "shadowing",
            FindingKind::Exfiltration => "exfiltration",
            FindingKind::Secret => "secret",
        }
    }
}

/// A checked finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    pub rule: String,
    /// A JSON pointer into the scanned tool; empty for a scanned text.
    pub path: String,
    pub start: usize,
    pub end: usize,
    pub message: String,
}

impl Finding {
    /// One line for a human: severity, kind, rule, where, and the message.
    pub fn line(&self) -> String {
        let at = if self.path.is_empty() {
            String::new()
        } else {
            format!(" at {}", self.path)
        };
        format!(
            "{} {} ({}){at}: {}",
            self.severity.as_str(),
            self.kind.as_str(),
            self.rule,
            self.message
        )
    }
}

/// What a finding's span is checked against: the tool as the server sent it, or a text.
pub(super) enum Scanned<'a> {
    Tool(&'a Value),
    Text(&'a str),
}

/// Checks each raw finding against what was scanned; the first bad one refuses them all.
pub(super) fn check(
    raw: Vec<scan_wit::Finding>,
    scanned: Scanned<'_>,
) -> Result<Vec<Finding>, String> {
    if raw.len() > MAX_FINDINGS {
        return Err(format!("{} findings; at most {MAX_FINDINGS}", raw.len()));
    }
    raw.into_iter().map(|f| one(f, &scanned)).collect()
}

fn one(f: scan_wit::Finding, scanned: &Scanned<'_>) -> Result<Finding, String> {
    let (start, end) = (f.start as usize, f.end as usize);
    let fits = |target: &str| {
        start < end
            && end <= target.len()
            && target.is_char_boundary(start)
            && target.is_char_boundary(end)
    };
    let fitted = match scanned {
        Scanned::Text(text) if f.path.is_empty() => fits(text),
        Scanned::Text(_) => return Err("a finding in a text names a path".into()),
        // A member's finding lies in its value when that is a string, else in its key
        // (the pointer's last segment); a finding in a key whose value is a string
        // says which only by where its span fits.
        Scanned::Tool(tool) => {
            let value = match tool.pointer(&f.path) {
                Some(Value::String(s)) => Some(s.as_str()),
                Some(_) if !f.path.is_empty() => None,
                _ => {
                    return Err(format!(
                        "its path {} names no string",
                        crate::text::shown(&f.path)
                    ));
                }
            };
            value.is_some_and(fits)
                || (!f.path.is_empty() && fits(&unescape(last_segment(&f.path))))
        }
    };
    if !fitted {
        return Err(format!(
            "its span {start}..{end} does not lie on characters of the string it names"
        ));
    }
    let rule = single_line(&f.rule, MAX_RULE_BYTES);
    if rule.is_empty() {
        return Err("a finding without a rule".into());
    }
    Ok(Finding {
        kind: match f.kind {
            scan_wit::FindingKind::InvisibleText => FindingKind::InvisibleText,
            scan_wit::FindingKind::DeceptiveName => FindingKind::DeceptiveName,
            scan_wit::FindingKind::Instructions => FindingKind::Instructions,
            scan_wit::FindingKind::Shadowing => FindingKind::Shadowing,
            scan_wit::FindingKind::Exfiltration => FindingKind::Exfiltration,
            scan_wit::FindingKind::Secret => FindingKind::Secret,
        },
        severity: match f.severity {
            scan_wit::Severity::Low => Severity::Low,
            scan_wit::Severity::Medium => Severity::Medium,
            scan_wit::Severity::High => Severity::High,
        },
        rule,
        path: single_line(&f.path, 1024),
        start,
        end,
        message: single_line(&f.message, MAX_MESSAGE_BYTES),
    })
}

fn last_segment(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// `s` on one line, control and invisible characters escaped, clamped.
fn single_line(s: &str, max: usize) -> String {
    let shown = crate::text::visible(s).replace(['\n', '\r'], " ");
    let cut = shown.floor_char_boundary(max);
    shown[..cut].to_owned()
}

/// `text` with each finding of `kind` replaced by a marker naming its rule. Findings are
/// applied from the end so earlier spans keep their offsets; overlapping ones are merged
/// into the first.
pub fn mask(text: &str, findings: &[&Finding]) -> String {
    let mut spans: Vec<(usize, usize, &str)> = findings
        .iter()
        .filter(|f| {
            f.end <= text.len() && text.is_char_boundary(f.start) && text.is_char_boundary(f.end)
        })
        .map(|f| (f.start, f.end, f.rule.as_str()))
        .collect();
    spans.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, rule) in spans {
        if start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(&format!("[masked by edgar: {rule}]"));
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(path: &str, start: u32, end: u32) -> scan_wit::Finding {
        scan_wit::Finding {
            kind: scan_wit::FindingKind::Secret,
            severity: scan_wit::Severity::High,
            rule: "r\nule".into(),
            path: path.into(),
            start,
            end,
            message: "m\u{E0041}".into(),
        }
    }

    #[test]
    fn spans_must_lie_on_the_string_the_path_names() {
        let tool = serde_json::json!({"description": "héllo", "inputSchema": {"properties": {"side/note": {}}}});
        let ok = check(vec![raw("/description", 0, 3)], Scanned::Tool(&tool));
        let f = ok.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !f[0].rule.contains('\n') && f[0].rule.starts_with('r'),
            "{}",
            f[0].rule
        );
        assert!(!f[0].message.contains('\u{E0041}'), "{}", f[0].message);
        for bad in [
            // Inside `é`, and past the key's end too.
            raw("/description", 2, 12),
            raw("/description", 0, 99),
            raw("/description", 3, 3),
            raw("/missing", 0, 1),
            raw("", 0, 1),
        ] {
            assert!(check(vec![bad], Scanned::Tool(&tool)).is_err());
        }
        // A key's finding lies in the key.
        let key = check(
            vec![raw("/inputSchema/properties/side~1note", 0, 9)],
            Scanned::Tool(&tool),
        );
        assert!(key.is_ok(), "{key:?}");
        // A finding in a key whose value is a string (found by the fuzzer: a bidi
        // control in `format\u{202e}`, beside `"uri"`) lies in the key too.
        let tool = serde_json::json!({"p": {"format\u{202e}": "uri"}});
        let key = check(vec![raw("/p/format\u{202e}", 6, 9)], Scanned::Tool(&tool));
        assert!(key.is_ok(), "{key:?}");
        assert!(check(vec![raw("/x", 0, 1)], Scanned::Text("abc")).is_err());
        assert!(check(vec![raw("", 1, 3)], Scanned::Text("abc")).is_ok());
        let many = (0..=MAX_FINDINGS).map(|_| raw("", 0, 1)).collect();
        assert!(check(many, Scanned::Text("abc")).is_err());
    }

    #[test]
    fn masking_replaces_each_span_once() {
        let f = |start, end| Finding {
            kind: FindingKind::Secret,
            severity: Severity::High,
            rule: "k".into(),
            path: String::new(),
            start,
            end,
            message: String::new(),
        };
        let (a, b, c) = (f(4, 8), f(5, 7), f(12, 16));
        assert_eq!(
            mask("key=SECRET and TOKN!", &[&c, &a, &b]),
            "key=[masked by edgar: k]ET a[masked by edgar: k]OKN!"
        );
    }
}
