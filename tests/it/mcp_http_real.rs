//! Real MCP servers over HTTP: server-everything in its Streamable HTTP and legacy SSE
//! modes, and a Streamable HTTP server written with the official Python SDK. Each is
//! discovered, called and closed through the same session code as stdio servers.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use edgar_host::config::{ServerSpec, Transport};
use edgar_tests::{fixture, installed};
use serde_json::json;

use crate::mcp_stdio::{Harness, text_of};

/// A server process on a free loopback port, killed (with its group) when dropped.
pub struct Served {
    child: Child,
    pub port: u16,
}

impl Served {
    pub fn start(program: &str, args: &[&str], env: &[(&str, String)]) -> Served {
        let port = free_port();
        let mut cmd = Command::new(program);
        cmd.args(args.iter().map(|a| a.replace("{port}", &port.to_string())))
            .env("PORT", port.to_string())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
        let served = Served { child, port };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "{program} never listened on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        served
    }
}

impl Drop for Served {
    /// Kills the server's process group with a syscall (on this Debian, `/usr/bin/kill
    /// -KILL -PGID` reached far more than the group), then reaps it.
    fn drop(&mut self) {
        if let Some(pgid) = i32::try_from(self.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
}

pub fn http_spec(name: &str, url: &str, sse: bool) -> ServerSpec {
    let mut s = ServerSpec::http(name, url);
    if sse {
        s.transport = Transport::Sse {
            url: url.into(),
            headers: BTreeMap::new(),
        };
    }
    s.startup_timeout = Duration::from_secs(30);
    s.tool_timeout = Duration::from_secs(30);
    s
}

fn everything() -> String {
    installed("npm/node_modules/.bin/mcp-server-everything")
        .display()
        .to_string()
}

async fn exercise_everything(h: &Harness) {
    let tools = h
        .session
        .tools("everything")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // get-roots-list is registered when the handshake ends, from the roots edgar declares.
    for name in ["everything__echo", "everything__get-roots-list"] {
        assert!(
            tools.iter().any(|t| t.name() == name),
            "{name} not in {:?}",
            tools.iter().map(|t| t.name()).collect::<Vec<_>>()
        );
    }
    let out = h
        .session
        .call("everything__echo", json!({"message": "over http"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "Echo: over http");
    let out = h
        .session
        .call("everything__get-sum", json!({"a": 20, "b": 22}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(text_of(&out).contains("42"), "{out:?}");
    // Several calls at once share the session.
    let calls = (0..8).map(|i| {
        h.session
            .call("everything__echo", json!({"message": format!("n{i}")}))
    });
    for (i, r) in edgar_host::mcp::client::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        let out = r.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text_of(&out), format!("Echo: n{i}"));
    }
    // Prompts and resources over the same transport, through the guard.
    let prompts = h
        .session
        .prompts("everything")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        prompts.iter().any(|p| p.name == "simple-prompt"),
        "{prompts:?}"
    );
    let args = BTreeMap::from([("city".to_owned(), "Oslo".to_owned())]);
    let out = h
        .session
        .prompt("everything", "args-prompt", &args)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(&out.messages[0].content[0], edgar_host::guard::ContentBlock::Text { text } if text.contains("Oslo")),
        "{out:?}"
    );
    let resources = h
        .session
        .resources("everything")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let doc = resources
        .iter()
        .find(|r| !r.template)
        .unwrap_or_else(|| panic!("no resource in {resources:?}"));
    let blocks = h
        .session
        .read("everything", &doc.uri)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(&blocks[0], edgar_host::guard::ContentBlock::Resource { resource } if resource.uri == doc.uri),
        "{blocks:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_streamable_http() {
    let served = Served::start(&everything(), &["streamableHttp"], &[]);
    let url = format!("http://127.0.0.1:{}/mcp", served.port);
    let h = Harness::new(vec![http_spec("everything", &url, false)]);
    exercise_everything(&h).await;
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_legacy_sse() {
    let served = Served::start(&everything(), &["sse"], &[]);
    let url = format!("http://127.0.0.1:{}/sse", served.port);
    let h = Harness::new(vec![http_spec("everything", &url, true)]);
    exercise_everything(&h).await;
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_sdk_server_over_streamable_http() {
    let python = installed("py/bin/python").display().to_string();
    let script = fixture("python_server.py").display().to_string();
    let served = Served::start(&python, &[&script, "streamable-http", "{port}"], &[]);
    let url = format!("http://127.0.0.1:{}/mcp", served.port);
    let h = Harness::new(vec![http_spec("py", &url, false)]);
    let tools = h
        .session
        .tools("py")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "py__add",
            "py__book",
            "py__count",
            "py__shout",
            "py__summarize"
        ]
    );
    let out = h
        .session
        .call("py__add", json!({"a": 2, "b": 40}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "42");
    let out = h
        .session
        .call("py__shout", json!({"text": "hi"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "HI");
    // Reached in the stateless era, and remembered so.
    let era = std::fs::read_dir(h.dir.path().join("cache/tools/era"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .and_then(|e| std::fs::read_to_string(e.path()).ok())
        .unwrap_or_default();
    assert!(era.contains("\"2026-07-28\""), "{era}");
    h.close().await;
}
