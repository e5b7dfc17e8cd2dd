//! What the team gateway costs per call: the same `tools/call` (edgar's example server's
//! `current_time`) over one keep-alive HTTP connection, through `serve --http` in its
//! one-person mode (a bearer secret) and in its team mode (`--gateway-config`: an
//! EdDSA JWT checked against a JWKS, a Cedar decision, the rate limiter, metrics, and an
//! audit line that names the user). The identity provider is a loopback thread serving
//! the key set. Prints a Markdown table.
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
        }
    }

    fn rpc(&mut self, method: &str, params: Value) -> Value {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        write!(
            self.writer,
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
            self.port,
            self.token,
            body.len()
        )
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
    let gateway_config = home.path().join("gateway.json");
    std::fs::write(
        &gateway_config,
        json!({"resource": resource, "issuer": issuer, "jwks_uri": format!("{issuer}/jwks"),
               "policy": "team.cedar", "rate_limits": {"per_user": {"per_minute": 1000000}}})
        .to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some("k".into());
    let token = jsonwebtoken::encode(
        &header,
        &json!({"iss": issuer, "aud": resource, "sub": "ada", "groups": ["eng"], "exp": now + 3600}),
        &jsonwebtoken::EncodingKey::from_ed_der(pkcs8.as_ref()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let config_arg = gateway_config.display().to_string();
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
        "| team mode (JWT + Cedar + limits + metrics + user's audit line) | {} ({ratio:.2}x) | {} |",
        us(team_median),
        us(team_p90)
    );
    println!(
        "| of which one Cedar decision (in process) | {} | |",
        us(decide)
    );
}
