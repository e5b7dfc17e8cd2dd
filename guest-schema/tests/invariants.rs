//! The guard's promises about its own output (`support/invariants.rs`) over the real
//! corpus of 2,506 tools from 106 published servers, and over every input a fuzz target
//! found that broke one (`found/`, named `TARGET-what.json`; `fuzz/README.md`).

mod support;

use std::error::Error;
use std::path::Path;

use support::invariants;

#[test]
fn every_corpus_tool_keeps_the_guards_promises() -> Result<(), Box<dyn Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/corpus");
    let mut tools = 0;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let server: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        for tool in server["tools"].as_array().ok_or("a server without tools")? {
            invariants::tool(&tool.to_string());
            tools += 1;
        }
    }
    assert_eq!(tools, 2506);
    Ok(())
}

#[test]
fn every_input_the_fuzzers_found_keeps_them_now() -> Result<(), Box<dyn Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/found");
    let mut found = 0;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&path)?;
        match name.split('-').next() {
            Some("tool") => invariants::tool(&text),
            Some("result") => invariants::result(&text),
            Some("context") => invariants::context(&text),
            _ => panic!("{name}: name it after its fuzz target"),
        }
        found += 1;
    }
    assert!(found > 0);
    Ok(())
}
