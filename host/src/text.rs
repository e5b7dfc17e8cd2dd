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
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// A message from an adapter or a library, made safe to print: one line, bounded.
pub fn shown_message(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_escapes_and_bounds() {
        assert_eq!(shown("a\u{1b}[31m"), "'a\\u{1b}[31m'");
        assert!(shown(&"x".repeat(500)).len() < 90);
        assert!(!shown_message("a\nb\rc").contains('\n'));
    }
}
