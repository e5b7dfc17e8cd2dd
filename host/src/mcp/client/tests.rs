use super::*;

fn session() -> Session {
    Session::new(
        &Config::default(),
        SessionOptions::new(std::env::temp_dir(), None),
    )
}

/// A long session keeps the handles of the background tasks still running, not one
/// per task it ever ran; `close` aborts those.
#[tokio::test]
async fn finished_background_tasks_are_forgotten_and_running_ones_aborted() {
    let session = session();
    for _ in 0..5 {
        let done = tokio::spawn(async {});
        let handle = done.abort_handle();
        done.await.unwrap_or_else(|e| panic!("{e}"));
        session.keep(handle);
    }
    assert_eq!(crate::sync::lock(&session.background).len(), 1);
    let endless = tokio::spawn(std::future::pending::<()>());
    session.keep(endless.abort_handle());
    let kept = crate::sync::lock(&session.background).clone();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].id(), endless.id());
    session.close().await;
    let ended = endless.await;
    assert!(ended.is_err_and(|e| e.is_cancelled()));
    assert!(crate::sync::lock(&session.background).is_empty());
}
