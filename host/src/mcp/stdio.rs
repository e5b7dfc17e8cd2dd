//! The stdio transport: a child process in its own process group, newline-delimited
//! JSON on stdin/stdout with a cap on every line, and stderr drained on its own task
//! into a bounded ring (its tail goes into error messages) and a per-server log file,
//! the credentials it was given masked in both (`stdio/stderr.rs`).
//!
//! A chatty or stuck server can never fill a pipe and freeze the host: stdout is read
//! into a bounded channel (back-pressure reaches the server, not our memory), stderr is
//! always drained, and `close` escalates from closing stdin to SIGTERM and SIGKILL of
//! the whole group.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio as Pipe;
use std::sync::Arc;
use std::time::Duration;

use bytes::Buf as _;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot};

mod stderr;

use super::connection::{Event, Link, Outbound};
use super::protocol;
use crate::text::shown;
use stderr::{StderrTail, drain_stderr};

/// The variables of edgar's own environment a stdio server gets (besides its entry's
/// `env`), as Codex does: enough to find programs, a home, a locale, a terminal and the
/// certificate authorities the machine trusts (behind a proxy that inspects TLS, `uvx`
/// and `npx -y` fetch nothing without them), and nothing that holds a key (proxy URLs
/// may, so they are not here). `env_inherit: true` in an entry passes everything.
pub const INHERITED_ENV: &[&str] = &[
    "HOME",
    "LOGNAME",
    "USER",
    "USERNAME",
    "PATH",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// How long a server gets to exit after its stdin closes, and again after SIGTERM.
const GRACE: Duration = Duration::from_millis(1000);
/// Messages buffered in each direction before back-pressure applies.
const CHANNEL_DEPTH: usize = 64;

/// A running stdio server.
pub(crate) struct Stdio {
    child: Arc<tokio::sync::Mutex<Child>>,
    pgid: Option<rustix::process::Pid>,
    /// The private working directory made for it, removed when it is dropped.
    _workdir: Option<crate::workdir::Workdir>,
    /// The proxy of a confined server with a `"net"` host list; stopped at close.
    egress: Option<super::sandbox::proxy::Egress>,
    /// The user's own install a confined server reads with its program, as its start
    /// found it.
    installs: Vec<PathBuf>,
    stderr: Arc<StderrTail>,
    close_stdin: Option<oneshot::Sender<()>>,
    closed: bool,
}

/// Between fork and exec (Linux): the server gets a session of its own (`setsid`), the
/// kernel is asked to kill it when edgar dies, then its confinement, when it has one, is
/// applied (`sandbox::Prepared::apply`).
///
/// A session of its own means no controlling terminal: a server (or anything it starts)
/// cannot open `/dev/tty` and push input into the user's shell with `TIOCSTI`
/// (bubblewrap's CVE-2017-5226, answered there with `--new-session`), nor get the
/// terminal's signals. Its process group is its session's, so `close` reaches it whole.
///
/// The kernel sends the server SIGKILL when edgar dies, even by SIGKILL, so a
/// killed edgar leaves no server behind. (Its own children, in its process group, are not
/// covered: only `close` or the signal handlers reach the group. The signal follows the
/// thread that spawned the server, a runtime worker that lives as long as the session.)
/// Elsewhere (macOS) there is no such signal: a SIGKILLed edgar orphans its servers,
/// which see end-of-input on stdin.
#[cfg(target_os = "linux")]
fn before_exec(cmd: &mut Command, mut confinement: Option<super::sandbox::Prepared>) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: `prctl` and `getppid` are plain system calls
    // that neither allocate nor take locks; `Prepared::apply` makes only `prctl`,
    // `landlock_restrict_self` and `seccomp` calls on rules and filters built before the
    // fork (it allocates only to report a failure, after which the child exits).
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            use rustix::process::{Signal, getppid, set_parent_process_death_signal};
            rustix::process::setsid()?;
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // edgar may have died between fork and prctl: then nobody will signal us.
            if getppid() != Some(parent) {
                return Err(std::io::Error::other(
                    "edgar exited while starting the server",
                ));
            }
            if let Some(c) = confinement.as_mut() {
                c.apply()?;
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn before_exec(cmd: &mut Command, confinement: Option<super::sandbox::Prepared>) {
    // `sandbox::prepare` refuses off Linux, so there is never one to apply here.
    debug_assert!(confinement.is_none());
    // SAFETY: `setsid` is a plain, async-signal-safe system call.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
}

/// What to spawn.
pub(crate) struct Spawn<'a> {
    pub server: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    /// Pass edgar's whole environment instead of [`INHERITED_ENV`].
    pub env_inherit: bool,
    /// Where it runs; `None` is a private empty directory made for it (never the
    /// directory edgar was started in, whose files launchers would load as code).
    pub cwd: Option<&'a Path>,
    /// Where this session's stderr goes, if anywhere.
    pub log: Option<PathBuf>,
    /// The confinement of its process, when its entry has one.
    pub sandbox: Option<&'a crate::config::SandboxProfile>,
    /// The project whose entry it is (canonical), `None` for the user's own config.
    pub project: Option<&'a Path>,
}

impl Stdio {
    /// Spawns the server and returns it with the link for its connection.
    pub(crate) fn spawn(s: Spawn<'_>) -> Result<(Stdio, Link), String> {
        super::hygiene::harden();
        // A private directory: its working directory when the entry names none, and a
        // confined server's only writable temporary directory.
        let workdir = match (s.cwd, s.sandbox) {
            (Some(_), None) => None,
            _ => Some(
                crate::workdir::Workdir::new()
                    .map_err(|e| format!("cannot make a private working directory for it: {e}"))?,
            ),
        };
        let mut confinement = match (s.sandbox, &workdir) {
            (Some(profile), Some(dir)) => {
                let protected: Vec<PathBuf> = [
                    crate::paths::config_dir(),
                    crate::paths::cache_dir(),
                    crate::trust::state_dir(),
                ]
                .into_iter()
                .flatten()
                .map(|p| p.canonicalize().unwrap_or(p))
                .collect();
                Some(
                    super::sandbox::prepare(
                        profile,
                        &super::sandbox::Program {
                            command: s.command,
                            // The PATH the server gets: its entry's, else edgar's.
                            path: s
                                .env
                                .get("PATH")
                                .map(std::ffi::OsStr::new)
                                .or(std::env::var_os("PATH").as_deref()),
                            args: s.args,
                            cwd: s.cwd,
                            server: s.server,
                            project: s.project,
                        },
                        dir.path(),
                        &protected,
                    )
                    .map_err(|e| format!("it cannot be confined as its entry says: {e}"))?,
                )
            }
            _ => None,
        };
        // A host list's proxy: its side is kept here, the namespace's goes to the child.
        let outside = confinement
            .as_mut()
            .and_then(super::sandbox::Prepared::take_outside);
        let installs = confinement
            .as_mut()
            .map(|c| std::mem::take(&mut c.installs))
            .unwrap_or_default();
        let cache_env = confinement
            .as_mut()
            .map(|c| std::mem::take(&mut c.cache_env))
            .unwrap_or_default();
        let cwd = match (s.cwd, &workdir) {
            (Some(cwd), _) => cwd,
            (None, Some(dir)) => dir.path(),
            (None, None) => return Err("no working directory".into()),
        };
        let mut cmd = Command::new(s.command);
        if !s.env_inherit {
            cmd.env_clear();
            for key in INHERITED_ENV {
                if let Some(v) = std::env::var_os(key) {
                    cmd.env(key, v);
                }
            }
        }
        if confinement.is_some()
            && let Some(dir) = &workdir
        {
            cmd.env("TMPDIR", dir.path());
        }
        // Before the entry's own `env`, which may point a launcher elsewhere on purpose.
        cmd.envs(cache_env);
        cmd.args(s.args)
            .envs(s.env)
            .current_dir(cwd)
            .stdin(Pipe::piped())
            .stdout(Pipe::piped())
            .stderr(Pipe::piped())
            .kill_on_drop(true);
        for (key, value) in outside.iter().flat_map(super::sandbox::Outside::env) {
            cmd.env(key, value);
        }
        let confined = confinement.is_some();
        before_exec(&mut cmd, confinement);
        // Until its pid is live, a sweep would take it for an escaped descendant.
        let spawning = super::hygiene::spawning();
        let mut child = cmd.spawn().map_err(|e| {
            let why = if outside.is_some() {
                " (its \"net\" host list needs a network namespace of its own: are unprivileged user namespaces allowed here?)"
            } else if confined && e.kind() == std::io::ErrorKind::PermissionDenied {
                " (it runs confined: the program, or the interpreter its `#!` line names, is outside what its \"sandbox\" lets it read; add that directory to its \"read\")"
            } else {
                ""
            };
            format!("cannot run {}: {e}{why}", shown(s.command))
        })?;
        let pgid = child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32));
        if let Some(pid) = pgid {
            super::hygiene::started(pid.as_raw_nonzero().get());
        }
        drop(spawning);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the child's pipes are missing".into());
        };
        let child = Arc::new(tokio::sync::Mutex::new(child));
        let tail = Arc::new(StderrTail::hiding(s.env));
        let egress = outside
            .map(|o| {
                let tail = tail.clone();
                o.start(s.server, Arc::new(move |line: &str| tail.push_line(line)))
            })
            .transpose()
            .map_err(|e| format!("cannot serve its network namespace: {e}"))?;

        let (out_tx, out_rx) = mpsc::channel::<Outbound>(CHANNEL_DEPTH);
        let (ev_tx, ev_rx) = mpsc::channel::<Event>(CHANNEL_DEPTH);
        let (close_tx, close_rx) = oneshot::channel();
        tokio::spawn(write_loop(stdin, out_rx, close_rx));
        let stderr_done = tokio::spawn(drain_stderr(
            stderr,
            tail.clone(),
            s.log,
            s.server.to_owned(),
        ));
        tokio::spawn(read_loop(
            stdout,
            ev_tx,
            child.clone(),
            tail.clone(),
            stderr_done,
        ));
        let stdio = Stdio {
            child,
            pgid,
            _workdir: workdir,
            egress,
            installs,
            stderr: tail,
            close_stdin: Some(close_tx),
            closed: false,
        };
        Ok((
            stdio,
            Link {
                outgoing: out_tx,
                events: ev_rx,
            },
        ))
    }

    /// The user's own install it reads with its program (none when it is not
    /// confined, or is a project's).
    pub(crate) fn installs(&self) -> &[PathBuf] {
        &self.installs
    }

    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr.suffix()
    }

    /// Shuts the server down: close stdin and wait, then SIGTERM the process group and
    /// wait, then SIGKILL it; the child is always reaped, and grandchildren in its group
    /// are signalled even when the child itself already exited.
    pub(crate) async fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        if let Some(tx) = self.close_stdin.take() {
            let _ = tx.send(());
        }
        let mut child = self.child.lock().await;
        let exited = tokio::time::timeout(GRACE, child.wait()).await.is_ok();
        self.signal(rustix::process::Signal::TERM);
        if !exited {
            let _ = tokio::time::timeout(GRACE, child.wait()).await;
        }
        self.signal(rustix::process::Signal::KILL);
        let _ = child.start_kill();
        let _ = child.wait().await;
        self.egress = None;
        if let Some(pid) = self.pgid {
            super::hygiene::ended(pid.as_raw_nonzero().get());
        }
    }

    fn signal(&self, sig: rustix::process::Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH (the group is already empty) is the expected, good case.
            let _ = rustix::process::kill_process_group(pgid, sig);
        }
    }
}

impl Drop for Stdio {
    /// A server that was never closed (a panic, a dropped session) still takes its whole
    /// process group with it; `kill_on_drop` alone reaches only the direct child.
    fn drop(&mut self) {
        if !self.closed {
            self.signal(rustix::process::Signal::KILL);
            if let Some(pid) = self.pgid {
                super::hygiene::forget(pid.as_raw_nonzero().get());
            }
        }
    }
}

async fn write_loop(
    mut stdin: tokio::process::ChildStdin,
    mut messages: mpsc::Receiver<Outbound>,
    mut close: oneshot::Receiver<()>,
) {
    loop {
        let msg = tokio::select! {
            biased;
            _ = &mut close => break,
            msg = messages.recv() => match msg {
                Some(m) => m,
                None => break,
            },
        };
        // The line and its newline in one `writev`: written apart, the server was woken
        // for a line without its end, and read again.
        let mut line = msg.bytes.chain(&b"\n"[..]);
        let write = async {
            stdin.write_all_buf(&mut line).await?;
            stdin.flush().await
        };
        let done = tokio::select! {
            biased;
            _ = &mut close => break,
            r = write => r,
        };
        if done.is_err() {
            break;
        }
    }
    // Dropping stdin here is what tells the server to exit.
}

enum Line {
    Complete,
    Eof,
    TooLong,
}

/// Reads one line into `buf` (without the newline), never holding more than `max` bytes.
async fn read_line_capped(
    r: &mut BufReader<ChildStdout>,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buf.is_empty() {
                Line::Eof
            } else {
                Line::Complete
            });
        }
        let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if buf.len() + chunk.len() > max {
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(chunk);
        let used = found.unwrap_or(chunk.len());
        r.consume(used);
        if found.is_some() {
            return Ok(Line::Complete);
        }
    }
}

async fn read_loop(
    stdout: ChildStdout,
    events: mpsc::Sender<Event>,
    child: Arc<tokio::sync::Mutex<Child>>,
    tail: Arc<StderrTail>,
    stderr_done: tokio::task::JoinHandle<()>,
) {
    let mut reader = BufReader::with_capacity(64 << 10, stdout);
    let mut buf = Vec::with_capacity(8 << 10);
    let mut garbage = 0u64;
    let reason = loop {
        match read_line_capped(&mut reader, &mut buf, protocol::MAX_MESSAGE_BYTES).await {
            Err(e) => break format!("reading its stdout failed: {e}"),
            Ok(Line::TooLong) => {
                break format!(
                    "it sent a message over the {}-byte limit",
                    protocol::MAX_MESSAGE_BYTES
                );
            }
            Ok(Line::Eof) => {
                // Give the exit status and the last stderr lines a moment to arrive.
                let _ = tokio::time::timeout(Duration::from_millis(500), stderr_done).await;
                let status = match tokio::time::timeout(Duration::from_millis(500), async {
                    child.lock().await.wait().await
                })
                .await
                {
                    Ok(Ok(status)) => format!("it exited ({status})"),
                    _ => "it closed its stdout".to_owned(),
                };
                break status;
            }
            Ok(Line::Complete) => {
                let line = buf.strip_suffix(b"\r").unwrap_or(&buf);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match super::protocol::decode(line) {
                    Ok(v) => {
                        if events.send(Event::Message(v)).await.is_err() {
                            return;
                        }
                    }
                    Err(what) => {
                        garbage += 1;
                        if garbage <= 3 {
                            tracing::debug!(
                                "ignoring {what} on stdout: {}",
                                shown(&String::from_utf8_lossy(line))
                            );
                        }
                    }
                }
            }
        }
    };
    let _ = events
        .send(Event::Closed(format!("{reason}{}", tail.suffix())))
        .await;
}
