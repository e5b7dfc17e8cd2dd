//! `edgar mcp serve --http --gateway-config FILE`: the gateway for a team, in front of
//! a test identity provider of our own (its keys, its JWKS and discovery metadata on
//! loopback, tokens signed here with ring). Tokens with a wrong audience, issuer, key
//! or algorithm, expired or not yet valid, are refused as the spec says; a rotated key
//! is fetched once and a made-up key id does not make the gateway fetch again; two
//! users in different groups, calling at once, each see and call only what the Cedar
//! policy permits, and the audit trail names the right user for every call. The
//! official Python SDK client works through it with a bearer token.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use edgar_tests::{fixture, in_home, installed, procs_with_tag, user_config};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RsaKeyPair};
use serde_json::{Value, json};

use crate::mcp_http_faults::{FakeHttp, Resp};
use crate::mcp_http_real::free_port;

pub(crate) const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
pub(crate) const FAKE: &str = env!("CARGO_BIN_EXE_fake-mcp-server");

pub(crate) fn tag(test: &str) -> String {
    format!("{}-team-{test}", std::process::id())
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A signing key of the test identity provider, with its public JWK.
pub(crate) enum Key {
    Es256(EcdsaKeyPair),
    EdDsa(Ed25519KeyPair),
    Rs256(RsaKeyPair),
}

impl Key {
    pub(crate) fn es256() -> Key {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let doc = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap_or_else(|e| panic!("{e}"));
        Key::Es256(
            EcdsaKeyPair::from_pkcs8(alg, doc.as_ref(), &rng).unwrap_or_else(|e| panic!("{e}")),
        )
    }

    fn eddsa() -> Key {
        let doc =
            Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap_or_else(|e| panic!("{e}"));
        Key::EdDsa(Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap_or_else(|e| panic!("{e}")))
    }

    /// The host's test-only RSA key (ring cannot make RSA keys).
    fn rs256() -> Key {
        let pem = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../host/src/auth/testdata/rs256-test-only.pem"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = STANDARD.decode(body).unwrap_or_else(|e| panic!("{e}"));
        Key::Rs256(RsaKeyPair::from_pkcs8(&der).unwrap_or_else(|e| panic!("{e}")))
    }

    fn alg(&self) -> &'static str {
        match self {
            Key::Es256(_) => "ES256",
            Key::EdDsa(_) => "EdDSA",
            Key::Rs256(_) => "RS256",
        }
    }

    pub(crate) fn jwk(&self, kid: &str) -> Value {
        match self {
            Key::Es256(k) => {
                let p = k.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
                       "x": b64(&p[1..33]), "y": b64(&p[33..65])})
            }
            Key::EdDsa(k) => json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig",
                                    "x": b64(k.public_key().as_ref())}),
            Key::Rs256(k) => {
                let c: ring::rsa::PublicKeyComponents<Vec<u8>> = k.public().into();
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                       "n": b64(&c.n), "e": b64(&c.e)})
            }
        }
    }

    fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match self {
            Key::Es256(k) => k
                .sign(&rng, message)
                .unwrap_or_else(|e| panic!("{e}"))
                .as_ref()
                .to_vec(),
            Key::EdDsa(k) => k.sign(message).as_ref().to_vec(),
            Key::Rs256(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut sig)
                    .unwrap_or_else(|e| panic!("{e}"));
                sig
            }
        }
    }

    /// A JWT of `claims` signed by this key, its header naming `kid`.
    pub(crate) fn token(&self, kid: Option<&str>, claims: &Value) -> String {
        let mut header = json!({"alg": self.alg(), "typ": "at+jwt"});
        if let Some(kid) = kid {
            header["kid"] = json!(kid);
        }
        let message = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let sig = self.sign(message.as_bytes());
        format!("{message}.{}", b64(&sig))
    }
}

/// The test identity provider: discovery metadata and a key set it can rotate.
pub(crate) struct Idp {
    _rt: tokio::runtime::Runtime,
    pub(crate) http: FakeHttp,
    pub(crate) base: String,
    keys: Arc<Mutex<Vec<Value>>>,
    /// The audience its introspection answers name (the gateway's resource).
    audience: Arc<Mutex<String>>,
    /// The key its ID tokens are signed with, once a test signs users in there.
    signer: Signer,
}

/// The key (and its id) an identity provider signs ID tokens with, once it has one.
type Signer = Arc<Mutex<Option<(Arc<Key>, String)>>>;

/// The gateway's client secret as the browser's OpenID Connect client.
pub(crate) const BROWSER_SECRET: &str = "gw-browser-secret";

/// A code the identity provider issued: for whom, with which nonce, PKCE challenge and
/// redirect URI; it works once.
type Codes = Arc<Mutex<std::collections::HashMap<String, (String, String, String, String)>>>;

/// The identity provider's OpenID Connect sign-in: a user already signed in there
/// (`x-user`) is sent straight back with a code, which the gateway's browser client
/// exchanges (with its secret and the PKCE verifier) for an ID token.
fn oidc(req: &crate::mcp_http_faults::Req, base: &str, codes: &Codes, signer: &Signer) -> Resp {
    let bad = |e: &str| Resp::Json(400, vec![], json!({"error": e}));
    let mut codes = codes.lock().unwrap_or_else(|p| p.into_inner());
    if req.method == "GET" {
        let (Some(user), Some(redirect), Some(state), Some(nonce), Some(ch)) = (
            req.header("x-user").map(str::to_owned),
            req.param("redirect_uri"),
            req.param("state"),
            req.param("nonce"),
            req.param("code_challenge"),
        ) else {
            return bad("invalid_request");
        };
        if req.param("client_id").as_deref() != Some("gw-browser")
            || req.param("scope").as_deref() != Some("openid")
        {
            return bad("invalid_client");
        }
        let code = format!("idp-code-{}", codes.len() + 1);
        codes.insert(code.clone(), (user, nonce, ch, redirect.clone()));
        let state = state
            .replace('%', "%25")
            .replace('&', "%26")
            .replace('=', "%3D");
        return Resp::Status(
            302,
            vec![("location", format!("{redirect}?code={code}&state={state}"))],
        );
    }
    let basic = format!(
        "Basic {}",
        STANDARD.encode(format!("gw-browser:{BROWSER_SECRET}"))
    );
    if req.header("authorization") != Some(basic.as_str()) {
        return Resp::Json(401, vec![], json!({"error": "invalid_client"}));
    }
    let verifier = req.param("code_verifier").unwrap_or_default();
    let challenge = b64(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
    let code = req.param("code").unwrap_or_default();
    let signer = signer.lock().map(|s| s.clone()).unwrap_or(None);
    match (codes.remove(&code), signer) {
        (Some((user, nonce, ch, redirect)), Some((key, kid)))
            if ch == challenge
                && req.param("redirect_uri").as_deref() == Some(redirect.as_str()) =>
        {
            let id_token = key.token(
                Some(&kid),
                &json!({"iss": base, "aud": "gw-browser",
                "sub": user, "nonce": nonce, "iat": now(), "exp": now() + 300}),
            );
            Resp::Json(
                200,
                vec![],
                json!({"access_token": "idp-access", "token_type": "Bearer",
                "id_token": id_token, "expires_in": 300}),
            )
        }
        _ => bad("invalid_grant"),
    }
}

/// The gateway's client secret at the introspection endpoint.
const INTROSPECTION_SECRET: &str = "gw-introspection-secret";

impl Idp {
    pub(crate) fn start(jwks: Vec<Value>) -> Idp {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let keys = Arc::new(Mutex::new(jwks));
        let base = Arc::new(Mutex::new(String::new()));
        let audience = Arc::new(Mutex::new(String::new()));
        let (k, b, aud) = (keys.clone(), base.clone(), audience.clone());
        let signer = Signer::default();
        let codes = Codes::default();
        let (sg, cs) = (signer.clone(), codes.clone());
        let http = rt.block_on(FakeHttp::start(move |req| {
            let base = b.lock().map(|b| b.clone()).unwrap_or_default();
            let path = req.path.split('?').next().unwrap_or_default();
            if path == "/authorize"
                || (path == "/token" && req.param("grant_type").as_deref() == Some("authorization_code"))
            {
                return oidc(req, &base, &cs, &sg);
            }
            match req.path.as_str() {
                "/.well-known/oauth-authorization-server" | "/.well-known/openid-configuration" => {
                    Resp::Json(
                        200,
                        vec![],
                        json!({"issuer": base, "jwks_uri": format!("{base}/jwks"),
                               "token_endpoint": format!("{base}/token"),
                               "authorization_endpoint": format!("{base}/authorize"),
                               "response_types_supported": ["code"],
                               "code_challenge_methods_supported": ["S256"]}),
                    )
                }
                "/introspect" => {
                    let basic = format!("Basic {}", STANDARD.encode(format!("gw:{INTROSPECTION_SECRET}")));
                    if req.header("authorization") != Some(basic.as_str()) {
                        return Resp::Json(401, vec![], json!({"error": "invalid_client"}));
                    }
                    let aud = aud.lock().map(|a| a.clone()).unwrap_or_default();
                    let token = req.param("token").unwrap_or_default();
                    match token.as_str() {
                        "opaque-ada" => Resp::Json(200, vec![], json!({"active": true, "sub": "ada",
                            "iss": base, "aud": aud, "exp": now() + 600, "scope": "mcp",
                            "groups": ["eng"]})),
                        "opaque-other-audience" => Resp::Json(200, vec![], json!({"active": true,
                            "sub": "ada", "aud": "https://elsewhere/mcp", "exp": now() + 600, "scope": "mcp"})),
                        _ => Resp::Json(200, vec![], json!({"active": false})),
                    }
                }
                "/token" => {
                    // RFC 8693: the gateway's client, a user's access token in, one for
                    // the upstream out, named after the user the inbound token names.
                    let basic = format!("Basic {}", STANDARD.encode("gw-up:up-secret"));
                    if req.header("authorization") != Some(basic.as_str()) {
                        return Resp::Json(401, vec![], json!({"error": "invalid_client"}));
                    }
                    let grant = req.param("grant_type").unwrap_or_default();
                    let subject = req.param("subject_token").unwrap_or_default();
                    let sub = subject
                        .split('.')
                        .nth(1)
                        .and_then(|p| URL_SAFE_NO_PAD.decode(p).ok())
                        .and_then(|p| serde_json::from_slice::<Value>(&p).ok())
                        .and_then(|c| c["sub"].as_str().map(str::to_owned));
                    match (grant.as_str(), sub, req.param("audience").as_deref()) {
                        ("urn:ietf:params:oauth:grant-type:token-exchange", Some(sub), Some("upstream")) => {
                            Resp::Json(200, vec![], json!({
                                "access_token": format!("up-token-for-{sub}"),
                                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                                "token_type": "Bearer", "expires_in": 600}))
                        }
                        _ => Resp::Json(400, vec![], json!({"error": "invalid_request"})),
                    }
                }
                "/jwks" => {
                    let keys = k.lock().map(|k| k.clone()).unwrap_or_default();
                    Resp::Json(200, vec![], json!({ "keys": keys }))
                }
                _ => Resp::Status(404, vec![]),
            }
        }));
        let url = http.url.trim_end_matches("/mcp").to_owned();
        if let Ok(mut b) = base.lock() {
            *b = url.clone();
        }
        Idp {
            _rt: rt,
            http,
            base: url,
            keys,
            audience,
            signer,
        }
    }

    /// Signs users in with OpenID Connect from now on, its ID tokens signed by `key`.
    pub(crate) fn sign_in_with(&self, key: Arc<Key>, kid: &str) {
        if let Ok(mut s) = self.signer.lock() {
            *s = Some((key, kid.to_owned()));
        }
    }

    fn jwks_fetches(&self) -> usize {
        self.http
            .requests
            .lock()
            .map(|r| r.iter().filter(|q| q.path == "/jwks").count())
            .unwrap_or(0)
    }

    pub(crate) fn rotate(&self, jwks: Vec<Value>) {
        if let Ok(mut k) = self.keys.lock() {
            *k = jwks;
        }
    }
}

/// Sends `child` SIGTERM and waits up to 30 s: `Some(its exit code)`, or `None` when it
/// did not stop (it is then killed, so nothing outlives the test).
pub(crate) fn stop_on_sigterm(child: &mut Child) -> Option<Option<i32>> {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    for _ in 0..300 {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status.code());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    None
}

/// Reads a team gateway's stderr until it says it serves (panicking, naming `who`, if it
/// ends first); from then on a thread gathers the rest. All of it, so far.
pub(crate) fn until_serving(child: &mut Child, who: &str) -> Arc<Mutex<String>> {
    let mut stderr = BufReader::new(child.stderr.take().unwrap_or_else(|| panic!("stderr")));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            panic!("{who} ended before serving: {seen}");
        }
        seen.push_str(&line);
        if line.starts_with("edgar: serving MCP for a team at ") {
            break;
        }
    }
    let all = Arc::new(Mutex::new(seen));
    let sink = all.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while stderr.read_line(&mut line).unwrap_or(0) > 0 {
            if let Ok(mut s) = sink.lock() {
                s.push_str(&line);
            }
            line.clear();
        }
    });
    all
}

/// The team gateway running, and where.
pub(crate) struct Team {
    child: Child,
    client: Client,
    pub(crate) resource: String,
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl std::ops::Deref for Team {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

pub(crate) const POLICY: &str = r#"
// Engineers see and call every tool of the fake server.
permit(principal, action, resource in Server::"f")
  when { principal.groups.contains("eng") };
// Readers see and call only its echo tool.
@id("readers-echo")
permit(principal, action, resource == Tool::"f__echo")
  when { principal.groups.contains("readers") };
// The Python SDK's test server, for engineers.
permit(principal, action, resource in Server::"py")
  when { principal.groups.contains("eng") };
// The per-user upstream, for everyone in a group.
permit(principal, action, resource in Server::"up")
  when { principal.groups.contains("eng") || principal.groups.contains("readers") };
// Nobody calls `die`, whatever else permits it.
@id("never-die")
forbid(principal, action == Action::"call_tool", resource == Tool::"f__die");
"#;

fn write_config(home: &Path, port: u16, issuer: &str, extra: Value) -> PathBuf {
    write_config_with(home, port, issuer, extra, POLICY)
}

fn write_config_with(home: &Path, port: u16, issuer: &str, extra: Value, policy: &str) -> PathBuf {
    std::fs::write(home.join("team.cedar"), policy).unwrap_or_else(|e| panic!("{e}"));
    let mut config = json!({
        "resource": format!("http://127.0.0.1:{port}/mcp"),
        "issuer": issuer,
        "policy": "team.cedar",
        "scopes_supported": ["mcp"],
        "required_scopes": ["mcp"],
    });
    if let (Value::Object(c), Value::Object(e)) = (&mut config, extra) {
        c.extend(e);
    }
    let path = home.join("gateway.json");
    std::fs::write(&path, config.to_string()).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// Only the request side of [`Team`], for another thread.
pub(crate) struct Client {
    pub(crate) port: u16,
}

impl Client {
    /// One raw HTTP/1.1 request: (status, headers, body).
    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port))
            .unwrap_or_else(|e| panic!("{e}"));
        let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\nhost: 127.0.0.1:{}\r\n",
            body.len(),
            self.port
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        write!(stream, "{head}\r\n{body}").unwrap_or_else(|e| panic!("{e}"));
        let mut raw = String::new();
        let _ = stream.read_to_string(&mut raw);
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Answer {
            status,
            head: head.to_ascii_lowercase(),
            session: head.lines().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_owned())
            }),
            body: body.to_owned(),
        }
    }

    /// An MCP request as `token`'s user; the JSON-RPC message answered (the last one of
    /// an event stream).
    pub(crate) fn rpc(&self, token: &str, id: u64, method: &str, params: Value) -> (u16, Value) {
        let auth = format!("Bearer {token}");
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let a = self.request(
            "POST",
            "/mcp",
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ],
            &body.to_string(),
        );
        let message = if a.head.contains("text/event-stream") {
            a.body
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|m| m["id"] == id)
                .unwrap_or(Value::Null)
        } else {
            serde_json::from_str(&a.body).unwrap_or(Value::Null)
        };
        (a.status, message)
    }

    fn call(&self, token: &str, id: u64, name: &str, args: Value) -> Value {
        let params = json!({"name": name, "arguments": args});
        let (status, m) = self.rpc(token, id, "tools/call", params);
        assert_eq!(status, 200, "{m}");
        m
    }

    fn tools(&self, token: &str) -> Vec<String> {
        let (_, m) = self.rpc(token, 1, "tools/list", json!({}));
        m["result"]["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Team {
    fn client(port: u16) -> Client {
        Client { port }
    }

    fn start(home: &Path, servers: Value, extra: Value, idp: &Idp) -> Team {
        Team::start_with(home, servers, extra, idp, POLICY)
    }

    pub(crate) fn start_with(
        home: &Path,
        servers: Value,
        extra: Value,
        idp: &Idp,
        policy: &str,
    ) -> Team {
        user_config(home, servers);
        let port = free_port();
        let config = write_config_with(home, port, &idp.base, extra, policy);
        if let Ok(mut a) = idp.audience.lock() {
            *a = format!("http://127.0.0.1:{port}/mcp");
        }
        let mut cmd = Command::new(EDGAR);
        cmd.args(["mcp", "serve", "--http", &format!("127.0.0.1:{port}")])
            .arg("--gateway-config")
            .arg(&config);
        let mut child = in_home(&mut cmd, home)
            .env("EDGAR_STATE_DIR", home.join("state"))
            .env("TEST_INTROSPECTION_SECRET", INTROSPECTION_SECRET)
            .env("TEST_BROWSER_SECRET", BROWSER_SECRET)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let all = until_serving(&mut child, "the team gateway");
        Team {
            child,
            client: Client { port },
            resource: format!("http://127.0.0.1:{port}/mcp"),
            stderr: all,
        }
    }

    fn stop(mut self) -> Option<i32> {
        stop_on_sigterm(&mut self.child)
            .unwrap_or_else(|| panic!("the team gateway did not stop on SIGTERM"))
    }
}

/// SIGTERM, then: exited 0, and no process tagged `tag` (an upstream) outlived it.
pub(crate) fn finish(team: Team, tag: &str) {
    assert_eq!(team.stop(), Some(0));
    assert!(
        procs_with_tag(tag).is_empty(),
        "the upstream outlived the gateway"
    );
}

/// [`finish`] for a gateway the test's threads shared (they must all have ended).
fn finish_shared(team: Arc<Team>, tag: &str) {
    match Arc::try_unwrap(team) {
        Ok(team) => finish(team, tag),
        Err(_) => panic!("a worker still holds the gateway"),
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) struct Answer {
    pub(crate) status: u16,
    /// Lower-cased, to find a header by name and value.
    pub(crate) head: String,
    /// The `Mcp-Session-Id` header as sent (session ids are case-sensitive).
    pub(crate) session: Option<String>,
    pub(crate) body: String,
}

pub(crate) fn claims(idp: &Idp, resource: &str, sub: &str, groups: &[&str]) -> Value {
    json!({"iss": idp.base, "aud": resource, "sub": sub, "groups": groups, "scope": "mcp openid",
           "iat": now(), "exp": now() + 600})
}

pub(crate) fn text(m: &Value) -> String {
    m["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn fake_servers(t: &str) -> Value {
    json!({"f": {"command": FAKE, "args": ["good"], "env": {"EDGAR_TEST_TAG": t}}})
}

#[test]
fn tokens_are_refused_or_accepted_as_the_spec_says() {
    let (es, ed, rs) = (Key::es256(), Key::eddsa(), Key::rs256());
    let stranger = Key::es256();
    let idp = Idp::start(vec![es.jwk("es-1"), ed.jwk("ed-1"), rs.jwk("rs-1")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("tokens");
    let team = Team::start(home.path(), fake_servers(&t), json!({}), &idp);
    assert_eq!(idp.jwks_fetches(), 1, "the keys are fetched once, at start");
    let good = claims(&idp, &team.resource, "ada", &["eng"]);
    let with = |key: &str, value: Value| {
        let mut c = good.clone();
        c[key] = value;
        c
    };
    let without = |key: &str| {
        let mut c = good.clone();
        c.as_object_mut().map(|o| o.remove(key));
        c
    };

    // The protected resource metadata, at both well-known paths, unauthenticated.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let a = team.request("GET", path, &[], "");
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        let doc: Value = serde_json::from_str(&a.body).unwrap_or(Value::Null);
        assert_eq!(doc["resource"], team.resource.as_str());
        assert_eq!(doc["authorization_servers"], json!([idp.base]));
        assert_eq!(doc["scopes_supported"], json!(["mcp"]));
    }

    // No token: 401 with the challenge that says where to sign in, and no error code.
    let a = team.request(
        "POST",
        "/mcp",
        &[("content-type", "application/json")],
        "{}",
    );
    assert_eq!(a.status, 401);
    let metadata = format!(
        "www-authenticate: bearer resource_metadata=\"http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp\"",
        team.port
    );
    assert!(a.head.contains(&metadata), "{}", a.head);
    assert!(!a.head.contains("invalid_token"), "{}", a.head);

    // Accepted: each allowed algorithm, and a token without a kid when one key fits.
    for (name, token) in [
        ("ES256", es.token(Some("es-1"), &good)),
        ("EdDSA", ed.token(Some("ed-1"), &good)),
        ("RS256", rs.token(Some("rs-1"), &good)),
        (
            "skew within leeway",
            es.token(Some("es-1"), &with("exp", json!(now() - 30))),
        ),
        (
            "audience in a list",
            es.token(Some("es-1"), &with("aud", json!(["other", team.resource]))),
        ),
    ] {
        let (status, m) = team.rpc(&token, 1, "ping", json!({}));
        assert_eq!((status, &m["result"]), (200, &json!({})), "{name}: {m}");
    }

    // Refused with 401 invalid_token, each saying why.
    let header_only = |alg: &str| {
        let header = b64(json!({"alg": alg, "typ": "JWT", "kid": "es-1"})
            .to_string()
            .as_bytes());
        let body = b64(good.to_string().as_bytes());
        format!("{header}.{body}")
    };
    let none = format!("{}.", header_only("none"));
    // HS256 keyed with the public key the JWKS publishes: the classic forgery.
    let hs256 = {
        let message = header_only("HS256");
        let public = es.jwk("es-1").to_string();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, public.as_bytes());
        let tag = ring::hmac::sign(&key, message.as_bytes());
        format!("{message}.{}", b64(tag.as_ref()))
    };
    let tampered = {
        let t = es.token(Some("es-1"), &good);
        let mut parts: Vec<String> = t.split('.').map(str::to_owned).collect();
        parts[1] = b64(with("sub", json!("root")).to_string().as_bytes());
        parts.join(".")
    };
    for (name, token, says) in [
        (
            "wrong audience",
            es.token(
                Some("es-1"),
                &with("aud", json!("https://other.example/mcp")),
            ),
            "aud",
        ),
        (
            "wrong issuer",
            es.token(Some("es-1"), &with("iss", json!("https://evil.example"))),
            "iss",
        ),
        (
            "another key under a known kid",
            stranger.token(Some("es-1"), &good),
            "signature",
        ),
        (
            "expired",
            es.token(Some("es-1"), &with("exp", json!(now() - 3600))),
            "expired",
        ),
        (
            "not yet valid",
            es.token(Some("es-1"), &with("nbf", json!(now() + 3600))),
            "nbf",
        ),
        ("no exp", es.token(Some("es-1"), &without("exp")), "exp"),
        ("no sub", es.token(Some("es-1"), &without("sub")), "sub"),
        ("alg none", none, "JWT"),
        ("HS256 with the public key", hs256, "accepted"),
        ("a changed claim", tampered, "signature"),
        (
            "an ES256 header on the RSA key",
            {
                let t = rs.token(Some("rs-1"), &good);
                let rest = t
                    .split_once('.')
                    .map(|(_, r)| r.to_owned())
                    .unwrap_or_default();
                format!(
                    "{}.{rest}",
                    b64(json!({"alg": "ES256", "kid": "rs-1"})
                        .to_string()
                        .as_bytes())
                )
            },
            "ES256 key",
        ),
        ("not a JWT", "opaque-token-value".to_owned(), "JWT"),
    ] {
        let (status, m) = team.rpc(&token, 1, "ping", json!({}));
        assert_eq!(status, 401, "{name}: {m}");
        let a = team.request(
            "POST",
            "/mcp",
            &[
                ("authorization", &format!("Bearer {token}")),
                ("content-type", "application/json"),
            ],
            "{}",
        );
        assert!(
            a.head.contains("error=\"invalid_token\""),
            "{name}: {}",
            a.head
        );
        assert!(
            a.head.contains(says.to_ascii_lowercase().as_str()),
            "{name}: {}",
            a.head
        );
    }

    // A token without the required scope: 403 insufficient_scope naming it.
    let token = es.token(Some("es-1"), &with("scope", json!("openid")));
    let a = team.request(
        "POST",
        "/mcp",
        &[
            ("authorization", &format!("Bearer {token}")),
            ("content-type", "application/json"),
        ],
        "{}",
    );
    assert_eq!(a.status, 403, "{}", a.head);
    assert!(
        a.head
            .contains("error=\"insufficient_scope\", scope=\"mcp\""),
        "{}",
        a.head
    );

    // Key rotation: a new kid is fetched once; a made-up one does not fetch again.
    assert_eq!(idp.jwks_fetches(), 1);
    let next = Key::es256();
    idp.rotate(vec![next.jwk("es-2"), ed.jwk("ed-1")]);
    let (status, _) = team.rpc(&next.token(Some("es-2"), &good), 1, "ping", json!({}));
    assert_eq!(status, 200, "a rotated key is fetched and accepted");
    assert_eq!(idp.jwks_fetches(), 2);
    let (status, _) = team.rpc(&next.token(Some("es-3"), &good), 1, "ping", json!({}));
    assert_eq!(status, 401);
    let (status, _) = team.rpc(&next.token(Some("es-4"), &good), 1, "ping", json!({}));
    assert_eq!(status, 401);
    assert_eq!(
        idp.jwks_fetches(),
        2,
        "unknown key ids refetch at most once per interval"
    );
    // The retired key is gone from the set the gateway holds now.
    let (status, _) = team.rpc(&es.token(Some("es-1"), &good), 1, "ping", json!({}));
    assert_eq!(status, 401);

    // Health, readiness, and metrics (loopback only) counting the refusals.
    assert_eq!(team.request("GET", "/healthz", &[], "").status, 200);
    assert_eq!(team.request("GET", "/readyz", &[], "").status, 200);
    let m = team.request("GET", "/metrics", &[], "");
    assert_eq!(m.status, 200);
    assert!(
        m.body
            .contains("edgar_gateway_refusals_total{reason=\"invalid_token\"}"),
        "{}",
        m.body
    );
    assert!(
        m.body
            .contains("edgar_gateway_refusals_total{reason=\"insufficient_scope\"} 1"),
        "{}",
        m.body
    );

    // Every JWT starts `eyJ` (base64 of `{"`): none reached the log.
    let log = team.stderr.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(!log.contains("eyJ"), "a token reached the log: {log}");
    finish(team, &t);
}

#[test]
fn two_users_calling_at_once_each_see_and_call_only_what_the_policy_permits() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("users");
    let team = Arc::new(Team::start(
        home.path(),
        fake_servers(&t),
        json!({"rate_limits": {"per_user": {"per_minute": 6000, "burst": 1000}}}),
        &idp,
    ));
    let ada = key.token(Some("k"), &claims(&idp, &team.resource, "ada", &["eng"]));
    let bob = key.token(
        Some("k"),
        &claims(&idp, &team.resource, "bob", &["readers"]),
    );
    let eve = key.token(Some("k"), &claims(&idp, &team.resource, "eve", &[]));

    // Each user's search finds only what they may see, and only their list grows.
    let search = |token: &str, query: &str| {
        text(&team.call(token, 2, "tool_search", json!({"query": query})))
    };
    let found = search(&ada, "add two numbers");
    assert!(found.contains("f__add"), "{found}");
    let found = search(&bob, "add two numbers echo");
    assert!(
        !found.contains("f__add") && found.contains("f__echo"),
        "{found}"
    );
    let found = search(&eve, "echo");
    assert!(!found.contains("f__"), "{found}");
    assert!(team.tools(&ada).contains(&"f__add".to_owned()));
    assert_eq!(team.tools(&bob), ["tool_search", "call_tool", "f__echo"]);
    assert_eq!(team.tools(&eve), ["tool_search", "call_tool"]);

    // Interleaved and concurrent: each gets their own answers.
    let rounds = 12;
    let workers: Vec<_> = [("ada", ada.clone()), ("bob", bob.clone())]
        .into_iter()
        .map(|(who, token)| {
            let team = team.clone();
            std::thread::spawn(move || {
                for i in 0..rounds {
                    let id = 100 + i;
                    if who == "ada" {
                        let m = team.call(&token, id, "f__add", json!({"a": i, "b": 1}));
                        assert_eq!(text(&m), (i + 1).to_string(), "{m}");
                    } else {
                        let words = format!("bob says {i}");
                        let m = team.call(
                            &token,
                            id,
                            "call_tool",
                            json!({"name": "f__echo", "arguments": {"text": words}}),
                        );
                        assert_eq!(text(&m), words, "{m}");
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap_or_else(|_| panic!("a user's calls failed"));
    }

    // What the policy refuses: a tool bob may not see is not his to call, a forbid
    // wins over a permit and names itself, and nothing reaches the server.
    let m = team.call(&bob, 3, "f__add", json!({"a": 1, "b": 2}));
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert!(text(&m).contains("call tool_search first"), "{m}");
    search(&ada, "die crash");
    let m = team.call(&ada, 4, "f__die", json!({}));
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert!(text(&m).contains("\"never-die\""), "{m}");
    let m = team.call(&ada, 5, "f__add", json!({"a": 40, "b": 2}));
    assert_eq!(text(&m), "42", "the server did not die: {m}");

    // A URI that names no served server reaches none; a log level is the user's own
    // (never passed upstream), and must be one of MCP's.
    let (_, m) = team.rpc(
        &ada,
        6,
        "resources/read",
        json!({"uri": "file:///etc/passwd"}),
    );
    assert_eq!(m["error"]["code"], -32602, "{m}");
    let (_, m) = team.rpc(&ada, 7, "logging/setLevel", json!({"level": "debug"}));
    assert_eq!(m["result"], json!({}), "{m}");
    let (_, m) = team.rpc(&ada, 8, "logging/setLevel", json!({"level": "loud"}));
    assert_eq!(m["error"]["code"], -32602, "{m}");
    assert!(
        m["error"]["message"]
            .as_str()
            .is_some_and(|t| t.contains("'loud' is not a log level")),
        "{m}"
    );

    // The audit trail names the right user for every call, and the denial.
    let trail = std::fs::read_to_string(home.path().join("state/audit.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<Value> = trail
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let calls = |user: &str, name: &str| {
        lines
            .iter()
            .filter(|l| l["event"] == "call" && l["user"] == user && l["name"] == name)
            .count()
    };
    assert_eq!(calls("ada", "f__add"), rounds as usize + 1, "{trail}");
    assert_eq!(calls("bob", "f__echo"), rounds as usize, "{trail}");
    assert_eq!(
        calls("bob", "f__add") + calls("ada", "f__echo"),
        0,
        "{trail}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l["event"] != "call" || l["user"].is_string()),
        "a call without its user: {trail}"
    );
    // The server's discovery (its tools pinned), caused by ada's first search, names
    // her too: the user is carried into the discovery task.
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "pinned" && l["user"] == "ada"),
        "{trail}"
    );
    let denied: Vec<&Value> = lines.iter().filter(|l| l["event"] == "denied").collect();
    assert_eq!(denied.len(), 1, "{trail}");
    assert_eq!(denied[0]["user"], "ada");
    assert_eq!(denied[0]["name"], "f__die");
    let mut verify = Command::new(EDGAR);
    let verify = in_home(verify.args(["audit", "verify"]), home.path())
        .env("EDGAR_STATE_DIR", home.path().join("state"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );

    let m = team.request("GET", "/metrics", &[], "");
    for line in [
        format!(
            "edgar_gateway_tool_calls_total{{server=\"f\",tool=\"add\",outcome=\"ok\"}} {}",
            rounds + 1
        ),
        format!(
            "edgar_gateway_tool_calls_total{{server=\"f\",tool=\"echo\",outcome=\"ok\"}} {rounds}"
        ),
        "edgar_gateway_tool_calls_total{server=\"f\",tool=\"die\",outcome=\"denied\"} 1".to_owned(),
    ] {
        assert!(m.body.contains(&line), "{line} not in {}", m.body);
    }
    finish_shared(team, &t);
}

#[test]
fn a_rate_limit_answers_with_when_to_retry() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let team = Team::start(
        home.path(),
        fake_servers(&tag("limits")),
        json!({"rate_limits": {"per_user": {"per_minute": 2, "burst": 2}}}),
        &idp,
    );
    let ada = key.token(Some("k"), &claims(&idp, &team.resource, "ada", &["eng"]));
    let bob = key.token(Some("k"), &claims(&idp, &team.resource, "bob", &["eng"]));
    for token in [&ada, &bob] {
        team.call(token, 1, "tool_search", json!({"query": "echo"}));
    }
    for i in 0..2 {
        let m = team.call(&ada, 10 + i, "f__echo", json!({"text": "hi"}));
        assert_eq!(text(&m), "hi", "{m}");
    }
    let m = team.call(&ada, 20, "f__echo", json!({"text": "hi"}));
    assert_eq!(m["error"]["code"], -32029, "{m}");
    let message = m["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("your calls per minute") && message.contains("retry after"),
        "{m}"
    );
    // Another user's budget is their own.
    let m = team.call(&bob, 21, "f__echo", json!({"text": "hi"}));
    assert_eq!(text(&m), "hi", "{m}");
}

#[test]
fn the_python_sdk_client_works_through_it_with_a_bearer_token() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("python");
    let python = installed("py/bin/python").display().to_string();
    let server = fixture("python_server.py").display().to_string();
    let team = Team::start(
        home.path(),
        json!({"py": {"command": python, "args": [server], "env": {"EDGAR_TEST_TAG": t}}}),
        json!({}),
        &idp,
    );
    // What a user's searches found stays theirs across connections: each era's run is
    // another engineer, so each starts with the two built-ins.
    for (mode, version, user) in [
        ("auto", "2026-07-28", "ada"),
        ("legacy", "2025-11-25", "ann"),
    ] {
        let token = key.token(Some("k"), &claims(&idp, &team.resource, user, &["eng"]));
        let mut cmd = Command::new(&python);
        cmd.arg(fixture("python_client.py"))
            .args([mode, &team.resource]);
        let out = in_home(&mut cmd, home.path())
            .env("EDGAR_SERVE_TOKEN", &token)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{mode}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let seen: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        crate::gateway::check_python_client(&seen, mode, version);
    }
    // A user the policy gives nothing sees nothing through the same client.
    let eve = key.token(Some("k"), &claims(&idp, &team.resource, "eve", &[]));
    let found = text(&team.call(&eve, 1, "tool_search", json!({"query": "add"})));
    assert!(!found.contains("py__add"), "{found}");
    finish(team, &t);
}

#[test]
fn a_gateway_that_cannot_be_safe_does_not_start_and_says_why() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    user_config(home.path(), fake_servers(&tag("refuse")));
    let config = write_config(home.path(), 9, &idp.base, json!({}));
    let config = config.display().to_string();
    let serve = |args: &[&str]| {
        let mut all = vec!["mcp", "serve"];
        all.extend_from_slice(args);
        edgar_tests::run(EDGAR, home.path(), &all, b"")
    };
    // Beyond loopback with neither TLS nor a proxy in front.
    let r = serve(&["--http", "0.0.0.0:0", "--gateway-config", &config]);
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("\"tls\"") && r.stderr.contains("behind_proxy"),
        "{}",
        r.stderr
    );
    // A policy with a typo: where it is.
    std::fs::write(
        home.path().join("team.cedar"),
        "permit(principal, action, resource)\n  when { principal.grups.contains(\"eng\") };\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let r = serve(&["--http", "127.0.0.1:0", "--gateway-config", &config]);
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("team.cedar") && r.stderr.contains("2:"),
        "{}",
        r.stderr
    );
    // An identity provider that is not there.
    std::fs::write(home.path().join("team.cedar"), POLICY).unwrap_or_else(|e| panic!("{e}"));
    let gone = write_config(home.path(), 9, "http://127.0.0.1:1", json!({}));
    let r = serve(&[
        "--http",
        "127.0.0.1:0",
        "--gateway-config",
        &gone.display().to_string(),
    ]);
    assert_ne!(r.code, Some(0));
    assert!(r.stderr.contains("keys"), "{}", r.stderr);
    // A misspelt setting.
    std::fs::write(
        home.path().join("bad.json"),
        json!({"resource": "http://127.0.0.1:9/mcp",
        "issuer": idp.base, "policy": "team.cedar", "requierd_scopes": ["mcp"]})
        .to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let bad = home.path().join("bad.json").display().to_string();
    let r = serve(&["--http", "127.0.0.1:0", "--gateway-config", &bad]);
    assert_ne!(r.code, Some(0));
    assert!(r.stderr.contains("requierd_scopes"), "{}", r.stderr);
    // Users who sign in to an upstream themselves, and no way to tell who is at the
    // browser of a sign-in: a forwarded link would link another's account.
    user_config(
        home.path(),
        json!({"acct": {"url": "https://acct.example/mcp", "oauth": {"grant": "user_sign_in"}}}),
    );
    let r = serve(&["--http", "127.0.0.1:0", "--gateway-config", &config]);
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("'acct'") && r.stderr.contains("\"browser_client\""),
        "{}",
        r.stderr
    );
}

#[test]
fn sigterm_lets_a_call_in_flight_finish_then_exits() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("drain");
    let team = Team::start(home.path(), fake_servers(&t), json!({}), &idp);
    let ada = key.token(Some("k"), &claims(&idp, &team.resource, "ada", &["eng"]));
    team.call(&ada, 1, "tool_search", json!({"query": "echo"}));
    let (port, token) = (team.port, ada.clone());
    let slow = std::thread::spawn(move || {
        let probe = Team::client(port);
        probe.call(
            &token,
            2,
            "f__echo",
            json!({"text": "finished", "sleep_ms": 1500}),
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let pid = team.child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    std::thread::sleep(Duration::from_millis(200));
    // No new connection is taken once it is stopping.
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", team.port)).is_err(),
        "still accepting after SIGTERM"
    );
    let m = slow
        .join()
        .unwrap_or_else(|_| panic!("the slow call failed"));
    assert_eq!(text(&m), "finished", "{m}");
    finish(team, &t);
}

/// A client that goes away in the middle of a call cuts it: the trail still has the
/// call's line, `"error": "cancelled"`, and names the user it ran for (the line is
/// written as the call's future is dropped, inside the user's scope).
#[test]
fn a_call_cut_when_its_client_goes_away_is_in_the_trail_with_its_user() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("cut");
    let called = home.path().join("called");
    let servers = json!({"f": {"command": FAKE, "args": ["good"],
                               "env": {"EDGAR_TEST_TAG": t,
                                       "FAKE_CALLED": called.display().to_string()}}});
    let team = Team::start(home.path(), servers, json!({}), &idp);
    let ada = key.token(Some("k"), &claims(&idp, &team.resource, "ada", &["eng"]));
    team.call(&ada, 1, "tool_search", json!({"query": "echo"}));
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "f__echo",
                                 "arguments": {"text": "never", "sleep_ms": 20000}}})
    .to_string();
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", team.port)).unwrap_or_else(|e| panic!("{e}"));
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nauthorization: Bearer {ada}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        team.port,
        body.len()
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Gone once the server is inside the call.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while !called.exists() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !called.exists() {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut got = String::new();
        let _ = stream.read_to_string(&mut got);
        panic!("the call never reached the server: {got}");
    }
    drop(stream);
    let trail_path = home.path().join("state/audit.jsonl");
    let cut = || {
        std::fs::read_to_string(&trail_path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["event"] == "call" && l["name"] == "f__echo")
    };
    let until = std::time::Instant::now() + Duration::from_secs(15);
    while cut().is_none() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let line = cut().unwrap_or_else(|| {
        panic!(
            "no line for the cut call: {}",
            std::fs::read_to_string(&trail_path).unwrap_or_default()
        )
    });
    assert_eq!(line["error"], "cancelled", "{line}");
    assert_eq!(line["user"], "ada", "{line}");
    assert_eq!(line["server"], "f", "{line}");
    finish(team, &t);
}

#[test]
fn an_opaque_token_is_introspected_and_believed_only_as_the_answer_says() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let introspection = json!({"introspection": {
        "endpoint": format!("{}/introspect", idp.base),
        "client_id": "gw",
        "client_secret_env": "TEST_INTROSPECTION_SECRET",
    }});
    let team = Team::start(
        home.path(),
        fake_servers(&tag("opaque")),
        introspection,
        &idp,
    );
    let (status, m) = team.rpc(
        "opaque-ada",
        1,
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "add"}}),
    );
    assert_eq!(status, 200, "{m}");
    assert!(
        text(&m).contains("f__add"),
        "ada's groups came from the answer: {m}"
    );
    // A JWT still goes the JWT way.
    let jwt = key.token(Some("k"), &claims(&idp, &team.resource, "bob", &["eng"]));
    assert_eq!(team.rpc(&jwt, 2, "ping", json!({})).0, 200);
    for (token, says) in [
        ("opaque-revoked", "not active"),
        ("opaque-other-audience", "aud"),
    ] {
        let a = team.request(
            "POST",
            "/mcp",
            &[
                ("authorization", &format!("Bearer {token}")),
                ("content-type", "application/json"),
            ],
            "{}",
        );
        assert_eq!(a.status, 401, "{token}");
        assert!(
            a.head.contains("invalid_token") && a.head.contains(says),
            "{token}: {}",
            a.head
        );
    }
    let asked = idp
        .http
        .requests
        .lock()
        .map(|r| r.iter().filter(|q| q.path == "/introspect").count())
        .unwrap_or(0);
    // The accepted token was asked about once: then believed for a while; a refused
    // one is refused for a while without asking again.
    team.rpc("opaque-ada", 3, "ping", json!({}));
    for _ in 0..3 {
        assert_eq!(team.rpc("opaque-revoked", 4, "ping", json!({})).0, 401);
    }
    let again = idp
        .http
        .requests
        .lock()
        .map(|r| r.iter().filter(|q| q.path == "/introspect").count())
        .unwrap_or(0);
    assert_eq!((asked, again), (3, 3));
}

/// The recording upstream of the token exchange tests: it answers only a token the
/// exchange issued (`up-token-for-<user>`), and says whose (`hello <user>`). Its
/// runtime must live as long as it.
pub(crate) fn exchanged_token_upstream() -> (tokio::runtime::Runtime, FakeHttp) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let upstream = rt.block_on(FakeHttp::start(|req| {
        let token = req.header("authorization").unwrap_or_default();
        if !token.starts_with("Bearer up-token-for-") {
            return Resp::Status(401, vec![("www-authenticate", "Bearer".to_owned())]);
        }
        if req.rpc() == "tools/call" {
            let who = token.trim_start_matches("Bearer up-token-for-");
            return Resp::Json(
                200,
                vec![],
                json!({"jsonrpc": "2.0", "id": req.id(),
                "result": {"content": [{"type": "text", "text": format!("hello {who}")}]}}),
            );
        }
        crate::mcp_http_faults::good(req).unwrap_or(Resp::Status(400, vec![]))
    }));
    (rt, upstream)
}

/// The server `up` at `url`, reached with each user's token exchanged at `idp`.
pub(crate) fn exchanged_token_servers(idp: &Idp, url: &str) -> Value {
    json!({"up": {"url": url, "oauth": {
        "grant": "token_exchange", "token_endpoint": format!("{}/token", idp.base),
        "issuer": idp.base, "client_id": "gw-up", "client_secret": "up-secret",
        "audience": "upstream"}}})
}

#[test]
fn each_user_reaches_a_per_user_upstream_with_their_own_exchanged_token_never_the_inbound_one() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let (_rt, upstream) = exchanged_token_upstream();
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let servers = exchanged_token_servers(&idp, &upstream.url);
    let team = Arc::new(Team::start(home.path(), servers, json!({}), &idp));
    let ada = key.token(Some("k"), &claims(&idp, &team.resource, "ada", &["eng"]));
    let bob = key.token(
        Some("k"),
        &claims(&idp, &team.resource, "bob", &["readers"]),
    );
    let found = text(&team.call(&ada, 1, "tool_search", json!({"query": "echo"})));
    assert!(found.contains("up__echo"), "{found}");
    text(&team.call(&bob, 1, "tool_search", json!({"query": "echo"})));
    let workers: Vec<_> = [("ada", ada.clone()), ("bob", bob.clone())]
        .into_iter()
        .map(|(who, token)| {
            let team = team.clone();
            std::thread::spawn(move || {
                for i in 0..8 {
                    let m = team.call(&token, 10 + i, "up__echo", json!({"text": who}));
                    assert_eq!(text(&m), format!("hello {who}"), "{who}: {m}");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap_or_else(|_| panic!("a user's calls failed"));
    }
    let seen = upstream
        .requests
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    let calls: Vec<_> = seen.iter().filter(|q| q.rpc() == "tools/call").collect();
    assert_eq!(calls.len(), 16);
    for q in &calls {
        let who = q.body["params"]["arguments"]["text"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            q.header("authorization"),
            Some(format!("Bearer up-token-for-{who}").as_str()),
            "a call carried another user's token"
        );
    }
    assert!(
        seen.iter()
            .all(|q| !q.headers.iter().any(|(_, v)| v.contains("eyJ"))),
        "an inbound token reached the upstream"
    );
    // One exchange per user, kept until it expires.
    let exchanges = idp
        .http
        .requests
        .lock()
        .map(|r| r.iter().filter(|q| q.path == "/token").count())
        .unwrap_or(0);
    assert_eq!(exchanges, 2);
    // Outside any user's request (the CLI), the server gets no token at all.
    let mut list = Command::new(EDGAR);
    let out = in_home(list.args(["mcp", "call", "up__echo", "{}"]), home.path())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    let mut list = Command::new(EDGAR);
    let out = in_home(list.args(["mcp", "list"]), home.path())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("per user"), "{listed}");
    let seen = upstream
        .requests
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    assert!(
        seen.iter()
            .filter_map(|q| q.header("authorization"))
            .all(|a| a.starts_with("Bearer up-token-for-")),
        "a request carried a token the exchange did not issue"
    );
    match Arc::try_unwrap(team) {
        Ok(team) => assert_eq!(team.stop(), Some(0)),
        Err(_) => panic!("a worker still holds the gateway"),
    }
}

#[test]
fn a_per_user_server_runs_once_for_each_user_and_one_users_crash_is_theirs_alone() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("per-user");
    let servers = json!({"f": {"command": FAKE, "args": ["good"], "per_user": true,
                               "env": {"EDGAR_TEST_TAG": t}}});
    let everything = "permit(principal, action, resource);";
    let team = Team::start_with(home.path(), servers, json!({}), &idp, everything);
    let ada = key.token(Some("k"), &claims(&idp, &team.resource, "ada", &["eng"]));
    let bob = key.token(Some("k"), &claims(&idp, &team.resource, "bob", &["eng"]));
    for token in [&ada, &bob] {
        let found = text(&team.call(token, 1, "tool_search", json!({"query": "echo die"})));
        assert!(
            found.contains("f__echo") && found.contains("f__die"),
            "{found}"
        );
    }
    // The search discovered the server once (one process); each user's first call
    // starts their own.
    let discovered = procs_with_tag(&t).len();
    assert_eq!(discovered, 1);
    assert_eq!(
        text(&team.call(&ada, 2, "f__echo", json!({"text": "a"}))),
        "a"
    );
    assert_eq!(
        text(&team.call(&bob, 2, "f__echo", json!({"text": "b"}))),
        "b"
    );
    assert_eq!(
        text(&team.call(&ada, 3, "f__echo", json!({"text": "a2"}))),
        "a2"
    );
    assert_eq!(procs_with_tag(&t).len(), discovered + 2);
    // Ada's process dies in her call; Bob's goes on.
    let m = team.call(&ada, 4, "f__die", json!({}));
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert_eq!(
        text(&team.call(&bob, 5, "f__echo", json!({"text": "still here"}))),
        "still here"
    );
    assert_eq!(procs_with_tag(&t).len(), discovered + 1);
    finish(team, &t);
}

#[test]
fn a_team_user_learns_no_server_names_or_failures_the_policy_does_not_show() {
    let key = Key::es256();
    let idp = Idp::start(vec![key.jwk("k")]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let t = tag("names");
    let servers = json!({
        "f": {"command": FAKE, "args": ["good"], "env": {"EDGAR_TEST_TAG": t}},
        "hr-payroll": {"command": "/nonexistent/payroll-secret-path"},
    });
    let team = Team::start(home.path(), servers, json!({}), &idp);
    let ada = key.token(Some("k"), &claims(&idp, &team.resource, "ada", &["eng"]));
    let (_, m) = team.rpc(
        &ada,
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let instructions = m["result"]["instructions"].as_str().unwrap_or_default();
    assert!(instructions.contains("tool_search"), "{m}");
    assert!(!instructions.contains("hr-payroll"), "{instructions}");
    let found = text(&team.call(&ada, 2, "tool_search", json!({"query": "echo"})));
    assert!(found.contains("f__echo"), "{found}");
    assert!(
        found.contains("1 of the gateway's servers could not be searched"),
        "{found}"
    );
    assert!(
        !found.contains("hr-payroll") && !found.contains("payroll-secret-path"),
        "{found}"
    );
    // The administrator reads which and why in the gateway's log, once.
    team.call(&ada, 3, "tool_search", json!({"query": "echo again"}));
    let log = team.stderr.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(log.matches("payroll-secret-path").count(), 1, "{log}");
    finish(team, &t);
}
