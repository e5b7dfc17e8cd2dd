use super::authorize::check_issuer;
use super::*;
use crate::config::ServerSpec;

fn auth(url: &str) -> McpAuth {
    McpAuth::new(&ServerSpec::http("s", url), Store::memory(), None)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A sign-in held from a shared store is believed for [`RECHECK`], then the store
/// is asked again: a sign-out at another replica reaches this one within it.
#[tokio::test]
async fn a_shared_sign_in_is_read_again_after_the_recheck() {
    use crate::auth::store::{MemoryVault, UserSecrets};
    use std::sync::Arc;
    let vault: Arc<dyn crate::auth::vault::TokenVault> = Arc::new(MemoryVault::default());
    let replica = || Store::User(UserSecrets::new("ada", Some(vault.clone())));
    let here = McpAuth::new(
        &ServerSpec::http("s", "https://mcp.example/"),
        replica(),
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let elsewhere = replica();
    let creds = Credentials {
        access_token: "t1".into(),
        refresh_token: None,
        expires_at: None,
        obtained_at: None,
        scope: None,
        resource: "https://mcp.example/".into(),
        token_endpoint: "https://as.example/token".into(),
        client: token::Client {
            id: "c".into(),
            secret: None,
            method: "none".into(),
            issuer: None,
        },
        wanted_scope: None,
        revocation_endpoint: None,
    };
    let text = serde_json::to_string(&creds).unwrap_or_else(|e| panic!("{e}"));
    elsewhere
        .write(&here.key, &Secret::new(text))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut st = State::default();
    here.load(&mut st).await;
    assert_eq!(
        st.creds.as_ref().map(|c| c.access_token.as_str()),
        Some("t1")
    );
    // Signed out at another replica: still held here within the recheck ...
    elsewhere
        .erase(&here.key)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    here.load(&mut st).await;
    assert!(st.creds.is_some());
    // ... and gone once it has passed.
    st.loaded_at = std::time::Instant::now().checked_sub(RECHECK + Duration::from_secs(1));
    assert!(st.loaded_at.is_some());
    here.load(&mut st).await;
    assert!(st.creds.is_none());
    // A store only this process has is not asked again.
    let alone = McpAuth::new(
        &ServerSpec::http("s", "https://mcp.example/"),
        Store::memory(),
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut st = State::default();
    alone.load(&mut st).await;
    let at = st.loaded_at;
    st.loaded_at = at.and_then(|t| t.checked_sub(RECHECK + Duration::from_secs(1)));
    let before = st.loaded_at;
    alone.load(&mut st).await;
    assert_eq!(st.loaded_at, before);
}

#[test]
fn unattended_fetches_count_only_in_a_row() {
    let t0 = std::time::Instant::now();
    assert!(!in_a_row(None, t0));
    assert!(in_a_row(Some(t0), t0 + Duration::from_secs(5)));
    assert!(in_a_row(Some(t0), t0 + UNATTENDED_WINDOW));
    assert!(!in_a_row(
        Some(t0),
        t0 + UNATTENDED_WINDOW + Duration::from_secs(1)
    ));
}

#[test]
fn a_redirect_from_another_issuer_is_refused() {
    let issuer = Some("https://as.example");
    assert!(check_issuer(issuer, false, None).is_ok());
    assert!(check_issuer(issuer, true, Some("https://as.example")).is_ok());
    // Compared as strings, nothing normalized (MCP 2026-07-28).
    for near in [
        "https://as.example/",
        "HTTPS://as.example",
        "https://as.example:443",
    ] {
        assert!(check_issuer(issuer, false, Some(near)).is_err(), "{near}");
    }
    let e = check_issuer(issuer, false, Some("https://evil.example"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("evil.example") && e.contains("refusing"), "{e}");
    assert!(check_issuer(issuer, true, None).is_err());
}

#[test]
fn a_remote_server_cannot_send_sign_in_to_local_or_private_addresses() {
    let remote = auth("https://mcp.example.com/mcp");
    for target in [
        "http://169.254.169.254/latest/meta-data",
        "https://127.0.0.1:8080/.well-known/oauth-authorization-server",
        "https://10.0.0.7/token",
        "https://[::1]/register",
        "https://localhost/authorize",
    ] {
        let u = Url::parse(target).unwrap_or_else(|e| panic!("{e}"));
        assert!(remote.reachable(&u, "x").is_err(), "{target}");
    }
    let public = Url::parse("https://auth.example.com/token").unwrap_or_else(|e| panic!("{e}"));
    assert!(remote.reachable(&public, "x").is_ok());
    // Local development: a server on loopback may use a local authorization server.
    let local = auth("http://127.0.0.1:3000/mcp");
    let u = Url::parse("http://127.0.0.1:3001/token").unwrap_or_else(|e| panic!("{e}"));
    assert!(local.reachable(&u, "x").is_ok());
    assert!(
        McpAuth::new(
            &ServerSpec::http("s", "http://mcp.example.com/mcp"),
            Store::memory(),
            None
        )
        .is_err()
    );
}
