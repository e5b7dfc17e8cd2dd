//! The loopback dance: a one-request loopback listener for the redirect, `visit`, the
//! only place that opens a browser (reachable only from commands a human runs), and
//! [`transfer`], the only way a request reaches an authorization server. Over SSH, the
//! redirected URL can be pasted back instead. PKCE and `state` come from `oauth2`.

use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{AuthError, Secret};

/// How long `listen` waits for the redirect by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// The redirect path on the loopback listener.
pub const REDIRECT_PATH: &str = "/callback";
/// Largest request head read from the browser.
const MAX_REQUEST_BYTES: usize = 16 << 10;
/// How long one connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// An unguessable token (a JWT's `jti`): `n` OS-random bytes, base64url.
pub fn random_token(n: usize) -> Result<String, AuthError> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes)
        .map_err(|e| AuthError::Loopback(format!("the OS random source failed: {e}")))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The authorization server's answer on the redirect.
#[derive(Debug)]
pub struct Callback {
    /// The authorization code, or the server's refusal (`error=`): neither is acted on
    /// or shown before `iss` is checked, since an answer from another authorization
    /// server must not be believed (RFC 9207 §2.4).
    pub code: Result<Secret, AuthError>,
    /// The authorization server's issuer, where it names itself in the redirect (RFC
    /// 9207): checked against the server edgar meant to ask, against mix-up attacks.
    pub iss: Option<String>,
}

/// A loopback listener on `127.0.0.1` that answers exactly one redirect.
pub struct Loopback {
    listener: TcpListener,
    port: u16,
}

impl Loopback {
    /// Binds `127.0.0.1` on `port`, or on one the OS picks. A configured port that is
    /// taken fails at once rather than silently moving elsewhere (the redirect URI
    /// registered with the server would no longer match).
    pub async fn bind(port: Option<u16>) -> Result<Loopback, AuthError> {
        let listener = TcpListener::bind(("127.0.0.1", port.unwrap_or(0))).await.map_err(|e| {
            AuthError::Loopback(match port {
                Some(p) => format!("cannot listen on 127.0.0.1:{p} for the sign-in redirect: {e} (is another sign-in running?)"),
                None => format!("cannot listen on a loopback port: {e}"),
            })
        })?;
        let port = listener
            .local_addr()
            .map_err(|e| AuthError::Loopback(e.to_string()))?
            .port();
        Ok(Loopback { listener, port })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The redirect URI to register and send: `http://127.0.0.1:PORT/callback`.
    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}{REDIRECT_PATH}", self.port)
    }

    /// Waits for the redirect: checks `state` (constant time), answers with a small
    /// page, and closes, so a second request finds nothing listening. Requests for other
    /// paths (a browser's `/favicon.ico`) get a 404 and the wait goes on.
    pub async fn listen(self, state: &str, wait: Duration) -> Result<Callback, AuthError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let accepted = tokio::time::timeout_at(deadline, self.listener.accept())
                .await
                .map_err(|_| {
                    AuthError::Loopback(format!(
                        "no sign-in redirect arrived within {} s; run the command again",
                        wait.as_secs()
                    ))
                })?;
            let Ok((mut stream, _)) = accepted else {
                continue;
            };
            let target = match tokio::time::timeout(REQUEST_TIMEOUT, read_target(&mut stream)).await
            {
                Ok(Ok(t)) => t,
                _ => {
                    let _ = respond(&mut stream, 400, "Bad request.").await;
                    continue;
                }
            };
            let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
            if path != REDIRECT_PATH {
                let _ = respond(&mut stream, 404, "Not the sign-in redirect.").await;
                continue;
            }
            let result = check_redirect(query, state);
            let page = match &result {
                Ok(Callback { code: Ok(_), .. }) => {
                    (200, "Signed in to edgar. You can close this window.")
                }
                _ => (
                    400,
                    "Sign-in failed; see the terminal for why. You can close this window.",
                ),
            };
            let _ = respond(&mut stream, page.0, page.1).await;
            return result;
        }
    }
}

/// Checks a redirect's query (from the loopback or a pasted URL): `state` first (a
/// redirect for no sign-in of ours is refused outright), then the code or the
/// authorization server's `error=`.
pub fn check_redirect(query: &str, state: &str) -> Result<Callback, AuthError> {
    let params: Vec<_> = form_urlencoded::parse(query.as_bytes()).collect();
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_ref());
    match get("state") {
        None => {
            return Err(AuthError::Redirect(
                "the redirect has no state; refusing it".into(),
            ));
        }
        Some(s) if !constant_time_eq(s.as_bytes(), state.as_bytes()) => {
            return Err(AuthError::Redirect(
                "the redirect's state does not match this sign-in; refusing it".into(),
            ));
        }
        Some(_) => {}
    }
    let iss = get("iss").map(str::to_owned);
    if let Some(error) = get("error") {
        let description = get("error_description")
            .map(|d| format!(": {}", crate::text::shown_message(d)))
            .unwrap_or_default();
        let refusal = AuthError::Redirect(format!(
            "the authorization server answered {}{description}",
            crate::text::shown(error)
        ));
        return Ok(Callback {
            code: Err(refusal),
            iss,
        });
    }
    match get("code") {
        Some(code) if !code.is_empty() => Ok(Callback {
            code: Ok(Secret::new(code)),
            iss,
        }),
        _ => Err(AuthError::Redirect(
            "the redirect has no authorization code".into(),
        )),
    }
}

/// Reads a pasted redirect URL (`http://127.0.0.1:PORT/callback?code=...&state=...`)
/// and checks it like the loopback would.
pub fn check_pasted(url: &str, state: &str) -> Result<Callback, AuthError> {
    let url = url.trim();
    let query = url
        .split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or(q));
    match query {
        Some(q) => check_redirect(q, state),
        None => Err(AuthError::Redirect(
            "that is not the redirected URL (it has no query)".into(),
        )),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The request target of an HTTP request, reading no more than the head.
async fn read_target(stream: &mut TcpStream) -> Result<String, ()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.map_err(|_| ())?;
        if n == 0 || buf.len() + n > MAX_REQUEST_BYTES {
            return Err(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let line = head.lines().next().ok_or(())?;
    let mut parts = line.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => Ok(target.to_owned()),
        _ => Err(()),
    }
}

async fn respond(stream: &mut TcpStream, status: u16, message: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!("<!doctype html><title>edgar</title><p>{message}</p>\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// Largest response body read from a token or registration endpoint.
pub const MAX_TOKEN_RESPONSE_BYTES: usize = 1 << 20;
/// Longest a token endpoint may take to answer.
pub const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A reqwest client builder with edgar's TLS (rustls with ring) and user agent.
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().user_agent(concat!("edgar/", env!("CARGO_PKG_VERSION")))
}

/// The HTTP client for authorization servers: redirects are never followed (a redirect
/// from a token endpoint is an SSRF vector), TLS through rustls. Built on first use.
pub fn http_client() -> Result<&'static reqwest::Client, AuthError> {
    static CLIENT: ClientCell = std::sync::OnceLock::new();
    sign_in_client(&CLIENT, false)
}

type ClientCell = std::sync::OnceLock<Result<reqwest::Client, String>>;

/// The sign-in client in `cell`, built on first use: no redirects, [`TOKEN_TIMEOUT`],
/// and with `public_only`, the resolver that refuses local and private addresses.
fn sign_in_client(
    cell: &'static ClientCell,
    public_only: bool,
) -> Result<&'static reqwest::Client, AuthError> {
    cell.get_or_init(|| {
        let mut builder = client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TOKEN_TIMEOUT);
        if public_only {
            builder = builder.dns_resolver(std::sync::Arc::new(crate::net::PublicOnly));
        }
        builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))
    })
    .as_ref()
    .map_err(|e| AuthError::Loopback(e.clone()))
}

/// The HTTP client for the authorization servers of a remote MCP server: as
/// [`http_client`], but names resolve to public addresses only (`net::PublicOnly`), so
/// a server cannot point edgar's discovery, registration or token requests into this
/// machine or its private networks.
pub fn public_http_client() -> Result<&'static reqwest::Client, AuthError> {
    static CLIENT: ClientCell = std::sync::OnceLock::new();
    sign_in_client(&CLIENT, true)
}

/// An authorization server's answer to a form POST.
#[derive(Debug)]
pub struct PostResponse {
    pub status: u16,
    /// The body as JSON (`Null` when it is empty or not JSON).
    pub json: serde_json::Value,
}

/// POSTs a form to a token endpoint with redirects disabled and the body size-limited.
/// `basic` is HTTP Basic client authentication (RFC 6749 §2.3.1). Form values may be
/// secrets; nothing of the request appears in an error.
pub async fn post(
    url: &str,
    form: &[(&str, &str)],
    basic: Option<(&str, &Secret)>,
) -> Result<PostResponse, AuthError> {
    post_with(http_client()?, url, form, basic).await
}

/// [`post`] through a given client (see [`public_http_client`]).
pub async fn post_with(
    http: &reqwest::Client,
    url: &str,
    form: &[(&str, &str)],
    basic: Option<(&str, &Secret)>,
) -> Result<PostResponse, AuthError> {
    let mut request = http
        .post(url)
        .form(form)
        .header("Accept", "application/json");
    if let Some((id, secret)) = basic {
        // RFC 6749 §2.3.1: both form-encoded before they are joined.
        let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        request = request.basic_auth(encode(id), Some(encode(secret.expose())));
    }
    let request = request.build().map_err(|e| {
        AuthError::Loopback(format!(
            "POST to {}: {}",
            crate::text::shown(url),
            crate::net::request_error(&e)
        ))
    })?;
    let (status, _, body) = transfer(http, request).await?;
    let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    Ok(PostResponse { status, json })
}

/// Sends one request to an authorization server: only over HTTPS (or to this machine),
/// redirects refused rather than followed, the answer cut off at
/// [`MAX_TOKEN_RESPONSE_BYTES`]. Nothing of the request (it may carry secrets) appears
/// in an error.
pub async fn transfer(
    http: &reqwest::Client,
    request: reqwest::Request,
) -> Result<(u16, reqwest::header::HeaderMap, Vec<u8>), AuthError> {
    let url = request.url().as_str().to_owned();
    let method = request.method().clone();
    if !crate::net::is_https_or_loopback(&url) {
        return Err(AuthError::Redirect(format!(
            "refusing to send credentials to {}: HTTPS is required",
            crate::text::shown(&url)
        )));
    }
    let fail = |what: String| {
        AuthError::Loopback(format!("{method} to {}: {what}", crate::text::shown(&url)))
    };
    let mut response = http
        .execute(request)
        .await
        .map_err(|e| fail(crate::net::request_error(&e)))?;
    let status = response.status().as_u16();
    if response.status().is_redirection() {
        return Err(fail(format!(
            "the server answered a redirect ({status}); it is not followed"
        )));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| fail(crate::net::request_error(&e)))?
    {
        if body.len() + chunk.len() > MAX_TOKEN_RESPONSE_BYTES {
            return Err(fail(format!(
                "the answer is over {MAX_TOKEN_RESPONSE_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((status, std::mem::take(response.headers_mut()), body))
}

/// `oauth2`'s HTTP client: its requests go through [`transfer`].
pub async fn send(
    http: &reqwest::Client,
    request: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, AuthError> {
    let request = reqwest::Request::try_from(request)
        .map_err(|e| AuthError::Loopback(crate::net::request_error(&e)))?;
    let (status, headers, body) = transfer(http, request).await?;
    let mut response = oauth2::HttpResponse::new(body);
    *response.status_mut() = oauth2::http::StatusCode::from_u16(status)
        .map_err(|_| AuthError::Loopback(format!("HTTP status {status} is not valid")))?;
    *response.headers_mut() = headers;
    Ok(response)
}

/// How `visit` showed the URL.
#[derive(Debug, PartialEq, Eq)]
pub enum Visit {
    /// A browser was started.
    Opened,
    /// No browser here (no display, an SSH session, or `--no-browser`): the URL was printed.
    Printed,
}

/// Opens `url` in the system browser, without a shell, or prints it where there is no
/// browser. Only `http`/`https` URLs are accepted. Call it only from a command a human
/// runs, never from a model's turn.
pub fn visit(url: &str, no_browser: bool) -> Result<Visit, AuthError> {
    if !(url.starts_with("https://") || url.starts_with("http://"))
        || url.chars().any(char::is_control)
    {
        return Err(AuthError::Redirect(format!(
            "refusing to open {}: not an http(s) URL",
            crate::text::shown(url)
        )));
    }
    let headless = std::env::var_os("SSH_CONNECTION").is_some()
        || (cfg!(target_os = "linux")
            && std::env::var_os("DISPLAY").is_none()
            && std::env::var_os("WAYLAND_DISPLAY").is_none());
    if !no_browser && !headless {
        let opener = if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        };
        let started = std::process::Command::new(opener)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if started.is_ok() {
            return Ok(Visit::Opened);
        }
    }
    Ok(Visit::Printed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_checks() {
        assert!(check_redirect("code=abc&state=s1", "s1").is_ok());
        let e = |q: &str| {
            check_redirect(q, "s1")
                .and_then(|c| c.code)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(e("code=abc&state=s2").contains("does not match"));
        assert!(e("code=abc").contains("no state"));
        assert!(
            e("error=access_denied&error_description=User+said+no&state=s1")
                .contains("'access_denied': User said no")
        );
        assert!(e("state=s1").contains("no authorization code"));
        assert!(
            check_pasted("http://127.0.0.1:1/callback?code=c%2B1&state=s1", "s1")
                .is_ok_and(|c| c.code.is_ok_and(|c| c.expose() == "c+1"))
        );
    }

    #[test]
    fn visit_refuses_other_schemes() {
        for bad in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "https://x\n--arg",
        ] {
            assert!(visit(bad, true).is_err(), "{bad}");
        }
        assert_eq!(
            visit("https://example.com/authorize", true).ok(),
            Some(Visit::Printed)
        );
    }
}
