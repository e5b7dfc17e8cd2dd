//! `edgar mcp serve` as a client meets it, with 30 servers configured (each edgar's own
//! example server, 4 tools): tokens of the tool list a client sees at start versus every
//! schema (and versus the 2,506-tool corpus); the time from launch to the first answers,
//! cold (nothing cached: the first search discovers all 30) and warm; and one proxied
//! `tools/call` versus the same call made to the server directly, and a prompt get and a
//! resource read direct versus through `--transparent`; and, for the floor of any
//! stdio proxy, the same call through a relay that only copies lines both ways (this
//! bench's own binary, run as one); and a real server from npm (server-everything's
//! `echo`) directly and through the gateway. The search ranks with the default (bundled)
//! encoder, so the cold search embeds the 120 tools once (`EDGAR_SEARCH_ENCODER=words`
//! measures words only). Prints Markdown tables.
//!
//! Run with `cargo bench -p edgar-host --bench gateway`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use edgar_host::tools::tokens;
use serde_json::{Value, json};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar");
const SERVERS: usize = 30;
const CALLS: usize = 1000;

/// Calls per row: `CALLS`, or `EDGAR_BENCH_CALLS` (for a profiler to attach).
fn calls() -> usize {
    std::env::var("EDGAR_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CALLS)
}
const COLD_RUNS: usize = 5;
const WARM_RUNS: usize = 11;

/// A line-by-line MCP client over a child's stdio.
struct Peer {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next: u64,
}

impl Peer {
    fn spawn(home: &Path, args: &[&str]) -> Peer {
        Peer::spawn_program(Command::new(EDGAR), home, args)
    }

    fn spawn_program(mut program: Command, home: &Path, args: &[&str]) -> Peer {
        let mut child = program
            .args(args)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env("XDG_STATE_HOME", home.join("state"))
            .env_remove("EDGAR_SEARCH_MODEL")
            .env_remove("EDGAR_CONFIG")
            .env_remove("EDGAR_CACHE_DIR")
            .current_dir(home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let input = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
        let output = BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("stdout")));
        Peer {
            child,
            input,
            output,
            next: 0,
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let m = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        // One write per message, as a real client sends it: `writeln!` of a `Value` would
        // write each JSON token separately, and the peer would wake for each.
        self.input
            .write_all(format!("{m}\n").as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        loop {
            let mut line = String::new();
            let n = self
                .output
                .read_line(&mut line)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(n > 0, "the peer ended");
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}"));
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        )
    }

    fn call(&mut self, name: &str, arguments: Value) -> Value {
        let v = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        assert!(v["result"]["isError"] != true, "{v}");
        v
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A home whose user config has `SERVERS` example servers, `s0` .. `s29`.
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let servers: serde_json::Map<String, Value> = (0..SERVERS)
        .map(|i| {
            (
                format!("s{i}"),
                json!({"command": EDGAR, "args": ["mcp", "example-server", "--root", home.path()]}),
            )
        })
        .collect();
    let dir = home.path().join("config/edgar");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.join("mcp.json"),
        json!({"mcpServers": servers}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    home
}

fn tools_tokens(listed: &Value) -> (usize, usize) {
    let tools = listed["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (tools.len(), tokens::count(&Value::Array(tools).to_string()))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Launch, `initialize`, then one `tool_search`: the time to each answer.
fn first_answers(home: &Path, cold: bool) -> (Duration, Duration) {
    if cold {
        let _ = std::fs::remove_dir_all(home.join("cache"));
    }
    let t = Instant::now();
    let mut gw = Peer::spawn(home, &["mcp", "serve"]);
    gw.initialize();
    let initialized = t.elapsed();
    let found = gw.call("tool_search", json!({"query": "current time"}));
    let searched = t.elapsed();
    let text = found["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("current_time"), "{text}");
    (initialized, searched)
}

/// Set for this binary run as the relay.
const RELAY: &str = "EDGAR_BENCH_RELAY";

/// This bench's own binary, to be run as the relay.
fn relay_command() -> Command {
    let me = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let mut relay = Command::new(me);
    relay.env(RELAY, "1");
    relay
}

/// The relay: runs its arguments as a child and copies each line from stdin to the
/// child and from the child to stdout, flushing each, and nothing else (no parsing).
fn relay() {
    let mut args = std::env::args().skip(1);
    let program = args
        .next()
        .unwrap_or_else(|| panic!("the relay needs a command"));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut to_child = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
    let from_child = child.stdout.take().unwrap_or_else(|| panic!("stdout"));
    let back = std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        for line in BufReader::new(from_child).lines() {
            let Ok(line) = line else { return };
            if out
                .write_all(format!("{line}\n").as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return;
            }
        }
    });
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        // The line and its newline in one write, as `edgar mcp serve` sends them.
        if to_child
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| to_child.flush())
            .is_err()
        {
            break;
        }
    }
    drop(to_child);
    let _ = child.wait();
    let _ = back.join();
}

fn main() {
    if std::env::var_os(RELAY).is_some() {
        return relay();
    }
    let home = home();

    // What a client's model is shown at start, and with every schema.
    let mut gw = Peer::spawn(home.path(), &["mcp", "serve"]);
    gw.initialize();
    let (start_n, start_tokens) = tools_tokens(&gw.request("tools/list", json!({})));
    drop(gw);
    let mut all = Peer::spawn(home.path(), &["mcp", "serve", "--expose", "all"]);
    all.initialize();
    let (all_n, all_tokens) = tools_tokens(&all.request("tools/list", json!({})));
    drop(all);
    let corpus_tokens = corpus_tokens();
    println!("| tool list a client sees | tools | tokens (o200k) |");
    println!("|---|---|---|");
    println!("| `edgar mcp serve`, at start | {start_n} | {start_tokens} |");
    println!("| `--expose all`, {SERVERS} example servers | {all_n} | {all_tokens} |");
    if let Some((n, t)) = corpus_tokens {
        println!("| every schema of the 2,506-tool corpus (106 servers) | {n} | {t} |");
    }
    println!();

    // Launch to first answers, cold and warm, interleaved after the first cold run.
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for i in 0..WARM_RUNS {
        if i < COLD_RUNS {
            cold.push(first_answers(home.path(), true));
        }
        warm.push(first_answers(home.path(), false));
    }
    let pick = |v: &[(Duration, Duration)], f: fn(&(Duration, Duration)) -> Duration| {
        median(v.iter().map(f).collect())
    };
    println!(
        "| `edgar mcp serve`, {SERVERS} servers configured | launch to `initialize` answer | launch to first `tool_search` answer |"
    );
    println!("|---|---|---|");
    println!(
        "| cold (nothing cached; the search discovers all {SERVERS}), median of {COLD_RUNS} | {} | {} |",
        ms(pick(&cold, |p| p.0)),
        ms(pick(&cold, |p| p.1))
    );
    println!(
        "| warm (cached names and index; nothing started), median of {WARM_RUNS} | {} | {} |",
        ms(pick(&warm, |p| p.0)),
        ms(pick(&warm, |p| p.1))
    );
    println!();

    // One proxied call versus the same call made directly, sequentially.
    let mut direct = Peer::spawn(home.path(), &["mcp", "example-server"]);
    direct.initialize();
    let mut gw = Peer::spawn(home.path(), &["mcp", "serve", "--servers", "s0"]);
    gw.initialize();
    let mut relayed = Peer::spawn_program(
        relay_command(),
        home.path(),
        &[EDGAR, "mcp", "example-server"],
    );
    relayed.initialize();
    gw.call("tool_search", json!({"query": "s0__current_time"}));
    direct.call("current_time", json!({}));
    relayed.call("current_time", json!({}));
    gw.call("s0__current_time", json!({}));
    let (mut d, mut r, mut g) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..calls() {
        let t = Instant::now();
        direct.call("current_time", json!({}));
        d.push(t.elapsed());
        let t = Instant::now();
        relayed.call("current_time", json!({}));
        r.push(t.elapsed());
        let t = Instant::now();
        gw.call("s0__current_time", json!({}));
        g.push(t.elapsed());
    }
    drop(relayed);
    let (d, r, g) = (Spread::of(d), Spread::of(r), Spread::of(g));
    println!(
        "| stdio `tools/call` `current_time`, {} sequential, interleaved | median | p90 | median against direct |",
        calls()
    );
    println!("|---|---|---|---|");
    println!("| the example server directly | {} | 1x |", d.cells());
    println!(
        "| through a relay that only copies lines (the floor of any stdio proxy) | {} | {:.2}x |",
        r.cells(),
        r.against(&d)
    );
    println!(
        "| through `edgar mcp serve` (validate, call, guard, audit, re-encode) | {} | {:.2}x |",
        g.cells(),
        g.against(&d)
    );
    println!();

    // A prompt get and a resource read, directly and through the gateway serving the
    // server transparently (both through the guard there, with pins and the audit).
    let mut tr = Peer::spawn(
        home.path(),
        &["mcp", "serve", "--servers", "s0", "--transparent"],
    );
    tr.initialize();
    let get =
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}});
    let read = json!({"uri": "test://static-text"});
    println!(
        "| {} sequential, interleaved, stdio (median / p90) | the example server directly | through `edgar mcp serve --transparent` | median ratio |",
        calls()
    );
    println!("|---|---|---|---|");
    for (method, params) in [("prompts/get", get), ("resources/read", read)] {
        for peer in [&mut direct, &mut tr] {
            let v = peer.request(method, params.clone());
            assert!(v.get("result").is_some(), "{method}: {v}");
        }
        let (mut d, mut g) = (Vec::new(), Vec::new());
        for _ in 0..calls() {
            let t = Instant::now();
            direct.request(method, params.clone());
            d.push(t.elapsed());
            let t = Instant::now();
            tr.request(method, params.clone());
            g.push(t.elapsed());
        }
        let (d, g) = (Spread::of(d), Spread::of(g));
        println!(
            "| `{method}` | {} | {} | {:.2}x |",
            d.cells().replace(" | ", " / "),
            g.cells().replace(" | ", " / "),
            g.against(&d)
        );
    }
    println!();
    real_server();
}

/// A real server from npm, as the tests install it (`@modelcontextprotocol/server-everything`
/// under `target/test-deps`, or `EDGAR_TEST_DEPS`): its `echo` called directly and through
/// `edgar mcp serve`. Skipped, and said so, when it is not installed.
fn real_server() {
    let deps = std::env::var_os("EDGAR_TEST_DEPS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-deps"));
    let bin = deps.join("npm/node_modules/.bin/mcp-server-everything");
    if !bin.exists() {
        println!(
            "(server-everything is not installed in {}: the real server's row is left out; the tests' setup installs it)",
            deps.display()
        );
        return;
    }
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = home.path().join("config/edgar");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let servers = json!({"mcpServers": {"ev": {"command": bin, "args": ["stdio"], "startup_timeout_sec": 60}}});
    std::fs::write(dir.join("mcp.json"), servers.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let mut direct = Peer::spawn_program(Command::new(&bin), home.path(), &["stdio"]);
    direct.initialize();
    let mut relayed = Peer::spawn_program(
        relay_command(),
        home.path(),
        &[
            bin.as_os_str()
                .to_str()
                .unwrap_or_else(|| panic!("a path that is not UTF-8")),
            "stdio",
        ],
    );
    relayed.initialize();
    let mut gw = Peer::spawn(home.path(), &["mcp", "serve", "--servers", "ev"]);
    gw.initialize();
    gw.call("tool_search", json!({"query": "ev__echo"}));
    let message = json!({"message": "hello"});
    direct.call("echo", message.clone());
    relayed.call("echo", message.clone());
    gw.call("ev__echo", message.clone());
    let (mut d, mut r, mut g) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..calls() {
        let t = Instant::now();
        direct.call("echo", message.clone());
        d.push(t.elapsed());
        let t = Instant::now();
        relayed.call("echo", message.clone());
        r.push(t.elapsed());
        let t = Instant::now();
        gw.call("ev__echo", message.clone());
        g.push(t.elapsed());
    }
    drop(relayed);
    let (d, r, g) = (Spread::of(d), Spread::of(r), Spread::of(g));
    println!(
        "| stdio `tools/call` `echo` of server-everything (Node.js, from npm), {} sequential, interleaved | median | p90 | median against direct |",
        calls()
    );
    println!("|---|---|---|---|");
    println!("| server-everything directly | {} | 1x |", d.cells());
    println!(
        "| through the relay that only copies lines | {} | {:.2}x |",
        r.cells(),
        r.against(&d)
    );
    println!(
        "| through `edgar mcp serve` | {} | {:.2}x |",
        g.cells(),
        g.against(&d)
    );
}

/// The median and 90th percentile of a run of call times: a loaded machine's rare long
/// pauses move a mean more than they say about the call.
struct Spread {
    median: Duration,
    p90: Duration,
}

impl Spread {
    fn of(mut times: Vec<Duration>) -> Spread {
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        Spread {
            median: at(0.5),
            p90: at(0.9),
        }
    }

    fn cells(&self) -> String {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        format!("{:.1} µs | {:.1} µs", us(self.median), us(self.p90))
    }

    fn against(&self, direct: &Spread) -> f64 {
        self.median.as_secs_f64() / direct.median.as_secs_f64()
    }
}

/// The corpus's tools as a client would list them all: (count, tokens).
fn corpus_tokens() -> Option<(usize, usize)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/corpus");
    let mut tools = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        if let Some(list) = v.get("tools").and_then(Value::as_array) {
            tools.extend(list.iter().cloned());
        }
    }
    (!tools.is_empty()).then(|| (tools.len(), tokens::count(&Value::Array(tools).to_string())))
}
