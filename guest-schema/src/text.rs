//! Text helpers shared by the three functions: clamping, cutting, quoting, base64.

/// The largest index `<= at` that is a char boundary of `s`.
pub(crate) fn floor_boundary(s: &str, at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    let mut i = at;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest index `>= at` that is a char boundary of `s`.
fn ceil_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// `s` cut to at most `max` bytes at a char boundary, ending in `…` when cut.
/// Returns whether anything was cut.
pub(crate) fn clamp(s: &str, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s.to_owned(), false);
    }
    let end = floor_boundary(s, max.saturating_sub('…'.len_utf8()));
    let mut out = String::with_capacity(end + 3);
    out.push_str(&s[..end]);
    out.push('…');
    (out, true)
}

/// Keeps the head and tail of an oversized text around a marker saying who cut how much,
/// so the model never mistakes the cut for the server's own output.
pub(crate) fn cut_middle(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let head_end = floor_boundary(s, max * 3 / 4);
    let tail_start = ceil_boundary(s, s.len() - max / 4);
    let cut = tail_start - head_end;
    let mut out = String::with_capacity(max + 100);
    out.push_str(&s[..head_end]);
    out.push_str(&format!(
        "\n[edgar cut {cut} of {} bytes from the middle of this output]\n",
        s.len()
    ));
    out.push_str(&s[tail_start..]);
    out
}

/// A short, printable rendering of untrusted text for messages: control characters
/// escaped and at most `max` bytes.
pub(crate) fn quote(s: &str, max: usize) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        if out.len() >= max {
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

/// The decoded length of standard, padded base64 text, or `None` if it is not valid.
pub(crate) fn base64_decoded_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return None;
    }
    let pad = b.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return None;
    }
    let body = &b[..b.len() - pad];
    if !body
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
    {
        return None;
    }
    Some(b.len() / 4 * 3 - pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_respects_char_boundaries() {
        let (s, cut) = clamp("héllo wörld", 6);
        assert!(cut);
        assert!(s.len() <= 6, "{s}");
        assert!(s.ends_with('…'));
        assert_eq!(clamp("short", 10), ("short".to_owned(), false));
    }

    #[test]
    fn cut_middle_says_how_much_was_cut() {
        let s = "a".repeat(1000) + &"é".repeat(500);
        let out = cut_middle(&s, 400);
        assert!(out.len() < 500);
        assert!(out.contains("[edgar cut "));
        assert!(out.contains("of 2000 bytes"));
        assert!(out.starts_with("aaa") && out.ends_with('é'));
    }

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_decoded_len(""), Some(0));
        assert_eq!(base64_decoded_len("aGk="), Some(2));
        assert_eq!(base64_decoded_len("aGVsbG8="), Some(5));
        assert_eq!(base64_decoded_len("aGVsbA=="), Some(4));
        assert_eq!(base64_decoded_len("aGk"), None);
        assert_eq!(base64_decoded_len("a!k="), None);
        assert_eq!(base64_decoded_len("a==="), None);
        assert_eq!(base64_decoded_len("aG=k"), None);
    }

    #[test]
    fn quote_escapes_controls() {
        assert_eq!(quote("a\nb", 40), "'a\\nb'");
        assert!(quote(&"x".repeat(100), 10).ends_with("…'"));
    }
}
