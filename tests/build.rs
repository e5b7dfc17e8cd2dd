//! Builds the misbehaving test adapters (`tests/adapters/`) as wasm components and
//! passes their directory to the tests as `EDGAR_TEST_ADAPTERS`; the hostile ones written
//! in WebAssembly text (`tests/adapters/hostile/*.wat`) land there too, as
//! `edgar_test_adapter_hostile_NAME.wasm`.

#[path = "../host/build/guest.rs"]
mod guest;

use std::path::Path;
use std::process::ExitCode;

use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::Resolve;

fn main() -> ExitCode {
    let result = guest::workspace_root().and_then(|root| {
        guest::rerun_if_changed(
            &root,
            &["tests/adapters", "wit", "Cargo.lock", "Cargo.toml"],
        );
        let dir = guest::build(
            &root,
            &[
                "edgar-test-adapter-misbehaving",
                "edgar-test-adapter-wrong-shape",
                "edgar-test-adapter-other-version",
                "edgar-test-adapter-previous-version",
            ],
        )?;
        build_text_adapters(&root, &dir)?;
        Ok(dir)
    });
    match result {
        Ok(dir) => {
            println!("cargo:rustc-env=EDGAR_TEST_ADAPTERS={}", dir.display());
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Each `hostile/*.wat` core module, given the `schema-adapter` world's metadata and
/// encoded as a component, exactly as `wasm-tools component new` would.
fn build_text_adapters(root: &Path, out: &Path) -> Result<(), String> {
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve
        .push_dir(root.join("wit"))
        .map_err(|e| format!("cannot read wit/: {e:#}"))?;
    let world = resolve
        .select_world(&[pkg], Some("schema-adapter"))
        .map_err(|e| format!("{e:#}"))?;
    let dir = root.join("tests/adapters/hostile");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_none_or(|x| x != "wat") {
            continue;
        }
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| format!("{}: not a UTF-8 name", path.display()))?;
        let mut module = wat::parse_file(&path).map_err(|e| format!("{e}"))?;
        wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)
            .map_err(|e| format!("{}: {e:#}", path.display()))?;
        let component = ComponentEncoder::default()
            .validate(true)
            .module(&module)
            .and_then(|mut e| e.encode())
            .map_err(|e| format!("{}: {e:#}", path.display()))?;
        let file = out.join(format!("edgar_test_adapter_hostile_{name}.wasm"));
        std::fs::write(&file, component).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(())
}
