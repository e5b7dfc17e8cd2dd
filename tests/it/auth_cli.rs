//! Sign-in from the command line against a real Secret Service (gnome-keyring in a
//! private D-Bus session), the honest messages without one, and secrets never printed.

use std::path::Path;
use std::process::{Command, Stdio};

use edgar_tests::fixture;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const KEY: &str = "sk-edgar-test-0123456789-SECRET-abcdef";
const KEY2: &str = "sk-edgar-test-second-9876543210-SECRET";

fn require(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status();
    assert!(
        found.is_ok_and(|s| s.success()),
        "{tool} is missing: run .ci/test, which installs gnome-keyring libsecret-tools dbus-daemon dbus-bin"
    );
}

/// Runs a shell script in a clean environment with a private HOME.
fn sh(home: &Path, prefix: &[&str], script: &str) -> (i32, String) {
    let out = Command::new(prefix[0])
        .args(&prefix[1..])
        .args(["sh", "-c", script])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("EDGAR", EDGAR)
        .env("KEY", KEY)
        .env("KEY2", KEY2)
        .current_dir(home)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn assert_no_secret(text: &str) {
    assert!(
        !text.contains(KEY) && !text.contains(KEY2),
        "a secret was printed:\n{text}"
    );
}

#[test]
fn login_account_logout_with_a_real_keyring() {
    require("dbus-run-session");
    require("gnome-keyring-daemon");
    require("secret-tool");
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let with_keyring = fixture("with-keyring.sh").display().to_string();
    let script = r#"
        set -u
        echo "== login"; printf '%s\n' "$KEY" | "$EDGAR" login anthropic || exit 10
        echo "== account"; "$EDGAR" account anthropic
        echo "== listed"; "$EDGAR" account
        echo "== lookup"; [ "$(secret-tool lookup service edgar username provider:anthropic)" = "$KEY" ] && echo "keyring holds it"
        echo "== overwrite"; printf '%s\n' "$KEY2" | "$EDGAR" login anthropic
        [ "$(secret-tool lookup service edgar username provider:anthropic)" = "$KEY2" ] && echo "keyring holds the new one"
        echo "== env wins"; ANTHROPIC_API_KEY=env-key-0123456789abcdef "$EDGAR" account anthropic
        echo "== logout"; "$EDGAR" logout anthropic || exit 11
        echo "== after"; "$EDGAR" account anthropic
        secret-tool lookup service edgar username provider:anthropic || echo "keyring entry gone"
        echo "== listed after"; "$EDGAR" account
    "#;
    let (code, out) = sh(
        home.path(),
        &["dbus-run-session", "--", &with_keyring],
        script,
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("stored the key for anthropic in the OS keyring"),
        "{out}"
    );
    assert!(
        out.contains("anthropic: sk-e…cdef from the key stored by `edgar login`"),
        "{out}"
    );
    // With no name, what `login` stored is listed (a keyring cannot be), and after
    // `logout` it is not.
    let listed = out
        .split("== listed\n")
        .nth(1)
        .and_then(|rest| rest.split("== lookup").next())
        .unwrap_or_default();
    assert_eq!(
        listed.trim(),
        "anthropic: sk-e…cdef from the key stored by `edgar login`",
        "{out}"
    );
    let after = out.split("== listed after\n").nth(1).unwrap_or_default();
    assert!(after.contains("no key stored with `edgar login`"), "{out}");
    assert!(
        out.contains("keyring holds it") && out.contains("keyring holds the new one"),
        "{out}"
    );
    assert!(
        out.contains("from environment variable ANTHROPIC_API_KEY"),
        "{out}"
    );
    assert!(out.contains("erased the stored key for anthropic"), "{out}");
    assert!(
        out.contains("nothing is stored") && out.contains("keyring entry gone"),
        "{out}"
    );
    assert_no_secret(&out);
}

#[test]
fn without_a_session_bus_the_store_says_so() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (code, out) = sh(
        home.path(),
        &["env"],
        r#"printf '%s\n' "$KEY" | "$EDGAR" login anthropic"#,
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no D-Bus session bus"), "{out}");
    assert_no_secret(&out);
    assert!(
        !home.path().join("config/edgar/credentials.json").exists(),
        "no silent plain-text fallback"
    );
}

#[test]
fn without_a_secret_service_provider_the_store_says_so() {
    require("dbus-run-session");
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let conf = format!(
        "--config-file={}",
        fixture("dbus-no-services.conf").display()
    );
    let (code, out) = sh(
        home.path(),
        &["dbus-run-session", &conf, "--"],
        r#"printf '%s\n' "$KEY" | "$EDGAR" login anthropic"#,
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no Secret Service provider"), "{out}");
    assert_no_secret(&out);
}

#[test]
fn api_key_command_and_the_file_store_never_print_keys() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(home.path().join("config/edgar")).unwrap_or_else(|e| panic!("{e}"));
    let config = serde_json::json!({
        "credential_store": "file",
        "providers": {
            "corp": {"env": "CORP_TOKEN", "api_key_command": ["sh", "-c", "printf '%s' \"$KEY\""]},
            "broken": {"api_key_command": "sh -c exit"}
        }
    });
    std::fs::write(
        home.path().join("config/edgar/config.json"),
        config.to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let script = r#"
        "$EDGAR" account
        printf '%s\n' "$KEY2" | "$EDGAR" login other
        "$EDGAR" account other
        "$EDGAR" mcp list
        EDGAR_LOG=trace "$EDGAR" account corp
    "#;
    let (code, out) = sh(home.path(), &["env"], script);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("corp: sk-e…cdef from api_key_command"),
        "{out}"
    );
    assert!(
        out.contains("broken: api_key_command for 'broken' failed"),
        "{out}"
    );
    assert!(
        out.contains("other: sk-e…CRET from the key stored by `edgar login`"),
        "{out}"
    );
    assert_no_secret(&out);
    let stored = std::fs::read_to_string(home.path().join("config/edgar/credentials.json"))
        .unwrap_or_default();
    assert!(
        stored.contains(KEY2),
        "the opted-in file store holds the key"
    );
    // Nothing else edgar wrote (caches, logs) holds a key.
    let mut stack = vec![home.path().to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.ends_with("credentials.json") && !p.ends_with("config.json") {
                assert_no_secret(&String::from_utf8_lossy(
                    &std::fs::read(&p).unwrap_or_default(),
                ));
            }
        }
    }
}

#[test]
fn the_audit_trail_is_keyed_by_a_key_in_the_real_keyring() {
    require("dbus-run-session");
    require("gnome-keyring-daemon");
    require("secret-tool");
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let fake = env!("CARGO_BIN_EXE_fake-mcp-server");
    let config = home.path().join("config/edgar");
    std::fs::create_dir_all(&config).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        config.join("mcp.json"),
        serde_json::json!({"mcpServers": {"f": {"command": fake, "args": ["good"]}}}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let with_keyring = fixture("with-keyring.sh").display().to_string();
    // Two calls, verified; then a line edited and the chain recomputed with plain
    // sha256, as a process that can write the files but not read the key would.
    let script = r#"
        set -u
        "$EDGAR" mcp call f__echo '{"text": "one"}' >/dev/null || exit 10
        "$EDGAR" mcp call f__echo '{"text": "two"}' >/dev/null || exit 11
        K="$(secret-tool lookup service edgar username audit-chain-key)"
        echo "== key"; [ "${#K}" -eq 64 ] && echo "keyring holds a 32-byte key"
        echo "== verify"; "$EDGAR" audit verify || exit 12
        T="$HOME/.local/state/edgar/audit.jsonl"
        grep -c '"mac":"hmac-sha256"' "$T"
        python3 - "$T" <<'PY'
import hashlib, json, sys
path = sys.argv[1]
lines = open(path).read().splitlines()
lines[-1] = lines[-1].replace('"is_error":false', '"is_error":true')
prev = None
for i, l in enumerate(lines):
    v = json.loads(l)
    if prev is not None:
        v["prev"] = prev
    l = json.dumps(v, separators=(",", ":"))
    lines[i] = l
    prev = hashlib.sha256(l.encode()).hexdigest()
open(path, "w").write("\n".join(lines) + "\n")
head = path.replace("audit.jsonl", "audit.head")
open(head, "w").write(json.dumps({"seq": len(lines), "hash": prev, "keyed": True}))
PY
        echo "== verify forged"; "$EDGAR" audit verify && exit 13
        exit 0
    "#;
    let (code, out) = sh(
        home.path(),
        &["dbus-run-session", "--", &with_keyring],
        script,
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("keyring holds a 32-byte key"), "{out}");
    assert!(out.contains("HMAC-SHA256"), "{out}");
    assert!(out.contains("tampered") || out.contains("edited"), "{out}");
}
