//! What the team gateway costs per call: the same `tools/call` (edgar's example server's
//! `current_time`) over one keep-alive HTTP connection, through `serve --http` in its
//! one-person mode (a bearer secret) and in its team mode (`--gateway-config`: an
//! EdDSA JWT checked against a JWKS, a Cedar decision, the rate limiter, metrics, and an
//! audit line that names the user). The identity provider is a loopback thread serving
//! the key set. Then shared state (a throwaway PostgreSQL cluster, Debian's server, as
//! the tests start it): the same call with `"state"` (its `call_begin` and `call` lines
//! committed to the shared chain), calls per second through Debian's HAProxy (the
//! config in `docs/deploy/haproxy.cfg`) in front of one and of three replicas, and the
//! audit append alone: the file against PostgreSQL, one at a time and many at once.
//! Prints Markdown tables.
//!
//! Run with `cargo bench -p edgar-host --bench team_gateway`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use serde_json::{Value, json};

// The tests' throwaway cluster; its TLS variant is for a test only.
#[allow(dead_code)]
#[path = "../../tests/it/postgres.rs"]
mod postgres;

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar");
const CALLS: usize = 2000;

/// Calls per mode: `CALLS`, or `EDGAR_BENCH_CALLS` (for a profiler to attach).
fn calls() -> usize {
    std::env::var("EDGAR_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CALLS)
}
const WARMUP: usize = 200;
const SECRET: &str = "bench-secret-0123456789abcdef";

/// The gateway process; killed when dropped.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A loopback "identity provider" answering every request with `jwks`.
fn serve_jwks(jwks: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{jwks}",
                jwks.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// A loopback OTLP "collector": reads each request whole and answers 200 with no body.
fn serve_collector() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let _ = reader
                        .get_mut()
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                }
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

fn start(home: &Path, port: u16, extra: &[&str], env: &[(&str, &str)]) -> Gateway {
    let child = Command::new(EDGAR)
        .args(["mcp", "serve", "--http", &format!("127.0.0.1:{port}")])
        .args(extra)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("EDGAR_STATE_DIR", home.join("state"))
        .env_remove("EDGAR_SEARCH_MODEL")
        .env_remove("EDGAR_CONFIG")
        .env_remove("EDGAR_CACHE_DIR")
        .envs(env.iter().copied())
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // Killed and reaped on drop, also when it never listens.
    let gateway = Gateway(child);
    for _ in 0..200 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return gateway;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the gateway did not start listening");
}

/// A keep-alive HTTP/1.1 client for JSON answers.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    port: u16,
    token: String,
    /// Speaks the stateless era (2026-07-28): `_meta` and routing headers each request.
    modern: bool,
}

impl Client {
    fn connect(port: u16, token: &str) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
        let _ = stream.set_nodelay(true);
        let writer = stream.try_clone().unwrap_or_else(|e| panic!("{e}"));
        Client {
            reader: BufReader::new(stream),
            writer,
            port,
            token: token.to_owned(),
            modern: false,
        }
    }

    fn rpc(&mut self, method: &str, mut params: Value) -> Value {
        let mut routing = String::new();
        if self.modern {
            params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                     "io.modelcontextprotocol/clientCapabilities": {}});
            routing = format!("mcp-protocol-version: 2026-07-28\r\nmcp-method: {method}\r\n");
            if let Some(name) = params["name"].as_str() {
                routing.push_str(&format!("mcp-name: {name}\r\n"));
            }
        }
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        // The whole request in one write, as an HTTP client sends it (`write!` straight
        // to the socket would send each piece of the format as its own segment).
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n{routing}content-length: {}\r\n\r\n{body}",
            self.port,
            self.token,
            body.len()
        );
        self.writer
            .write_all(request.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut length = 0usize;
        let mut status = String::new();
        self.reader
            .read_line(&mut status)
            .unwrap_or_else(|e| panic!("{e}"));
        loop {
            let mut line = String::new();
            self.reader
                .read_line(&mut line)
                .unwrap_or_else(|e| panic!("{e}"));
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        self.reader
            .read_exact(&mut body)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            status.contains(" 200 "),
            "{status}: {}",
            String::from_utf8_lossy(&body)
        );
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    }
}

/// Median and 90th percentile of `CALLS` calls, after a warm-up.
fn measure(client: &mut Client) -> (Duration, Duration) {
    let found = client.rpc(
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "ex__current_time"}}),
    );
    assert!(found.to_string().contains("ex__current_time"), "{found}");
    let call = || json!({"name": "ex__current_time", "arguments": {}});
    for _ in 0..WARMUP {
        client.rpc("tools/call", call());
    }
    let n = calls();
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            let m = client.rpc("tools/call", call());
            let took = t.elapsed();
            assert!(m["result"]["isError"] != true, "{m}");
            took
        })
        .collect();
    times.sort();
    (times[n / 2], times[n * 9 / 10])
}

/// A team gateway config for `resource` in `home` (named `name`), with `extra` keys.
fn team_config(home: &Path, name: &str, resource: &str, issuer: &str, extra: Value) -> String {
    let mut config = json!({"resource": resource, "issuer": issuer,
        "jwks_uri": format!("{issuer}/jwks"), "policy": "team.cedar",
        "rate_limits": {"per_user": {"per_minute": 100000000}}});
    if let (Value::Object(c), Value::Object(e)) = (&mut config, extra) {
        c.extend(e);
    }
    let path = home.join(name);
    std::fs::write(&path, config.to_string()).unwrap_or_else(|e| panic!("{e}"));
    path.display().to_string()
}

/// An EdDSA access token for `sub` in group `eng`, for `resource`.
fn token(pkcs8: &[u8], issuer: &str, resource: &str, sub: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some("k".into());
    jsonwebtoken::encode(
        &header,
        &json!({"iss": issuer, "aud": resource, "sub": sub, "groups": ["eng"], "exp": now + 3600}),
        &jsonwebtoken::EncodingKey::from_ed_der(pkcs8),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// HAProxy (`docs/deploy/haproxy.cfg`) on `front` in front of `replicas`.
struct Haproxy {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn haproxy(front: u16, replicas: &[u16]) -> Haproxy {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut cfg: String = include_str!("../../docs/deploy/haproxy.cfg")
        .replace("\"${EDGAR_FRONT}\"", &format!("127.0.0.1:{front}"))
        .replace("\"${EDGAR_HOST}\"", &format!("127.0.0.1:{front}"))
        .lines()
        .filter(|l| !l.trim_start().starts_with("server "))
        .map(|l| format!("{l}\n"))
        .collect();
    for (i, p) in replicas.iter().enumerate() {
        cfg.push_str(&format!("    server r{i} 127.0.0.1:{p} check\n"));
    }
    let path = dir.path().join("haproxy.cfg");
    std::fs::write(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("haproxy (Debian's `haproxy` package): {e}"));
    let proxy = Haproxy { child, _dir: dir };
    // Every replica checked ready once (rise 1, every 500 ms).
    std::thread::sleep(Duration::from_millis(1500));
    proxy
}

/// `threads` clients at once, each on its own keep-alive connection to `port`, each
/// searching once and then making `n` calls: calls per second, and the median call.
fn throughput(port: u16, tokens: &[String], n: usize) -> (f64, Duration) {
    let started = Instant::now();
    let workers: Vec<_> = tokens
        .iter()
        .map(|t| {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(port, &t);
                // A server still starting joins a later search (the search waits for no
                // slow server): search again until it has.
                let mut found = Value::Null;
                for _ in 0..100 {
                    found = client.rpc(
                        "tools/call",
                        json!({"name": "tool_search", "arguments": {"query": "ex__current_time"}}),
                    );
                    if found.to_string().contains("ex__current_time") {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                assert!(found.to_string().contains("ex__current_time"), "{found}");
                (0..n)
                    .map(|_| {
                        let t = Instant::now();
                        let m = client.rpc(
                            "tools/call",
                            json!({"name": "ex__current_time", "arguments": {}}),
                        );
                        assert!(m["result"]["isError"] != true, "{m}");
                        t.elapsed()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut times: Vec<Duration> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap_or_else(|_| panic!("a client panicked")))
        .collect();
    let rate = times.len() as f64 / started.elapsed().as_secs_f64();
    times.sort();
    (rate, times[times.len() / 2])
}

/// Audit appends, one at a time and `tasks` at once (`writers` trails, as so many
/// replicas), against the shared chain in `db`: (median one-at-a-time, appends per
/// second at once).
fn shared_appends(
    url: &str,
    key_file: &Path,
    n: usize,
    writers: usize,
    tasks: usize,
) -> (Duration, f64, u64) {
    use edgar_host::state::{Database, StateKey, Trail};
    use edgar_host::trust::audit::AuditLog;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let db = Database::new(url).unwrap_or_else(|e| panic!("{e}"));
        db.migrate().await.unwrap_or_else(|e| panic!("{e}"));
        // The gateways' key: the chain they began goes on.
        let key = StateKey::load(key_file)
            .unwrap_or_else(|e| panic!("{e}"))
            .audit_key();
        let logs: Vec<AuditLog> = (0..writers)
            .map(|_| AuditLog::shared(Trail::start(db.clone(), key.clone()), key.clone()))
            .collect();
        let mut one = Vec::with_capacity(n);
        for i in 0..n {
            let t = Instant::now();
            logs[0]
                .record_confirmed("bench", json!({"i": i}))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            one.push(t.elapsed());
        }
        one.sort();
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for t in 0..tasks {
            let log = logs[t % writers].clone();
            set.spawn(async move {
                for i in 0..n / 10 {
                    log.record_confirmed("bench", json!({"task": t, "i": i}))
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            });
        }
        set.join_all().await;
        let rate = (tasks * (n / 10)) as f64 / started.elapsed().as_secs_f64();
        let lines = edgar_host::state::trail::verify(&db, &key)
            .await
            .unwrap_or_else(|e| panic!("the bench's chain does not verify: {e}"));
        (one[n / 2], rate, lines)
    })
}

fn us(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}

fn main() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = home.path().join("config/edgar");
    std::fs::create_dir_all(&config).unwrap_or_else(|e| panic!("{e}"));
    let servers = json!({"mcpServers": {"ex": {"command": EDGAR, "args": ["mcp", "example-server", "--root", home.path()]}}});
    std::fs::write(config.join("mcp.json"), servers.to_string()).unwrap_or_else(|e| panic!("{e}"));

    // The one-person mode: the bearer secret.
    let port = free_port();
    let gw = start(home.path(), port, &[], &[("EDGAR_SERVE_TOKEN", SECRET)]);
    let (secret_median, secret_p90) = measure(&mut Client::connect(port, SECRET));
    // The same calls in the stateless era: each can pause for
    // the client's input.
    let mut modern = Client::connect(port, SECRET);
    modern.modern = true;
    let (modern_median, modern_p90) = measure(&mut modern);
    drop(gw);
    // The one-person mode exporting a server and a client span per call over OTLP.
    let port = free_port();
    let collector = serve_collector();
    let env = [
        ("EDGAR_SERVE_TOKEN", SECRET),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str()),
    ];
    let gw = start(home.path(), port, &[], &env);
    let (traced_median, traced_p90) = measure(&mut Client::connect(port, SECRET));
    drop(gw);

    // The team mode: a JWT per request, Cedar, limits, metrics, the user's audit line.
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap_or_else(|e| panic!("{e}"));
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap_or_else(|e| panic!("{e}"));
    let jwks = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k", "use": "sig",
        "x": URL_SAFE_NO_PAD.encode(pair.public_key().as_ref())}]});
    let issuer = serve_jwks(jwks.to_string());
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(
        home.path().join("team.cedar"),
        "permit(principal, action, resource in Server::\"ex\") when { principal.groups.contains(\"eng\") };",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let config_arg = team_config(home.path(), "gateway.json", &resource, &issuer, json!({}));
    let token = token(pkcs8.as_ref(), &issuer, &resource, "ada");
    let gw = start(home.path(), port, &["--gateway-config", &config_arg], &[]);
    let (team_median, team_p90) = measure(&mut Client::connect(port, &token));
    drop(gw);

    // The policy decision alone, as each call makes it.
    let policy = edgar_host::gateway::team::policy::Policy::parse(
        "permit(principal, action, resource in Server::\"ex\") when { principal.groups.contains(\"eng\") };",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let who = edgar_host::gateway::team::Principal {
        sub: "ada".into(),
        groups: vec!["eng".into()],
        scopes: vec![],
    };
    let tool = edgar_host::guard::SanitizedTool::from_cache(edgar_host::guard::CachedTool {
        server: "ex".into(),
        tool: "current_time".into(),
        name: "ex__current_time".into(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        hints: Default::default(),
        dropped: Vec::new(),
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let action = edgar_host::gateway::team::policy::Action::CallTool;
    let t = Instant::now();
    for _ in 0..CALLS {
        assert!(policy.decide(&who, action, &tool).allowed());
    }
    let decide = t.elapsed() / CALLS as u32;

    let ratio = team_median.as_secs_f64() / secret_median.as_secs_f64();
    println!("| `tools/call` over keep-alive HTTP, {CALLS} calls | median | p90 |");
    println!("|---|---|---|");
    println!(
        "| one-person mode (bearer secret) | {} | {} |",
        us(secret_median),
        us(secret_p90)
    );
    println!(
        "| one-person mode, stateless era (2026-07-28: `_meta` and headers checked, the call able to pause) | {} | {} |",
        us(modern_median),
        us(modern_p90)
    );
    println!(
        "| one-person mode exporting its spans over OTLP/HTTP (protobuf, batched) | {} | {} |",
        us(traced_median),
        us(traced_p90)
    );
    println!(
        "| team mode (JWT + Cedar + limits + metrics + user's audit line) | {} ({ratio:.2}x) | {} |",
        us(team_median),
        us(team_p90)
    );
    println!(
        "| of which one Cedar decision (in process) | {} | |",
        us(decide)
    );

    shared_state(home.path(), pkcs8.as_ref(), &issuer, team_median);
}

/// The shared-state rows: the same call with `"state"`, through HAProxy with one and
/// three replicas, and the audit append alone.
fn shared_state(home: &Path, pkcs8: &[u8], issuer: &str, team_median: Duration) {
    let pg = postgres::Postgres::start();
    let key_file = home.join("state.key");
    std::fs::write(&key_file, format!("{}\n", "3c".repeat(32))).unwrap_or_else(|e| panic!("{e}"));
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let state = json!({"state": pg.url(), "state_key_file": "state.key",
                       "behind_proxy": ["127.0.0.1"]});

    // One replica, direct.
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let config = team_config(home, "shared.json", &resource, issuer, state.clone());
    let gw = start(home, port, &["--gateway-config", &config], &[]);
    let ada = token(pkcs8, issuer, &resource, "ada");
    let (shared_median, shared_p90) = measure(&mut Client::connect(port, &ada));
    drop(gw);

    // HAProxy in front of one, then three replicas; eight users at once.
    let per_client = calls() / 4;
    let mut rows = Vec::new();
    for replicas in [1usize, 3] {
        let front = free_port();
        let resource = format!("http://127.0.0.1:{front}/mcp");
        let config = team_config(home, "front.json", &resource, issuer, state.clone());
        let ports: Vec<u16> = (0..replicas).map(|_| free_port()).collect();
        let gws: Vec<Gateway> = ports
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let own = home.join(format!("replica-{replicas}-{i}"));
                std::fs::create_dir_all(&own).unwrap_or_else(|e| panic!("{e}"));
                start(
                    home,
                    p,
                    &["--gateway-config", &config],
                    &[
                        ("EDGAR_STATE_DIR", own.join("state").to_str().unwrap_or("")),
                        ("XDG_CACHE_HOME", own.join("cache").to_str().unwrap_or("")),
                    ],
                )
            })
            .collect();
        let proxy = haproxy(front, &ports);
        let tokens: Vec<String> = (0..8)
            .map(|u| token(pkcs8, issuer, &resource, &format!("user-{u}")))
            .collect();
        let (rate, median) = throughput(front, &tokens, per_client);
        rows.push((replicas, rate, median));
        drop(proxy);
        drop(gws);
    }

    // The audit append alone.
    let n = 2000;
    let file_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = edgar_host::trust::audit::AuditLog::new(file_dir.path());
    let mut one = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        file.record("bench", json!({"i": i}))
            .unwrap_or_else(|e| panic!("{e}"));
        one.push(t.elapsed());
    }
    one.sort();
    let file_median = one[n / 2];
    let (pg_one, pg_many, _) = shared_appends(&pg.url(), &key_file, n, 1, 64);
    let (_, pg_three, lines) = shared_appends(&pg.url(), &key_file, n, 3, 96);
    let bytes: f64 = pg
        .query("SELECT pg_total_relation_size('edgar_audit')")
        .parse()
        .unwrap_or(0.0);
    let audit_rows: f64 = pg
        .query("SELECT count(*) FROM edgar_audit")
        .parse()
        .unwrap_or(1.0);

    println!();
    println!("| shared state (PostgreSQL 15, local) | median | p90 / rate |");
    println!("|---|---|---|");
    println!(
        "| team mode with `\"state\"`, one replica, {} calls | {} (+{} over the file) | {} |",
        calls(),
        us(shared_median),
        us(shared_median.saturating_sub(team_median)),
        us(shared_p90)
    );
    for (replicas, rate, median) in rows {
        println!(
            "| through HAProxy, {replicas} replica(s), 8 users at once, {} calls | {} | {rate:.0} calls/s |",
            8 * per_client,
            us(median)
        );
    }
    println!(
        "| one audit append, file (`audit.jsonl`, flock) | {} | |",
        us(file_median)
    );
    println!(
        "| one audit append, PostgreSQL (committed, one at a time) | {} | |",
        us(pg_one)
    );
    println!("| audit appends, PostgreSQL, 64 at once, one writer | | {pg_many:.0} appends/s |");
    println!(
        "| audit appends, PostgreSQL, 96 at once, three writers (replicas) on one chain | | {pg_three:.0} appends/s ({lines} lines verified) |"
    );
    println!(
        "| `edgar_audit` on disk, with its indexes | {:.0} bytes a line | {audit_rows:.0} lines |",
        bytes / audit_rows.max(1.0)
    );
}
