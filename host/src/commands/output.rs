//! Printing what servers sent: JSON, and content blocks made safe for a terminal.

use std::io::Write;

use edgar_host::guard::ContentBlock;
use serde_json::Value;

pub(super) fn print_json(v: &Value) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// A server's text made safe for a terminal: escape sequences (clipboard writes, title
/// changes, cursor moves) and other control characters are shown, not obeyed. Newlines
/// and tabs stay.
fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return text.into();
    }
    text.chars()
        .map(|c| {
            if unsafe_char(c) {
                c.escape_default().collect()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

pub(super) fn print_blocks(blocks: &[ContentBlock]) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    let shown = |t: &str| -> String {
        if tty {
            terminal_safe(t).into_owned()
        } else {
            t.to_owned()
        }
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for b in blocks {
        match b {
            ContentBlock::Text { text } => writeln!(out, "{}", shown(text))?,
            ContentBlock::Image { mime_type, data } => writeln!(
                out,
                "[image {}, {} bytes base64]",
                shown(mime_type),
                data.len()
            )?,
            ContentBlock::Audio { mime_type, data } => writeln!(
                out,
                "[audio {}, {} bytes base64]",
                shown(mime_type),
                data.len()
            )?,
            ContentBlock::ResourceLink { uri, name, .. } => {
                writeln!(out, "[resource link {}: {}]", shown(name), shown(uri))?
            }
            ContentBlock::Resource { resource: r } => match &r.text {
                Some(text) => writeln!(out, "[resource {}]\n{}", shown(&r.uri), shown(text))?,
                None => writeln!(
                    out,
                    "[resource {}, {} bytes base64]",
                    shown(&r.uri),
                    r.blob.as_ref().map_or(0, String::len)
                )?,
            },
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::terminal_safe;

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        for evil in [
            "\u{1b}]52;c;ZXZpbA==\u{7}", // OSC 52: write the clipboard
            "\u{1b}]0;owned\u{7}",       // the window title
            "\u{1b}[2J\u{1b}[H",         // clear the screen, cursor home
            "\u{9b}31m",                 // an 8-bit CSI
            "a\rb",                      // overwrite the line
        ] {
            let out = terminal_safe(evil);
            assert!(!out.chars().any(|c| c.is_control()), "{out:?}");
        }
        assert_eq!(
            terminal_safe("two\nlines\tand a tab"),
            "two\nlines\tand a tab"
        );
    }
}
