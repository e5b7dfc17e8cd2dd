//! Support for the integration tests in `it/`: paths to the built test adapters, the
//! shared tool corpus, and a small runner for the real `edgar` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A misbehaving or incompatible test adapter component, by crate suffix
/// (`misbehaving`, `wrong-shape`, `other-version`).
pub fn test_adapter(name: &str) -> PathBuf {
    let file = format!("edgar_test_adapter_{}.wasm", name.replace('-', "_"));
    Path::new(env!("EDGAR_TEST_ADAPTERS")).join(file)
}

/// `tests/fixtures/...`
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// One server's captured `tools/list` from the corpus.
pub struct CorpusServer {
    pub server: String,
    /// Each tool object as compact JSON text, as a server would send it.
    pub tools: Vec<String>,
}

/// The 106 captured servers of `tests/fixtures/corpus`, sorted by name.
pub fn corpus() -> Vec<CorpusServer> {
    let dir = fixture("corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
            let v: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
            CorpusServer {
                server: v["server"].as_str().unwrap_or_default().to_owned(),
                tools: v["tools"]
                    .as_array()
                    .map(|ts| ts.iter().map(|t| t.to_string()).collect())
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// The outcome of one `edgar` run.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from(out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Stdout parsed as JSON; panics with both streams when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Writes `servers` as the user's own config under `home` (`$XDG_CONFIG_HOME/edgar/mcp.json`
/// as [`run`] sets it): trusted, so its servers run without approval.
pub fn user_config(home: &Path, servers: serde_json::Value) {
    let dir = home.join("config").join("edgar");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.join("mcp.json"),
        serde_json::json!({ "mcpServers": servers }).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Gives `cmd` an environment of its own under `home` (its cache, config and state; no
/// policy or directory the developer's shell may have set), run from `home`.
pub fn in_home<'a>(cmd: &'a mut Command, home: &Path) -> &'a mut Command {
    cmd.env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("EDGAR_CACHE_DIR")
        .env_remove("EDGAR_CONFIG")
        .env_remove("EDGAR_STATE_DIR")
        .env_remove("XDG_STATE_HOME")
        .env_remove("EDGAR_POLICY")
        .current_dir(home)
}

/// Runs `bin` with `args` in an environment of its own (cache and config under `home`),
/// feeding `stdin`.
pub fn run(bin: &str, home: &Path, args: &[&str], stdin: &[u8]) -> Run {
    use std::io::Write;
    let mut child = in_home(Command::new(bin).args(args), home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"));
    if let Some(mut input) = child.stdin.take() {
        // A command may exit before reading everything; that is its answer, not ours.
        let _ = input.write_all(stdin);
    }
    Run::from(child.wait_with_output().unwrap_or_else(|e| panic!("{e}")))
}

/// Processes (not zombies) whose environment holds `EDGAR_TEST_TAG=<tag>`: a server and
/// every descendant it started, since children inherit the environment.
pub fn procs_with_tag(tag: &str) -> Vec<u32> {
    let needle = format!("EDGAR_TEST_TAG={tag}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()) && !is_zombie(*pid)
        })
        .collect()
}

/// Whether `pid` is gone or a zombie (dead, waiting to be reaped by someone).
pub fn is_dead(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid)
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(true)
}

/// Where `.ci/test` installs the real MCP servers the tests start.
pub fn test_deps() -> PathBuf {
    match std::env::var_os("EDGAR_TEST_DEPS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-deps"),
    }
}

/// A real server's executable from the installed test dependencies; panics with what to
/// install when it is missing (tests never skip silently).
pub fn installed(rel: &str) -> PathBuf {
    let p = test_deps().join(rel);
    assert!(
        p.exists(),
        "{} is missing: run .ci/test (the README's test command), which installs the real MCP servers the tests use",
        p.display()
    );
    p
}

/// The fake server's `probe` answer for `what` (`what: ok ...` or `what: denied: ...`):
/// whether it got through. Panics when the answer has no line for it.
pub fn probe_allowed(out: &str, what: &str) -> bool {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("{what}: ")))
        .unwrap_or_else(|| panic!("no line for {what} in:\n{out}"));
    line.starts_with(&format!("{what}: ok"))
}

/// The probe's line name for an `exec` attempt: `exec ARGV...`, as the fake server writes it.
pub fn probe_exec_line(argv: &serde_json::Value) -> String {
    let words: Vec<&str> = argv
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect();
    format!("exec {}", words.join(" "))
}
