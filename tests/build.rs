//! Builds the misbehaving test adapters (`tests/adapters/`) as wasm components and
//! passes their directory to the tests as `EDGAR_TEST_ADAPTERS`.

#[path = "../host/build/guest.rs"]
mod guest;

use std::process::ExitCode;

fn main() -> ExitCode {
    let result = guest::workspace_root().and_then(|root| {
        guest::rerun_if_changed(
            &root,
            &["tests/adapters", "wit", "Cargo.lock", "Cargo.toml"],
        );
        guest::build(
            &root,
            &[
                "edgar-test-adapter-misbehaving",
                "edgar-test-adapter-wrong-shape",
                "edgar-test-adapter-other-version",
            ],
        )
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
