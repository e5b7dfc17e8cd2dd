//! The stdio transport and the session against fake servers, one misbehaviour each.
//! Every test closes its session and checks that no process it started survives.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgar_host::config::{Config, ServerSpec, Transport};
use edgar_host::guard::{AdapterSource, ContentBlock, ToolOutput};
use edgar_host::mcp::McpError;
use edgar_host::mcp::client::{Session, SessionOptions, join_all};
use edgar_tests::{is_dead, procs_with_tag};
use serde_json::{Value, json};

const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

/// A session over fake servers, with its own cache dir and a unique process tag.
pub struct Harness {
    pub session: Session,
    pub dir: tempfile::TempDir,
    pub tag: String,
}

pub fn spec(name: &str, command: &str, args: &[&str], env: &[(&str, String)]) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        transport: Transport::Stdio {
            command: command.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
            cwd: None,
            env_inherit: false,
        },
        startup_timeout: Duration::from_secs(10),
        tool_timeout: Duration::from_secs(10),
        enabled_tools: None,
        disabled_tools: Vec::new(),
        adapter: AdapterSource::Builtin,
        oauth: Default::default(),
        source: PathBuf::from("test"),
        project: None,
        tool_policy: Default::default(),
        elicitation_defaults: false,
        protocol: Default::default(),
        task_deadline: edgar_host::config::DEFAULT_TASK_DEADLINE,
        sandbox: Default::default(),
        per_user: false,
        written: edgar_host::config::Written {
            target: command.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
        },
    }
}

impl Harness {
    pub fn new(specs: Vec<ServerSpec>) -> Harness {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cwd = dir.path().to_owned();
        Self::with(dir, &cwd, specs, |_| {})
    }

    /// A session whose prompt waits for every server up to its own startup deadline, so
    /// what a test reads does not depend on how busy the machine is.
    pub fn patient(specs: Vec<ServerSpec>) -> Harness {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cwd = dir.path().to_owned();
        Self::with(dir, &cwd, specs, |opts| opts.prompt_budget = Duration::MAX)
    }

    /// A session whose working directory (and offered root) is `cwd`.
    pub fn in_dir(cwd: &std::path::Path, specs: Vec<ServerSpec>) -> Harness {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        Self::with(dir, cwd, specs, |_| {})
    }

    fn with(
        dir: tempfile::TempDir,
        cwd: &std::path::Path,
        specs: Vec<ServerSpec>,
        options: impl FnOnce(&mut SessionOptions),
    ) -> Harness {
        let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id())
            .replace(['(', ')'], "");
        let specs = specs
            .into_iter()
            .map(|mut s| {
                if let Transport::Stdio { env, .. } = &mut s.transport {
                    env.insert("EDGAR_TEST_TAG".into(), tag.clone());
                }
                s
            })
            .collect();
        let config = Config {
            servers: specs,
            files: Vec::new(),
            is_default: false,
            ..Default::default()
        };
        let mut opts = SessionOptions::new(cwd.to_owned(), Some(dir.path().join("cache")));
        options(&mut opts);
        Harness {
            session: Session::new(&config, opts),
            dir,
            tag,
        }
    }

    /// One fake server named `fake` in `mode`. Its startup deadline is long enough for a
    /// loaded machine; a test of a server that never answers sets a short one itself.
    pub fn fake(mode: &str) -> Harness {
        Self::fake_with(mode, |_| {})
    }

    pub fn fake_with(mode: &str, f: impl FnOnce(&mut ServerSpec)) -> Harness {
        let mut s = spec("fake", FAKE, &[mode], &[]);
        s.startup_timeout = Duration::from_secs(30);
        f(&mut s);
        Harness::new(vec![s])
    }

    /// Closes the session and asserts every process it started is gone.
    pub async fn close(self) {
        let t = Instant::now();
        self.session.close().await;
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "close took {:?}",
            t.elapsed()
        );
        // SIGKILL is delivered asynchronously: give the kernel a moment to tear down.
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut left = procs_with_tag(&self.tag);
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            left = procs_with_tag(&self.tag);
        }
        assert!(left.is_empty(), "processes left after close: {left:?}");
    }
}

pub fn text_of(out: &ToolOutput) -> String {
    out.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn err<T: std::fmt::Debug>(r: Result<T, McpError>) -> McpError {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn a_good_server_is_discovered_called_and_closed() {
    let h = Harness::fake("good");
    let tools = h
        .session
        .tools("fake")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "fake__echo",
            "fake__add",
            "fake__die",
            "fake__ask_client",
            "fake__change"
        ]
    );
    let out = h
        .session
        .call("fake__add", json!({"a": 2, "b": 40}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "42");
    let out = h
        .session
        .call("fake/echo", json!({"text": "hi"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "hi");
    h.close().await;
}

#[tokio::test]
async fn concurrent_calls_are_matched_by_id() {
    let h = Harness::fake("good");
    let calls = (0..20).map(|i| {
        let s = &h.session;
        async move {
            (
                i,
                s.call("fake__echo", json!({"text": format!("n{i}")})).await,
            )
        }
    });
    for (i, r) in join_all(calls).await {
        assert_eq!(
            text_of(&r.unwrap_or_else(|e| panic!("{e}"))),
            format!("n{i}")
        );
    }
    h.close().await;
}

#[tokio::test]
async fn garbage_between_messages_is_skipped() {
    let h = Harness::fake("garbage");
    let out = h
        .session
        .call("fake__echo", json!({"text": "still fine"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "still fine");
    h.close().await;
}

#[tokio::test]
async fn a_200_mb_stderr_flood_neither_blocks_nor_fills_memory() {
    let h = Harness::fake_with("stderr-flood", |s| {
        s.startup_timeout = Duration::from_secs(30)
    });
    let tools = h
        .session
        .tools("fake")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tools.len(), 5);
    let log = h.dir.path().join("cache/logs/fake.log");
    let size = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    assert!(size > 1 << 20 && size < 5 << 20, "log is {size} bytes");
    h.close().await;
}

#[tokio::test]
async fn a_credential_it_was_given_is_masked_in_its_stderr_and_log() {
    let token = ["tok_", "0123456789abcdef"].concat();
    let script = "echo \"auth failed with $SERVICE_TOKEN at postgres://u:pw-123@db/x\" >&2; exit 2";
    let h = Harness::new(vec![spec(
        "fake",
        "sh",
        &["-c", script],
        &[("SERVICE_TOKEN", token.clone())],
    )]);
    let e = err(h.session.tools("fake").await).to_string();
    assert!(
        e.contains("auth failed with *** at postgres://u:***@db/x"),
        "{e}"
    );
    assert!(!e.contains(&token) && !e.contains("pw-123"), "{e}");
    let log = std::fs::read_to_string(h.dir.path().join("cache/logs/fake.log"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(log, "auth failed with *** at postgres://u:***@db/x\n");
    h.close().await;
}

/// A URL right after a character of several bytes (as a server localized in Chinese
/// prints one) made the stderr masking slice inside that character: the task draining
/// stderr died, and a server that then wrote more than a pipe holds hung its start.
#[tokio::test]
async fn stderr_in_any_language_is_masked_and_drained() {
    let script = format!(
        "printf '连接失败postgres://u:pw-123@db/x\\n' >&2; \\
         head -c 1048576 /dev/zero | tr '\\0' e >&2; echo >&2; exec {FAKE} good"
    );
    let h = Harness::new(vec![spec("fake", "sh", &["-c", &script], &[])]);
    let tools = h
        .session
        .tools("fake")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tools.len(), 5);
    let log = std::fs::read_to_string(h.dir.path().join("cache/logs/fake.log"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        log.starts_with("连接失败postgres://u:***@db/x\n"),
        "{}",
        &log[..log.len().min(200)]
    );
    assert!(!log.contains("pw-123"));
    h.close().await;
}

#[tokio::test]
async fn a_server_that_never_answers_fails_at_its_deadline_and_stays_failed() {
    let h = Harness::fake_with("silent", |s| s.startup_timeout = Duration::from_secs(2));
    let t = Instant::now();
    let e = err(h.session.tools("fake").await);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(e.to_string().contains("initialize"), "{e}");
    // Stays failed: the call is refused without a second start, which would take 2 s.
    let t = Instant::now();
    let e = err(h.session.call("fake/echo", json!({})).await);
    assert!(matches!(e, McpError::Failed { .. }), "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    h.session
        .reset("fake")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.close().await;
}

#[tokio::test]
async fn an_unsupported_protocol_version_is_refused() {
    let h = Harness::fake("old-version");
    let e = err(h.session.tools("fake").await);
    assert!(e.to_string().contains("1999-01-01"), "{e}");
    h.close().await;
}

#[tokio::test]
async fn a_server_exiting_mid_call_fails_the_call_with_its_stderr() {
    let h = Harness::fake("good");
    let e = err(h.session.call("fake__die", json!({})).await);
    let text = e.to_string();
    assert!(matches!(e, McpError::Closed { .. }), "{text}");
    assert!(
        text.contains("exit status: 3") && text.contains("dying in the middle"),
        "{text}"
    );
    let e = err(h.session.call("fake__echo", json!({})).await);
    assert!(matches!(e, McpError::Failed { .. }), "{e}");
    h.close().await;
}

#[tokio::test]
async fn a_server_ignoring_term_and_eof_is_killed() {
    let script = format!("trap '' TERM; exec {FAKE} ignore-eof");
    let h = Harness::new(vec![spec("fake", "sh", &["-c", &script], &[])]);
    h.session
        .tools("fake")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(procs_with_tag(&h.tag).len(), 1);
    h.close().await;
}

#[tokio::test]
async fn a_grandchild_holding_the_pipes_dies_with_the_group() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pid_file = dir.path().join("grandchild.pid");
    let h = Harness::new(vec![spec(
        "fake",
        FAKE,
        &["grandchild"],
        &[("FAKE_GRANDCHILD_PID", pid_file.display().to_string())],
    )]);
    h.session
        .tools("fake")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(pid > 0 && !is_dead(pid));
    h.close().await;
    let deadline = Instant::now() + Duration::from_secs(3);
    while !is_dead(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(is_dead(pid), "grandchild {pid} survived");
}

#[tokio::test]
async fn a_100_mb_line_fails_the_server_without_buffering_it() {
    let h = Harness::fake_with("huge-line", |s| s.startup_timeout = Duration::from_secs(20));
    let e = err(h.session.tools("fake").await);
    assert!(
        e.to_string().contains("over the 16777216-byte limit"),
        "{e}"
    );
    h.close().await;
}

#[tokio::test]
async fn wrong_ids_end_in_a_timeout() {
    let h = Harness::fake_with("wrong-ids", |s| {
        s.startup_timeout = Duration::from_millis(800)
    });
    let e = err(h.session.tools("fake").await);
    assert!(e.to_string().contains("initialize"), "{e}");
    h.close().await;
}

#[tokio::test]
async fn a_list_of_millions_of_tiny_values_is_counted_before_it_is_built() {
    let h = Harness::fake("tiny-values");
    let e = err(h.session.tools("fake").await);
    assert!(e.to_string().contains("more than 5000 tools"), "{e}");
    h.close().await;
}

#[tokio::test]
async fn answers_that_are_not_tool_lists_or_results_have_a_lower_cap() {
    let h = Harness::fake("fat-initialize");
    let e = err(h.session.tools("fake").await);
    assert!(
        e.to_string().contains("its answer to initialize has 524"),
        "{e}"
    );
    assert!(e.to_string().contains("over the 1048576-byte limit"), "{e}");
    h.close().await;
}

#[tokio::test]
async fn endless_pagination_is_cut_off() {
    let h = Harness::fake("endless-pages");
    let e = err(h.session.tools("fake").await);
    assert!(e.to_string().contains("more than 100 pages"), "{e}");
    h.close().await;
}

#[tokio::test]
async fn a_flood_of_notifications_is_absorbed() {
    let h = Harness::fake_with("notification-flood", |s| {
        s.startup_timeout = Duration::from_secs(30)
    });
    assert_eq!(h.session.tools("fake").await.map(|t| t.len()).ok(), Some(5));
    h.close().await;
}

#[tokio::test]
async fn requests_from_the_server_are_answered_or_declined() {
    let h = Harness::fake("server-requests");
    let out = h
        .session
        .call("fake__ask_client", json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let answers: Vec<Value> =
        serde_json::from_str(&text_of(&out)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answers[0]["result"], json!({}));
    let root = answers[1]["result"]["roots"][0]["uri"]
        .as_str()
        .unwrap_or_default();
    assert!(root.starts_with("file:///"), "{answers:?}");
    assert_eq!(answers[2]["error"]["code"], -32601);
    assert_eq!(answers[3]["error"]["code"], -32601);
    h.close().await;
}

#[tokio::test]
async fn a_storm_of_list_changed_is_coalesced() {
    // The server says its list changed after every tools/list, for ever: refreshes must
    // not follow it as fast as it can go.
    let h = Harness::fake("list-storm");
    assert!(h.session.tools("fake").await.is_ok());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let out = h
        .session
        .call("fake__echo", json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let lists: u64 = text_of(&out).parse().unwrap_or(u64::MAX);
    // One discovery, then at most one refresh a second (with room for a slow machine).
    assert!(
        (2..=5).contains(&lists),
        "{lists} tools/list requests in 2.5 s"
    );
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_waits_for_no_slow_server_and_it_joins_when_ready() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let tag = format!("{}-prompt", std::process::id());
    // `slow` answers initialize only once this file exists: the test, not the clock,
    // decides when it is ready, so a loaded machine cannot make it look fast or `ok` slow.
    let gate = dir.path().join("gate");
    let mk = |name: &str, mode: &str| {
        let env = [
            ("EDGAR_TEST_TAG", tag.clone()),
            ("FAKE_GATE", gate.display().to_string()),
        ];
        let mut s = spec(name, FAKE, &[mode], &env);
        s.startup_timeout = Duration::from_secs(120);
        s
    };
    let config = Config {
        servers: vec![mk("ok", "good"), mk("slow", "slow-init")],
        ..Default::default()
    };
    let new_session = || {
        let mut opts = SessionOptions::new(dir.path().to_owned(), Some(dir.path().join("cache")));
        opts.prompt_budget = Duration::from_millis(500);
        Session::new(&config, opts)
    };
    let session = new_session();
    // Each prompt waits at most its budget and never for `slow`; `ok` joins when ready
    // (its first start compiles the guard, which a loaded machine may take seconds over).
    let mut ok_joined = false;
    for _ in 0..120 {
        let ready = session.tool_names_within(session.prompt_budget()).await;
        let names: Vec<&str> = ready.names.iter().map(|n| n.name.as_str()).collect();
        assert!(!names.iter().any(|n| n.starts_with("slow__")), "{names:?}");
        assert!(
            ready.pending.iter().any(|p| p == "slow"),
            "{:?}",
            ready.pending
        );
        assert!(ready.failures.is_empty(), "{:?}", ready.failures);
        if names.contains(&"ok__echo") {
            assert_eq!(ready.pending, ["slow"]);
            ok_joined = true;
            break;
        }
    }
    assert!(ok_joined, "`ok` never joined the prompt");
    // A search meanwhile names it as still starting.
    let search = edgar_host::tools::search_tool::ToolSearch::new(3000);
    let reply = search.search(&session, "echo").await;
    assert!(
        reply.found.contains("still starting: slow"),
        "{}",
        reply.found
    );
    // It kept starting in the background; once ready, a search includes it.
    std::fs::write(&gate, "").unwrap_or_else(|e| panic!("{e}"));
    let mut joined = false;
    for _ in 0..300 {
        let reply = search.search(&session, "slow echo").await;
        if reply.tools.iter().any(|t| t.server == "slow") {
            joined = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(joined, "the slow server never joined the search");
    session.close().await;
    // And the next session's prompt has it from the cache, at once.
    let next = new_session();
    let ready = next.tool_names_within(Duration::ZERO).await;
    assert!(ready.pending.is_empty(), "{:?}", ready.pending);
    assert!(ready.names.iter().any(|n| n.name == "slow__echo"));
    next.close().await;
    assert!(procs_with_tag(&tag).is_empty());
}

/// Takes its time over each elicitation, as a human would.
struct SlowHuman;
impl edgar_host::mcp::ClientHandler for SlowHuman {
    fn supports_elicitation(&self) -> bool {
        true
    }
    fn elicit(&self, _server: &str, _params: &Value) -> Option<Value> {
        std::thread::sleep(Duration::from_millis(500));
        Some(json!({"action": "decline"}))
    }
}

#[tokio::test]
async fn a_server_cannot_queue_unbounded_requests_to_the_client() {
    let mut h = Harness::fake("request-flood");
    let dir = h.dir.path().to_owned();
    let mut opts = SessionOptions::new(dir.clone(), Some(dir.join("cache")));
    opts.handler = Arc::new(SlowHuman);
    let config = Config {
        servers: vec![{
            let mut s = spec(
                "fake",
                FAKE,
                &["request-flood"],
                &[("EDGAR_TEST_TAG", h.tag.clone())],
            );
            s.startup_timeout = Duration::from_secs(30);
            s
        }],
        ..Default::default()
    };
    h.session = Session::new(&config, opts);
    let out = h
        .session
        .call("fake__ask_client", json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let answers: Vec<Value> =
        serde_json::from_str(&text_of(&out)).unwrap_or_else(|e| panic!("{e}"));
    let handled = answers
        .iter()
        .filter(|a| a["result"]["action"] == "decline")
        .count();
    let refused: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32603)
        .collect();
    assert_eq!(handled, edgar_host::mcp::MAX_SERVER_REQUESTS, "{answers:?}");
    assert_eq!(refused.len(), 10 - handled, "{answers:?}");
    assert!(
        refused[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already handling 4")),
        "{answers:?}"
    );
    h.close().await;
}

#[tokio::test]
async fn duplicate_and_hostile_tool_names_come_out_clean_and_unique() {
    let h = Harness::fake("hostile-names");
    let tools = h
        .session
        .tools("fake")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    let unique: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(unique.len(), names.len());
    for n in &names {
        assert!(
            n.len() <= 64
                && n.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'),
            "{n}"
        );
        assert_ne!(*n, "tool_search");
    }
    assert!(!tools.iter().any(|t| t.tool() == "bad-schema"));
    h.close().await;
}

#[tokio::test]
async fn list_changed_refreshes_the_tools() {
    let h = Harness::fake("good");
    h.session
        .call("fake__change", json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tools = h
            .session
            .tools("fake")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if tools.iter().any(|t| t.tool() == "added_later") {
            break;
        }
        assert!(Instant::now() < deadline, "the list was not refreshed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.close().await;
}

#[tokio::test]
async fn bad_arguments_are_refused_with_the_schema_before_sending() {
    let h = Harness::fake("good");
    let e = err(h.session.call("fake__add", json!({"a": "two"})).await);
    let text = e.to_string();
    assert!(matches!(e, McpError::InvalidArguments { .. }), "{text}");
    assert!(
        text.contains("/a") && text.contains("\"integer\"") && text.contains("The schema is"),
        "{text}"
    );
    h.close().await;
}

/// A model shown a strict-mode schema sends null for what it leaves out; the accepted
/// schema refuses null there, so such a null means absent and is not sent.
#[tokio::test]
async fn a_null_for_an_absent_optional_argument_is_dropped_not_refused() {
    let h = Harness::fake("good");
    let out = h
        .session
        .call(
            "fake__echo",
            json!({"text": "kept", "a": null, "sleep_ms": null}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "kept");
    let e = err(h
        .session
        .call("fake__echo", json!({"text": 5, "a": null}))
        .await);
    assert!(matches!(e, McpError::InvalidArguments { .. }), "{e}");
    h.close().await;
}

#[tokio::test]
async fn a_slow_call_times_out_and_the_server_keeps_serving() {
    // A deadline a loaded machine's plain echo stays well within.
    let h = Harness::fake_with("good", |s| s.tool_timeout = Duration::from_secs(1));
    let e = err(h
        .session
        .call("fake__echo", json!({"sleep_ms": 2500}))
        .await);
    assert!(matches!(e, McpError::Timeout { .. }), "{e}");
    // Past the slow call's own end, whether or not the server serves calls at once.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let out = h
        .session
        .call("fake__echo", json!({"text": "after"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&out), "after");
    h.close().await;
}

#[tokio::test]
async fn a_missing_command_is_a_clear_start_error() {
    let h = Harness::new(vec![spec("nope", "/definitely/not/here", &[], &[])]);
    let e = err(h.session.tools("nope").await);
    assert!(matches!(e, McpError::Start { .. }), "{e}");
    assert!(e.to_string().contains("/definitely/not/here"), "{e}");
    h.close().await;
}

#[tokio::test]
async fn one_broken_server_does_not_hide_the_others() {
    let mut silent = spec("silent", FAKE, &["silent"], &[]);
    silent.startup_timeout = Duration::from_millis(500);
    let h = Harness::new(vec![spec("good", FAKE, &["good"], &[]), silent]);
    let catalog = h.session.catalog().await;
    assert_eq!(catalog.tools.len(), 5);
    assert_eq!(catalog.failures.len(), 1);
    assert_eq!(catalog.failures[0].server(), Some("silent"));
    h.close().await;
}
