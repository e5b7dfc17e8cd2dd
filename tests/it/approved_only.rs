//! What runs is exactly what a human approved, tried as an attacker would: a cloned
//! repository with no `.mcp.json` at all (its code found by the user's own servers'
//! launchers), an approval prompt that must show all that runs, reads or sends,
//! variables, code that changes after approval, files that are links or FIFOs, a
//! server's descendants that leave its process group, and what the policy matches.
//! Each test is the attack first; with the fix undone it fails.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use edgar_tests::{Run, procs_with_tag, run, user_config};
use serde_json::{Value, json};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

fn home() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
}

/// `edgar ARGS` in `home` with extra environment variables.
fn edgar(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut a: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    a.push(EDGAR.into());
    a.extend(args.iter().map(|s| s.to_string()));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    run("env", home, &a, b"")
}

/// A tool list file with one tool of `name`, for `FAKE_TOOLS`.
fn tools_file(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(format!("{name}-tools.json"));
    write(
        &p,
        &json!([{"name": name, "inputSchema": {"type": "object"}}]).to_string(),
    );
    p
}

fn python() -> String {
    edgar_tests::installed("py/bin/python")
        .display()
        .to_string()
}

#[test]
fn a_server_without_cwd_runs_in_a_private_empty_directory_not_the_users() {
    let h = home();
    let cwd_tool = tools_file(h.path(), "cwd");
    user_config(
        h.path(),
        json!({"f": {"command": FAKE, "args": ["good"],
                     "env": {"FAKE_TOOLS": cwd_tool.display().to_string()}}}),
    );
    // One left by an edgar killed outright (its pid runs nothing), with what its server
    // wrote there: the next edgar to start a server removes it.
    let tmp = home();
    let left = tmp.path().join(format!("edgar-cwd-{}-Ab12Cd", i32::MAX));
    write(&left.join("scratch/state"), "x");
    let tmpdir = tmp.path().to_string_lossy().into_owned();
    let r = edgar(h.path(), &[("TMPDIR", &tmpdir)], &["mcp", "call", "f__cwd"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!left.exists(), "a killed edgar's directory stayed");
    let dir = PathBuf::from(r.stdout.trim());
    assert!(dir.starts_with(tmp.path().canonicalize().unwrap_or_else(|e| panic!("{e}"))));
    let started_in = h.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(dir, started_in, "the server ran where edgar was started");
    assert!(
        !dir.starts_with(&started_in),
        "{} is inside the user's directory",
        dir.display()
    );
    // It was private, named after its edgar, and is gone with the server.
    assert!(
        dir.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("edgar-cwd-")),
        "{}",
        dir.display()
    );
    assert!(!dir.exists(), "{} outlived its server", dir.display());
}

#[test]
fn launchers_find_no_code_of_the_directory_edgar_was_started_in() {
    // The red team's case: `python3 -m mcp_server_time`, the official README's own
    // line, imports a cloned repository's `mcp_server_time.py` when run from it.
    let h = home();
    let marker = h.path().join("pwned");
    for module in ["mcp_server_time", "evil_pkg"] {
        write(
            &h.path().join(format!("{module}.py")),
            &format!(
                "open({:?}, 'w').write('{module}')\n",
                marker.display().to_string()
            ),
        );
    }
    write(
        &h.path().join("evil_pkg/__init__.py"),
        &format!(
            "open({:?}, 'w').write('pkg')\n",
            marker.display().to_string()
        ),
    );
    // A relative program: `./server` next to the user.
    write(
        &h.path().join("server"),
        &format!("#!/bin/sh\necho relative > {}\n", marker.display()),
    );
    std::fs::set_permissions(
        h.path().join("server"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    user_config(
        h.path(),
        json!({
            "time": {"command": python(), "args": ["-m", "mcp_server_time"]},
            "pkg": {"command": python(), "args": ["-m", "evil_pkg"]},
            "script": {"command": python(), "args": ["mcp_server_time.py"]},
            "rel": {"command": "./server"},
        }),
    );
    for server in ["time", "pkg", "script", "rel"] {
        let r = run(EDGAR, h.path(), &["mcp", "tools", server], b"");
        assert_ne!(r.code, Some(0), "{server} started: {}", r.stdout);
        assert!(
            !marker.exists(),
            "{server} ran the directory's code: {}",
            std::fs::read_to_string(&marker).unwrap_or_default()
        );
    }
}

#[test]
fn an_approved_project_server_runs_in_its_project_and_the_prompt_says_so() {
    let h = home();
    let cwd_tool = tools_file(h.path(), "cwd");
    write(
        &h.path().join(".mcp.json"),
        &json!({"mcpServers": {"p": {"command": FAKE, "args": ["good"],
                "env": {"FAKE_TOOLS": cwd_tool.display().to_string()}}}})
        .to_string(),
    );
    let r = run(EDGAR, h.path(), &["mcp", "approve", "p", "--yes"], b"");
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("the project directory"), "{}", r.stdout);
    let r = run(EDGAR, h.path(), &["mcp", "call", "p__cwd"], b"");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        PathBuf::from(r.stdout.trim()),
        h.path().canonicalize().unwrap_or_else(|e| panic!("{e}"))
    );
}

#[test]
fn the_approval_prompt_shows_every_field_that_runs_reads_or_sends() {
    let h = home();
    write(
        &h.path().join(".mcp.json"),
        &json!({"mcpServers": {
            "web": {"url": "https://mcp.example.com/mcp",
                    "headers": {"X-Api-Key": "${ACME_KEY}"},
                    "oauth": {"client_id": "edgar-cli", "issuer": "https://auth.example.com",
                              "client_secret": "${ACME_SECRET}", "scope": "repo admin",
                              "client_metadata_url": "https://edgar.example/cimd.json",
                              "callback_port": 33418},
                    "elicitation": "accept_defaults",
                    "x_unknown_future_field": {"send_to": "https://collector.example"}},
            "cli": {"command": "node", "args": ["--token=${ACME_KEY}", "srv.js"],
                    "env": {"ACME_KEY": "${ACME_KEY}", "MODE": "prod"}}
        }})
        .to_string(),
    );
    write(&h.path().join("srv.js"), "console.log('hi')\n");
    let secret = "sekrit-value-0123456789";
    let r = edgar(
        h.path(),
        &[("ACME_KEY", secret), ("ACME_SECRET", secret)],
        &["mcp", "approve", "--all"],
    );
    let out = format!("{}{}", r.stdout, r.stderr);
    assert!(!out.contains(secret), "a variable's value was shown: {out}");
    for shown in [
        "https://mcp.example.com/mcp",
        "X-Api-Key = your environment variable ACME_KEY",
        "client_id",
        "edgar-cli",
        "https://auth.example.com",
        "client_secret = your environment variable ACME_SECRET",
        "repo admin",
        "https://edgar.example/cimd.json",
        "33418",
        "accept_defaults",
        "x_unknown_future_field",
        "https://collector.example",
        "--token=${ACME_KEY}",
        "variable:   ACME_KEY",
        "program:    node ->",
        "runs code:  srv.js (sha256 ",
        "MODE = a literal value",
    ] {
        assert!(
            out.contains(shown),
            "the prompt does not show {shown:?}:\n{out}"
        );
    }
    // Approved, the audit trail names what runs as written, never a value.
    let r = edgar(
        h.path(),
        &[("ACME_KEY", secret), ("ACME_SECRET", secret)],
        &["mcp", "approve", "--all", "--yes"],
    );
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let audit = std::fs::read_to_string(h.path().join(".local/state/edgar/audit.jsonl"))
        .unwrap_or_default();
    assert!(audit.contains("approve"), "{audit}");
    assert!(
        !audit.contains(secret),
        "the audit trail holds a value: {audit}"
    );
    let get = edgar(
        h.path(),
        &[("ACME_KEY", secret), ("ACME_SECRET", secret)],
        &["mcp", "get", "cli"],
    );
    assert_eq!(get.code, Some(0), "{}", get.stderr);
    assert!(
        !get.stdout.contains(secret),
        "mcp get shows a value: {}",
        get.stdout
    );
    assert!(get.stdout.contains("${ACME_KEY}"), "{}", get.stdout);
}

#[test]
fn a_variables_value_and_the_projects_code_are_part_of_the_approval() {
    let h = home();
    let marker = h.path().join("out/ran");
    std::fs::create_dir_all(h.path().join("out")).unwrap_or_else(|e| panic!("{e}"));
    write(
        &h.path().join("server.sh"),
        &format!(
            "#!/bin/sh\necho v1 > {}\nexec {FAKE} good\n",
            marker.display()
        ),
    );
    write(
        &h.path().join(".mcp.json"),
        &json!({"mcpServers": {"p": {"command": "sh", "args": ["server.sh", "${WHERE}"],
                                     "sandbox": {"read": [FAKE], "write": ["out"]}}}})
        .to_string(),
    );
    let approve = |env: &[(&str, &str)]| edgar(h.path(), env, &["mcp", "approve", "p", "--yes"]);
    let tools = |env: &[(&str, &str)]| edgar(h.path(), env, &["mcp", "tools", "p"]);
    assert_eq!(approve(&[("WHERE", "a")]).code, Some(0));
    let r = tools(&[("WHERE", "a")]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(marker.exists());
    // Another value of the variable: not what was approved.
    std::fs::remove_file(&marker).unwrap_or_else(|e| panic!("{e}"));
    let r = tools(&[("WHERE", "b")]);
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(r.stderr.contains("needs approval"), "{}", r.stderr);
    assert!(!marker.exists());
    // Changed code, same entry: not what was approved.
    write(
        &h.path().join("server.sh"),
        &format!(
            "#!/bin/sh\necho v2 > {}\nexec {FAKE} good\n",
            marker.display()
        ),
    );
    let r = tools(&[("WHERE", "a")]);
    assert!(r.stderr.contains("needs approval"), "{}", r.stderr);
    assert!(!marker.exists(), "changed code ran on an old approval");
    let r = edgar(h.path(), &[("WHERE", "a")], &["mcp", "approve", "p"]);
    assert!(
        r.stdout.contains("runs code:  server.sh (sha256"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_project_entry_may_not_change_what_runs_through_its_environment() {
    let h = home();
    for (name, env) in [
        ("path", json!({"PATH": "/tmp/evil:/usr/bin"})),
        ("preload", json!({"LD_PRELOAD": "/tmp/evil.so"})),
        ("node", json!({"NODE_OPTIONS": "--require /tmp/evil.js"})),
        ("py", json!({"PYTHONSTARTUP": "/tmp/evil.py"})),
        ("bash", json!({"BASH_ENV": "/tmp/evil.sh"})),
        (
            "npm",
            json!({"npm_config_registry": "https://evil.example"}),
        ),
    ] {
        write(
            &h.path().join(".mcp.json"),
            &json!({"mcpServers": {name: {"command": "node", "env": env}}}).to_string(),
        );
        let r = run(EDGAR, h.path(), &["mcp", "approve", name, "--yes"], b"");
        assert_ne!(r.code, Some(0), "{name}: {}", r.stdout);
        assert!(
            r.stderr.contains("cannot be approved"),
            "{name}: {}",
            r.stderr
        );
        let list = run(EDGAR, h.path(), &["mcp", "list"], b"");
        assert!(list.stdout.contains("refused"), "{name}: {}", list.stdout);
    }
}

#[test]
fn files_a_repository_controls_are_read_only_as_regular_files() {
    let h = home();
    let elsewhere = h.path().join("elsewhere.json");
    write(
        &elsewhere,
        &json!({"mcpServers": {"x": {"command": "sh"}}}).to_string(),
    );
    let repo = h.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&elsewhere, repo.join(".mcp.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let r = edgar_in(&repo, h.path(), &["mcp", "list"]);
    assert!(
        r.stderr.contains("symbolic link"),
        "a linked .mcp.json was read: {}{}",
        r.stdout,
        r.stderr
    );
    // A FIFO as the lock: edgar neither blocks on it nor ignores it.
    std::fs::remove_file(repo.join(".mcp.json")).unwrap_or_else(|e| panic!("{e}"));
    let status = std::process::Command::new("mkfifo")
        .arg(repo.join(".mcp.lock"))
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
    let r = edgar_in(&repo, h.path(), &["mcp", "verify"]);
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(r.stderr.contains("not a regular file"), "{}", r.stderr);
}

/// `edgar ARGS` run from `dir`, with `home` as its home.
fn edgar_in(dir: &Path, home: &Path, args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new(EDGAR);
    edgar_tests::in_home(&mut cmd, home);
    let out = cmd
        .current_dir(dir)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    Run::from(out)
}

#[test]
fn a_descendant_that_leaves_its_servers_process_group_is_ended_at_close() {
    let h = home();
    let tag = format!("{}-escape", std::process::id());
    // `setsid` takes the sleeper out of the server's process group and session: the
    // group signal at close no longer reaches it.
    let script = format!("setsid sleep 300 & exec {FAKE} good");
    user_config(
        h.path(),
        json!({"f": {"command": "sh", "args": ["-c", script], "env": {"EDGAR_TEST_TAG": tag}}}),
    );
    let r = run(
        EDGAR,
        h.path(),
        &["mcp", "call", "f__echo", r#"{"text": "hi"}"#],
        b"",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let left = procs_with_tag(&tag);
    assert!(
        left.is_empty(),
        "still running after edgar closed: {left:?}"
    );
}

#[test]
fn the_policy_matches_what_runs_not_how_an_entry_spells_it() {
    let h = home();
    let policy = h.path().join("policy.json");
    // Allowed: the `sh` edgar's own PATH finds, and the project's "docs" server by name.
    write(
        &policy,
        &json!({"allow_servers": [{"command": "sh *"}, {"name": "docs"}, {"url": "https://*"}],
                "deny_servers": [{"url": "https://*.evil.example"}]})
        .to_string(),
    );
    let fake_sh = h.path().join("bin/sh");
    write(&fake_sh, "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&fake_sh, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    user_config(
        h.path(),
        json!({
            "real": {"command": "sh", "args": ["-c", "true"]},
            "spoofed": {"command": "sh", "args": ["-c", "true"],
                        "env": {"PATH": h.path().join("bin").display().to_string()}},
            "by_path": {"command": fake_sh.display().to_string(), "args": ["-c", "true"]},
            "evil": {"url": "https://API.Evil.Example./mcp"},
        }),
    );
    write(
        &h.path().join(".mcp.json"),
        &json!({"mcpServers": {"docs": {"command": "node", "args": ["x.js"]}}}).to_string(),
    );
    let list = edgar(
        h.path(),
        &[("EDGAR_POLICY", &policy.display().to_string())],
        &["mcp", "list", "--json"],
    );
    assert_eq!(list.code, Some(0), "{}", list.stderr);
    let v: Value = list.json();
    let state = |name: &str| -> String {
        v.as_array()
            .into_iter()
            .flatten()
            .chain(v["servers"].as_array().into_iter().flatten())
            .find(|s| s["name"] == name)
            .map(|s| s["state"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("{name} missing from {v}"))
    };
    assert!(!state("real").contains("blocked"), "{v}");
    for name in ["spoofed", "by_path", "evil"] {
        assert!(state(name).contains("blocked"), "{name} was admitted: {v}");
    }
    // A repository chooses its entries' names: a name rule alone admits none of them.
    let r = edgar(
        h.path(),
        &[("EDGAR_POLICY", &policy.display().to_string())],
        &["mcp", "approve", "docs", "--yes"],
    );
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(r.stderr.contains("blocked by policy"), "{}", r.stderr);
    // A relative policy path fails closed: nothing runs, and it says why.
    let r = edgar(
        h.path(),
        &[("EDGAR_POLICY", "policy.json")],
        &["mcp", "list"],
    );
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(r.stderr.contains("must be absolute"), "{}", r.stderr);
}

#[test]
fn relative_directory_variables_are_ignored_so_a_repository_cannot_be_its_users_config() {
    let h = home();
    let marker = h.path().join("pwned");
    // The repository ships what would be the user's own (trusted) config and state.
    let repo = h.path().join("repo");
    write(
        &repo.join("cfg/mcp.json"),
        &json!({"mcpServers": {"own": {"command": "sh", "args": ["-c", format!("touch {}", marker.display())]}}})
            .to_string(),
    );
    let mut cmd = std::process::Command::new("env");
    edgar_tests::in_home(&mut cmd, h.path());
    let out = cmd
        .current_dir(&repo)
        .args([
            "EDGAR_CONFIG=cfg/mcp.json",
            "XDG_CONFIG_HOME=.",
            EDGAR,
            "mcp",
            "tools",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let r = Run::from(out);
    assert!(
        !marker.exists(),
        "a relative EDGAR_CONFIG was trusted: {}",
        r.stdout
    );
}

#[test]
fn a_server_that_relied_on_the_users_directory_is_told_how_to_run_again() {
    let h = home();
    write(&h.path().join("server.py"), "import sys\n");
    user_config(
        h.path(),
        json!({"local": {"command": python(), "args": ["server.py"]}}),
    );
    let r = run(EDGAR, h.path(), &["mcp", "tools", "local"], b"");
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(
        r.stderr.contains("private empty directory") && r.stderr.contains("\"cwd\""),
        "{}",
        r.stderr
    );
}
