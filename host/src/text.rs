//! Showing untrusted text (from servers, adapters, libraries) in messages and logs:
//! escaped, bounded, one line.

/// Untrusted text in a message: control characters escaped, at most 80 bytes, quoted.
pub fn shown(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(90) + 2);
    out.push('\'');
    for c in s.chars() {
        if out.len() >= 80 {
            out.push('…');
            break;
        }
        if unsafe_to_show(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Control characters, and the invisible formatting characters that reorder or hide
/// text on a terminal (bidirectional overrides and isolates, zero-width characters).
fn unsafe_to_show(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}'
        )
}

/// A message from an adapter or a library, made safe to print: one line, bounded.
pub fn shown_message(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if unsafe_to_show(c) { ' ' } else { c })
        .collect();
    if out.len() > 300 {
        let mut end = 300;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push('…');
    }
    out
}

/// A span of seconds as a person reads it: `45 s`, `12 min`, `5 h`, `3 days`.
pub fn duration(s: u64) -> String {
    match s {
        0..120 => format!("{s} s"),
        120..7200 => format!("{} min", s / 60),
        7200..172800 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86400),
    }
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (the civil-from-days algorithm).
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_reordering_characters_are_escaped() {
        assert_eq!(shown("a\u{202E}b\u{200B}c"), "'a\\u{202e}b\\u{200b}c'");
        assert_eq!(shown_message("x\u{2066}y"), "x y");
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_218_861), "2026-12-02T13:41:01Z");
    }

    #[test]
    fn shown_escapes_and_bounds() {
        assert_eq!(shown("a\u{1b}[31m"), "'a\\u{1b}[31m'");
        assert!(shown(&"x".repeat(500)).len() < 90);
        assert!(!shown_message("a\nb\rc").contains('\n'));
    }
}
