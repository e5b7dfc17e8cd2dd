//! The real loopback listener, driven by a real HTTP client (curl).

use std::time::{Duration, Instant};

use edgar_host::auth::oauth::Loopback;

/// `curl` against `url`: (exit code, HTTP status, body). Exit 7 means nothing listened.
async fn curl(url: String) -> (i32, String, String) {
    let out = tokio::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "--max-time",
            "5",
            &url,
        ])
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!("curl is missing ({e}); the tests use it as a real HTTP client")
        });
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        out.status.code().unwrap_or(-1),
        status.to_owned(),
        body.to_owned(),
    )
}

async fn run(query: &str, wait: Duration) -> (Result<String, String>, (i32, String, String), Port) {
    let lb = Loopback::bind(None).await.unwrap_or_else(|e| panic!("{e}"));
    let base = lb.redirect_uri();
    let port = lb.port();
    let listen = tokio::spawn(async move { lb.listen("the-state", wait).await });
    let client = curl(format!("{base}?{query}")).await;
    let result = listen
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .and_then(|c| c.code)
        .map(|c| c.expose().to_owned())
        .map_err(|e| e.to_string());
    (result, client, Port(port))
}

/// The port a finished listener used.
struct Port(u16);

#[tokio::test]
async fn a_good_redirect_is_answered_once() {
    let (result, (_, status, body), lb) =
        run("code=the-code&state=the-state", Duration::from_secs(10)).await;
    assert_eq!(result.as_deref(), Ok("the-code"));
    assert_eq!(status, "200");
    assert!(body.contains("You can close this window"), "{body}");
    let (exit, _, _) = curl(format!(
        "http://127.0.0.1:{}/callback?code=again&state=the-state",
        lb.0
    ))
    .await;
    assert_eq!(exit, 7, "a second request finds nothing listening");
}

#[tokio::test]
async fn refusals_are_clear() {
    for (query, expect) in [
        ("code=c&state=wrong", "does not match"),
        ("code=c", "no state"),
        (
            "error=access_denied&error_description=Nope&state=the-state",
            "'access_denied': Nope",
        ),
    ] {
        let (result, (_, status, _), _) = run(query, Duration::from_secs(10)).await;
        let e = result.err().unwrap_or_default();
        assert!(e.contains(expect), "{query}: {e}");
        assert_eq!(status, "400", "{query}");
    }
}

#[tokio::test]
async fn a_wrong_path_gets_404_and_the_wait_goes_on() {
    let lb = Loopback::bind(None).await.unwrap_or_else(|e| panic!("{e}"));
    let port = lb.port();
    let listen = tokio::spawn(async move { lb.listen("s", Duration::from_secs(10)).await });
    let (_, status, _) = curl(format!("http://127.0.0.1:{port}/favicon.ico")).await;
    assert_eq!(status, "404");
    let (_, status, _) = curl(format!("http://127.0.0.1:{port}/callback?code=c&state=s")).await;
    assert_eq!(status, "200");
    assert!(listen.await.unwrap_or_else(|e| panic!("{e}")).is_ok());
}

#[tokio::test]
async fn a_wait_times_out() {
    let lb = Loopback::bind(None).await.unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    let e = lb
        .listen("s", Duration::from_millis(300))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("no sign-in redirect arrived"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_taken_fixed_port_fails_at_once() {
    let first = Loopback::bind(None).await.unwrap_or_else(|e| panic!("{e}"));
    let e = Loopback::bind(Some(first.port()))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains(&format!("127.0.0.1:{}", first.port())), "{e}");
}

/// A tiny HTTP server on loopback answering every connection with `response`; returns its
/// URL and how many requests it saw.
async fn serve(response: Vec<u8>) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = vec![0u8; 8192];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(&response).await;
            let _ = s.shutdown().await;
        }
    });
    (format!("http://127.0.0.1:{port}/token"), hits)
}

#[tokio::test]
async fn post_reads_json_and_never_follows_redirects() {
    use edgar_host::auth::Secret;
    use edgar_host::auth::oauth::post;
    let body = r#"{"access_token":"at","token_type":"Bearer"}"#;
    let ok = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (url, _) = serve(ok.into_bytes()).await;
    let secret = Secret::new("client-secret-value");
    let r = post(
        &url,
        &[("grant_type", "authorization_code")],
        Some(("client id", &secret)),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (r.status, r.json["access_token"].as_str()),
        (200, Some("at"))
    );

    let (target, target_hits) =
        serve(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_vec()).await;
    let redirect = format!(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let (url, _) = serve(redirect.into_bytes()).await;
    let e = post(&url, &[("code", "c")], None)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("not followed"), "{e}");
    assert_eq!(target_hits.load(std::sync::atomic::Ordering::SeqCst), 0);

    let huge = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        3 << 20,
        "x".repeat(3 << 20)
    );
    let (url, _) = serve(huge.into_bytes()).await;
    let e = post(&url, &[], None)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("over 1048576 bytes"), "{e}");
    assert!(!e.contains("client-secret-value"));

    // Parsed, not compared as a prefix: these hosts are not this machine.
    for url in [
        "http://example.com/token",
        "http://127.0.0.1.nip.io/token",
        "http://localhost.example.com/token",
        "http://127.0.0.1@example.com/token",
    ] {
        let e = post(url, &[], None)
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("HTTPS is required"), "{url}: {e}");
    }
}

#[tokio::test]
async fn a_token_answer_edgar_cannot_use_is_refused_without_showing_it() {
    use edgar_host::auth::mcp::token::{self, Client, Grant};
    let http = edgar_host::auth::oauth::http_client().unwrap_or_else(|e| panic!("{e}"));
    let client = Client {
        id: "edgar".into(),
        secret: Some("client-secret-value".into()),
        method: "client_secret_basic".into(),
        issuer: None,
    };
    let answer = |status: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    for (response, want) in [
        (
            answer(
                "200 OK",
                r#"{"access_token":"tok-secret-1","token_type":"Bearer","expires_in":"soon"}"#,
            ),
            "not understood (at 'expires_in')",
        ),
        (
            answer("200 OK", r#"{"access_token":"tok-secret-1","token_type":"mac"}"#),
            "the token type is 'mac', not Bearer",
        ),
        (
            b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: 5\r\nConnection: close\r\n\r\n<h1/>"
                .to_vec(),
            "HTTP 502 from the token endpoint",
        ),
        (
            answer("400 Bad Request", r#"{"error":"invalid_grant"}"#),
            "'invalid_grant'",
        ),
    ] {
        let (url, _) = serve(response).await;
        let refusal = token::request(
            http,
            &url,
            &client,
            None,
            Grant::Refresh("refresh-secret-2"),
            "https://mcp.example/mcp",
        )
        .await
        .err()
        .unwrap_or_else(|| panic!("{want}: accepted"));
        let is_final = refusal.is_final();
        let e = refusal.into_error().to_string();
        assert!(e.contains(want), "{e}");
        assert_eq!(is_final, want == "'invalid_grant'", "{e}");
        for secret in ["tok-secret-1", "refresh-secret-2", "client-secret-value"] {
            assert!(!e.contains(secret), "{e}");
        }
    }
}
