//! A stdio server's stderr: always drained, its last lines kept for error messages and
//! the whole (up to a cap) written to its log file. Credentials its entry gave it (the
//! values of its credential-named `env`) and a URL's password are masked in both, since
//! a server that fails often prints what it was started with.

use std::collections::VecDeque;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;

use crate::sync::lock;

/// Lines of stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 20;
/// Bytes of stderr kept for error messages.
const STDERR_TAIL_BYTES: usize = 4 << 10;
/// Longest stderr line shown in an error (bytes): enough for the path a failure names.
const STDERR_LINE_SHOWN: usize = 240;
/// Most stderr written to a server's log file per session.
const MAX_LOG_BYTES: u64 = 4 << 20;
/// Shortest value masked: shorter ones (`1`, `true`) would mask ordinary words.
const MIN_SECRET: usize = 6;

/// The last lines a server wrote to stderr, and what to mask in them.
#[derive(Default)]
pub(crate) struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    secrets: Vec<String>,
}

impl StderrTail {
    /// A tail that masks the values of `env`'s credential-named variables.
    pub(crate) fn hiding<'a>(env: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut secrets: Vec<String> = env
            .into_iter()
            .filter(|(k, v)| v.len() >= MIN_SECRET && crate::redact::credential_name(k))
            .map(|(_, v)| v.clone())
            .collect();
        // The longest first, so one that contains another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        StderrTail {
            lines: Mutex::default(),
            secrets,
        }
    }

    /// `line` with the credentials it holds masked.
    fn masked(&self, line: &str) -> String {
        let mut line = crate::redact::urls_in(line);
        for s in &self.secrets {
            if line.contains(s.as_str()) {
                line = line.replace(s.as_str(), crate::redact::MASK);
            }
        }
        line
    }

    /// Keeps `line`, masked, dropping the oldest beyond the tail's bounds.
    pub(crate) fn push_line(&self, line: &str) {
        let line = self.masked(line);
        self.keep(line);
    }

    fn keep(&self, line: String) {
        let line: String = line.chars().take(STDERR_TAIL_BYTES / 4).collect();
        let mut q = lock(&self.lines);
        q.push_back(line);
        while q.len() > STDERR_TAIL_LINES
            || q.iter().map(String::len).sum::<usize>() > STDERR_TAIL_BYTES
        {
            q.pop_front();
        }
    }

    /// The tail for an error message: `"; last stderr: ..."` or empty. A stack trace's
    /// frames (`    at f (file:1:2)` as Node and the JVM print them, `  File "x.py", line
    /// 3, in f` and its source line as Python does) and a package manager's notices
    /// (npm's and pip's new-version nags) are left out and counted: the message they
    /// surround says what went wrong, and the log file keeps them.
    pub(crate) fn suffix(&self) -> String {
        let q = lock(&self.lines);
        let said: Vec<&String> = q.iter().filter(|l| !l.trim().is_empty()).collect();
        let parts = frame_parts(&said);
        let left_out = parts.iter().filter(|p| **p != Part::Message).count();
        let all = left_out == said.len();
        let mut lines: Vec<String> = said
            .iter()
            .zip(&parts)
            .filter(|&(_, p)| all || *p == Part::Message)
            .map(|(l, _)| crate::text::shown_up_to(l.trim_end(), STDERR_LINE_SHOWN))
            .collect();
        let frames = parts.iter().filter(|p| **p == Part::Frame).count();
        if frames > 0 && !all {
            lines.push(format!(
                "({} left out)",
                crate::text::counted(frames, "stack frame")
            ));
        }
        let notices = parts.iter().filter(|p| **p == Part::Notice).count();
        if notices > 0 && !all {
            lines.push(format!(
                "({} left out)",
                crate::text::counted(notices, "notice")
            ));
        }
        if lines.is_empty() {
            String::new()
        } else {
            format!("; last stderr: {}", lines.join(" / "))
        }
    }
}

/// What a stderr line is to an error message.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Message,
    /// A stack trace's frame: an indented `at ...` (Node, the JVM) or an indented
    /// `File "...", line N` (Python).
    Frame,
    /// The source line Python prints under its frame, more deeply indented, and the
    /// line of `^` or `~` under that one.
    FrameSource,
    /// `npm notice ...` (npx's new-version nag and changelog) or pip's `[notice] ...`.
    Notice,
}

/// Each of `lines` as a [`Part`].
fn frame_parts(lines: &[&String]) -> Vec<Part> {
    let mut out: Vec<Part> = Vec::with_capacity(lines.len());
    for l in lines {
        let indented = l.starts_with(char::is_whitespace);
        let text = l.trim_start();
        let python = indented && text.starts_with("File \"") && text.contains("\", line ");
        let previous = out.last().copied();
        let part = if l.starts_with("npm notice") || l.starts_with("[notice] ") {
            Part::Notice
        } else if python || (indented && text.starts_with("at ")) {
            Part::Frame
        } else if l.starts_with("    ")
            && match previous {
                // Python's source line under its frame, then its `^^^` marks.
                Some(Part::Frame) => true,
                Some(Part::FrameSource) => text.chars().all(|c| "^~".contains(c)),
                _ => false,
            }
        {
            Part::FrameSource
        } else {
            Part::Message
        };
        out.push(part);
    }
    out
}

/// Reads stderr to its end: each line, masked, into the tail and the log file.
pub(crate) async fn drain_stderr(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<StderrTail>,
    log: Option<PathBuf>,
    server: String,
) {
    let mut log = Log {
        file: log.and_then(|p| open_log(&p)),
        written: 0,
    };
    let mut buf = vec![0u8; 8 << 10];
    let mut lines = Lines::default();
    let mut take = |line: &str, end: &str| {
        let line = tail.masked(line);
        log.write(&line, end);
        tail.keep(line);
    };
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        lines.feed(&buf[..n], &tail.secrets, &mut take);
    }
    lines.finish(&mut take);
    tracing::debug!(server, "stderr closed");
}

/// The longest run of non-space bytes held back from a piece of a line that never ends,
/// so a URL or token still being written is masked whole in the next piece.
const HELD_TOKEN_BYTES: usize = 1 << 10;

/// Stderr's bytes cut into lines, whatever the pieces the reads return: a character is
/// decoded whole, and a line too long to wait for its end (a progress bar) is taken in
/// pieces cut where no credential can straddle the cut.
#[derive(Default)]
struct Lines {
    partial: Vec<u8>,
}

impl Lines {
    /// Takes every line `bytes` completes (with its `"\n"`), and a piece of a line grown
    /// past [`STDERR_TAIL_BYTES`] (with `""`).
    fn feed(&mut self, bytes: &[u8], secrets: &[String], take: &mut impl FnMut(&str, &str)) {
        self.partial.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(i) = self.partial[start..].iter().position(|&b| b == b'\n') {
            take(
                &String::from_utf8_lossy(&self.partial[start..start + i]),
                "\n",
            );
            start += i + 1;
        }
        self.partial.drain(..start);
        while self.partial.len() > STDERR_TAIL_BYTES {
            let cut = piece_end(&self.partial, secrets);
            take(&String::from_utf8_lossy(&self.partial[..cut]), "");
            self.partial.drain(..cut);
        }
    }

    /// Takes what is left once stderr closed.
    fn finish(&mut self, take: &mut impl FnMut(&str, &str)) {
        if !self.partial.is_empty() {
            take(&String::from_utf8_lossy(&self.partial), "");
            self.partial.clear();
        }
    }
}

/// Where to end a piece of the unfinished line `bytes`: before its last run of non-space
/// bytes when that is short (a URL is masked only whole), else early enough that no
/// secret can begin before the cut and end after it; never inside a character. Always
/// past 0, so every piece moves on.
fn piece_end(bytes: &[u8], secrets: &[String]) -> usize {
    let token = bytes
        .iter()
        .rposition(u8::is_ascii_whitespace)
        .map_or(0, |i| i + 1);
    let mut cut = if token > 0 && bytes.len() - token <= HELD_TOKEN_BYTES {
        token
    } else {
        let longest = secrets.iter().map(String::len).max().unwrap_or(0);
        bytes.len() - longest.saturating_sub(1).min(bytes.len() / 2)
    };
    // A secret that starts before the cut and would end after it goes to the next piece,
    // and so does a character the cut would split; until neither moves the cut.
    loop {
        let before = cut;
        for s in secrets.iter().map(String::as_bytes) {
            let from = cut.saturating_sub(s.len() - 1);
            // Any match from `from` on ends after the cut: it straddles if it starts before.
            if let Some(at) = bytes[from..]
                .windows(s.len())
                .position(|w| w == s)
                .map(|i| from + i)
                .filter(|&at| at < cut)
            {
                cut = at;
            }
        }
        while cut > 0 && cut < bytes.len() && (bytes[cut] & 0xC0) == 0x80 {
            cut -= 1;
        }
        if cut == before {
            break;
        }
    }
    if cut == 0 { bytes.len() } else { cut }
}

/// The server's log file, cut at [`MAX_LOG_BYTES`].
struct Log {
    file: Option<std::fs::File>,
    written: u64,
}

impl Log {
    fn write(&mut self, line: &str, end: &str) {
        let Some(f) = self.file.as_mut() else {
            return;
        };
        if self.written >= MAX_LOG_BYTES {
            return;
        }
        let bytes = [line, end].concat();
        let take = bytes.len().min((MAX_LOG_BYTES - self.written) as usize);
        let _ = f.write_all(&bytes.as_bytes()[..take]);
        self.written += take as u64;
        if self.written >= MAX_LOG_BYTES {
            let _ = writeln!(
                f,
                "\n[edgar: log cut at {MAX_LOG_BYTES} bytes; stderr is still drained]"
            );
        }
    }
}

fn open_log(path: &Path) -> Option<std::fs::File> {
    if let Some(dir) = path.parent() {
        let _ = crate::paths::create_private_dir(dir);
    }
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything `Lines` takes from `bytes` read `step` bytes at a time, each piece
    /// masked as the drain masks it, joined.
    fn drained(tail: &StderrTail, bytes: &[u8], step: usize) -> String {
        let mut out = String::new();
        let mut take = |line: &str, end: &str| {
            out.push_str(&tail.masked(line));
            out.push_str(end);
        };
        let mut lines = Lines::default();
        for chunk in bytes.chunks(step) {
            lines.feed(chunk, &tail.secrets, &mut take);
        }
        lines.finish(&mut take);
        out
    }

    proptest::proptest! {
        /// Whatever a server writes around them (runs with no space of any length, no
        /// line end, characters of several bytes) and however the reads cut it, a
        /// credential it was given never reaches the tail or the log, nor does the
        /// password of a URL written as a word of its own. (A URL inside a run of over
        /// 1 KiB without a space, in a line of over 4 KiB, may be cut: `piece_end`
        /// holds back only a run that long.)
        #[test]
        fn no_credential_survives_any_stderr(
            parts in proptest::collection::vec((0..5u8, 0..3000usize, proptest::prelude::any::<char>()), 1..12),
            step in 1..9000usize,
        ) {
            let env: std::collections::BTreeMap<String, String> =
                [("API_TOKEN".to_owned(), "tok_0123456789abcdef".to_owned())].into();
            let tail = StderrTail::hiding(&env);
            let mut text = String::new();
            for (kind, len, c) in parts {
                match kind {
                    0 => text.push_str(&c.to_string().repeat(len % 400)),
                    1 => text.push_str(&"x".repeat(len)),
                    2 => text.push_str("tok_0123456789abcdef"),
                    3 => text.push_str(" postgres://u:hunter22@db/x "),
                    _ => text.push('\n'),
                }
            }
            let out = drained(&tail, text.as_bytes(), step);
            proptest::prop_assert!(!out.contains("tok_0123456789abcdef"));
            proptest::prop_assert!(!out.contains("hunter22"));
        }
    }

    #[test]
    fn a_line_that_never_ends_is_masked_whatever_the_reads_return() {
        let env: std::collections::BTreeMap<String, String> = [(
            "SERVICE_TOKEN".to_owned(),
            "tok_0123456789abcdef".to_owned(),
        )]
        .into();
        let tail = StderrTail::hiding(&env);
        // A progress line of 12 KB, no newline: the token, a URL's password and a
        // two-byte character at many offsets, so some straddle any piece boundary.
        let mut line = String::new();
        let mut n = 0;
        while line.len() < 12_000 {
            line.push_str(&"x".repeat(n % 37));
            line.push_str(match n % 3 {
                0 => "tok_0123456789abcdef",
                1 => " https://u:hunter22@h.example/p ",
                _ => "é",
            });
            n += 1;
        }
        for step in [1, 7, 64, 1000, 4095, 4096, 4097, 8192, 20_000] {
            let out = drained(&tail, line.as_bytes(), step);
            assert!(!out.contains("tok_0123456789abcdef"), "step {step}");
            assert!(!out.contains("hunter22"), "step {step}");
            assert!(
                !out.contains('\u{fffd}'),
                "step {step}: a character was split"
            );
            assert_eq!(
                out.matches('é').count(),
                line.matches('é').count(),
                "step {step}"
            );
            // Nothing else is lost: the same text with every credential masked.
            let expected = tail.masked(&line);
            assert_eq!(out.replace('\n', ""), expected, "step {step}");
        }
    }

    /// The error tail of a server that wrote `lines` to stderr.
    fn suffix_of(lines: &[&str]) -> String {
        let tail = StderrTail::default();
        for line in lines {
            tail.push_line(line);
        }
        tail.suffix()
    }

    #[test]
    fn a_stack_traces_frames_are_left_out_of_the_message_and_counted() {
        assert_eq!(
            suffix_of(&[
                "node:internal/modules/esm/resolve:283",
                "Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/x/sdk/server/mcp.js'",
                "    at finalizeResolution (node:internal/modules/esm/resolve:283:11)",
                "    at moduleResolve (node:internal/modules/esm/resolve:952:10)",
                "  code: 'ERR_MODULE_NOT_FOUND',",
                "Node.js v20.20.2",
            ]),
            r"; last stderr: 'node:internal/modules/esm/resolve:283' / 'Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/x/sdk/server/mcp.js'' / '  code: 'ERR_MODULE_NOT_FOUND',' / 'Node.js v20.20.2' / (2 stack frames left out)"
        );
        // Lines that only look like frames stay: no indent, or nothing but frames.
        assert_eq!(
            suffix_of(&["at startup: config missing", "    at main (index.js:1:1)"]),
            "; last stderr: 'at startup: config missing' / (1 stack frame left out)"
        );
        assert_eq!(
            suffix_of(&["    at main (index.js:1:1)"]),
            "; last stderr: '    at main (index.js:1:1)'"
        );
    }

    /// What npx printed for a package with no executable, in a home where npm had not
    /// checked its own version yet; and pip's nag.
    #[test]
    fn package_manager_notices_are_left_out() {
        assert_eq!(
            suffix_of(&[
                "npm error could not determine executable to run",
                "npm notice",
                "npm notice New minor version of npm available! 11.19.1 -> 11.21.3",
                "npm notice Changelog: https://github.com/npm/cli/releases/tag/v11.21.3",
                "npm notice To update run: npm install -g npm@11.21.3",
                "npm error A complete log of this run can be found in: /root/.npm/_logs/x.log",
            ]),
            "; last stderr: 'npm error could not determine executable to run' / 'npm error A complete log of this run can be found in: /root/.npm/_logs/x.log' / (4 notices left out)"
        );
        assert_eq!(
            suffix_of(&[
                "ERROR: No matching distribution found for mcp-nope",
                "[notice] A new release of pip is available: 23.2.1 -> 25.3",
            ]),
            "; last stderr: 'ERROR: No matching distribution found for mcp-nope' / (1 notice left out)"
        );
        // A line that only mentions a notice stays.
        assert_eq!(
            suffix_of(&["error: see the npm notice above"]),
            "; last stderr: 'error: see the npm notice above'"
        );
    }

    #[test]
    fn a_python_tracebacks_frames_and_their_source_lines_are_left_out() {
        assert_eq!(
            suffix_of(&[
                "Traceback (most recent call last):",
                "  File \"/srv/app/server.py\", line 3, in <module>",
                "    import missing_dep",
                "  File \"/srv/app/other.py\", line 9, in load",
                "    return helper()",
                "           ^^^^^^^^",
                "ModuleNotFoundError: No module named 'missing_dep'",
            ]),
            "; last stderr: 'Traceback (most recent call last):' / 'ModuleNotFoundError: No module named 'missing_dep'' / (2 stack frames left out)"
        );
        // An indented line that follows no frame is the message's own, and stays.
        assert_eq!(
            suffix_of(&["error: bad config:", "    key 'x' is unknown"]),
            "; last stderr: 'error: bad config:' / '    key 'x' is unknown'"
        );
    }

    #[test]
    fn lines_are_cut_at_newlines_and_a_character_split_by_a_read_survives() {
        let tail = StderrTail::default();
        let text = "première ligne\nzweite Zeile ü\nlast";
        for step in 1..=text.len() {
            assert_eq!(drained(&tail, text.as_bytes(), step), text, "step {step}");
        }
    }

    #[test]
    fn credentials_it_was_given_are_masked_and_the_rest_kept() {
        let env: std::collections::BTreeMap<String, String> = [
            ("GITHUB_TOKEN", "ghp_sekrit_value_123"),
            ("API_KEY", "sk-short"),
            ("ROOT", "/home/me/notes"),
            ("PASSWORD", "abc"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let tail = StderrTail::hiding(&env);
        tail.push_line("Error: bad credentials for ghp_sekrit_value_123 (key sk-short)");
        tail.push_line("cannot open /home/me/notes");
        tail.push_line("connecting to postgres://admin:hunter2@db.example.com/prod");
        let shown = tail.suffix();
        assert!(
            !shown.contains("sekrit") && !shown.contains("sk-short") && !shown.contains("hunter2"),
            "{shown}"
        );
        assert!(
            shown.contains("bad credentials for *** (key ***)"),
            "{shown}"
        );
        // Not credentials: a path, and a value too short to mask without masking words.
        assert!(shown.contains("cannot open /home/me/notes"), "{shown}");
        assert!(
            shown.contains("postgres://admin:***@db.example.com/prod"),
            "{shown}"
        );
    }
}
