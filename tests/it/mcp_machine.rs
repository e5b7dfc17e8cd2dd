//! Sign-in without a human (`oauth.grant: "client_credentials"`) against a
//! machine-to-machine authorization server of our own on loopback, one that verifies
//! the client's signed assertions with its public key: a token fetched on the first
//! refusal and again when it expires (there is no refresh token), a key the server does
//! not know refused with a clear error and a bounded number of tries, a client secret
//! sent by HTTP Basic, and the CLI fetching a token without a browser and printing
//! neither the token nor the key. The same key also signs a human's sign-in (the code
//! exchange and every refresh, `private_key_jwt` with PKCE).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use edgar_host::auth::store::Store;
use edgar_host::config::{Config, Grant, ServerSpec};
use edgar_host::mcp::client::{Session, SessionOptions};
use edgar_tests::{run, user_config};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};

use crate::mcp_http_faults::{FakeHttp, Req, Resp, good};

const EDGAR: &str = env!("CARGO_BIN_EXE_edgar-it");
const CLIENT: &str = "svc-edgar";
const SECRET: &str = "svc-secret-value";

#[derive(Default)]
struct World {
    base: String,
    /// The public key the server trusts for `CLIENT`'s assertions.
    public_key: Vec<u8>,
    expires_in: u64,
    access: HashSet<String>,
    counter: u32,
    /// Assertion IDs seen (a replayed assertion is refused).
    jtis: HashSet<String>,
    /// How each token request authenticated: `jwt`, `basic`, or why it was refused;
    /// for the authorization code and refresh grants, `code+` or `refresh+` before it.
    token_requests: Vec<String>,
    /// Issued codes and their PKCE challenges.
    challenges: HashMap<String, String>,
    refresh: HashSet<String>,
    bearers: Vec<Option<String>>,
}

type Shared = Arc<Mutex<World>>;

fn lock(w: &Shared) -> std::sync::MutexGuard<'_, World> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

/// Checks an ES256 client assertion as an authorization server would.
fn verify_assertion(w: &mut World, jwt: &str) -> Result<(), String> {
    let (signed, sig) = jwt.rsplit_once('.').ok_or("not a JWT")?;
    let sig = URL_SAFE_NO_PAD.decode(sig).map_err(|e| e.to_string())?;
    signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &w.public_key)
        .verify(signed.as_bytes(), &sig)
        .map_err(|_| "bad signature".to_owned())?;
    let claims = signed.split('.').nth(1).ok_or("no claims")?;
    let claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    if claims["iss"] != CLIENT || claims["sub"] != CLIENT || claims["aud"] != w.base.as_str() {
        return Err(format!("wrong claims {claims}"));
    }
    let jti = claims["jti"].as_str().ok_or("no jti")?.to_owned();
    if !w.jtis.insert(jti) {
        return Err("replayed".into());
    }
    Ok(())
}

fn handle(world: &Shared, req: &Req) -> Resp {
    let base = lock(world).base.clone();
    let path = req.path.split('?').next().unwrap_or("");
    let refuse = |e: &str| Resp::Json(401, vec![], json!({"error": e}));
    match (req.method.as_str(), path) {
        ("GET", "/.well-known/oauth-protected-resource/mcp") => Resp::Json(
            200,
            vec![],
            json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}),
        ),
        ("GET", "/.well-known/oauth-authorization-server") => Resp::Json(
            200,
            vec![],
            json!({"issuer": base, "token_endpoint": format!("{base}/token"),
                "authorization_endpoint": format!("{base}/authorize"),
                "code_challenge_methods_supported": ["S256"],
                "grant_types_supported": ["client_credentials", "authorization_code", "refresh_token"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "private_key_jwt"],
                "token_endpoint_auth_signing_alg_values_supported": ["ES256"]}),
        ),
        // A human's sign-in, answered at once (the test's `Browser::Fetch` follows it).
        ("GET", "/authorize") => {
            let (Some(redirect), Some(state), Some(ch)) = (
                req.param("redirect_uri"),
                req.param("state"),
                req.param("code_challenge"),
            ) else {
                return Resp::Json(400, vec![], json!({"error": "invalid_request"}));
            };
            let mut w = lock(world);
            w.counter += 1;
            let code = format!("code-{}", w.counter);
            w.challenges.insert(code.clone(), ch);
            Resp::Status(
                302,
                vec![("location", format!("{redirect}?code={code}&state={state}"))],
            )
        }
        ("POST", "/token") => {
            let mut w = lock(world);
            let grant = match req.param("grant_type").as_deref() {
                Some("client_credentials") => "",
                Some("authorization_code") => {
                    let code = req.param("code").unwrap_or_default();
                    let verifier = req.param("code_verifier").unwrap_or_default();
                    match w.challenges.remove(&code) {
                        Some(ch) if ch == crate::mcp_auth::challenge(&verifier) => "code+",
                        _ => return Resp::Json(400, vec![], json!({"error": "invalid_grant"})),
                    }
                }
                Some("refresh_token") => {
                    let token = req.param("refresh_token").unwrap_or_default();
                    if !w.refresh.remove(&token) {
                        return Resp::Json(400, vec![], json!({"error": "invalid_grant"}));
                    }
                    "refresh+"
                }
                _ => {
                    w.token_requests.push("wrong grant".into());
                    return Resp::Json(400, vec![], json!({"error": "unsupported_grant_type"}));
                }
            };
            let how = if let Some(jwt) = req.param("client_assertion") {
                match verify_assertion(&mut w, &jwt) {
                    Ok(()) => "jwt".to_owned(),
                    Err(why) => why,
                }
            } else {
                let want = format!("Basic {}", STANDARD.encode(format!("{CLIENT}:{SECRET}")));
                if req.header("authorization") == Some(want.as_str()) {
                    "basic".to_owned()
                } else {
                    "bad basic".to_owned()
                }
            };
            w.token_requests.push(format!("{grant}{how}"));
            if how != "jwt" && how != "basic" {
                return refuse("invalid_client");
            }
            w.counter += 1;
            let token = format!("m2m-access-{}", w.counter);
            w.access.insert(token.clone());
            let mut answer =
                json!({"access_token": token, "token_type": "Bearer", "expires_in": w.expires_in});
            if !grant.is_empty() {
                let refresh = format!("m2m-refresh-{}", w.counter);
                w.refresh.insert(refresh.clone());
                answer["refresh_token"] = json!(refresh);
            }
            Resp::Json(200, vec![], answer)
        }
        ("POST", "/mcp") => {
            let mut w = lock(world);
            let bearer = req
                .header("authorization")
                .and_then(|h| h.strip_prefix("Bearer "))
                .map(str::to_owned);
            w.bearers.push(bearer.clone());
            if !bearer.as_ref().is_some_and(|b| w.access.contains(b)) {
                return Resp::Status(
                    401,
                    vec![(
                        "www-authenticate",
                        format!(
                            r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
                        ),
                    )],
                );
            }
            drop(w);
            good(req).unwrap_or(Resp::Accepted)
        }
        _ => good(req).unwrap_or(Resp::Status(404, vec![])),
    }
}

/// A P-256 key pair: its PKCS#8 PEM and its public key.
fn key_pair() -> (String, Vec<u8>) {
    let rng = SystemRandom::new();
    let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .unwrap_or_else(|e| panic!("{e}"));
    let pair = EcdsaKeyPair::from_pkcs8(
        &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        doc.as_ref(),
        &rng,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let b64 = STANDARD.encode(doc.as_ref());
    let body: Vec<String> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        body.join("\n")
    );
    (pem, pair.public_key().as_ref().to_vec())
}

/// A fresh key pair, its private key written to a file in a temporary directory.
fn key_in_file() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
    let (pem, public) = key_pair();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let key_file = dir.path().join("svc.pem");
    std::fs::write(&key_file, &pem).unwrap_or_else(|e| panic!("{e}"));
    (dir, key_file, public)
}

async fn server(public_key: Vec<u8>, expires_in: u64) -> (FakeHttp, Shared) {
    let world: Shared = Arc::new(Mutex::new(World {
        public_key,
        expires_in,
        ..World::default()
    }));
    let w = world.clone();
    let server = FakeHttp::start(move |req| handle(&w, req)).await;
    lock(&world).base = server.url.trim_end_matches("/mcp").to_owned();
    (server, world)
}

fn spec_with_key(url: &str, key_file: &std::path::Path) -> ServerSpec {
    let mut spec = ServerSpec::http("m2m", url);
    spec.oauth.grant = Grant::ClientCredentials;
    spec.oauth.client_id = Some(CLIENT.into());
    spec.oauth.private_key_file = Some(key_file.to_owned());
    spec
}

fn session(spec: &ServerSpec, store: &Store) -> Session {
    let config = Config {
        servers: vec![spec.clone()],
        ..Config::default()
    };
    let mut opts = SessionOptions::new(std::env::temp_dir(), None);
    opts.credentials = Some(store.clone());
    // No browser: nobody is there.
    opts.browser = None;
    Session::new(&config, opts)
}

/// A user config for the CLI: server `m2m` at `url` with this `oauth`, tokens in the file
/// store (no keyring needed).
fn cli_config(home: &std::path::Path, url: &str, oauth: Value) {
    user_config(
        home,
        json!({"m2m": {"type": "http", "url": url, "oauth": oauth}}),
    );
    std::fs::write(
        home.join("config/edgar/config.json"),
        r#"{"credential_store": "file"}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

async fn call(session: &Session) -> Result<(), String> {
    session
        .call("m2m/echo", json!({"text": "x"}))
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_assertion_gets_a_token_and_an_expiring_one_is_fetched_again() {
    let (_dir, key_file, public) = key_in_file();
    // Tokens that live 6 s, renewed in their second half (expiry has one-second
    // granularity, so the two calls below have at least 2 s to run on a loaded machine).
    let (server, world) = server(public, 6).await;
    let spec = spec_with_key(&server.url, &key_file);
    let store = Store::memory();
    let s = session(&spec, &store);
    call(&s).await.unwrap_or_else(|e| panic!("{e}"));
    call(&s).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        lock(&world).token_requests,
        ["jwt"],
        "one token, used twice"
    );
    tokio::time::sleep(std::time::Duration::from_millis(6100)).await;
    call(&s).await.unwrap_or_else(|e| panic!("{e}"));
    s.close().await;
    {
        let w = lock(&world);
        assert_eq!(
            w.token_requests,
            ["jwt", "jwt"],
            "fetched again once expired"
        );
        // Two distinct tokens were used, the second after the first expired.
        let used: HashSet<&String> = w.bearers.iter().flatten().collect();
        assert_eq!(used.len(), 2, "{:?}", w.bearers);
        assert_eq!(w.jtis.len(), 2);
    }
    // What is stored: the token, no refresh token, and never the key.
    let stored = crate::mcp_auth::stored(&store, &edgar_host::auth::mcp::store_key(&spec)).await;
    assert!(stored["refresh_token"].is_null());
    assert_eq!(stored["client"]["method"], "private_key_jwt");
    assert!(!stored.to_string().contains("PRIVATE KEY"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_server_does_not_know_is_refused_clearly_and_not_retried_for_ever() {
    let (pem, _) = key_pair();
    let (_, other_public) = key_pair();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let key_file = dir.path().join("svc.pem");
    std::fs::write(&key_file, &pem).unwrap_or_else(|e| panic!("{e}"));
    let (server, world) = server(other_public, 3600).await;
    let s = session(&spec_with_key(&server.url, &key_file), &Store::memory());
    let e = call(&s)
        .await
        .err()
        .unwrap_or_else(|| panic!("the call worked"));
    s.close().await;
    let w = lock(&world);
    assert!(
        !w.token_requests.is_empty() && w.token_requests.iter().all(|t| t == "bad signature"),
        "{:?}",
        w.token_requests
    );
    assert!(w.token_requests.len() <= 3, "{:?}", w.token_requests);
    assert!(!e.contains("PRIVATE KEY") && !e.contains("eyJ"), "{e}");
    assert!(e.contains("m2m"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_secret_goes_by_http_basic() {
    let (server, world) = server(Vec::new(), 3600).await;
    let mut spec = ServerSpec::http("m2m", &server.url);
    spec.oauth.grant = Grant::ClientCredentials;
    spec.oauth.client_id = Some(CLIENT.into());
    spec.oauth.client_secret = Some(SECRET.into());
    let s = session(&spec, &Store::memory());
    call(&s).await.unwrap_or_else(|e| panic!("{e}"));
    call(&s).await.unwrap_or_else(|e| panic!("{e}"));
    s.close().await;
    // One token, used twice: it does not expire within the hour.
    assert_eq!(lock(&world).token_requests, ["basic"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_fetches_a_token_without_a_browser_and_prints_no_secret() {
    let (pem, public) = key_pair();
    let (server, world) = server(public, 3600).await;
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let key_file = home.path().join("svc.pem");
    std::fs::write(&key_file, &pem).unwrap_or_else(|e| panic!("{e}"));
    cli_config(
        home.path(),
        &server.url,
        json!({"grant": "client_credentials", "client_id": CLIENT, "private_key_file": key_file}),
    );
    let home = home.path().to_owned();
    let runs = tokio::task::spawn_blocking(move || {
        let edgar = |args: &[&str]| {
            let mut a = vec!["EDGAR_LOG=debug", EDGAR];
            a.extend_from_slice(args);
            run("env", &home, &a, b"")
        };
        vec![
            edgar(&["mcp", "list"]),
            edgar(&["mcp", "login", "m2m"]),
            edgar(&["mcp", "list"]),
            edgar(&["mcp", "call", "m2m__echo", r#"{"text":"x"}"#]),
        ]
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let [before, login, list, call] = &runs[..] else {
        panic!("four runs");
    };
    assert!(
        before
            .stdout
            .contains("client_credentials: token fetched on first use"),
        "{}",
        before.stdout
    );
    assert_eq!(login.code, Some(0), "{}", login.stderr);
    assert!(
        login.stdout.contains("signed in to m2m"),
        "{}",
        login.stdout
    );
    assert!(!login.stderr.contains("browser"), "{}", login.stderr);
    assert!(
        list.stdout
            .contains("client_credentials: signed in, expires in"),
        "{}",
        list.stdout
    );
    assert_eq!(call.code, Some(0), "{}", call.stderr);
    assert_eq!(call.stdout.trim(), "fine");
    // The login's token served the call.
    assert_eq!(lock(&world).token_requests, ["jwt"]);
    let key_line = pem.lines().nth(1).unwrap_or_default();
    for r in &runs {
        for text in [&r.stdout, &r.stderr] {
            assert!(
                !text.contains("m2m-access") && !text.contains(key_line) && !text.contains("eyJ"),
                "{text}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_kept_in_the_credential_store_signs_after_its_file_is_gone() {
    let (pem, public) = key_pair();
    let (server, world) = server(public, 3600).await;
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let key_file = home.path().join("svc.pem");
    std::fs::write(&key_file, &pem).unwrap_or_else(|e| panic!("{e}"));
    cli_config(
        home.path(),
        &server.url,
        json!({"grant": "client_credentials", "client_id": CLIENT, "private_key": "store"}),
    );
    let home = home.path().to_owned();
    let runs = tokio::task::spawn_blocking(move || {
        let edgar = |args: &[&str], stdin: &[u8]| {
            let mut a = vec!["EDGAR_LOG=debug", EDGAR];
            a.extend_from_slice(args);
            run("env", &home, &a, stdin)
        };
        let missing = edgar(&["mcp", "call", "m2m__echo", r#"{"text":"x"}"#], b"");
        let bad = edgar(
            &["mcp", "set-key", "m2m"],
            b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        );
        let key = home.join("svc.pem");
        let set = edgar(
            &["mcp", "set-key", "m2m", "--file", &key.to_string_lossy()],
            b"",
        );
        let _ = std::fs::remove_file(&key);
        let call = edgar(&["mcp", "call", "m2m__echo", r#"{"text":"x"}"#], b"");
        vec![missing, bad, set, call]
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let [missing, bad, set, call] = &runs[..] else {
        panic!("four runs");
    };
    assert_ne!(missing.code, Some(0));
    assert!(
        missing.stderr.contains("edgar mcp set-key m2m"),
        "{}",
        missing.stderr
    );
    assert_ne!(bad.code, Some(0));
    assert!(
        bad.stderr.contains("the private key cannot be used"),
        "{}",
        bad.stderr
    );
    assert_eq!(set.code, Some(0), "{}", set.stderr);
    assert!(
        set.stdout.contains("stored the ES256 private key of m2m"),
        "{}",
        set.stdout
    );
    assert_eq!(call.code, Some(0), "{}", call.stderr);
    assert_eq!(call.stdout.trim(), "fine");
    assert_eq!(lock(&world).token_requests, ["jwt"]);
    let key_line = pem.lines().nth(1).unwrap_or_default();
    for r in &runs {
        for text in [&r.stdout, &r.stderr] {
            assert!(
                !text.contains(key_line) && !text.contains("m2m-access"),
                "{text}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_sign_in_with_a_private_key_signs_the_code_exchange_and_every_refresh() {
    let (_dir, key_file, public) = key_in_file();
    let (server, world) = server(public, 3600).await;
    let mut spec = spec_with_key(&server.url, &key_file);
    spec.oauth.grant = Grant::AuthorizationCode;
    let store = Store::memory();
    let creds = edgar_host::auth::mcp::McpAuth::new(
        &spec,
        store.clone(),
        Some(edgar_host::auth::mcp::Browser::Fetch),
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .login()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(creds.client.method, "private_key_jwt");
    assert!(creds.client.secret.is_none());
    // Make the token about to expire, so the first request refreshes it.
    crate::mcp_auth::make_expiring(&store, &edgar_host::auth::mcp::store_key(&spec)).await;
    let s = session(&spec, &store);
    call(&s).await.unwrap_or_else(|e| panic!("{e}"));
    s.close().await;
    {
        let w = lock(&world);
        assert_eq!(w.token_requests, ["code+jwt", "refresh+jwt"]);
        // Each request carried its own assertion; the call used the refreshed token.
        assert_eq!(w.jtis.len(), 2);
        assert_eq!(
            w.bearers.last().cloned().flatten().as_deref(),
            Some("m2m-access-3")
        );
    }
    let stored = crate::mcp_auth::stored(&store, &edgar_host::auth::mcp::store_key(&spec)).await;
    assert!(stored["refresh_token"].is_string());
    assert!(!stored.to_string().contains("PRIVATE KEY"));
    assert!(!format!("{creds:?}").contains("m2m-"));
}
