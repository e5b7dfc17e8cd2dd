use super::*;

fn trail(n: u64) -> (tempfile::TempDir, AuditLog) {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = AuditLog::new(d.path());
    for i in 0..n {
        log.record("call", json!({"server": "s", "tool": format!("t{i}")}))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    (d, log)
}

fn lines(log: &AuditLog) -> Vec<String> {
    std::fs::read_to_string(log.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .lines()
        .map(str::to_owned)
        .collect()
}

fn rewrite(log: &AuditLog, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(log.path(), text).unwrap_or_else(|e| panic!("{e}"));
}

fn bad_line(log: &AuditLog) -> usize {
    match log.verify() {
        Err(TrustError::Tampered { line, .. }) => line,
        other => panic!("expected tampering to be found, got {other:?}"),
    }
}

#[test]
fn an_untouched_trail_verifies() {
    let (_d, log) = trail(5);
    assert_eq!(log.verify().unwrap_or_else(|e| panic!("{e}")), 5);
    let tail = log.tail(2).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tail.len(), 2);
    assert_eq!(tail[1]["tool"], "t4");
    assert_eq!(tail[1]["seq"], 5);
    let (_e, empty) = trail(0);
    assert_eq!(empty.verify().unwrap_or_else(|e| panic!("{e}")), 0);
}

#[test]
fn the_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let (_d, log) = trail(1);
    let mode = std::fs::metadata(log.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn an_edited_line_is_found() {
    for target in [0, 2, 4] {
        let (_d, log) = trail(5);
        let mut l = lines(&log);
        l[target] = l[target].replace(&format!("t{target}"), "tX");
        rewrite(&log, &l);
        // The edited line itself still chains to its predecessor; the line after it no
        // longer does, and the last line is checked against the head.
        let expected = if target == 4 { 5 } else { target + 2 };
        assert_eq!(bad_line(&log), expected, "edited line {}", target + 1);
    }
}

#[test]
fn a_deleted_line_is_found() {
    for target in [0, 2, 4] {
        let (_d, log) = trail(5);
        let mut l = lines(&log);
        l.remove(target);
        rewrite(&log, &l);
        let found = bad_line(&log);
        assert_eq!(found, target + 1, "deleted line {}", target + 1);
    }
}

#[test]
fn swapped_lines_are_found() {
    let (_d, log) = trail(5);
    let mut l = lines(&log);
    l.swap(1, 2);
    rewrite(&log, &l);
    assert_eq!(bad_line(&log), 2);
}

#[test]
fn a_truncated_tail_is_found() {
    let (_d, log) = trail(5);
    let l = lines(&log);
    rewrite(&log, &l[..3]);
    assert_eq!(bad_line(&log), 4);
    std::fs::write(log.path(), "").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bad_line(&log), 1);
    std::fs::remove_file(log.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bad_line(&log), 1);
}

#[test]
fn a_removed_head_stops_writing_and_fails_verification() {
    let (d, log) = trail(2);
    std::fs::remove_file(d.path().join(HEAD)).unwrap_or_else(|e| panic!("{e}"));
    assert!(log.verify().is_err());
    assert!(log.record("call", json!({})).is_err());
}

#[test]
fn a_forged_line_with_a_recomputed_chain_but_no_head_update_is_found() {
    let (_d, log) = trail(3);
    let mut l = lines(&log);
    let mut v: Value = serde_json::from_str(&l[2]).unwrap_or_else(|e| panic!("{e}"));
    v["tool"] = json!("forged");
    l[2] = v.to_string();
    rewrite(&log, &l);
    assert_eq!(bad_line(&log), 3);
}

#[test]
fn the_head_is_rewritten_in_place_whatever_its_size_before() {
    let (d, log) = trail(2);
    let head = d.path().join(HEAD);
    assert_eq!(std::fs::metadata(&head).map(|m| m.len()).ok(), Some(128));
    // As older versions wrote it (unpadded), and padded past the fixed size: both are
    // read, continued and left exactly `HEAD_BYTES` long.
    let read = || std::fs::read_to_string(&head).unwrap_or_else(|e| panic!("{e}"));
    let unpadded = |text: String| text.trim_end().to_owned();
    let overlong = |text: String| format!("{text}{}", " ".repeat(300));
    for variant in [unpadded, overlong] {
        std::fs::write(&head, variant(read())).unwrap_or_else(|e| panic!("{e}"));
        log.record("call", json!({}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::metadata(&head).map(|m| m.len()).ok(), Some(128));
        let text = read();
        assert!(text.trim_end().ends_with('}'), "{text:?}");
    }
    assert_eq!(log.verify().unwrap_or_else(|e| panic!("{e}")), 4);
}

fn keyed(dir: &Path, key: Option<[u8; 32]>) -> AuditLog {
    AuditLog::new(dir).with_key(Arc::new(move |_| key.map(AuditKey::new)))
}

/// What a process with write access to the files but not the key can do: edit a line,
/// then recompute every later `prev` and the head with plain sha256.
fn forge(log: &AuditLog, at: usize, from: &str, to: &str) {
    let mut ls = lines(log);
    ls[at] = ls[at].replace(from, to);
    let mut prev = if at == 0 {
        GENESIS.to_owned()
    } else {
        sha256_hex(ls[at - 1].as_bytes())
    };
    for l in ls.iter_mut().skip(at) {
        let mut v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}"));
        v["prev"] = json!(prev);
        *l = v.to_string();
        prev = sha256_hex(l.as_bytes());
    }
    rewrite(log, &ls);
    let head = json!({"seq": ls.len(), "hash": prev, "keyed": true}).to_string();
    std::fs::write(log.dir.join(HEAD), head).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_keyed_chain_cannot_be_recomputed_without_its_key() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // A trail that started plain, before a key existed, then keyed.
    let plain = AuditLog::new(d.path());
    plain
        .record("call", json!({"tool": "before"}))
        .unwrap_or_else(|e| panic!("{e}"));
    let log = keyed(d.path(), Some([7; 32]));
    for t in ["a", "b", "c"] {
        log.record("call", json!({"tool": t}))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(log.verify().unwrap_or_else(|e| panic!("{e}")), 4);
    assert!(lines(&log)[1].contains("\"mac\":\"hmac-sha256\""));
    // Each forgery a plain chain would not notice.
    for (at, from, to) in [(2, "\"b\"", "\"B\""), (3, "\"c\"", "\"x\"")] {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = keyed(d.path(), Some([7; 32]));
        for t in ["a", "b", "c", "d"] {
            log.record("call", json!({"tool": t}))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        forge(&log, at, from, to);
        assert_eq!(bad_line(&keyed(d.path(), Some([7; 32]))), at + 1);
        // And downgrading the whole trail to plain lines is seen too.
        let ls: Vec<String> = lines(&log)
            .iter()
            .map(|l| l.replace(",\"mac\":\"hmac-sha256\"", ""))
            .collect();
        rewrite(&log, &ls);
        forge(&log, 0, "\"a\"", "\"a\"");
        assert!(
            keyed(d.path(), Some([7; 32])).verify().is_err(),
            "a plain rewrite passed"
        );
    }
    // The wrong key checks nothing.
    assert!(keyed(d.path(), Some([8; 32])).verify().is_err());
    // Without the key, a keyed trail is neither verified nor continued.
    let keyless = keyed(d.path(), None);
    assert!(keyless.verify().is_err());
    assert!(keyless.record("call", json!({"tool": "late"})).is_err());
    assert_eq!(lines(&log).len(), 4);
}

#[test]
fn an_oversized_event_is_written_small_enough_to_read_back() {
    let (_d, log) = trail(1);
    log.record("call", json!({"tool": "x".repeat(MAX_LINE_BYTES * 2)}))
        .unwrap_or_else(|e| panic!("{e}"));
    log.record("call", json!({"tool": "after"}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(log.verify().unwrap_or_else(|e| panic!("{e}")), 3);
    let tail = log.tail(2).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        tail[0]["oversized"]
            .as_u64()
            .is_some_and(|n| n > MAX_LINE_BYTES as u64)
    );
    assert_eq!(tail[1]["tool"], "after");
}

#[test]
fn keyed_argument_digests_are_not_plain_hashes() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let args = br#"{"pin":"1234"}"#;
    assert_eq!(AuditLog::new(d.path()).digest(args), sha256_hex(args));
    let k = keyed(d.path(), Some([7; 32])).digest(args);
    assert_eq!(k.len(), 64);
    assert_ne!(k, sha256_hex(args));
    assert_ne!(k, keyed(d.path(), Some([8; 32])).digest(args));
}

#[test]
fn writers_that_keep_their_files_open_still_keep_one_chain() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Two processes' trails on one directory (each keeps its own files open).
    let (a, b) = (AuditLog::new(d.path()), AuditLog::new(d.path()));
    for i in 0..6 {
        let log = if i % 3 == 0 { &a } else { &b };
        log.record("call", json!({"n": i}))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(a.verify().unwrap_or_else(|e| panic!("{e}")), 6);
    // The trail moved away (as a rotation would): the next line goes to the path, not
    // to the moved file, and continues the chain the head names.
    let moved = d.path().join("audit.jsonl.1");
    std::fs::rename(a.path(), &moved).unwrap_or_else(|e| panic!("{e}"));
    a.record("call", json!({"n": 6}))
        .unwrap_or_else(|e| panic!("{e}"));
    let left = std::fs::read_to_string(&moved).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(left.lines().count(), 6);
    let now = lines(&a);
    assert_eq!(now.len(), 1);
    assert!(now[0].contains("\"seq\":7"), "{}", now[0]);
    // The head replaced by a rename of a copy: read afresh, and the chain goes on.
    let head = d.path().join(HEAD);
    let copy = d.path().join("head.copy");
    std::fs::copy(&head, &copy).unwrap_or_else(|e| panic!("{e}"));
    std::fs::rename(&copy, &head).unwrap_or_else(|e| panic!("{e}"));
    b.record("call", json!({"n": 7}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(lines(&b)[1].contains("\"seq\":8"));
}

/// Held by the tests that look at lines before their request ends: `write_held` (another
/// test's) writes every request's.
static HELD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_deferred_note_is_written_when_its_request_is_done_with() {
    let _one = HELD.lock().await;
    let (_d, log) = trail(1);
    let ((), held) = deferring(async {
        log.note("call", json!({"tool": "held"}));
        // Decisions are never held back.
        log.record("decision", json!({}))
            .unwrap_or_else(|e| panic!("{e}"));
    })
    .await;
    let events = |log: &AuditLog| -> Vec<String> {
        lines(log)
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap_or_default()["event"].to_string())
            .collect()
    };
    assert_eq!(events(&log), ["\"call\"", "\"decision\""]);
    drop(held);
    assert_eq!(events(&log), ["\"call\"", "\"decision\"", "\"call\""]);
    assert_eq!(log.verify().unwrap_or_else(|e| panic!("{e}")), 3);
    // Outside a request, a note is written at once.
    log.note("call", json!({}));
    assert_eq!(lines(&log).len(), 4);
}

#[tokio::test]
async fn a_cancelled_request_still_leaves_its_lines() {
    let (_d, log) = trail(0);
    let noted = tokio::sync::Notify::new();
    let work = deferring(async {
        log.note("call", json!({"tool": "cancelled"}));
        noted.notify_one();
        std::future::pending::<()>().await;
    });
    tokio::select! {
        _ = work => panic!("the work never ends"),
        () = noted.notified() => {}
    }
    assert_eq!(lines(&log).len(), 1);
    assert_eq!(
        log.tail(1).unwrap_or_else(|e| panic!("{e}"))[0]["tool"],
        "cancelled"
    );
}

#[tokio::test]
async fn held_lines_are_written_on_an_exit_that_drops_no_task() {
    let _one = HELD.lock().await;
    let (_d, log) = trail(0);
    let noted = tokio::sync::Notify::new();
    let work = deferring(async {
        log.note("call", json!({"tool": "running"}));
        noted.notify_one();
        std::future::pending::<()>().await;
    });
    let mut work = Box::pin(work);
    tokio::select! {
        _ = &mut work => panic!("the work never ends"),
        () = noted.notified() => {}
    }
    assert!(!log.path().exists() || lines(&log).is_empty());
    write_held();
    assert_eq!(lines(&log).len(), 1);
    // Written once: dropping the request afterwards adds nothing.
    drop(work);
    assert_eq!(lines(&log).len(), 1);
    assert_eq!(log.verify().unwrap_or_else(|e| panic!("{e}")), 1);
}

/// A writer that wrote the last line goes on from the head it wrote without reading it
/// again, and reads it again whenever another writer's line came between, or the head
/// file changed: the chain stays one, whoever writes in whatever order.
#[test]
fn a_writer_reads_the_head_again_only_when_another_wrote() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (AuditLog::new(d.path()), AuditLog::new(d.path()));
    for (i, log) in [&a, &a, &a, &b, &a, &b, &b, &a].into_iter().enumerate() {
        log.record("call", json!({"n": i}))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(a.verify().unwrap_or_else(|e| panic!("{e}")), 8);
    // The head edited behind a's back (its length changed), nothing appended: read
    // again, and a forged head is not continued from blindly.
    let head = d.path().join(HEAD);
    let text = std::fs::read_to_string(&head).unwrap_or_else(|e| panic!("{e}"));
    let forged = text
        .replace("\"seq\":8", "\"seq\":80")
        .trim_end()
        .to_owned();
    std::fs::write(&head, forged).unwrap_or_else(|e| panic!("{e}"));
    a.record("call", json!({"n": 8}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(lines(&a)[8].contains("\"seq\":81"), "{}", lines(&a)[8]);
}
