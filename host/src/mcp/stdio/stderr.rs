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
        let mut line = crate::redact::url(line);
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

    /// The tail for an error message: `"; stderr: ..."` or empty.
    pub(crate) fn suffix(&self) -> String {
        let q = lock(&self.lines);
        let lines: Vec<String> = q
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| crate::text::shown_up_to(l.trim_end(), STDERR_LINE_SHOWN))
            .collect();
        if lines.is_empty() {
            String::new()
        } else {
            format!("; last stderr: {}", lines.join(" / "))
        }
    }
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
    let mut partial = String::new();
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
        partial.push_str(&String::from_utf8_lossy(&buf[..n]));
        while let Some(i) = partial.find('\n') {
            take(&partial[..i], "\n");
            partial.drain(..=i);
        }
        if partial.len() > STDERR_TAIL_BYTES {
            // A line that never ends (a progress bar) is taken in pieces.
            take(&partial, "");
            partial.clear();
        }
    }
    if !partial.is_empty() {
        take(&partial, "");
    }
    tracing::debug!(server, "stderr closed");
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
