use super::*;
use crate::auth::mcp::token::Client;
use crate::config::Grant;

fn spec(name: &str) -> ServerSpec {
    let mut spec = ServerSpec::http(name, "http://127.0.0.1:9/mcp");
    spec.oauth.grant = Grant::UserSignIn;
    spec
}

fn sign_ins(sealer: Sealer) -> UserSignIns {
    let other = ServerSpec::http("shared", "http://127.0.0.1:9/other");
    UserSignIns::new(
        "https://gw.example/oauth/callback".into(),
        sealer,
        None,
        [spec("acct"), other],
    )
}

fn key(byte: u8) -> Sealer {
    Sealer::new(&[byte; 32])
}

fn pending(server: &str, until: u64) -> Pending {
    Pending {
        server: server.into(),
        sub: "ada".into(),
        id: "0123456789abcdef".into(),
        until,
        begun: Begun {
            verifier: "v".repeat(43),
            redirect_uri: "https://gw.example/oauth/callback".into(),
            resource: "http://127.0.0.1:9/mcp".into(),
            client: Client {
                id: "c".into(),
                secret: None,
                method: "none".into(),
                issuer: None,
            },
            token_endpoint: "http://127.0.0.1:9/token".into(),
            issuer: None,
            iss_in_response: false,
            revocation_endpoint: None,
        },
    }
}

/// A callback query whose `state` is `p` sealed by `sealer` under `bound`.
fn query(sealer: &Sealer, bound: &str, p: &Pending) -> String {
    let plain = serde_json::to_vec(p).unwrap_or_else(|e| panic!("{e}"));
    let sealed = sealer
        .seal(&[bound], &plain)
        .unwrap_or_else(|| panic!("sealing failed"));
    format!("code=c&state={}", URL_SAFE_NO_PAD.encode(sealed))
}

fn anyone(_: &str, _: &str) -> Result<(), AuthError> {
    Ok(())
}

fn refusal(got: Result<Finished, AuthError>) -> String {
    match got {
        Ok(f) => panic!("finished {f:?}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_callback_the_gateway_did_not_begin_finishes_nothing() {
    let ours = sign_ins(key(1));
    let later = crate::clock::now() + 60;
    let cases = [
        ("no state".to_owned(), "code=c".to_owned()),
        ("not base64".to_owned(), "code=c&state=%%%".to_owned()),
        (
            "random bytes".to_owned(),
            format!("code=c&state={}", "A".repeat(80)),
        ),
        (
            "another gateway's key".to_owned(),
            query(&key(2), BOUND, &pending("acct", later)),
        ),
        (
            "sealed for something else".to_owned(),
            query(&key(1), "edgar client session", &pending("acct", later)),
        ),
    ];
    for (what, q) in cases {
        let why = refusal(ours.finish(&q, anyone).await);
        assert!(why.contains("not one the gateway made"), "{what}: {why}");
    }
    // One altered character anywhere in a good state.
    let good = query(&key(1), BOUND, &pending("acct", later));
    let at = good.len() - 5;
    let mut altered = good.clone().into_bytes();
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap_or_else(|e| panic!("{e}"));
    let why = refusal(ours.finish(&altered, anyone).await);
    assert!(why.contains("not one the gateway made"), "{why}");
}

#[tokio::test]
async fn a_late_refused_or_foreign_sign_in_is_said_so() {
    let ours = sign_ins(key(1));
    let late = query(&key(1), BOUND, &pending("acct", crate::clock::now() - 1));
    assert!(refusal(ours.finish(&late, anyone).await).contains("longer than 10 minutes"));
    let later = crate::clock::now() + 60;
    // A server that is not signed in to per user (no longer, or never).
    for server in ["shared", "gone"] {
        let q = query(&key(1), BOUND, &pending(server, later));
        let why = refusal(ours.finish(&q, anyone).await);
        assert!(
            why.contains("no longer signed in to per user"),
            "{server}: {why}"
        );
    }
    let refused = format!(
        "error=access_denied%0A&{}",
        query(&key(1), BOUND, &pending("acct", later))
    );
    let why = refusal(ours.finish(&refused, anyone).await);
    assert!(
        why.contains("access_denied") && !why.contains('\n'),
        "{why}"
    );
    let no_code = query(&key(1), BOUND, &pending("acct", later)).replace("code=c&", "");
    assert!(refusal(ours.finish(&no_code, anyone).await).contains("no code"));
}

#[test]
fn only_user_sign_in_servers_are_signed_in_to_and_their_state_is_replaced() {
    let ours = sign_ins(key(1));
    assert!(ours.signs_in("acct"));
    assert!(!ours.signs_in("shared"));
    assert!(ours.server("shared").is_none());
    let a = ours.server("acct").unwrap_or_else(|| panic!("no sign-in"));
    let b = ours.server("acct").unwrap_or_else(|| panic!("no sign-in"));
    assert!(Arc::ptr_eq(&a, &b), "one sign-in per server");
    let resource = Url::parse("https://gw.example:8443/team/mcp").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        UserSignIns::callback_for(&resource),
        "https://gw.example:8443/oauth/callback"
    );
    let mut url = Url::parse("https://as.example/authorize?client_id=c&state=old&scope=a%20b")
        .unwrap_or_else(|e| panic!("{e}"));
    set_state(&mut url, "new");
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("client_id".into(), "c".into()),
            ("scope".into(), "a b".into()),
            ("state".into(), "new".into())
        ]
    );
}

#[tokio::test]
async fn a_message_for_no_user_or_a_user_not_signed_in_carries_no_token() {
    let ours = sign_ins(key(1));
    let acct = ours.server("acct").unwrap_or_else(|| panic!("no sign-in"));
    assert!(acct.bearer().await.is_none());
    assert!(acct.bearer_for(None).await.is_none());
    let ada = Subject {
        sub: "ada".into(),
        token: Arc::new(Secret::new("eyJ.inbound.token")),
    };
    assert!(acct.bearer_for(Some(&ada)).await.is_none());
    assert!(!ours.signed_in("acct", "ada").await);
    // A refusal needs the user: no retry, and the server's metadata is remembered.
    let challenge = Challenge {
        resource_metadata: Some("http://127.0.0.1:9/.well-known/oauth-protected-resource".into()),
        ..Challenge::default()
    };
    assert!(
        !acct
            .refused_for(Some(&ada), 401, Some(&challenge), None)
            .await
    );
    let kept = acct
        .challenge
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    assert_eq!(kept, Some(challenge));
    // What a debugger shows holds no key.
    let shown = format!("{ours:?}");
    assert!(
        shown.contains("acct") && shown.contains("callback"),
        "{shown}"
    );
}

#[tokio::test]
async fn nothing_is_exchanged_for_a_browser_the_check_refuses() {
    let ours = sign_ins(key(1));
    let q = query(&key(1), BOUND, &pending("acct", crate::clock::now() + 60));
    let mut asked = None;
    let got = ours
        .finish(&q, |sub, id| {
            asked = Some((sub.to_owned(), id.to_owned()));
            Err(AuthError::Redirect("not this browser".into()))
        })
        .await;
    assert!(refusal(got).contains("not this browser"));
    assert_eq!(asked, Some(("ada".into(), "0123456789abcdef".into())));
}
