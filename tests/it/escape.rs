//! Ways out of a confinement, tried as a hostile server would (issue 57), each next to an
//! unconfined twin that shows the attempt can succeed: pushing input into the user's
//! terminal and reading it, sockets made through `io_uring` (which seccomp does not see),
//! and capabilities kept when edgar runs as root.

use std::path::Path;
use std::process::Command;

use edgar_tests::{in_home, run, user_config};
use serde_json::{Value, json};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

/// A home whose user config has one server `h` with this `sandbox` value and a `probe`.
fn home_with(sandbox: &Value) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let allowed = d.path().join("allowed");
    std::fs::create_dir_all(&allowed).unwrap_or_else(|e| panic!("{e}"));
    let tools = allowed.join("tools.json");
    let mut sandbox = sandbox.clone();
    if let Some(o) = sandbox.as_object_mut() {
        o.insert("read".into(), json!([allowed.display().to_string()]));
    }
    std::fs::write(
        &tools,
        r#"[{"name": "probe", "inputSchema": {"type": "object"}}]"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    user_config(
        d.path(),
        json!({"h": {"command": FAKE, "args": ["good"], "sandbox": sandbox,
                     "env": {"FAKE_TOOLS": tools.display().to_string()}}}),
    );
    d
}

fn probe(home: &Path, args: &Value) -> String {
    let r = run(
        EDGAR,
        home,
        &["mcp", "call", "h__probe", &args.to_string()],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    r.stdout
}

use edgar_tests::probe_allowed as got_through;

/// Runs `script` (a shell script) in a new terminal (util-linux `script`), as a user at
/// a terminal would run edgar, and returns what the terminal showed.
fn in_a_terminal(home: &Path, body: &str) -> String {
    let file = home.join("attack.sh");
    std::fs::write(&file, body).unwrap_or_else(|e| panic!("{e}"));
    let mut child = in_home(
        Command::new("script").args(["-qec", &format!("bash {}", file.display()), "/dev/null"]),
        home,
    )
    .env("EDGAR", EDGAR)
    .env("FAKE", FAKE)
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap_or_else(|e| panic!("cannot run script(1): {e}"));
    // Its input stays open and empty: at end of input, script(1) would type an EOF
    // into the terminal, racing what the shell reads.
    let _input = child.stdin.take();
    let mut shown = String::new();
    if let Some(mut out) = child.stdout.take() {
        std::io::Read::read_to_string(&mut out, &mut shown).unwrap_or_else(|e| panic!("{e}"));
    }
    let _ = child.wait();
    shown
}

/// The attack: the server opens the terminal its session has and the user's pty by name,
/// and pushes a command into it; the "user's shell" (the script's `read`) then receives
/// it as if typed. The probe's arguments as one JSON text for `sh`.
const TERMINAL_ATTACK: &str = r#"T=$(tty)
ARGS="{\"open\": [\"$T\"], \"tiocsti\": [\"/dev/tty\", \"$T\"], \"input\": \"echo MARK-typed\\n\"}"
"#;

#[test]
fn a_server_cannot_push_input_into_the_users_terminal_nor_read_it() {
    // The twin: the same probe run straight from the terminal pushes its line, and the
    // shell reads it as typed (so the checks below can fail).
    let home = home_with(&json!("off"));
    let direct = in_a_terminal(
        home.path(),
        &format!(
            r#"{TERMINAL_ATTACK}
printf '%s\n' "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"probe\",\"arguments\":$ARGS}}}}" | FAKE_TOOLS={} "$FAKE" good
read -t 2 L && echo "shell read: $L"
"#,
            home.path().join("allowed/tools.json").display()
        ),
    );
    assert!(direct.contains("shell read: echo MARK-typed"), "{direct}");

    let through_edgar = r#""$EDGAR" mcp call h__probe "$ARGS"
read -t 2 L && echo "shell read: $L"
"#;
    for (sandbox, confined) in [
        (json!({"net": "none"}), true),
        (json!({"net": ["example.com:443"]}), true),
        (json!("off"), false),
    ] {
        let home = home_with(&sandbox);
        let shown = in_a_terminal(home.path(), &format!("{TERMINAL_ATTACK}{through_edgar}"));
        // No server, confined or not, has a controlling terminal to push into.
        assert!(
            shown.contains("tiocsti /dev/tty: denied"),
            "{sandbox}: {shown}"
        );
        let pty = shown
            .lines()
            .find(|l| l.starts_with("open /dev/pts/"))
            .unwrap_or_else(|| panic!("{sandbox}: {shown}"));
        // A confined server cannot open the user's pty by its name either (to read the
        // keystrokes meant for the shell, or push its own); an unconfined one runs as
        // the user, and can.
        assert_eq!(pty.contains(": ok"), !confined, "{sandbox}: {shown}");
        if confined {
            assert!(
                shown
                    .lines()
                    .filter(|l| l.starts_with("tiocsti "))
                    .all(|l| l.contains(": denied")),
                "{sandbox}: {shown}"
            );
            assert!(!shown.contains("shell read:"), "{sandbox}: {shown}");
        }
    }
    // A profile that grants the terminals (written by a user who means it) still cannot
    // push into one: seccomp refuses the request, whatever its high bits.
    let home = home_with(&json!({"net": "none", "write": ["/dev/pts"]}));
    let shown = in_a_terminal(home.path(), &format!("{TERMINAL_ATTACK}{through_edgar}"));
    let pushed: Vec<&str> = shown
        .lines()
        .filter(|l| l.starts_with("tiocsti /dev/pts/"))
        .collect();
    assert!(
        !pushed.is_empty() && pushed.iter().all(|l| l.contains("Operation not permitted")),
        "{shown}"
    );
    assert!(!shown.contains("shell read:"), "{shown}");
}

/// A Unix listener at `path` and one at the abstract `name`, as ssh-agent, D-Bus and
/// docker are, and a UDP socket: the targets of the `io_uring` probe.
struct Listeners {
    _unix: std::os::unix::net::UnixListener,
    _abstract: std::os::unix::net::UnixListener,
    udp: std::net::UdpSocket,
    targets: Vec<String>,
}

fn listeners(dir: &Path) -> Listeners {
    use std::os::linux::net::SocketAddrExt;
    let path = dir.join("agent.sock");
    let unix = std::os::unix::net::UnixListener::bind(&path).unwrap_or_else(|e| panic!("{e}"));
    let name = format!("edgar-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let abs = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap_or_else(|e| panic!("{e}"));
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = udp.local_addr().map(|a| a.port()).unwrap_or_default();
    Listeners {
        _unix: unix,
        _abstract: abs,
        udp,
        targets: vec![
            format!("unix:{}", path.display()),
            format!("abstract:{name}"),
            format!("udp:127.0.0.1:{port}"),
        ],
    }
}

#[test]
fn io_uring_makes_no_socket_the_filter_refuses() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let l = listeners(d.path());
    let attempt = json!({"uring": l.targets});
    // The twin: unconfined, every socket is made and used.
    let home = home_with(&json!("off"));
    let out = probe(home.path(), &attempt);
    for t in &l.targets {
        assert!(got_through(&out, &format!("uring {t}")), "{out}");
    }
    let mut buf = [0u8; 16];
    l.udp
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(l.udp.recv(&mut buf).is_ok(), "the twin's datagram arrived");
    for sandbox in [json!({"net": "none"}), json!({"net": ["example.com:443"]})] {
        let home = home_with(&sandbox);
        let out = probe(home.path(), &attempt);
        for t in &l.targets {
            assert!(
                !got_through(&out, &format!("uring {t}")),
                "{sandbox}: {out}"
            );
        }
        assert!(out.contains("io_uring_setup"), "{sandbox}: {out}");
    }
}

#[test]
fn a_confined_server_holds_no_capability() {
    let root = rustix::process::geteuid().is_root();
    // The twin: unconfined, a server of root's holds root's capabilities.
    let home = home_with(&json!("off"));
    let out = probe(home.path(), &json!({"caps": true}));
    assert_eq!(got_through(&out, "caps"), root, "{out}");
    // Confined, none, whether edgar runs as root or not, and in a host list's own user
    // namespace too (where a process starts with every capability).
    for sandbox in [json!({"net": "none"}), json!({"net": ["example.com:443"]})] {
        let home = home_with(&sandbox);
        let out = probe(home.path(), &json!({"caps": true}));
        assert!(!got_through(&out, "caps"), "{sandbox}: {out}");
    }
}

/// A repository with a tool list, a real directory `docs`, and links out of it: `data`
/// to the user's `~/.ssh`, `home` to the home itself.
struct Repo {
    home: tempfile::TempDir,
    repo: std::path::PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let h = home.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let repo = h.join("repo");
        for dir in [h.join(".ssh"), repo.join("docs")] {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(
            h.join(".ssh/id_rsa"),
            "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(h.join(".bashrc"), "# mine\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(repo.join("docs/readme"), "docs\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            repo.join("tools.json"),
            r#"[{"name": "probe", "inputSchema": {"type": "object"}}]"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(h.join(".ssh"), repo.join("data"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&h, repo.join("home")).unwrap_or_else(|e| panic!("{e}"));
        Repo { home, repo }
    }

    fn entry(&self, args: &[&str], sandbox: Option<Value>) -> Value {
        let mut e = json!({"command": FAKE, "args": ["good"],
                           "env": {"FAKE_TOOLS": self.repo.join("tools.json").display().to_string()}});
        for a in args {
            if let Some(list) = e["args"].as_array_mut() {
                list.push(json!(a));
            }
        }
        if let Some(s) = sandbox {
            e["sandbox"] = s;
        }
        e
    }

    /// The project's `.mcp.json` with one server `p`, approved as a human would.
    fn project(&self, entry: &Value) {
        std::fs::write(
            self.repo.join(".mcp.json"),
            json!({"mcpServers": {"p": entry}}).to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let r = self.edgar(&["mcp", "approve", "p", "--yes"]);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
    }

    fn edgar(&self, args: &[&str]) -> edgar_tests::Run {
        let mut cmd = Command::new(EDGAR);
        in_home(cmd.args(args), self.home.path()).current_dir(&self.repo);
        edgar_tests::Run::from(cmd.output().unwrap_or_else(|e| panic!("{e}")))
    }

    /// The probe's attempt on the secret and the start-up file, through the links.
    fn attack(&self, server: &str) -> edgar_tests::Run {
        let args = json!({
            "read": [self.repo.join("data/id_rsa").display().to_string()],
            "write": [self.repo.join("home/.bashrc").display().to_string()],
        });
        self.edgar(&[
            "mcp",
            "call",
            &format!("{server}__probe"),
            &args.to_string(),
        ])
    }
}

/// What a refused start says: the link, its target, and why.
fn refused_for_a_link(r: &edgar_tests::Run) -> bool {
    r.code != Some(0)
        && r.stderr.contains("is a link in the project to")
        && r.stderr.contains("outside the project")
        && !r.stdout.contains(": ok")
}

#[test]
fn a_link_in_the_project_widens_no_confinement() {
    let r = Repo::new();
    // The twin: the same entry in the user's own config follows its links (the user's
    // own choice), and the probe gets both.
    // (A user's relative paths are relative to the config file: named absolutely here.)
    user_config(
        r.home.path(),
        json!({"u": r.entry(
            &[&r.repo.join("data").display().to_string()],
            Some(json!({"write": [r.repo.join("home").display().to_string()]})),
        )}),
    );
    let twin = r.attack("u");
    assert_eq!(twin.code, Some(0), "{}", twin.stderr);
    assert!(
        got_through(
            &twin.stdout,
            &format!("read {}", r.repo.join("data/id_rsa").display())
        ),
        "{}",
        twin.stdout
    );
    user_config(r.home.path(), json!({}));

    // Through an argument that names a link (the default project profile reads it).
    r.project(&r.entry(&["./data"], None));
    let out = r.attack("p");
    assert!(refused_for_a_link(&out), "{}\n{}", out.stdout, out.stderr);
    // Through a profile's `read` and `write`.
    r.project(&r.entry(&[], Some(json!({"read": ["./data"], "write": ["./home"]}))));
    let out = r.attack("p");
    assert!(refused_for_a_link(&out), "{}\n{}", out.stdout, out.stderr);
    // After approval: a pull turns an approved directory into a link.
    r.project(&r.entry(&[], Some(json!({"read": ["./docs"]}))));
    let docs = r.repo.join("docs/readme").display().to_string();
    let before = r.edgar(&[
        "mcp",
        "call",
        "p__probe",
        &json!({"read": [docs]}).to_string(),
    ]);
    assert!(
        got_through(&before.stdout, &format!("read {docs}")),
        "{}",
        before.stderr
    );
    std::fs::remove_dir_all(r.repo.join("docs")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(r.home.path().join(".ssh"), r.repo.join("docs"))
        .unwrap_or_else(|e| panic!("{e}"));
    let secret = r.repo.join("docs/id_rsa").display().to_string();
    let after = r.edgar(&[
        "mcp",
        "call",
        "p__probe",
        &json!({"read": [secret]}).to_string(),
    ]);
    assert!(
        refused_for_a_link(&after),
        "{}\n{}",
        after.stdout,
        after.stderr
    );
}

/// A loopback HTTP server that answers every request with `body` (a service on this
/// machine that no server's list names).
fn http_service(body: &'static str) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = l.local_addr().map(|a| a.port()).unwrap_or_default();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// `edgar mcp call h__probe ARGS` with `/etc/hosts` replaced by `hosts` in a mount
/// namespace of its own: DNS that a server's author controls, without a DNS server.
fn probe_with_hosts(home: &Path, hosts: &str, args: &Value) -> (String, String) {
    let file = home.join("hosts");
    std::fs::write(&file, hosts).unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new("unshare");
    if !rustix::process::geteuid().is_root() {
        cmd.arg("--map-root-user");
    }
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$1" /etc/hosts && shift && exec "$@""#)
        .args([
            "sh",
            &file.display().to_string(),
            EDGAR,
            "mcp",
            "call",
            "h__probe",
        ])
        .arg(args.to_string());
    let out = in_home(&mut cmd, home)
        .output()
        .unwrap_or_else(|e| panic!("cannot run unshare: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

#[test]
fn a_listed_name_reaches_only_public_addresses_and_its_own_host() {
    let port = http_service("internal-secret");
    let hosts =
        "127.0.0.1 localhost\n127.0.0.1 evil.example.test\n169.254.169.254 metadata.example.test\n";
    let curl = |extra: &[&str], url: String| {
        // `-f`: an HTTP error (the proxy's 403) is a failure.
        let mut argv: Vec<Value> = ["curl", "-sf", "-o", "/dev/null", "-m", "5"]
            .into_iter()
            .map(Value::from)
            .collect();
        argv.extend(extra.iter().map(|e| Value::from(*e)));
        argv.push(Value::from(url));
        Value::Array(argv)
    };
    let evil = format!("http://evil.example.test:{port}/");
    let fronted = format!("http://localhost:{port}/");
    let attempts = json!({"exec": [
        curl(&[], evil.clone()),
        curl(&["-p"], evil.clone()),
        curl(&["-H", "Host: internal.example"], fronted.clone()),
        curl(&[], fronted.clone()),
    ]});
    let line = edgar_tests::probe_exec_line;
    let tries: Vec<String> = attempts["exec"]
        .as_array()
        .into_iter()
        .flatten()
        .map(line)
        .collect();
    // The twin: unconfined, the name reaches the service on this machine.
    let home = home_with(&json!("off"));
    let (twin, _) = probe_with_hosts(home.path(), hosts, &attempts);
    assert!(got_through(&twin, &tries[0]), "{twin}");

    // Confined with a wildcard and a literal `localhost`: the wildcard's name resolves to
    // loopback and is refused (plain and CONNECT); the literal reaches its own port only
    // with its own Host.
    let home =
        home_with(&json!({"net": [format!("*.example.test:{port}"), format!("localhost:{port}")]}));
    let (out, stderr) = probe_with_hosts(home.path(), hosts, &attempts);
    assert!(
        !got_through(&out, &tries[0]),
        "a wildcard reached loopback: {out}"
    );
    assert!(
        !got_through(&out, &tries[1]),
        "CONNECT reached loopback: {out}"
    );
    assert!(
        !got_through(&out, &tries[2]),
        "another Host went through: {out}"
    );
    assert!(got_through(&out, &tries[3]), "the literal host: {out}");
    // Each refusal is said, in one line.
    assert!(
        stderr.contains("resolves to 127.0.0.1 (this machine or a private network)")
            && stderr.contains("with Host 'internal.example'"),
        "{stderr}"
    );
}

/// A project directory's name is the repository's to choose: `approve` and `revoke` show
/// it escaped, never as terminal escape sequences.
#[test]
fn approve_and_revoke_show_a_hostile_project_path_escaped() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let repo = home.path().join("repo\u{1b}]0;owned\u{7}\u{1b}[2J");
    std::fs::create_dir_all(&repo).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        repo.join(".mcp.json"),
        json!({"mcpServers": {"p": {"command": FAKE, "args": ["good"]}}}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let edgar = |args: &[&str]| {
        let mut cmd = Command::new(EDGAR);
        in_home(cmd.args(args), home.path()).current_dir(&repo);
        edgar_tests::Run::from(cmd.output().unwrap_or_else(|e| panic!("{e}")))
    };
    for args in [
        &["mcp", "approve", "p", "--yes"][..],
        &["mcp", "revoke", "p"],
        &["mcp", "revoke", "p"],
    ] {
        let r = edgar(args);
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(
            !all.contains('\u{1b}') && !all.contains('\u{7}'),
            "{args:?}: {all:?}"
        );
        assert!(all.contains("repo\\u{1b}"), "{args:?}: {all}");
    }
}

/// `edgar mcp list` says for each local server whether it runs confined.
#[test]
fn mcp_list_says_which_servers_run_confined() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    user_config(
        home.path(),
        json!({"c": {"command": FAKE, "args": ["good"], "sandbox": {"net": "none"}},
               "u": {"command": FAKE, "args": ["good"]},
               "w": {"url": "https://example.com/mcp"}}),
    );
    let r = run(EDGAR, home.path(), &["mcp", "list"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let line = |name: &str| {
        r.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name}\t")))
            .unwrap_or_else(|| panic!("{}", r.stdout))
            .to_owned()
    };
    assert!(
        line("c").starts_with("c\tstdio\tconfined\t"),
        "{}",
        r.stdout
    );
    assert!(
        line("u").starts_with("u\tstdio\tNOT confined\t"),
        "{}",
        r.stdout
    );
    assert!(!line("w").contains("confined"), "{}", r.stdout);
}

/// A project's server whose interpreter the user's PATH finds in a version manager in the
/// home (this machine's `python3` is pyenv's) starts under edgar's default profile, with
/// that runtime read and shown in the approval prompt.
#[test]
fn a_project_server_runs_confined_on_the_users_own_python() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let repo = home.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(
        edgar_tests::fixture("stdlib_server.py"),
        repo.join("server.py"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        repo.join(".mcp.json"),
        json!({"mcpServers": {"py": {"command": "python3", "args": ["server.py"]}}}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let edgar = |args: &[&str]| {
        let mut cmd = Command::new(EDGAR);
        // The real HOME's version managers (pyenv here) stay where the PATH finds them.
        in_home(cmd.args(args), home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(&repo);
        edgar_tests::Run::from(cmd.output().unwrap_or_else(|e| panic!("{e}")))
    };
    let approve = edgar(&["mcp", "approve", "py", "--yes"]);
    assert_eq!(approve.code, Some(0), "{}", approve.stderr);
    let python = edgar_host::trust::policy::resolve_program(
        "python3",
        std::env::var_os("PATH").as_deref(),
        None,
    )
    .unwrap_or_else(|| panic!("no python3 on PATH"));
    let in_system = ["/usr", "/bin", "/lib"]
        .iter()
        .any(|s| python.starts_with(s));
    assert_eq!(
        !in_system,
        approve
            .stdout
            .contains("the runtime its program belongs to (found on your PATH) read with it"),
        "{}: {}",
        python.display(),
        approve.stdout
    );
    let r = edgar(&["mcp", "call", "py__add", r#"{"a": 20, "b": 22}"#]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("42"), "{}", r.stdout);
}

/// A confined launcher's private cache belongs to one entry: a project's server with the
/// same command and arguments as the user's own never shares it, so it cannot plant
/// code the user's server (which holds the user's tokens) would load.
#[test]
fn a_project_server_never_shares_a_cache_with_the_users() {
    let r = Repo::new();
    let h = r.home.path();
    let npx = h.join("bin/npx");
    std::fs::create_dir_all(h.join("bin")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(FAKE, &npx).unwrap_or_else(|e| panic!("{e}"));
    let entry = json!({"command": npx.display().to_string(), "args": ["good"],
                       "env": {"FAKE_TOOLS": r.repo.join("tools.json").display().to_string()},
                       "sandbox": {"read": [r.repo.display().to_string(), h.join("bin").display().to_string()]}});
    r.project(&entry);
    let caches = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(h.join("cache/edgar-sandbox"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    // The project's server plants a file in its cache.
    let first = r.edgar(&["mcp", "call", "p__probe", r#"{}"#]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let project_cache = caches();
    assert_eq!(project_cache.len(), 1, "{project_cache:?}");
    let planted = project_cache[0].join("planted").display().to_string();
    let out = r.edgar(&[
        "mcp",
        "call",
        "p__probe",
        &json!({"write": [planted]}).to_string(),
    ]);
    assert!(
        got_through(&out.stdout, &format!("write {planted}")),
        "{}",
        out.stderr
    );
    // The user's own server of the same command and arguments gets a cache of its own,
    // and cannot even read the project's.
    user_config(h, json!({"u": entry}));
    let out = r.edgar(&[
        "mcp",
        "call",
        "u__probe",
        &json!({"read": [planted]}).to_string(),
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(caches().len(), 2, "{:?}", caches());
    assert!(
        !got_through(&out.stdout, &format!("read {planted}")),
        "{}",
        out.stdout
    );
}
