use super::*;

fn keys_with(command: Option<Vec<String>>) -> Keys {
    let mut k = Keys::with_store(Store::memory());
    k.providers.insert(
        "p".into(),
        Provider {
            name: "p".into(),
            env: "P_KEY".into(),
            command,
        },
    );
    k
}

fn sh(script: &str) -> Option<Vec<String>> {
    Some(vec!["sh".into(), "-c".into(), script.into()])
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// Every combination of the three sources: the environment wins, then the store, then
/// the command.
#[tokio::test]
async fn resolution_order_holds_for_every_combination() {
    for mask in 0..8u8 {
        let (env, stored, command) = (mask & 1 != 0, mask & 2 != 0, mask & 4 != 0);
        let k = keys_with(if command {
            sh("echo from-command")
        } else {
            None
        });
        if stored {
            k.store
                .write("provider:p", &Secret::new("from-store"))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let with_env = |var: &str| (var == "P_KEY").then(|| "from-env".to_owned());
        let got = if env {
            k.sign_in_with("p", &with_env).await
        } else {
            k.sign_in_with("p", &no_env).await
        };
        let want = if env {
            Some(("from-env", Source::Env("P_KEY".into())))
        } else if stored {
            Some(("from-store", Source::Stored))
        } else if command {
            Some(("from-command", Source::Command))
        } else {
            None
        };
        match (got, want) {
            (Ok((s, src)), Some((v, wsrc))) => {
                assert_eq!(s.expose(), v, "mask {mask}");
                assert_eq!(src, wsrc, "mask {mask}");
            }
            (Err(AuthError::NoKey { tried, .. }), None) => {
                assert!(
                    tried.contains("P_KEY is not set") && tried.contains("no api_key_command"),
                    "{tried}"
                )
            }
            (other, want) => panic!("mask {mask}: got {other:?}, want {want:?}"),
        }
    }
}

#[tokio::test]
async fn command_failures_are_reported_without_output() {
    let cases = [
        (
            sh("echo secret-output; exit 3"),
            "exited with exit status: 3",
        ),
        (sh("true"), "printed nothing"),
        (Some(vec!["/no/such/program".into()]), "cannot run"),
    ];
    for (cmd, want) in cases {
        let k = keys_with(cmd);
        let e = k
            .sign_in_with("p", &no_env)
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(want), "{e}");
        assert!(!e.contains("secret-output"), "{e}");
    }
    let k = keys_with(sh("printf '  spaced-key \\n'"));
    let key = k
        .sign_in_with("p", &no_env)
        .await
        .map(|(s, _)| s.expose().to_owned())
        .ok();
    assert_eq!(key.as_deref(), Some("spaced-key"));
}

#[tokio::test]
async fn a_hanging_command_times_out() {
    let k = keys_with(sh("sleep 30"));
    let t = std::time::Instant::now();
    let e = k
        .sign_in_with("p", &no_env)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("did not finish"), "{e}");
    assert!(t.elapsed() < KEY_COMMAND_TIMEOUT + Duration::from_secs(3));
}

#[test]
fn unconfigured_providers_use_name_api_key() {
    let k = Keys::with_store(Store::memory());
    assert_eq!(k.provider("anthropic").env, "ANTHROPIC_API_KEY");
    assert_eq!(k.provider("open-router").env, "OPEN_ROUTER_API_KEY");
}

#[tokio::test]
async fn the_names_of_stored_keys_are_kept_and_never_a_key() {
    let k = Keys::with_store(Store::memory());
    assert!(k.stored().await.unwrap_or_default().is_empty());
    for (name, key) in [
        ("openai", "sk-one"),
        ("anthropic", "sk-two"),
        ("openai", "sk-3"),
    ] {
        k.login(name, &Secret::new(key))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(
        k.stored().await.ok(),
        Some(vec!["anthropic".into(), "openai".into()])
    );
    let list = k.store.read(STORED_NAMES).await.ok().flatten();
    assert!(list.is_some_and(|l| !l.expose().contains("sk-")));
    k.logout("openai").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.stored().await.ok(), Some(vec!["anthropic".into()]));
    // Erasing a key never stored leaves the list as it was.
    k.logout("gemini").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.stored().await.ok(), Some(vec!["anthropic".into()]));
    k.logout("anthropic")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(k.store.read(STORED_NAMES).await.ok().flatten().is_none());
}
