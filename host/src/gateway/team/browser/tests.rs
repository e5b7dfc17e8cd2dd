use super::*;

fn config(resource: &str, browser: bool) -> TeamConfig {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut file = serde_json::json!({
        "resource": resource,
        "issuer": "http://127.0.0.1:9/idp",
        "policy": "team.cedar",
    });
    if browser {
        file["browser_client"] = serde_json::json!({"client_id": "gw-browser"});
    }
    let path = dir.path().join("gateway.json");
    std::fs::write(&path, file.to_string()).unwrap_or_else(|e| panic!("{e}"));
    TeamConfig::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn browser(key: u8) -> Browser {
    Browser::new(&config("https://gw.example/mcp", true), &[key; 32])
        .unwrap_or_else(|| panic!("no browser client"))
}

/// The cookie `b` sets for `sub` and sign-in `id`, good until `until`, as sent back.
fn cookie(b: &Browser, sub: &str, id: &str, until: u64) -> String {
    let proven = Proven {
        sub: sub.into(),
        id: id.into(),
        until,
    };
    let value = b
        .seal(BOUND_COOKIE, &proven)
        .unwrap_or_else(|e| panic!("{e}"));
    format!("other=1; {COOKIE_PREFIX}{id}={value}")
}

#[test]
fn only_a_browser_shown_to_be_the_user_finishes_their_sign_in() {
    let b = browser(1);
    let later = crate::clock::now() + 60;
    let good = cookie(&b, "ada", "s1", later);
    assert!(b.proves([good.as_str()], "ada", "s1"));
    // Among several Cookie headers too.
    assert!(b.proves(["a=b", good.as_str()], "ada", "s1"));
    for (what, header, sub, id) in [
        ("no cookie", String::new(), "ada", "s1"),
        ("another user's", good.clone(), "mallory", "s1"),
        ("another sign-in's", good.clone(), "ada", "s2"),
        (
            "one another sign-in's under this one's name",
            cookie(&b, "ada", "s2", later).replace("_s2=", "_s1="),
            "ada",
            "s1",
        ),
        (
            "stale",
            cookie(&b, "ada", "s1", crate::clock::now() - 1),
            "ada",
            "s1",
        ),
        (
            "another gateway's",
            cookie(&browser(2), "ada", "s1", later),
            "ada",
            "s1",
        ),
        (
            "not sealed",
            format!("{COOKIE_PREFIX}s1=eyJzdWIiOiJhZGEifQ"),
            "ada",
            "s1",
        ),
        ("garbage", format!("{COOKIE_PREFIX}s1=%%%;;=="), "ada", "s1"),
    ] {
        assert!(!b.proves([header.as_str()], sub, id), "{what}");
    }
    // A sealed identity-leg state is no cookie.
    let going = Going {
        upstream: "https://as.example/authorize".into(),
        sub: "ada".into(),
        id: "s1".into(),
        verifier: "v".into(),
        nonce: "n".into(),
        until: later,
    };
    let state = b
        .seal(BOUND_STATE, &going)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!b.proves([format!("{COOKIE_PREFIX}s1={state}").as_str()], "ada", "s1"));
}

#[tokio::test]
async fn a_return_from_the_company_the_gateway_did_not_send_goes_nowhere() {
    let b = browser(1);
    let config = config("https://gw.example/mcp", true);
    let verifier = Verifier::new(&config);
    let going = |until| Going {
        upstream: "https://as.example/authorize".into(),
        sub: "ada".into(),
        id: "s1".into(),
        verifier: "v".into(),
        nonce: "n".into(),
        until,
    };
    let stale = b
        .seal(BOUND_STATE, &going(crate::clock::now() - 1))
        .unwrap_or_else(|e| panic!("{e}"));
    let other = browser(2)
        .seal(BOUND_STATE, &going(crate::clock::now() + 60))
        .unwrap_or_else(|e| panic!("{e}"));
    let as_cookie = b
        .seal(BOUND_COOKIE, &going(crate::clock::now() + 60))
        .unwrap_or_else(|e| panic!("{e}"));
    for (query, says) in [
        ("code=c".to_owned(), "not one the gateway made"),
        (format!("code=c&state={other}"), "not one the gateway made"),
        (
            format!("code=c&state={as_cookie}"),
            "not one the gateway made",
        ),
        (format!("code=c&state={stale}"), "longer than 10 minutes"),
        (
            "error=login_required%0D%0Ax&state=x".to_owned(),
            "refused: 'login_required",
        ),
    ] {
        match b.identified(&query, &verifier).await {
            Ok(_) => panic!("{query} went on"),
            Err(why) => {
                assert!(why.contains(says), "{query}: {why}");
                assert!(!why.contains('\r') && !why.contains('\n'), "{why}");
            }
        }
    }
}

#[test]
fn the_cookie_is_secure_on_https_and_the_check_needs_a_client() {
    assert!(browser(1).secure);
    let loopback = Browser::new(&config("http://127.0.0.1:8080/mcp", true), &[1; 32]);
    assert!(
        loopback
            .is_some_and(|b| !b.secure && b.redirect_uri == "http://127.0.0.1:8080/oauth/identity")
    );
    assert!(Browser::new(&config("https://gw.example/mcp", false), &[1; 32]).is_none());
}
