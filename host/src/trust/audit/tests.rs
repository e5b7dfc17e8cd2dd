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
