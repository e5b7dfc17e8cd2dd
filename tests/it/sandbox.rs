//! Confinement by the kernel (Landlock and seccomp): a hostile stdio server whose tool
//! tries to read a user's keys and edgar's credentials, write a shell start-up file,
//! write outside its declared directory, connect to a loopback port, trace a process and
//! make a namespace. Each is denied or allowed exactly as its profile says, and the same
//! server with `"sandbox": "off"` succeeds, so every check can fail.

use std::path::{Path, PathBuf};

use edgar_tests::{Run, run, user_config};
use serde_json::{Value, json};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
}

/// A home with planted secrets, an allowed and a writable directory, and a `probe` tool.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let h = dir.path();
        write(
            &h.join(".ssh/id_rsa"),
            "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        );
        write(
            &h.join(".aws/credentials"),
            "[default]\naws_secret_access_key=x\n",
        );
        write(&h.join(".bashrc"), "# mine\n");
        write(
            &h.join("config/edgar/credentials.json"),
            "{\"t\": \"secret\"}",
        );
        write(&h.join(".local/state/edgar/approvals.json"), "{}");
        write(&h.join("allowed/notes.txt"), "allowed\n");
        write(
            &h.join("allowed/tools.json"),
            r#"[{"name": "probe", "inputSchema": {"type": "object"}}]"#,
        );
        std::fs::create_dir_all(h.join("out")).unwrap_or_else(|e| panic!("{e}"));
        Home { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The user's config with one server `h` of this `sandbox` value.
    fn server(&self, sandbox: Value) {
        user_config(
            self.path(),
            json!({"h": {"command": FAKE, "args": ["good"], "sandbox": sandbox,
                         "env": {"FAKE_TOOLS": self.path().join("allowed/tools.json").display().to_string()}}}),
        );
    }

    fn probe(&self, args: Value) -> String {
        let r = run(
            EDGAR,
            self.path(),
            &["mcp", "call", "h__probe", &args.to_string()],
            b"",
        );
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        r.stdout
    }
}

use edgar_tests::probe_allowed as allowed;

fn listener() -> (std::net::TcpListener, String) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = l.local_addr().unwrap_or_else(|e| panic!("{e}")).to_string();
    (l, addr)
}

#[test]
fn a_confined_server_touches_only_what_its_profile_declares() {
    let h = Home::new();
    let p = |rel: &str| h.path().join(rel).display().to_string();
    let (_l, addr) = listener();
    let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let outside_file = outside.path().join("dropped").display().to_string();
    let attempts = json!({
        "read": [p(".ssh/id_rsa"), p(".aws/credentials"), p("config/edgar/credentials.json"),
                 p(".local/state/edgar/approvals.json"), p("allowed/notes.txt"), "/etc/hostname"],
        "write": [p(".bashrc"), p("out/made"), outside_file, p("allowed/notes.txt")],
        "connect": [addr],
        "exec": [["unshare", "-U", "true"], ["true"]],
    });
    let reads_and_writes = |out: &str, confined: bool| {
        for secret in [
            ".ssh/id_rsa",
            ".aws/credentials",
            "config/edgar/credentials.json",
            ".local/state/edgar/approvals.json",
        ] {
            assert_eq!(
                allowed(out, &format!("read {}", p(secret))),
                !confined,
                "{secret}:\n{out}"
            );
        }
        assert!(
            allowed(out, &format!("read {}", p("allowed/notes.txt"))),
            "{out}"
        );
        assert!(allowed(out, "read /etc/hostname"), "{out}");
        assert!(allowed(out, &format!("write {}", p("out/made"))), "{out}");
        for denied in [p(".bashrc"), outside_file.clone(), p("allowed/notes.txt")] {
            assert_eq!(
                allowed(out, &format!("write {denied}")),
                !confined,
                "{denied}:\n{out}"
            );
        }
        assert_eq!(allowed(out, &format!("connect {addr}")), !confined, "{out}");
        assert_eq!(allowed(out, "exec unshare -U true"), !confined, "{out}");
        assert!(allowed(out, "exec true"), "{out}");
    };
    h.server(json!({"read": ["~/allowed"], "write": ["~/out"], "net": "none"}));
    reads_and_writes(&h.probe(attempts.clone()), true);
    assert!(
        !std::fs::read_to_string(h.path().join(".bashrc"))
            .unwrap_or_default()
            .contains("pwned")
    );
    // `ptrace` last, on its own: once it succeeds the server is being traced.
    assert!(!allowed(&h.probe(json!({"ptrace": true})), "ptrace"));

    // Even `"read": ["~"]` never reaches edgar's own files.
    h.server(json!({"read": ["~"], "write": ["~/out"], "net": "none"}));
    let out = h.probe(attempts.clone());
    assert!(
        allowed(&out, &format!("read {}", p(".ssh/id_rsa"))),
        "{out}"
    );
    assert!(
        !allowed(
            &out,
            &format!("read {}", p("config/edgar/credentials.json"))
        ),
        "{out}"
    );
    assert!(
        !allowed(
            &out,
            &format!("read {}", p(".local/state/edgar/approvals.json"))
        ),
        "{out}"
    );

    // The same server unconfined: everything it tried works (so the checks above can fail).
    h.server(json!("off"));
    reads_and_writes(&h.probe(attempts), false);
    assert!(allowed(&h.probe(json!({"ptrace": true})), "ptrace"));
}

#[test]
fn net_all_reaches_the_network_and_net_none_reaches_nothing() {
    let h = Home::new();
    let (_l, addr) = listener();
    for (net, reach) in [("all", true), ("none", false)] {
        h.server(json!({"read": ["~/allowed"], "net": net}));
        let out = h.probe(json!({"connect": [addr]}));
        assert_eq!(
            allowed(&out, &format!("connect {addr}")),
            reach,
            "net {net}: {out}"
        );
    }
}

/// A loopback HTTP server that answers every request with 200 and `name`.
fn http_server(name: &'static str) -> u16 {
    use std::io::{Read, Write};
    let (l, _) = listener();
    let port = l
        .local_addr()
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"));
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut head = Vec::new();
            let mut b = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{name}",
                name.len()
            );
        }
    });
    port
}

#[test]
fn a_host_list_reaches_exactly_its_hosts_by_name() {
    let h = Home::new();
    let listed = http_server("listed");
    let other = http_server("other");
    let curl = |extra: &[&str], url: String| {
        let mut argv = vec!["curl", "-sf", "-m", "5"];
        argv.extend_from_slice(extra);
        let mut argv: Vec<Value> = argv.into_iter().map(Value::from).collect();
        argv.push(Value::from(url));
        Value::Array(argv)
    };
    let tries = [
        // (what, the probe's line, reached confined)
        (curl(&[], format!("http://localhost:{listed}/")), true),
        (curl(&["-p"], format!("http://localhost:{listed}/")), true),
        (curl(&[], format!("http://localhost:{other}/")), false),
        (curl(&["-p"], format!("http://localhost:{other}/")), false),
        // Names, not addresses: the same server by another name is not on the list.
        (curl(&[], format!("http://127.0.0.1:{listed}/")), false),
        // Around the proxy there is only the namespace's own loopback.
        (
            curl(&["--noproxy", "*"], format!("http://127.0.0.1:{other}/")),
            false,
        ),
        (
            curl(&["--noproxy", "*"], format!("http://10.255.255.1:{other}/")),
            false,
        ),
    ];
    let line = edgar_tests::probe_exec_line;
    let attempts = json!({
        "connect": [format!("127.0.0.1:{listed}"), format!("127.0.0.1:{other}")],
        "exec": tries.iter().map(|(argv, _)| argv.clone()).collect::<Vec<_>>(),
    });
    for (sandbox, confined) in [
        (
            json!({"read": ["~/allowed"], "net": [format!("localhost:{listed}"), "api.example.com:443"]}),
            true,
        ),
        (json!("off"), false),
    ] {
        h.server(sandbox.clone());
        let out = h.probe(attempts.clone());
        // A raw connection reaches a listed loopback port (edgar forwards it), no other.
        assert!(
            allowed(&out, &format!("connect 127.0.0.1:{listed}")),
            "{sandbox}: {out}"
        );
        assert_eq!(
            allowed(&out, &format!("connect 127.0.0.1:{other}")),
            !confined,
            "{sandbox}: {out}"
        );
        for (argv, reached) in &tries {
            let what = line(argv);
            let unreachable = argv.to_string().contains("10.255.255.1");
            if !confined && unreachable {
                continue;
            }
            assert_eq!(
                allowed(&out, &what),
                *reached || !confined,
                "{sandbox}: {what}:\n{out}"
            );
        }
    }
    // `mcp get` says how it runs.
    h.server(json!({"net": [format!("localhost:{listed}")]}));
    let v = run(EDGAR, h.path(), &["mcp", "get", "h"], b"").json();
    let conf = v["confinement"].as_str().unwrap_or_default();
    assert!(
        conf.contains(&format!(
            "net: localhost:{listed} (by name, through edgar's proxy)"
        )),
        "{v}"
    );
}

#[test]
fn a_refused_host_is_named_when_the_server_fails() {
    let h = Home::new();
    let listed = http_server("listed");
    let other = http_server("other");
    user_config(
        h.path(),
        json!({"needy": {"command": "sh",
                         "args": ["-c", format!("curl -sf -m 5 http://localhost:{other}/ >&2; exit 3")],
                         "sandbox": {"net": [format!("localhost:{listed}")]}}}),
    );
    let r = run(EDGAR, h.path(), &["mcp", "tools", "needy"], b"");
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(
        r.stderr.contains(&format!(
            "edgar's sandbox refused localhost:{other} (not in its \"net\" list)"
        )),
        "{}",
        r.stderr
    );
}

#[test]
fn confinement_is_shown_required_by_policy_and_audited() {
    let h = Home::new();
    user_config(
        h.path(),
        json!({
            "boxed": {"command": FAKE, "args": ["good"], "sandbox": {"read": ["~/allowed"], "net": "none"}},
            "open": {"command": FAKE, "args": ["good"], "sandbox": "off"},
            "plain": {"command": FAKE, "args": ["good"]},
        }),
    );
    let r = run(EDGAR, h.path(), &["mcp", "get", "boxed"], b"");
    let v: Value = r.json();
    let line = v["confinement"].as_str().unwrap_or_default();
    assert!(
        line.starts_with("confined: landlock + seccomp, net: none"),
        "{v}"
    );
    assert!(line.contains("allowed"), "{v}");
    let r = run(EDGAR, h.path(), &["mcp", "list", "--json"], b"");
    let list: Value = r.json();
    let conf = |name: &str| {
        list.as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == name)
            .map(|s| s["confinement"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    assert!(conf("open").starts_with("NOT confined"), "{list}");
    assert!(conf("plain").starts_with("NOT confined"), "{list}");
    // Started: the audit trail records how.
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "boxed__echo", r#"{"text": "x"}"#],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let audit = std::fs::read_to_string(h.path().join(".local/state/edgar/audit.jsonl"))
        .unwrap_or_default();
    assert!(
        audit.contains("\"event\":\"start\"") && audit.contains("confined: landlock + seccomp"),
        "{audit}"
    );
    // The policy requires it: the unconfined ones do not start, and say which rule.
    let policy = h.path().join("policy.json");
    write(&policy, r#"{"require_sandbox": true}"#);
    let with_policy = |args: &[&str]| -> Run {
        let mut a = vec![
            format!("EDGAR_POLICY={}", policy.display()),
            EDGAR.to_owned(),
        ];
        a.extend(args.iter().map(|s| s.to_string()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run("env", h.path(), &a, b"")
    };
    for name in ["open", "plain"] {
        let r = with_policy(&["mcp", "call", &format!("{name}__echo"), r#"{"text": "x"}"#]);
        assert_eq!(r.code, Some(1), "{name}: {}", r.stdout);
        assert!(r.stderr.contains("require_sandbox"), "{name}: {}", r.stderr);
    }
    let r = with_policy(&["mcp", "call", "boxed__echo", r#"{"text": "x"}"#]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

#[test]
fn a_profile_that_cannot_be_read_is_a_clear_error() {
    let h = Home::new();
    for (sandbox, want) in [
        (json!({"net": ["api.example.com"]}), "has no port"),
        (json!({"net": ["api.example.com:0"]}), "from 1 to 65535"),
        (json!({"net": ["api.example.com:https"]}), "from 1 to 65535"),
        (
            json!({"net": ["http://api.example.com:443"]}),
            "the host must be",
        ),
        (json!({"net": ["a b:443"]}), "the host must be"),
        (json!({"net": ["[zz]:443"]}), "the host must be"),
        (json!({"net": [443]}), "\"host:port\" string"),
        (json!({"reed": ["~"]}), "unknown key"),
        (json!({"net": "some"}), "\"none\", \"all\" or a list"),
        (json!("on"), "must be \"off\""),
    ] {
        h.server(sandbox.clone());
        let r = run(EDGAR, h.path(), &["mcp", "list"], b"");
        assert_eq!(r.code, Some(1), "{sandbox}: {}", r.stdout);
        assert!(r.stderr.contains(want), "{sandbox}: {}", r.stderr);
    }
}

/// `edgar mcp call NAME ARGS` in `home`, which must succeed: what it printed.
fn called(home: &Path, name: &str, args: Value) -> String {
    let r = run(EDGAR, home, &["mcp", "call", name, &args.to_string()], b"");
    assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
    r.stdout
}

/// The installation `python` (a virtual environment's) was made from: `sys.base_prefix`.
fn base_prefix(python: &Path) -> String {
    std::process::Command::new(python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The real servers the suite installs, each under the profile the README gives for its
/// kind: read the package's install tree, nothing else of the home, no network.
#[test]
fn real_servers_run_confined_with_the_readmes_profiles() {
    let h = Home::new();
    let deps = edgar_tests::test_deps();
    let node_modules = deps.join("npm/node_modules").display().to_string();
    let venv = deps.join("py").display().to_string();
    let python = edgar_tests::installed("py/bin/python");
    let base_prefix = base_prefix(&python);
    let root = h.path().join("allowed").display().to_string();
    let npm_bin = |b: &str| {
        edgar_tests::installed(&format!("npm/node_modules/.bin/{b}"))
            .display()
            .to_string()
    };
    user_config(
        h.path(),
        json!({
            "everything": {"command": npm_bin("mcp-server-everything"), "args": ["stdio"],
                           "startup_timeout_sec": 60,
                           "sandbox": {"read": [node_modules], "net": "none"}},
            "fs": {"command": npm_bin("mcp-server-filesystem"), "args": [root],
                   "startup_timeout_sec": 60,
                   "sandbox": {"read": [node_modules], "net": "none"}},
            "py": {"command": python.display().to_string(),
                   "args": [edgar_tests::fixture("python_server.py").display().to_string()],
                   "startup_timeout_sec": 60,
                   "sandbox": {"read": [venv, base_prefix], "net": "none"}},
            "workspace": {"command": EDGAR, "args": ["mcp", "example-server", "--root", root],
                          "sandbox": {"net": "none"}},
        }),
    );
    let call = |name: &str, args: Value| called(h.path(), name, args);
    assert!(call("everything__echo", json!({"message": "hi"})).contains("Echo: hi"));
    let note = h.path().join("allowed/notes.txt").display().to_string();
    assert!(call("fs__read_text_file", json!({"path": note})).contains("allowed"));
    assert!(call("py__add", json!({"a": 20, "b": 22})).contains("42"));
    assert!(
        call("workspace__search_text", json!({"query": "allowed"})).contains("notes.txt"),
        "the embedded default reads its root confined"
    );
}

/// A script whose `#!` interpreter lies outside what its profile reads is refused by the
/// kernel at `exec`; the error says that, not only "Permission denied".
#[test]
fn an_interpreter_it_may_not_read_is_named_as_the_cause() {
    use std::os::unix::fs::PermissionsExt;
    let h = Home::new();
    let shell = h.path().join("interp/sh");
    write(&shell, "");
    std::fs::copy("/bin/sh", &shell).unwrap_or_else(|e| panic!("{e}"));
    let script = h.path().join("srv/run");
    write(
        &script,
        &format!("#!{}\nexec {FAKE} good\n", shell.display()),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    let entry = |sandbox: Value| json!({"s": {"command": script.display().to_string(), "args": [FAKE], "sandbox": sandbox}});
    user_config(h.path(), entry(json!({"net": "none"})));
    let r = run(EDGAR, h.path(), &["mcp", "tools", "s"], b"");
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(
        r.stderr.contains("the interpreter its `#!` line names"),
        "{}",
        r.stderr
    );
    // Reading the interpreter's directory is what it needed.
    let interp = h.path().join("interp").display().to_string();
    user_config(h.path(), entry(json!({"read": [interp], "net": "none"})));
    let r = run(EDGAR, h.path(), &["mcp", "tools", "s"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

/// A user's server confined to its data alone still starts: the install its program
/// lives in (npm's `node_modules`, a Python virtual environment and the Python it was
/// made from, pyenv's here) is read with it. A project's entry gets no such thing: its
/// profile names what it reads, approved.
#[test]
fn a_users_server_reads_its_own_install_and_a_projects_does_not() {
    let h = Home::new();
    let python = edgar_tests::installed("py/bin/python");
    let base_prefix = PathBuf::from(base_prefix(&python));
    let root = h.path().join("allowed").display().to_string();
    let fs_bin = edgar_tests::installed("npm/node_modules/.bin/mcp-server-filesystem")
        .display()
        .to_string();
    let fs = json!({"command": fs_bin, "args": [root], "startup_timeout_sec": 60,
                    "sandbox": {"net": "none"}});
    user_config(
        h.path(),
        json!({
            "fs": fs,
            "py": {"command": python.display().to_string(),
                   "args": [edgar_tests::fixture("python_server.py").display().to_string()],
                   "startup_timeout_sec": 60,
                   "sandbox": {"net": "none"}},
        }),
    );
    let call = |name: &str, args: Value| called(h.path(), name, args);
    let note = h.path().join("allowed/notes.txt").display().to_string();
    assert!(call("fs__read_text_file", json!({"path": note})).contains("allowed"));
    assert!(call("py__add", json!({"a": 20, "b": 22})).contains("42"));
    // The Python the venv was made from is named when it is not the system's.
    let get = run(EDGAR, h.path(), &["mcp", "get", "py"], b"").json();
    let line = get["confinement"].as_str().unwrap_or_default();
    let venv = edgar_tests::installed("py");
    assert!(line.contains(&venv.display().to_string()), "{line}");
    if !base_prefix.starts_with("/usr") {
        let lib = base_prefix.join("lib").display().to_string();
        assert!(line.contains(&lib), "{line}");
    }
    // And it says so where it says how the server runs.
    let get = run(EDGAR, h.path(), &["mcp", "get", "fs"], b"").json();
    let node_modules = edgar_tests::installed("npm/node_modules");
    let line = get["confinement"].as_str().unwrap_or_default();
    let want = format!("its own install read with it: {}", node_modules.display());
    assert!(line.contains(&want), "{line}");
    // The start's audit line names the install the start itself found.
    let trail = std::fs::read_to_string(h.path().join(".local/state/edgar/audit.jsonl"))
        .unwrap_or_default();
    assert!(
        trail.lines().any(|l| l.contains("\"event\":\"start\"")
            && l.contains("\"server\":\"fs\"")
            && l.contains(&want)),
        "{trail}"
    );
    // Not its home's secrets for all that.
    let secret = h.path().join(".ssh/id_rsa").display().to_string();
    let r = run(
        EDGAR,
        h.path(),
        &[
            "mcp",
            "call",
            "fs__read_text_file",
            &json!({"path": secret}).to_string(),
        ],
        b"",
    );
    assert!(!r.stdout.contains("PRIVATE KEY"), "{}", r.stdout);

    // The same entry in a project, approved: its install is not read, so it cannot start.
    let repo = h.path().join("repo");
    write(
        &repo.join(".mcp.json"),
        &json!({"mcpServers": {"pfs": fs}}).to_string(),
    );
    let in_repo = |args: &[&str]| {
        let mut cmd = std::process::Command::new(EDGAR);
        edgar_tests::in_home(cmd.args(args), h.path()).current_dir(&repo);
        Run::from(cmd.output().unwrap_or_else(|e| panic!("{e}")))
    };
    let approve = in_repo(&["mcp", "approve", "pfs", "--yes"]);
    assert_eq!(approve.code, Some(0), "{}", approve.stderr);
    let get = in_repo(&["mcp", "get", "pfs"]).json();
    let line = get["confinement"].as_str().unwrap_or_default();
    assert!(!line.contains("own install"), "{line}");
    let r = in_repo(&["mcp", "tools", "pfs"]);
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(r.stderr.contains("it runs confined"), "{}", r.stderr);
}

#[test]
fn mcp_add_writes_a_profile_and_a_denied_start_says_how_it_ran() {
    let h = Home::new();
    let add = |args: &[&str]| {
        let mut a = vec!["mcp", "add"];
        a.extend_from_slice(args);
        let r = run(EDGAR, h.path(), &a, b"");
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        r
    };
    // A server added without a profile is said to run unconfined, once it is added.
    let plain = add(&["plain", "--", FAKE, "good"]);
    assert!(plain.stdout.starts_with("added plain"), "{}", plain.stdout);
    assert!(
        plain.stderr.contains("plain runs NOT confined"),
        "{}",
        plain.stderr
    );
    assert_eq!(
        run(EDGAR, h.path(), &["mcp", "remove", "plain"], b"").code,
        Some(0)
    );
    let boxed = add(&[
        "boxed",
        "--read",
        "~/allowed",
        "--write",
        "~/out",
        "--",
        FAKE,
        "good",
    ]);
    assert!(!boxed.stderr.contains("does not exist"), "{}", boxed.stderr);
    // A path that is not there is said to allow nothing (a typo), and the entry is kept.
    let typo = add(&["typo", "--read", "~/alowed", "--", FAKE, "good"]);
    assert!(
        typo.stderr.contains(&format!(
            "note: --read '{}' does not exist: it allows nothing until it does",
            h.path().join("alowed").display()
        )),
        "{}",
        typo.stderr
    );
    add(&["open", "--no-sandbox", "--", FAKE, "good"]);
    add(&[
        "web",
        "--net",
        "api.example.com:443",
        "--net",
        "localhost:5432",
        "--",
        FAKE,
        "good",
    ]);
    for bad in [
        &[
            "x",
            "--net",
            "none",
            "--net",
            "api.example.com:443",
            "--",
            FAKE,
        ][..],
        &["x", "--net", "api.example.com", "--", FAKE][..],
    ] {
        let mut a = vec!["mcp", "add"];
        a.extend_from_slice(bad);
        let r = run(EDGAR, h.path(), &a, b"");
        assert_ne!(r.code, Some(0), "{bad:?}: {}", r.stdout);
    }
    let get = |name: &str| run(EDGAR, h.path(), &["mcp", "get", name], b"").json();
    let web = get("web");
    assert!(
        web["confinement"]
            .as_str()
            .unwrap_or_default()
            .contains("net: api.example.com:443, localhost:5432 (by name"),
        "{web}"
    );
    let boxed = get("boxed");
    let line = boxed["confinement"].as_str().unwrap_or_default();
    assert!(
        line.contains("net: none") && line.contains("allowed") && line.contains("out"),
        "{boxed}"
    );
    assert!(
        get("open")["confinement"]
            .as_str()
            .unwrap_or_default()
            .contains("\"off\"")
    );
    // A server denied what it needs: the error says it ran confined and what would allow it.
    user_config(
        h.path(),
        json!({"needy": {"command": "sh", "args": ["-c", "cat ~/.ssh/id_rsa >&2; exit 3"],
                         "sandbox": {"net": "none"}}}),
    );
    let r = run(EDGAR, h.path(), &["mcp", "tools", "needy"], b"");
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(r.stderr.contains("Permission denied"), "{}", r.stderr);
    assert!(
        r.stderr.contains("it runs confined: landlock + seccomp"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("\"sandbox\""), "{}", r.stderr);
}

#[test]
fn the_policy_caps_what_a_profile_may_grant() {
    let h = Home::new();
    let policy = h.path().join("policy.json");
    write(
        &policy,
        r#"{"sandbox_limits": {"write_within": ["~/out"], "net": "none"}}"#,
    );
    user_config(
        h.path(),
        json!({
            "fine": {"command": FAKE, "args": ["good"], "sandbox": {"write": ["~/out/cache"]}},
            "home": {"command": FAKE, "args": ["good"], "sandbox": {"write": ["~"]}},
            "climb": {"command": FAKE, "args": ["good"], "sandbox": {"write": ["~/out/../.ssh"]}},
            "online": {"command": FAKE, "args": ["good"], "sandbox": {"net": "all"}},
        }),
    );
    let r = run(
        "env",
        h.path(),
        &[
            &format!("EDGAR_POLICY={}", policy.display()),
            EDGAR,
            "mcp",
            "list",
            "--json",
        ],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v: Value = r.json();
    let state = |name: &str| {
        v.as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == name)
            .map(|s| format!("{} {}", s["state"], s["detail"]))
            .unwrap_or_default()
    };
    assert!(!state("fine").contains("blocked"), "{v}");
    for (name, rule) in [
        ("home", "write_within"),
        ("climb", "write_within"),
        ("online", "sandbox_limits.net"),
    ] {
        let s = state(name);
        assert!(s.contains("blocked") && s.contains(rule), "{name}: {s}");
    }
}

#[test]
fn a_project_server_without_a_profile_is_confined_by_default() {
    let h = Home::new();
    let repo = h.path().join("repo");
    write(
        &repo.join(".mcp.json"),
        &json!({"mcpServers": {"p": {"command": FAKE, "args": ["good"],
                "env": {"FAKE_TOOLS": h.path().join("allowed/tools.json").display().to_string()}}}})
        .to_string(),
    );
    // Its tool list is outside the repository: the default profile reads only the repository.
    std::fs::copy(h.path().join("allowed/tools.json"), repo.join("tools.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let in_repo = |args: &[&str]| {
        let mut cmd = std::process::Command::new(EDGAR);
        edgar_tests::in_home(cmd.args(args), h.path()).current_dir(&repo);
        Run::from(cmd.output().unwrap_or_else(|e| panic!("{e}")))
    };
    let approve = in_repo(&["mcp", "approve", "p", "--yes"]);
    assert_eq!(approve.code, Some(0), "{}", approve.stderr);
    assert!(
        approve
            .stdout
            .contains("edgar's default for a project server"),
        "the approval shows the profile: {}",
        approve.stdout
    );
    let get = in_repo(&["mcp", "get", "p"]).json();
    assert!(
        get["confinement"]
            .as_str()
            .unwrap_or_default()
            .starts_with("confined: landlock + seccomp, net: none"),
        "{get}"
    );
    // FAKE_TOOLS outside the repository cannot be read: it lists its built-in tools instead.
    let r = in_repo(&["mcp", "tools", "p"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.contains("p__echo") && !r.stdout.contains("p__probe"),
        "{}",
        r.stdout
    );
    // Pointed at its repository's copy (a new approval), it runs, and reaches nothing else.
    write(
        &repo.join(".mcp.json"),
        &json!({"mcpServers": {"p": {"command": FAKE, "args": ["good"],
                "env": {"FAKE_TOOLS": repo.join("tools.json").display().to_string()}}}})
        .to_string(),
    );
    assert_eq!(in_repo(&["mcp", "approve", "p", "--yes"]).code, Some(0));
    // Its new tool is held back until a human reviews it.
    in_repo(&["mcp", "tools", "p", "--refresh"]);
    assert_eq!(in_repo(&["mcp", "approve", "p", "--yes"]).code, Some(0));
    let (_l, addr) = listener();
    let p = |rel: &str| h.path().join(rel).display().to_string();
    let args = json!({"read": [p(".ssh/id_rsa"), repo.join("tools.json").display().to_string()],
                      "write": [p(".bashrc"), repo.join("dropped").display().to_string()],
                      "connect": [addr]});
    let r = in_repo(&["mcp", "call", "p__probe", &args.to_string()]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let out = r.stdout;
    assert!(
        !allowed(&out, &format!("read {}", p(".ssh/id_rsa"))),
        "{out}"
    );
    assert!(
        allowed(&out, &format!("read {}", repo.join("tools.json").display())),
        "{out}"
    );
    assert!(!allowed(&out, &format!("write {}", p(".bashrc"))), "{out}");
    assert!(
        !allowed(&out, &format!("write {}", repo.join("dropped").display())),
        "{out}"
    );
    assert!(!allowed(&out, &format!("connect {addr}")), "{out}");
}

/// A real HTTP client (npm, which reads `HTTPS_PROXY`) inside a confined server's own
/// namespace reaches a real listed host through edgar's proxy, and is refused another.
#[test]
fn a_real_client_reaches_a_listed_registry_through_the_proxy() {
    let h = Home::new();
    std::fs::create_dir_all(h.path().join(".npm")).unwrap_or_else(|e| panic!("{e}"));
    for (host, reached) in [
        ("registry.npmjs.org:443", true),
        ("api.example.com:443", false),
    ] {
        user_config(
            h.path(),
            json!({"reg": {"command": "sh",
                           "args": ["-c", format!("npm ping --fetch-retries=0 >&2 || exit 7; exec {FAKE} good")],
                           "startup_timeout_sec": 60,
                           "sandbox": {"read": [FAKE], "write": ["~/.npm"], "net": [host]}}}),
        );
        let r = run(EDGAR, h.path(), &["mcp", "tools", "reg", "--refresh"], b"");
        if reached {
            assert_eq!(r.code, Some(0), "{}", r.stderr);
            assert!(r.stdout.contains("reg__echo"), "{}", r.stdout);
        } else {
            assert_ne!(r.code, Some(0), "{}", r.stdout);
            assert!(
                r.stderr
                    .contains("edgar's sandbox refused registry.npmjs.org:443"),
                "{}",
                r.stderr
            );
        }
    }
}

/// `uvx` from a cold cache, confined to PyPI's two hosts: edgar makes uv's cache (the
/// home is not the server's to write), the machine's certificate authorities reach it,
/// the package comes through edgar's proxy, and the server answers. Another host list
/// gets nothing.
#[test]
fn a_cold_uvx_fetches_its_server_through_the_proxy() {
    let h = Home::new();
    let py_bin = edgar_tests::installed("py/bin");
    let uvx = edgar_tests::installed("py/bin/uvx");
    let path = format!("{}:/usr/bin:/bin", py_bin.display());
    let entry = |net: Value| {
        json!({"time": {"command": uvx.display().to_string(),
                        "args": ["mcp-server-time==2026.10.19"],
                        "env": {"PATH": path, "UV_PYTHON_DOWNLOADS": "never"},
                        "startup_timeout_sec": 120,
                        "sandbox": {"net": net}}})
    };
    // The server's own cache, under the tests' `XDG_CACHE_HOME` (`~/cache`); the user's
    // uv cache is never made or written.
    let cache = h.path().join("cache/edgar-sandbox");
    user_config(h.path(), entry(json!(["pypi.org:443"])));
    let r = run(EDGAR, h.path(), &["mcp", "tools", "time"], b"");
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("edgar's sandbox refused files.pythonhosted.org:443"),
        "{}",
        r.stderr
    );
    std::fs::remove_dir_all(&cache).unwrap_or_else(|e| panic!("{e}"));
    user_config(
        h.path(),
        entry(json!(["pypi.org:443", "files.pythonhosted.org:443"])),
    );
    let out = called(
        h.path(),
        "time__get_current_time",
        json!({"timezone": "UTC"}),
    );
    assert!(out.contains("\"timezone\": \"UTC\""), "{out}");
    let own = std::fs::read_dir(&cache)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().join("uv/cache").is_dir())
                .count()
        })
        .unwrap_or(0);
    assert_eq!(own, 1, "uv's cache is the server's own");
    assert!(!h.path().join("cache/uv").exists() && !h.path().join(".local/share/uv").exists());
}

/// A confined launcher (`npx` here) could plant code in the user's npm cache that their
/// own unconfined `npx` later runs; it gets a cache of its own instead, and the
/// user's is out of its reach.
#[test]
fn a_confined_launcher_writes_its_own_cache_never_the_users() {
    let h = Home::new();
    let p = |rel: &str| h.path().join(rel).display().to_string();
    let npx = h.path().join("bin/npx");
    std::fs::create_dir_all(h.path().join("bin")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(FAKE, &npx).unwrap_or_else(|e| panic!("{e}"));
    write(&h.path().join(".npm/_npx/keep"), "");
    user_config(
        h.path(),
        json!({"h": {"command": npx.display().to_string(), "args": ["good"],
                     "sandbox": {"read": ["~/allowed"], "net": "none"},
                     "env": {"FAKE_TOOLS": p("allowed/tools.json")}}}),
    );
    let planted = p(".npm/_npx/planted");
    let out = h.probe(json!({"write": [planted]}));
    assert!(!allowed(&out, &format!("write {planted}")), "{out}");
    let own: Vec<PathBuf> = std::fs::read_dir(h.path().join("cache/edgar-sandbox"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(own.len(), 1, "{own:?}");
    let mine = own[0].join("made").display().to_string();
    let out = h.probe(json!({"write": [mine]}));
    assert!(allowed(&out, &format!("write {mine}")), "{out}");
}

/// server-memory writes its file beside its script unless told otherwise: confined, its
/// tool fails with the server's own EACCES, and `mcp call` adds how it runs and which
/// keys allow more. Given a file in a directory its profile writes, it works.
#[test]
fn a_refused_write_in_a_tool_error_gets_a_note_on_how_it_runs() {
    let h = Home::new();
    let bin = edgar_tests::installed("npm/node_modules/.bin/mcp-server-memory")
        .display()
        .to_string();
    let entry = |env: Value, sandbox: Value| {
        json!({"mem": {"command": bin, "env": env, "startup_timeout_sec": 60,
                       "sandbox": sandbox}})
    };
    let create = json!({"entities": [{"name": "Ada", "entityType": "person",
                                      "observations": ["likes math"]}]})
    .to_string();
    user_config(h.path(), entry(json!({}), json!({"net": "none"})));
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "mem__create_entities", &create],
        b"",
    );
    assert_eq!(r.code, Some(3), "a tool error: {}", r.stderr);
    assert!(r.stdout.contains("EACCES"), "{}", r.stdout);
    assert!(
        r.stderr.contains("note: mem runs confined: landlock")
            && r.stderr.contains("if it was refused a file it needs"),
        "{}",
        r.stderr
    );
    let file = h.path().join("out/memory.jsonl").display().to_string();
    user_config(
        h.path(),
        entry(
            json!({"MEMORY_FILE_PATH": file}),
            json!({"write": ["~/out"], "net": "none"}),
        ),
    );
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "mem__create_entities", &create],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("note:"), "{}", r.stderr);
    let written = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(written.contains("likes math"), "{written}");
}
