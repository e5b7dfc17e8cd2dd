//! MCP server sign-in against an authorization server of our own on loopback (the
//! conformance suite's never issues refresh tokens): login through the real listener,
//! bearer tokens on calls, refresh on a 401 and before expiry, rotation saved, a
//! rejected refresh erasing the sign-in, a network failure erasing nothing, and the
//! CLI never printing a token.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use edgar_host::auth::mcp::{Browser, McpAuth, store_key};
use edgar_host::auth::store::Store;
use edgar_host::config::{Config, ServerSpec};
use edgar_host::mcp::McpError;
use edgar_host::mcp::client::{Session, SessionOptions};
use edgar_tests::run;
use serde_json::{Value, json};

use crate::mcp_http_faults::{FakeHttp, Req, Resp, good};

/// The S256 PKCE challenge (RFC 7636 §4.2), computed here rather than by edgar.
pub fn challenge(verifier: &str) -> String {
    use base64::Engine as _;
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

#[test]
fn the_challenge_is_rfc7636_appendix_b() {
    assert_eq!(
        challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    );
}

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");

/// What the authorization server and the protected MCP server share.
#[derive(Default)]
struct World {
    base: OnceLock<String>,
    counter: u32,
    access: HashSet<String>,
    refresh: HashSet<String>,
    challenges: HashMap<String, String>,
    expires_in: u64,
    token_down: bool,
    /// (grant_type, resource) of each token request.
    token_requests: Vec<(String, String)>,
    /// The bearer token of each MCP request (`None` if it had none).
    bearers: Vec<Option<String>>,
    refusals: usize,
    /// Scope asked for at each authorization request.
    asked: Vec<Option<String>>,
    /// Scope granted with each code and each access token.
    code_scope: HashMap<String, String>,
    token_scope: HashMap<String, String>,
    /// `tools/call` needs `files:write`.
    need_write: bool,
    /// (token_type_hint) of each RFC 7009 revocation.
    revoked: Vec<String>,
    /// The issuer the redirect names (RFC 9207), if any.
    redirect_iss: Option<String>,
    /// Answer the authorization request with this `error_description` instead of a code.
    redirect_error: Option<String>,
}

type Shared = Arc<Mutex<World>>;

fn lock(w: &Shared) -> std::sync::MutexGuard<'_, World> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

fn issue(w: &mut World, scope: &str) -> Value {
    w.counter += 1;
    let (a, r) = (
        format!("secret-access-{}", w.counter),
        format!("secret-refresh-{}", w.counter),
    );
    w.access.insert(a.clone());
    w.refresh.insert(r.clone());
    w.token_scope.insert(a.clone(), scope.to_owned());
    w.token_scope.insert(r.clone(), scope.to_owned());
    json!({"access_token": a, "refresh_token": r, "token_type": "Bearer",
        "expires_in": w.expires_in, "scope": scope})
}

fn handle(world: &Shared, req: &Req) -> Resp {
    let base = lock(world).base.get().cloned().unwrap_or_default();
    let path = req.path.split('?').next().unwrap_or("");
    let bad = |e: &str| Resp::Json(400, vec![], json!({"error": e}));
    match (req.method.as_str(), path) {
        ("GET", "/.well-known/oauth-protected-resource/mcp") => Resp::Json(
            200,
            vec![],
            json!({"resource": format!("{base}/mcp"), "authorization_servers": [base],
                "scopes_supported": ["files:read"]}),
        ),
        ("GET", "/.well-known/oauth-authorization-server") => Resp::Json(
            200,
            vec![],
            json!({"issuer": base, "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"), "registration_endpoint": format!("{base}/register"),
                "revocation_endpoint": format!("{base}/revoke"),
                "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"]}),
        ),
        ("POST", "/revoke") => {
            let mut w = lock(world);
            let token = req.param("token").unwrap_or_default();
            if req.param("client_id").as_deref() != Some("edgar-test-client") {
                return bad("invalid_client");
            }
            w.access.remove(&token);
            w.refresh.remove(&token);
            w.revoked
                .push(req.param("token_type_hint").unwrap_or_default());
            Resp::Status(200, vec![])
        }
        ("POST", "/register") => Resp::Json(
            201,
            vec![],
            json!({"client_id": "edgar-test-client", "token_endpoint_auth_method": "none"}),
        ),
        ("GET", "/authorize") => {
            let (Some(redirect), Some(state), Some(ch)) = (
                req.param("redirect_uri"),
                req.param("state"),
                req.param("code_challenge"),
            ) else {
                return bad("invalid_request");
            };
            let mut w = lock(world);
            w.counter += 1;
            let code = format!("code-{}", w.counter);
            w.challenges.insert(code.clone(), ch);
            let scope = req.param("scope");
            w.asked.push(scope.clone());
            w.code_scope
                .insert(code.clone(), scope.unwrap_or_else(|| "files:read".into()));
            let iss = w
                .redirect_iss
                .as_ref()
                .map(|i| format!("&iss={}", i.replace(':', "%3A").replace('/', "%2F")))
                .unwrap_or_default();
            let answer = match &w.redirect_error {
                Some(d) => format!("error=access_denied&error_description={d}"),
                None => format!("code={code}"),
            };
            Resp::Status(
                302,
                vec![(
                    "location",
                    format!("{redirect}?{answer}&state={state}{iss}"),
                )],
            )
        }
        ("POST", "/token") => {
            let mut w = lock(world);
            let grant = req.param("grant_type").unwrap_or_default();
            w.token_requests
                .push((grant.clone(), req.param("resource").unwrap_or_default()));
            if w.token_down {
                return Resp::Status(503, vec![]);
            }
            match grant.as_str() {
                "authorization_code" => {
                    let code = req.param("code").unwrap_or_default();
                    let verifier = req.param("code_verifier").unwrap_or_default();
                    let scope = w.code_scope.get(&code).cloned().unwrap_or_default();
                    match w.challenges.remove(&code) {
                        Some(ch) if ch == challenge(&verifier) => {
                            Resp::Json(200, vec![], issue(&mut w, &scope))
                        }
                        _ => bad("invalid_grant"),
                    }
                }
                "refresh_token" => {
                    let token = req.param("refresh_token").unwrap_or_default();
                    // Rotation: a refresh token works once.
                    if w.refresh.remove(&token) {
                        let scope = w.token_scope.get(&token).cloned().unwrap_or_default();
                        Resp::Json(200, vec![], issue(&mut w, &scope))
                    } else {
                        bad("invalid_grant")
                    }
                }
                _ => bad("unsupported_grant_type"),
            }
        }
        ("POST", "/mcp") => {
            let mut w = lock(world);
            let bearer = req
                .header("authorization")
                .and_then(|h| h.strip_prefix("Bearer "))
                .map(str::to_owned);
            w.bearers.push(bearer.clone());
            if !bearer.as_ref().is_some_and(|b| w.access.contains(b)) {
                w.refusals += 1;
                return Resp::Status(
                    401,
                    vec![(
                        "www-authenticate",
                        format!(
                            r#"Bearer error="invalid_token", resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
                        ),
                    )],
                );
            }
            let scope = bearer
                .and_then(|b| w.token_scope.get(&b).cloned())
                .unwrap_or_default();
            if w.need_write && req.rpc() == "tools/call" && !scope.contains("files:write") {
                return Resp::Status(
                    403,
                    vec![(
                        "www-authenticate",
                        r#"Bearer error="insufficient_scope", scope="files:read files:write""#
                            .into(),
                    )],
                );
            }
            drop(w);
            good(req).unwrap_or(Resp::Accepted)
        }
        _ => good(req).unwrap_or(Resp::Status(404, vec![])),
    }
}

async fn protected(expires_in: u64) -> (FakeHttp, Shared) {
    let world: Shared = Arc::new(Mutex::new(World {
        expires_in,
        ..World::default()
    }));
    let w = world.clone();
    let server = FakeHttp::start(move |req| handle(&w, req)).await;
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let _ = lock(&world).base.set(base);
    (server, world)
}

/// `edgar mcp login` through the headless browser, into `store`.
async fn login(spec: &ServerSpec, store: &Store) -> edgar_host::auth::mcp::token::Credentials {
    McpAuth::new(spec, store.clone(), Some(Browser::Fetch))
        .unwrap_or_else(|e| panic!("{e}"))
        .login()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn session(spec: &ServerSpec, store: &Store) -> Session {
    let config = Config {
        servers: vec![spec.clone()],
        ..Config::default()
    };
    let mut opts = SessionOptions::new(std::env::temp_dir(), None);
    opts.credentials = Some(store.clone());
    Session::new(&config, opts)
}

async fn stored_refresh(store: &Store, spec: &ServerSpec) -> Option<String> {
    let secret = store.read(&store_key(spec)).await.ok().flatten()?;
    let v: Value = serde_json::from_str(secret.expose()).ok()?;
    v["refresh_token"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_refresh_rotation_and_rejection() {
    let (server, world) = protected(3600).await;
    let spec = ServerSpec::http("prot", &server.url);
    let store = Store::memory();

    let creds = login(&spec, &store).await;
    assert_eq!(creds.scope.as_deref(), Some("files:read"));
    assert_eq!(
        stored_refresh(&store, &spec).await.as_deref(),
        Some("secret-refresh-2")
    );

    // The login's probe was the one unauthenticated request.
    assert_eq!(lock(&world).refusals, 1);
    let s = session(&spec, &store);
    let call = || s.call("prot__echo", json!({"text": "x"}));
    call().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lock(&world).refusals, 1);

    // The access token expires on the server: one 401, one refresh, the call succeeds,
    // and the rotated refresh token is what is stored now.
    lock(&world).access.clear();
    call().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lock(&world).refusals, 2);
    assert_eq!(
        stored_refresh(&store, &spec).await.as_deref(),
        Some("secret-refresh-3")
    );

    // The token endpoint is down: the call fails, but nothing is erased.
    lock(&world).access.clear();
    lock(&world).token_down = true;
    let e = call().await.err();
    assert!(matches!(e, Some(McpError::NeedsLogin { .. })), "{e:?}");
    assert_eq!(
        stored_refresh(&store, &spec).await.as_deref(),
        Some("secret-refresh-3")
    );

    // The refresh token is rejected: the sign-in is erased and the error says what to run.
    lock(&world).token_down = false;
    lock(&world).refresh.clear();
    let e = call()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("run `edgar mcp login prot`"), "{e}");
    assert!(
        store.read(&store_key(&spec)).await.ok().flatten().is_none(),
        "{:?}",
        lock(&world).token_requests
    );

    // `resource` went out identically on every token request.
    {
        let w = lock(&world);
        let grants: Vec<&str> = w.token_requests.iter().map(|(g, _)| g.as_str()).collect();
        assert_eq!(
            grants,
            [
                "authorization_code",
                "refresh_token",
                "refresh_token",
                "refresh_token"
            ]
        );
        assert!(
            w.token_requests.iter().all(|(_, r)| *r == server.url),
            "{:?}",
            w.token_requests
        );
    }
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_client_secret_goes_only_to_its_issuer() {
    let (server, world) = protected(3600).await;
    let base = lock(&world).base.get().cloned().unwrap_or_default();
    let mut spec = ServerSpec::http("prot", &server.url);
    spec.oauth.client_id = Some("mine".into());
    spec.oauth.client_secret = Some("pre-registered-secret".into());
    // Issued by another authorization server than the one the MCP server now names.
    spec.oauth.issuer = Some("https://as.example.com".into());
    let store = Store::memory();
    let e = McpAuth::new(&spec, store.clone(), Some(Browser::Fetch))
        .unwrap_or_else(|e| panic!("{e}"))
        .login()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("sends its credentials to no other"), "{e}");
    assert!(!e.contains("pre-registered-secret"), "{e}");
    assert!(lock(&world).token_requests.is_empty());

    // Its own issuer (a trailing slash is forgiven) gets it.
    spec.oauth.issuer = Some(format!("{base}/"));
    let creds = login(&spec, &store).await;
    assert_eq!(creds.scope.as_deref(), Some("files:read"));
    assert_eq!(lock(&world).token_requests.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_about_to_expire_is_refreshed_before_use() {
    let (server, world) = protected(3600).await;
    let spec = ServerSpec::http("prot", &server.url);
    let store = Store::memory();
    login(&spec, &store).await;
    make_expiring(&store, &store_key(&spec)).await;
    let s = session(&spec, &store);
    s.call("prot__echo", json!({"text": "x"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    {
        let w = lock(&world);
        // Only the login's probe went without a token.
        assert_eq!(w.refusals, 1);
        // Every MCP request carried the refreshed token, none the one about to expire.
        assert!(
            w.bearers
                .iter()
                .all(|b| b.as_deref() != Some("secret-access-2")),
            "{:?}",
            w.bearers
        );
        // Refreshed once: the new token is good for an hour.
        assert!(
            w.bearers
                .iter()
                .all(|b| b.is_none() || b.as_deref() == Some("secret-access-3")),
            "{:?}",
            w.bearers
        );
        assert!(
            w.bearers
                .iter()
                .any(|b| b.as_deref() == Some("secret-access-3"))
        );
    }
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_lived_token_is_refreshed_in_its_second_half_not_on_every_request() {
    let (server, world) = protected(30).await;
    let spec = ServerSpec::http("prot", &server.url);
    let store = Store::memory();
    login(&spec, &store).await;
    let s = session(&spec, &store);
    for _ in 0..3 {
        s.call("prot__echo", json!({"text": "x"}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    s.close().await;
    // Fifteen seconds of its thirty left: the login's token serves every request.
    let w = lock(&world);
    assert!(
        w.bearers
            .iter()
            .all(|b| b.is_none() || b.as_deref() == Some("secret-access-2")),
        "{:?}",
        w.bearers
    );
}

/// A stored sign-in, as JSON.
pub async fn stored(store: &Store, key: &str) -> Value {
    store
        .read(key)
        .await
        .ok()
        .flatten()
        .and_then(|s| serde_json::from_str(s.expose()).ok())
        .unwrap_or_else(|| panic!("nothing stored"))
}

/// Rewrites a stored sign-in as issued an hour ago and expiring in ten seconds.
pub async fn make_expiring(store: &Store, key: &str) {
    let mut stored = stored(store, key).await;
    let now = stored["obtained_at"].as_u64().unwrap_or_default();
    stored["expires_at"] = json!(now + 10);
    stored["obtained_at"] = json!(now - 3590);
    store
        .write(key, &edgar_host::auth::Secret::new(stored.to_string()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_sign_in_the_server_needs_login() {
    let (server, _world) = protected(3600).await;
    let spec = ServerSpec::http("prot", &server.url);
    let s = session(&spec, &Store::memory());
    let e = s.tools("prot").await.err();
    match e {
        Some(McpError::NeedsLogin { challenge, .. }) => {
            assert!(challenge.and_then(|c| c.resource_metadata).is_some());
        }
        other => panic!("{other:?}"),
    }
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_signs_in_and_out_without_printing_tokens() {
    let (server, world) = protected(3600).await;
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = home.path().join("config/edgar");
    std::fs::create_dir_all(&config).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        config.join("mcp.json"),
        json!({"mcpServers": {"prot": {"type": "http", "url": server.url}}}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        config.join("config.json"),
        r#"{"credential_store": "file"}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let home = home.path().to_owned();
    let runs = tokio::task::spawn_blocking(move || {
        // Debug logs on, so a token in any log line would show up in stderr too.
        let edgar = |args: &[&str]| {
            let mut a = vec!["EDGAR_LOG=debug", EDGAR];
            a.extend_from_slice(args);
            run("env", &home, &a, b"")
        };
        let before = edgar(&["mcp", "call", "prot__echo", r#"{"text":"x"}"#]);
        let login = edgar(&["mcp", "login", "prot", "--browser-fetch"]);
        let list = edgar(&["mcp", "list"]);
        let call = edgar(&["mcp", "call", "prot__echo", r#"{"text":"x"}"#]);
        let logout = edgar(&["mcp", "logout", "prot"]);
        let after = edgar(&["mcp", "list", "--json"]);
        vec![before, login, list, call, logout, after]
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let [before, login, list, call, logout, after] = &runs[..] else {
        panic!("six runs");
    };
    assert!(
        before.stderr.contains("run `edgar mcp login prot`"),
        "{}",
        before.stderr
    );
    assert_eq!(login.code, Some(0), "{}", login.stderr);
    assert!(
        login
            .stdout
            .contains("signed in to prot (scope: files:read), expires in"),
        "{}",
        login.stdout
    );
    assert!(
        list.stdout.contains("signed in, expires in"),
        "{}",
        list.stdout
    );
    assert_eq!(call.code, Some(0), "{}", call.stderr);
    assert_eq!(call.stdout.trim(), "fine");
    assert!(
        logout.stdout.contains("signed out of prot")
            && logout
                .stdout
                .contains("its tokens are revoked at the authorization server"),
        "{}{}",
        logout.stdout,
        logout.stderr
    );
    {
        let w = lock(&world);
        assert_eq!(w.revoked, ["refresh_token", "access_token"]);
        assert!(w.access.is_empty() && w.refresh.is_empty());
    }
    assert!(
        after.stdout.contains(r#""state": "none""#),
        "{}",
        after.stdout
    );
    for r in &runs {
        for text in [&r.stdout, &r.stderr] {
            assert!(
                !text.contains("secret-access") && !text.contains("secret-refresh"),
                "{text}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_up_without_a_human_is_remembered_for_the_next_login() {
    let (server, world) = protected(3600).await;
    lock(&world).need_write = true;
    let spec = ServerSpec::http("prot", &server.url);
    let store = Store::memory();
    login(&spec, &store).await;
    let s = session(&spec, &store);
    let e = s.call("prot__echo", json!({"text": "x"})).await.err();
    match &e {
        Some(McpError::NeedsLogin { challenge, .. }) => {
            assert!(
                challenge.as_ref().is_some_and(|c| c.insufficient_scope()),
                "{e:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    s.close().await;
    let creds = login(&spec, &store).await;
    assert_eq!(creds.scope.as_deref(), Some("files:read files:write"));
    {
        let w = lock(&world);
        assert_eq!(
            w.asked,
            [
                Some("files:read".to_owned()),
                Some("files:read files:write".to_owned())
            ]
        );
    }
    let s = session(&spec, &store);
    s.call("prot__echo", json!({"text": "x"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    s.close().await;
}

/// Two sessions (as two edgar processes would) share a stored sign-in whose refresh
/// tokens rotate: when both find the access token expired, one refreshes and the other
/// takes the new token from the store instead of reusing the rotated-away one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_refreshes_take_turns() {
    let (server, world) = protected(3600).await;
    let spec = ServerSpec::http("prot", &server.url);
    let store = Store::memory();
    login(&spec, &store).await;
    let cache = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = Config {
        servers: vec![spec.clone()],
        ..Config::default()
    };
    let sessions: Vec<Session> = (0..2)
        .map(|_| {
            let mut opts = SessionOptions::new(std::env::temp_dir(), Some(cache.path().to_owned()));
            opts.credentials = Some(store.clone());
            Session::new(&config, opts)
        })
        .collect();
    for s in &sessions {
        s.call("prot__echo", json!({"text": "x"}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    lock(&world).access.clear();
    let calls = sessions
        .iter()
        .map(|s| s.call("prot__echo", json!({"text": "x"})));
    for r in edgar_host::mcp::client::join_all(calls).await {
        r.unwrap_or_else(|e| panic!("{e}"));
    }
    {
        let w = lock(&world);
        let refreshes = w
            .token_requests
            .iter()
            .filter(|(g, _)| g == "refresh_token")
            .count();
        assert_eq!(refreshes, 1, "{:?}", w.token_requests);
    }
    assert!(stored_refresh(&store, &spec).await.is_some());
    for s in &sessions {
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_needs_no_sign_in_says_so() {
    let server = FakeHttp::start(|req| good(req).unwrap_or(Resp::Status(404, vec![]))).await;
    let spec = ServerSpec::http("open", &server.url);
    let e = McpAuth::new(&spec, Store::memory(), Some(Browser::Fetch))
        .unwrap_or_else(|e| panic!("{e}"))
        .login()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("there is nothing to sign in to"), "{e}");
}

/// The same sign-in with the default store, a real Secret Service (gnome-keyring in a
/// private D-Bus session): the tokens live in the keyring and nowhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_lives_in_a_real_keyring() {
    let (server, _world) = protected(3600).await;
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = home.path().join("config/edgar");
    std::fs::create_dir_all(&config).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        config.join("mcp.json"),
        json!({"mcpServers": {"prot": {"type": "http", "url": server.url}}}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let key = store_key(&ServerSpec::http("prot", &server.url));
    let script = r#"
        set -u
        echo "== login"; "$EDGAR" mcp login prot --browser-fetch || exit 10
        secret-tool lookup service edgar username "$ENTRY" | grep -q secret-refresh && echo "keyring holds the sign-in"
        grep -rqs secret-access "$HOME" || echo "no token in any file"
        echo "== list"; "$EDGAR" mcp list
        echo "== call"; "$EDGAR" mcp call prot__echo '{"text": "x"}' || exit 11
        echo "== logout"; "$EDGAR" mcp logout prot || exit 12
        secret-tool lookup service edgar username "$ENTRY" >/dev/null || echo "keyring entry gone"
    "#;
    let with_keyring = edgar_tests::fixture("with-keyring.sh")
        .display()
        .to_string();
    let home_path = home.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("dbus-run-session")
            .args(["--", &with_keyring, "sh", "-c", script])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home_path)
            .env("XDG_CONFIG_HOME", home_path.join("config"))
            .env("XDG_CACHE_HOME", home_path.join("cache"))
            .env("XDG_DATA_HOME", home_path.join("data"))
            .env("EDGAR", EDGAR)
            .env("EDGAR_LOG", "debug")
            .env("ENTRY", key)
            .current_dir(&home_path)
            .output()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
    .unwrap_or_else(|e| panic!("dbus-run-session: {e} (run .ci/test, which installs it)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    for expected in [
        "signed in to prot (scope: files:read), expires in",
        "stored in the OS keyring",
        "keyring holds the sign-in",
        "no token in any file",
        "signed in, expires in",
        "fine",
        "signed out of prot",
        "keyring entry gone",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
    assert!(
        !text.contains("secret-access") && !text.contains("secret-refresh"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_naming_another_issuer_is_refused_before_the_code_is_sent() {
    let (server, world) = protected(3600).await;
    let spec = ServerSpec::http("prot", &server.url);
    // The right issuer in the redirect: accepted.
    let base = lock(&world).base.get().cloned().unwrap_or_default();
    lock(&world).redirect_iss = Some(base);
    login(&spec, &Store::memory()).await;
    // Another one (a mix-up): refused, and the code never reaches a token endpoint.
    lock(&world).redirect_iss = Some("https://evil.example".into());
    let before = lock(&world).token_requests.len();
    let e = McpAuth::new(&spec, Store::memory(), Some(Browser::Fetch))
        .unwrap_or_else(|e| panic!("{e}"))
        .login()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("evil.example") && e.contains("refusing"), "{e}");
    assert_eq!(lock(&world).token_requests.len(), before);
    // A refusal from the wrong server is not shown either; from the right one it is.
    lock(&world).redirect_error = Some("Call+0800+EVIL".into());
    let e = McpAuth::new(&spec, Store::memory(), Some(Browser::Fetch))
        .unwrap_or_else(|e| panic!("{e}"))
        .login()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("evil.example") && !e.contains("0800"), "{e}");
    let base = lock(&world).base.get().cloned().unwrap_or_default();
    lock(&world).redirect_iss = Some(base);
    let e = McpAuth::new(&spec, Store::memory(), Some(Browser::Fetch))
        .unwrap_or_else(|e| panic!("{e}"))
        .login()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("'access_denied': Call 0800 EVIL"), "{e}");
}
