//! Process lifetime under real signals: Ctrl-C, TERM and HUP to `edgar mcp call` close a
//! server that ignores TERM together with its grandchild and leave the cut call's audit
//! line; a SIGKILLed edgar takes its server with it (Linux).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use edgar_tests::is_dead;
use rustix::process::{Pid, Signal, kill_process};
use serde_json::json;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

/// A server that ignores TERM, INT and HUP (so does its grandchild), mid-way through a
/// 60 s tool call started by `edgar mcp call`.
// The child is returned to the caller, which waits for it (and the runtime of the test
// binary reaps anything left when a test fails).
#[allow(clippy::zombie_processes)]
fn stubborn_call(home: &Path) -> (Child, u32, u32) {
    let server_pid = home.join("server.pid");
    let grandchild_pid = home.join("grandchild.pid");
    let called = home.join("called");
    let dir = home.join("config/edgar");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let script = format!("trap '' TERM INT HUP; exec '{FAKE}' grandchild");
    std::fs::write(
        dir.join("mcp.json"),
        json!({"mcpServers": {"s": {"command": "sh", "args": ["-c", script],
            "env": {"FAKE_MARKER": server_pid, "FAKE_GRANDCHILD_PID": grandchild_pid,
                "FAKE_CALLED": called}}}})
        .to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let child = Command::new(EDGAR)
        .args([
            "mcp",
            "call",
            "s__echo",
            r#"{"text": "x", "sleep_ms": 60000}"#,
        ])
        .current_dir(home)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("EDGAR_CONFIG")
        .env_remove("XDG_STATE_HOME")
        .env_remove("EDGAR_STATE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let read = |p: &Path| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // The server marks the call's arrival: it is in flight.
        if let (Some(s), Some(g), true) =
            (read(&server_pid), read(&grandchild_pid), called.exists())
        {
            return (child, s, g);
        }
        assert!(Instant::now() < deadline, "the server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, sig: Signal) {
    let pid = Pid::from_raw(pid as i32).unwrap_or_else(|| panic!("pid 0"));
    kill_process(pid, sig).unwrap_or_else(|e| panic!("kill: {e}"));
}

fn wait_dead(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if is_dead(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    is_dead(pid)
}

fn wait_exit(child: &mut Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

#[test]
fn int_term_and_hup_close_every_server_and_exit_with_the_signal_code() {
    for (sig, code) in [(Signal::INT, 130), (Signal::TERM, 143), (Signal::HUP, 129)] {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (mut edgar, server, grandchild) = stubborn_call(home.path());
        signal(edgar.id(), sig);
        assert_eq!(
            wait_exit(&mut edgar, Duration::from_secs(10)),
            Some(code),
            "{sig:?}"
        );
        assert!(is_dead(server), "{sig:?}: the server outlived edgar");
        assert!(
            is_dead(grandchild),
            "{sig:?}: the grandchild outlived edgar"
        );
        // The call reached the server: the audit trail says so, and that it was cut.
        let trail = std::fs::read_to_string(home.path().join(".local/state/edgar/audit.jsonl"))
            .unwrap_or_else(|e| panic!("{sig:?}: {e}"));
        let calls: Vec<serde_json::Value> = trail
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|l: &serde_json::Value| l["event"] == "call")
            .collect();
        assert_eq!(calls.len(), 1, "{sig:?}: {trail}");
        assert_eq!(
            (&calls[0]["server"], &calls[0]["tool"], &calls[0]["error"]),
            (&json!("s"), &json!("echo"), &json!("cancelled")),
            "{sig:?}: {trail}"
        );
    }
}

#[test]
fn a_sigkilled_edgar_takes_its_server_with_it() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (mut edgar, server, grandchild) = stubborn_call(home.path());
    signal(edgar.id(), Signal::KILL);
    let _ = edgar.wait();
    assert!(
        wait_dead(server, Duration::from_secs(5)),
        "the server outlived a SIGKILLed edgar"
    );
    // Known limit: the server's own children are not the kernel's to kill here; the
    // grandchild is cleaned up by the test.
    let _ = Pid::from_raw(grandchild as i32).map(|p| kill_process(p, Signal::KILL));
}
