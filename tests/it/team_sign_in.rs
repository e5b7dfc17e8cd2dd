//! A team gateway's users signing in to an upstream themselves (`"grant":
//! "user_sign_in"`): an upstream MCP server with an authorization server of its own (not
//! the company's), registration, PKCE, RFC 9207 `iss`. A user's search or call that needs
//! their sign-in is answered with URL-mode elicitation (-32042) holding the upstream's
//! authorization URL; the "browser" (this test, as the user at the upstream) follows it
//! to the gateway's callback; then the same request works, with that user's own token
//! upstream. Each user gets their own; the policy's `sign_in` decides who may; a client
//! that cannot be sent to a URL is told so and shown none; a forged, altered or replayed
//! callback is refused; no inbound token reaches the upstream.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::mcp_http_faults::{FakeHttp, Req, Resp};
use crate::team_gateway::{Client, Idp, Key, Team, claims, finish, tag, text};

const POLICY: &str = r#"
// Engineers may do everything with the upstream, signing in included.
permit(principal, action, resource in Server::"acct")
  when { principal.groups.contains("eng") };
// Readers may find and call its tools, but not sign in to it.
permit(principal, action in [Action::"list_tools", Action::"call_tool"], resource in Server::"acct")
  when { principal.groups.contains("readers") };
"#;

/// The upstream and its own authorization server, on one loopback origin.
#[derive(Default)]
pub(crate) struct World {
    pub(crate) base: OnceLock<String>,
    /// code -> (user, PKCE challenge, redirect URI); a code works once.
    codes: HashMap<String, (String, String, String)>,
    /// access token -> user.
    tokens: HashMap<String, String>,
    counter: u32,
    /// The redirect URIs registrations asked for.
    registered: Vec<String>,
    /// The tokens revoked (RFC 7009), in order.
    revoked: Vec<String>,
}

pub(crate) fn lock(w: &Mutex<World>) -> std::sync::MutexGuard<'_, World> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        verifier.as_bytes(),
    ))
}

pub(crate) fn upstream(world: &Arc<Mutex<World>>, req: &Req) -> Resp {
    let base = lock(world).base.get().cloned().unwrap_or_default();
    let path = req.path.split('?').next().unwrap_or("");
    let bad = |e: &str| Resp::Json(400, vec![], json!({"error": e}));
    match (req.method.as_str(), path) {
        ("GET", "/.well-known/oauth-protected-resource/mcp") => Resp::Json(
            200,
            vec![],
            json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}),
        ),
        ("GET", "/.well-known/oauth-authorization-server") => Resp::Json(
            200,
            vec![],
            json!({"issuer": base, "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"), "registration_endpoint": format!("{base}/register"),
                "revocation_endpoint": format!("{base}/revoke"),
                "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "authorization_response_iss_parameter_supported": true}),
        ),
        ("POST", "/register") => {
            let uris = req.body["redirect_uris"].clone();
            lock(world).registered.extend(
                uris.as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|u| u.as_str().map(str::to_owned)),
            );
            Resp::Json(
                201,
                vec![],
                json!({"client_id": "acct-client", "token_endpoint_auth_method": "none"}),
            )
        }
        // The user is signed in to the upstream in their browser: `x-user` says who.
        ("GET", "/authorize") => {
            let (Some(user), Some(redirect), Some(state), Some(ch)) = (
                req.header("x-user").map(str::to_owned),
                req.param("redirect_uri"),
                req.param("state"),
                req.param("code_challenge"),
            ) else {
                return bad("invalid_request");
            };
            if req.param("client_id").as_deref() != Some("acct-client") {
                return bad("invalid_client");
            }
            let mut w = lock(world);
            w.counter += 1;
            let code = format!("code-{}", w.counter);
            w.codes.insert(code.clone(), (user, ch, redirect.clone()));
            let iss: String = url_encode(&base);
            Resp::Status(
                302,
                vec![(
                    "location",
                    format!("{redirect}?code={code}&state={state}&iss={iss}"),
                )],
            )
        }
        ("POST", "/token") => {
            let mut w = lock(world);
            if req.param("grant_type").as_deref() != Some("authorization_code") {
                return bad("unsupported_grant_type");
            }
            let code = req.param("code").unwrap_or_default();
            let verifier = req.param("code_verifier").unwrap_or_default();
            match w.codes.remove(&code) {
                Some((user, ch, redirect))
                    if ch == s256(&verifier)
                        && req.param("redirect_uri").as_deref() == Some(redirect.as_str()) =>
                {
                    w.counter += 1;
                    let token = format!("acct-token-{user}-{}", w.counter);
                    w.tokens.insert(token.clone(), user);
                    Resp::Json(
                        200,
                        vec![],
                        json!({"access_token": token, "token_type": "Bearer", "expires_in": 600}),
                    )
                }
                _ => bad("invalid_grant"),
            }
        }
        ("POST", "/revoke") => {
            let mut w = lock(world);
            let token = req.param("token").unwrap_or_default();
            w.tokens.remove(&token);
            w.revoked.push(token);
            Resp::Status(200, vec![])
        }
        ("POST", "/mcp") => {
            let w = lock(world);
            let user = req
                .header("authorization")
                .and_then(|h| h.strip_prefix("Bearer "))
                .and_then(|t| w.tokens.get(t).cloned());
            let Some(user) = user else {
                return Resp::Status(
                    401,
                    vec![(
                        "www-authenticate",
                        format!(
                            r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
                        ),
                    )],
                );
            };
            if req.rpc() == "tools/call" {
                let said = req.body["params"]["arguments"]["text"]
                    .as_str()
                    .unwrap_or_default();
                return Resp::Json(
                    200,
                    vec![],
                    json!({"jsonrpc": "2.0", "id": req.id(),
                    "result": {"content": [{"type": "text", "text": format!("{user} said {said}")}]}}),
                );
            }
            crate::mcp_http_faults::good(req).unwrap_or(Resp::Status(400, vec![]))
        }
        _ => Resp::Status(404, vec![]),
    }
}

fn url_encode(s: &str) -> String {
    s.replace('%', "%25")
        .replace(':', "%3A")
        .replace('/', "%2F")
}

/// What a browser got for one GET: its status, the `Location` and `Set-Cookie` headers
/// as sent, and the page.
pub(crate) struct Got {
    pub(crate) status: u16,
    pub(crate) location: Option<String>,
    pub(crate) cookie: Option<String>,
    pub(crate) page: String,
}

/// One raw GET on loopback `port`, as `user`'s browser sends it (signed in at the
/// identity provider and at the upstream as `user`, with `cookie` if it holds one).
pub(crate) fn browser_get(port: u16, path: &str, user: &str, cookie: Option<&str>) -> Got {
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let cookie = cookie
        .map(|c| format!("cookie: {c}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\nx-user: {user}\r\n{cookie}\r\n"
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut raw = String::new();
    let _ = stream.read_to_string(&mut raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (n, value) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    Got {
        status,
        location: header("location"),
        // The cookie itself, as a browser sends it back (its attributes checked apart).
        cookie: header("set-cookie"),
        page: body.to_owned(),
    }
}

/// Follows a redirect `got` must be.
pub(crate) fn follow(got: &Got, user: &str, cookie: Option<&str>) -> Got {
    assert_eq!(got.status, 302, "{}", got.page);
    let (port, path) = port_and_path(
        got.location
            .as_deref()
            .unwrap_or_else(|| panic!("no Location")),
    );
    browser_get(port, &path, user, cookie)
}

/// Port and path-with-query of a loopback URL.
pub(crate) fn port_and_path(url: &str) -> (u16, String) {
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("{url}"));
    let (port, path) = rest.split_once('/').unwrap_or_else(|| panic!("{url}"));
    (
        port.parse().unwrap_or_else(|e| panic!("{e}")),
        format!("/{path}"),
    )
}

/// A client of the gateway that declared what `capabilities` say, in its own session.
pub(crate) struct User {
    pub(crate) client: Client,
    token: String,
    session: String,
}

impl User {
    pub(crate) fn new(team: &Client, token: String, capabilities: Value) -> User {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "t", "version": "1"}}});
        let auth = format!("Bearer {token}");
        let a = team.request(
            "POST",
            "/mcp",
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ],
            &body.to_string(),
        );
        assert_eq!(a.status, 200, "{}", a.body);
        let session = a
            .session
            .unwrap_or_else(|| panic!("no session: {}", a.head));
        User {
            client: Client { port: team.port },
            token,
            session,
        }
    }

    /// The same user and session, reaching the gateway at `port` (another replica).
    pub(crate) fn at(&self, port: u16) -> User {
        User {
            client: Client { port },
            token: self.token.clone(),
            session: self.session.clone(),
        }
    }

    /// Opens the session's standing stream (GET) and waits, on a thread, for the first
    /// `notifications/elicitation/complete` it carries (30 s at most).
    pub(crate) fn hear_completion(&self) -> std::thread::JoinHandle<Option<Value>> {
        let (port, token, session) = (self.client.port, self.token.clone(), self.session.clone());
        let (opened, ready) = std::sync::mpsc::channel();
        let heard = std::thread::spawn(move || {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
            write!(
                stream,
                "GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nauthorization: Bearer {token}\r\naccept: text/event-stream\r\nmcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n"
            )
            .ok()?;
            let mut reader = std::io::BufReader::new(stream);
            let mut line = String::new();
            let mut told = false;
            loop {
                line.clear();
                if std::io::BufRead::read_line(&mut reader, &mut line).ok()? == 0 {
                    return None;
                }
                // The headers are in: the stream is open.
                if !told && line == "\r\n" {
                    told = true;
                    let _ = opened.send(());
                }
                if let Some(data) = line.trim_end().strip_prefix("data: ")
                    && let Ok(m) = serde_json::from_str::<Value>(data)
                    && m["method"] == "notifications/elicitation/complete"
                {
                    return Some(m);
                }
            }
        });
        let _ = ready.recv_timeout(Duration::from_secs(30));
        heard
    }

    pub(crate) fn rpc(&self, id: u64, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let auth = format!("Bearer {}", self.token);
        let a = self.client.request(
            "POST",
            "/mcp",
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-session-id", &self.session),
            ],
            &body.to_string(),
        );
        let found = a
            .body
            .lines()
            .map(|l| l.strip_prefix("data: ").unwrap_or(l))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|m| m["id"] == id);
        found.unwrap_or_else(|| panic!("no answer to {method}: {} {}", a.status, a.body))
    }

    pub(crate) fn call(&self, id: u64, name: &str, said: &str) -> Value {
        self.rpc(
            id,
            "tools/call",
            json!({"name": name, "arguments": {"text": said}}),
        )
    }
}

/// What a standing stream `hearing` heard was the completion of the elicitation `asked`
/// (a -32042 answer) handed out.
pub(crate) fn completed(hearing: std::thread::JoinHandle<Option<Value>>, asked: &Value) {
    let heard = hearing
        .join()
        .unwrap_or_else(|_| panic!("the stream's reader failed"));
    let id = &asked["error"]["data"]["elicitations"][0]["elicitationId"];
    assert_eq!(
        heard.map(|m| m["params"]["elicitationId"].clone()),
        Some(id.clone())
    );
}

/// The one authorization URL of a -32042 answer.
pub(crate) fn sign_in_url(m: &Value) -> String {
    assert_eq!(m["error"]["code"], -32042, "{m}");
    let e = &m["error"]["data"]["elicitations"];
    assert_eq!(e.as_array().map(Vec::len), Some(1), "{m}");
    assert_eq!(e[0]["mode"], "url", "{m}");
    assert!(
        e[0]["elicitationId"]
            .as_str()
            .is_some_and(|i| i.len() >= 16),
        "{m}"
    );
    e[0]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("{m}"))
        .to_owned()
}

/// `user`'s browser follows a sign-in link: the company's sign-in, the gateway, the
/// upstream's sign-in, the gateway's callback. The callback's answer, its path, and the
/// cookie the browser held.
fn sign_in_as(user: &str, url: &str) -> (Got, String, String) {
    let (port, path) = port_and_path(url);
    let at_company = browser_get(port, &path, user, None);
    let identified = follow(&at_company, user, None);
    let set = identified
        .cookie
        .clone()
        .unwrap_or_else(|| panic!("no cookie: {}", identified.page));
    assert!(
        set.contains("HttpOnly")
            && set.contains("SameSite=Lax")
            && set.contains("Path=/oauth/callback"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap_or_default().to_owned();
    let at_upstream = follow(&identified, user, None);
    let back = at_upstream
        .location
        .clone()
        .unwrap_or_else(|| panic!("no redirect"));
    let (_, callback_path) = port_and_path(&back);
    let done = follow(&at_upstream, user, Some(&cookie));
    (done, callback_path, cookie)
}

#[test]
fn each_user_signs_in_to_the_upstream_themselves_through_the_gateway() {
    let key = Arc::new(Key::es256());
    let idp = Idp::start(vec![key.jwk("k")]);
    idp.sign_in_with(key.clone(), "k");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let world = Arc::new(Mutex::new(World::default()));
    let w = world.clone();
    let acct = rt.block_on(FakeHttp::start(move |req| upstream(&w, req)));
    let _ = lock(&world)
        .base
        .set(acct.url.trim_end_matches("/mcp").to_owned());
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let servers = json!({"acct": {"url": acct.url, "oauth": {"grant": "user_sign_in"}}});
    let browser = json!({"browser_client": {"client_id": "gw-browser", "client_secret_env": "TEST_BROWSER_SECRET"}});
    let team = Team::start_with(home.path(), servers, browser, &idp, POLICY);
    let token =
        |sub: &str, group: &str| key.token(Some("k"), &claims(&idp, &team.resource, sub, &[group]));
    let url_mode = json!({"elicitation": {"url": {}}});

    // Ada's search cannot include the upstream's tools until she signs in: asked.
    let ada = User::new(&team, token("ada", "eng"), url_mode.clone());
    let m = ada.rpc(
        1,
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "echo"}}),
    );
    let url = sign_in_url(&m);
    // The link goes to the company's sign-in first, then to the upstream's.
    assert!(
        url.starts_with(&format!("{}/authorize?", idp.base)),
        "{url}"
    );
    assert!(
        url.contains("client_id=gw-browser") && url.contains("nonce="),
        "{url}"
    );
    let callback = format!("http://127.0.0.1:{}/oauth/callback", team.port);
    assert_eq!(lock(&world).registered, vec![callback.clone()]);
    let (done, callback_path, cookie) = sign_in_as("ada", &url);
    assert_eq!(done.status, 200, "{}", done.page);
    assert!(done.page.contains("Signed in to 'acct'"), "{}", done.page);
    // Asked again, the search finds its tools, and her call carries her own token.
    let m = ada.rpc(
        2,
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "echo"}}),
    );
    let log = || team.stderr.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(text(&m).contains("acct__echo"), "{m}\n{}", log());
    assert_eq!(text(&ada.call(3, "acct__echo", "hi")), "ada said hi");

    // The same callback again: the code is spent, and nothing changes.
    let (port, _) = port_and_path(&callback);
    let again = browser_get(port, &callback_path, "ada", Some(&cookie));
    assert_eq!(again.status, 400, "{}", again.page);
    // A state this gateway did not seal, or one altered by a character.
    let forged =
        "/oauth/callback?code=code-1&state=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let got = browser_get(port, forged, "ada", Some(&cookie));
    assert_eq!(got.status, 400, "{}", got.page);
    assert!(
        got.page.contains("not one the gateway made"),
        "{}",
        got.page
    );
    let state_at = callback_path
        .find("state=")
        .unwrap_or_else(|| panic!("{callback_path}"))
        + 10;
    let mut altered = callback_path.clone().into_bytes();
    altered[state_at] = if altered[state_at] == b'A' {
        b'B'
    } else {
        b'A'
    };
    let altered = String::from_utf8(altered).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        browser_get(port, &altered, "ada", Some(&cookie)).status,
        400
    );
    // The authorization server's refusal is shown as such.
    let got = browser_get(
        port,
        "/oauth/callback?error=access_denied&state=x",
        "ada",
        None,
    );
    assert_eq!(got.status, 400, "{}", got.page);
    assert!(got.page.contains("access_denied"), "{}", got.page);

    // Mallory's link, forwarded to Ada: the company's sign-in shows it is Ada, not him.
    let mallory = User::new(&team, token("mallory", "eng"), url_mode.clone());
    mallory.rpc(
        19,
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "echo"}}),
    );
    let url = sign_in_url(&mallory.call(20, "acct__echo", "mine"));
    let (port_idp, path) = port_and_path(&url);
    let at_company = browser_get(port_idp, &path, "ada", None);
    let refused = follow(&at_company, "ada", None);
    assert_eq!(refused.status, 400, "{}", refused.page);
    assert!(refused.page.contains("another user"), "{}", refused.page);
    assert!(refused.cookie.is_none());
    // Or past the company's sign-in as himself, the upstream's page forwarded: Ada's
    // browser holds no cookie for it, and her upstream account is not kept as his.
    let url = sign_in_url(&mallory.call(21, "acct__echo", "mine"));
    let (port_idp, path) = port_and_path(&url);
    let identified = follow(
        &browser_get(port_idp, &path, "mallory", None),
        "mallory",
        None,
    );
    assert_eq!(identified.status, 302, "{}", identified.page);
    let at_upstream = follow(&identified, "ada", None);
    let refused = follow(&at_upstream, "ada", None);
    assert_eq!(refused.status, 400, "{}", refused.page);
    assert!(
        refused.page.contains("this browser did not sign in"),
        "{}",
        refused.page
    );
    // With Ada's own cookie of her own sign-in: still not his.
    let at_upstream = follow(
        &follow(
            &browser_get(port_idp, &path, "mallory", None),
            "mallory",
            None,
        ),
        "ada",
        None,
    );
    assert_eq!(follow(&at_upstream, "ada", Some(&cookie)).status, 400);
    assert_eq!(
        mallory.call(22, "acct__echo", "mine")["error"]["code"],
        -32042
    );

    // Bob, found the tool already there, is asked when he calls it, and then has his own.
    let bob = User::new(&team, token("bob", "eng"), url_mode.clone());
    let m = bob.rpc(
        4,
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "echo"}}),
    );
    assert!(text(&m).contains("acct__echo"), "{m}");
    let asked = bob.call(5, "acct__echo", "yo");
    let url = sign_in_url(&asked);
    // His session's standing stream hears that the elicitation is complete.
    let hearing = bob.hear_completion();
    assert_eq!(sign_in_as("bob", &url).0.status, 200);
    completed(hearing, &asked);
    assert_eq!(text(&bob.call(6, "acct__echo", "yo")), "bob said yo");
    assert_eq!(text(&ada.call(7, "acct__echo", "again")), "ada said again");
    // One client registered for everyone, not one per user.
    assert_eq!(lock(&world).registered.len(), 1);

    // Carol may call it but not sign in: told so, no URL.
    let carol = User::new(&team, token("carol", "readers"), url_mode);
    carol.rpc(
        8,
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "echo"}}),
    );
    let m = carol.call(9, "acct__echo", "hey");
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert!(text(&m).contains("does not let you sign in to"), "{m}");
    assert!(!m.to_string().contains("authorize"), "{m}");
    // Dan's client cannot be sent to a URL: told so, no URL.
    let dan = User::new(&team, token("dan", "eng"), json!({"elicitation": {}}));
    dan.rpc(
        10,
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "echo"}}),
    );
    let m = dan.call(11, "acct__echo", "hey");
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert!(text(&m).contains("URL-mode elicitation"), "{m}");
    assert!(!m.to_string().contains("authorize"), "{m}");

    // The upstream saw each user's own token only, never one the company issued.
    let seen = acct.requests.lock().map(|r| r.clone()).unwrap_or_default();
    // A call sent before its user signed in carried no token; every other, theirs.
    let mut tokened = HashMap::new();
    for q in seen.iter().filter(|q| q.rpc() == "tools/call") {
        let said = q.body["params"]["arguments"]["text"]
            .as_str()
            .unwrap_or_default();
        let owner = match said {
            "yo" => "bob",
            "hey" => "carol or dan",
            "mine" => "mallory",
            _ => "ada",
        };
        match q.header("authorization") {
            None => {}
            Some(who) => {
                assert!(
                    who.starts_with(&format!("Bearer acct-token-{owner}-")),
                    "{said}: {who}"
                );
                *tokened.entry(owner).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(tokened, HashMap::from([("ada", 2), ("bob", 1)]));
    assert!(
        seen.iter()
            .all(|q| !q.headers.iter().any(|(_, v)| v.contains("eyJ"))),
        "an inbound token reached the upstream"
    );
    // The trail says who signed in and who was asked, under their names; no tokens.
    let trail = std::fs::read_to_string(home.path().join("state/audit.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<Value> = trail
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let by = |event: &str, user: &str| {
        lines
            .iter()
            .filter(|l| l["event"] == event && l["user"] == user)
            .count()
    };
    assert_eq!(
        (by("signed_in", "ada"), by("signed_in", "bob")),
        (1, 1),
        "{trail}"
    );
    assert_eq!(
        (by("sign_in_asked", "ada"), by("sign_in_asked", "bob")),
        (1, 1),
        "{trail}"
    );
    assert_eq!(by("denied", "carol"), 1, "{trail}");
    assert_eq!(by("signed_in", "mallory"), 0, "{trail}");
    assert!(
        !trail.contains("acct-token-") && !trail.contains("code-"),
        "{trail}"
    );

    // Ada signs out: her token is revoked upstream and erased, her next call asks her
    // to sign in again; Bob's sign-in stays.
    let sign_out = |auth: Option<&str>, method: &str, query: &str| {
        let bearer = auth.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer
            .iter()
            .map(|b| ("authorization", b.as_str()))
            .collect();
        team.request(method, &format!("/oauth/sign-out{query}"), &headers, "")
    };
    let ada_token = token("ada", "eng");
    let a = sign_out(None, "POST", "?server=acct");
    assert_eq!(a.status, 401, "{}", a.body);
    assert!(a.head.contains("www-authenticate: bearer"), "{}", a.head);
    assert_eq!(sign_out(Some(&ada_token), "GET", "").status, 405);
    let a = sign_out(Some(&ada_token), "POST", "?server=other");
    assert_eq!(a.status, 404, "{}", a.body);
    let a = sign_out(Some(&ada_token), "POST", "?server=acct");
    assert_eq!(a.status, 200, "{}", a.body);
    let said: Value = serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{e}: {}", a.body));
    assert_eq!(
        said,
        json!({"signed_out": [{"server": "acct", "was_signed_in": true, "revoked": "revoked"}]})
    );
    let revoked = lock(&world).revoked.clone();
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert!(revoked[0].starts_with("acct-token-ada-"), "{revoked:?}");
    assert_eq!(ada.call(23, "acct__echo", "gone")["error"]["code"], -32042);
    assert_eq!(text(&bob.call(24, "acct__echo", "still")), "bob said still");
    // Signed out already: nothing kept, nothing revoked.
    let a = sign_out(Some(&ada_token), "POST", "");
    let said: Value = serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{e}: {}", a.body));
    assert_eq!(
        said["signed_out"],
        json!([{"server": "acct", "was_signed_in": false, "revoked": "nothing_kept"}])
    );
    assert_eq!(lock(&world).revoked.len(), 1);
    let trail = std::fs::read_to_string(home.path().join("state/audit.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"));
    let signed_out = trail
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["event"] == "signed_out" && l["user"] == "ada")
        .count();
    assert_eq!(signed_out, 2, "{trail}");
    assert!(!trail.contains("acct-token-"), "{trail}");
    finish(team, &tag("sign-in"));
}
