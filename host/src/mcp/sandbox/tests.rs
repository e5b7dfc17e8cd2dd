use super::*;

#[test]
fn an_allowed_parent_never_reaches_a_protected_child() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let home = d.path();
    for p in [
        ".ssh",
        ".config/edgar",
        ".config/other",
        ".local/state/edgar",
        "work",
    ] {
        std::fs::create_dir_all(home.join(p)).unwrap_or_else(|e| panic!("{e}"));
    }
    let protected = vec![home.join(".config/edgar"), home.join(".local/state/edgar")];
    let mut out = Vec::new();
    allow_except(&mut out, home, &protected);
    out.sort();
    assert!(out.contains(&home.join(".ssh")) && out.contains(&home.join("work")));
    assert!(out.contains(&home.join(".config/other")));
    for p in &out {
        assert!(
            !protected.iter().any(|x| x.starts_with(p)),
            "{} would grant {}",
            p.display(),
            protected[0].display()
        );
    }
    // A protected path itself, or one inside it, is never allowed.
    let mut out = Vec::new();
    allow_except(&mut out, &home.join(".config/edgar/sub"), &protected);
    assert!(out.is_empty());
}

#[test]
fn the_description_names_the_profile() {
    let p = SandboxProfile {
        read: vec![PathBuf::from("/data")],
        write: Vec::new(),
        net: Net::All,
        implied: false,
    };
    assert_eq!(
        describe(&p),
        "confined: landlock + seccomp, net: all, read: /data, write: -"
    );
    let hosts = ["api.example.com:443", "localhost:5432"]
        .iter()
        .map(|h| HostPort::parse(h).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let p = SandboxProfile {
        net: Net::Hosts(hosts),
        implied: true,
        ..p
    };
    let line = describe(&p);
    assert!(
        line.contains("net: api.example.com:443, localhost:5432 (by name, through edgar's proxy)")
            && line.ends_with("its entry's \"sandbox\" changes it)"),
        "{line}"
    );
}

#[test]
fn the_description_shows_where_a_link_leads() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = d.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(root.join("real")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(root.join("real"), root.join("link"))
        .unwrap_or_else(|e| panic!("{e}"));
    let p = SandboxProfile {
        read: vec![root.join("link"), root.join("real")],
        write: Vec::new(),
        net: Net::None,
        implied: false,
    };
    let line = describe(&p);
    let real = root.join("real").display().to_string();
    assert!(
        line.contains(&format!(
            "{} (-> {real}), {real},",
            root.join("link").display()
        )),
        "{line}"
    );
}
