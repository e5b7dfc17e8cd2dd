//! Showing untrusted text (from servers, adapters, libraries) in messages and logs:
//! escaped, bounded, one line.

/// Untrusted text in a message: control characters escaped, at most 80 bytes, quoted.
pub fn shown(s: &str) -> String {
    shown_up_to(s, 80)
}

/// [`shown`], cut after about `max` bytes instead of 80: for text whose end says what
/// went wrong (a path in a server's stderr line).
pub fn shown_up_to(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max + 10) + 2);
    out.push('\'');
    for c in s.chars() {
        if out.len() >= max {
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

/// Text a human reviews (an approval, a pin diff, the audit tail, an error, a forwarded
/// question), whole: control characters and every invisible or deceptive character (see
/// [`is_invisible`]) written as `\u{...}` escapes, so what the reader sees is all there
/// is. Nothing is cut.
pub fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if unsafe_to_show(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Control characters and the invisible characters below.
pub fn unsafe_to_show(c: char) -> bool {
    c.is_control() || is_invisible(c)
}

/// Characters that render as nothing, or that change how the text around them renders,
/// on a terminal: Unicode format characters (zero-width, joiners, word joiner, invisible
/// operators, soft hyphen, BOM), bidirectional marks, embeddings, overrides and isolates,
/// line and paragraph separators, variation selectors, tag characters (an invisible copy
/// of ASCII a model reads), Hangul and Mongolian fillers, and interlinear annotation.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{205F}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFFB}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E007F}'
            | '\u{E0100}'..='\u{E01EF}'
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

/// `n` of a thing, its name plural unless there is one: `1 server`, `2 files`.
pub fn counted(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
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

/// `*` matches any run of characters (`/` included), `?` any one character; everything
/// else matches itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// `glob` as its definition says, slowly: `*` any run, `?` any one character.
    fn glob_by_definition(p: &[char], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('*', rest)) => (0..=t.len()).any(|i| glob_by_definition(rest, &t[i..])),
            Some((&c, rest)) => t
                .split_first()
                .is_some_and(|(&u, t)| (c == '?' || c == u) && glob_by_definition(rest, t)),
        }
    }

    proptest! {
        /// The policy's patterns match exactly what their definition says they match.
        #[test]
        fn glob_matches_as_defined(pattern in "[ab*?é]{0,8}", text in "[abé]{0,10}") {
            let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
            prop_assert_eq!(glob(&pattern, &text), glob_by_definition(&p, &t), "{} ~ {}", pattern, text);
        }

        /// Whatever a server writes, what a human is shown of it holds no control or
        /// invisible character, is one line, and is bounded where it says it is.
        #[test]
        fn no_text_shows_an_invisible_character(s in any::<String>(), max in 1..200usize) {
            for out in [shown(&s), shown_up_to(&s, max), visible(&s), shown_message(&s)] {
                prop_assert!(!out.chars().any(unsafe_to_show), "{out:?}");
                prop_assert!(!out.contains(['\n', '\r']));
            }
            prop_assert!(shown(&s).len() <= 80 + 10 + 3 + 1);
            prop_assert!(shown_up_to(&s, max).len() <= max + 10 + 3 + 1);
            prop_assert!(shown_message(&s).len() <= 300 + 3);
            // Text with nothing to escape is shown as it is.
            if !s.chars().any(unsafe_to_show) {
                prop_assert_eq!(visible(&s), s.clone());
                if s.len() < 80 {
                    prop_assert_eq!(shown(&s), format!("'{s}'"));
                }
            }
        }
    }

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1, "file"), "1 file");
        assert_eq!(counted(0, "file"), "0 files");
        assert_eq!(counted(2, "server"), "2 servers");
    }

    #[test]
    fn invisible_reordering_characters_are_escaped() {
        assert_eq!(shown("a\u{202E}b\u{200B}c"), "'a\\u{202e}b\\u{200b}c'");
        assert_eq!(shown_message("x\u{2066}y"), "x y");
    }

    #[test]
    fn every_class_of_invisible_character_is_made_visible_and_nothing_is_cut() {
        for (hidden, label) in [
            ("\u{E0049}\u{E0047}\u{E004E}", "tag characters"),
            (
                "\u{202E}\u{202D}\u{2066}\u{2069}\u{200E}\u{061C}",
                "bidi controls",
            ),
            ("\u{200B}\u{200C}\u{200D}\u{2060}\u{FEFF}", "zero-width"),
            (
                "\u{00AD}\u{2062}\u{180E}\u{3164}\u{115F}",
                "fillers and invisible operators",
            ),
            ("\u{FE0F}\u{E0100}", "variation selectors"),
            ("\u{2028}\u{2029}\u{85}", "line separators"),
            ("\u{1b}[2J\u{7}", "terminal controls"),
        ] {
            let text = format!("read ~/.ssh{hidden} now");
            let v = visible(&text);
            assert!(v.chars().all(|c| !unsafe_to_show(c)), "{label}: {v}");
            assert!(
                v.starts_with("read ~/.ssh\\u{") && v.ends_with(" now"),
                "{label}: {v}"
            );
        }
        let long = "é".repeat(5000);
        assert_eq!(visible(&long), long, "visible text passes whole");
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
        let path = format!("/{}/end.js", "d".repeat(150));
        assert!(shown_up_to(&path, 240).contains("end.js"));
        assert!(shown_up_to(&"x".repeat(500), 240).len() < 250);
        assert!(shown_up_to("a\u{202e}b", 240).contains("\\u{202e}"));
        assert!(!shown_message("a\nb\rc").contains('\n'));
    }
}
