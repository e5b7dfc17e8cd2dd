//! Builds the reference guest component (`guest-schema`) so a plain `cargo build`
//! produces it, and passes its path to the crate as `EDGAR_GUEST_WASM`. Set
//! `EDGAR_GUEST_WASM` to an already built component to skip the nested build.

#[path = "build/guest.rs"]
mod guest;

use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    println!("cargo:rerun-if-env-changed=EDGAR_GUEST_WASM");
    if let Ok(prebuilt) = std::env::var("EDGAR_GUEST_WASM") {
        println!("cargo:rerun-if-changed={prebuilt}");
        println!("cargo:rustc-env=EDGAR_GUEST_WASM={prebuilt}");
        return Ok(());
    }
    let root = guest::workspace_root()?;
    guest::rerun_if_changed(
        &root,
        &[
            "guest-schema/src",
            "guest-schema/Cargo.toml",
            "wit",
            "Cargo.lock",
        ],
    );
    let wasm = guest::build(&root, &["edgar-guest-schema"])?.join("guest_schema.wasm");
    if !wasm.is_file() {
        return Err(format!("the guest build produced no {}", wasm.display()));
    }
    println!("cargo:rustc-env=EDGAR_GUEST_WASM={}", wasm.display());
    Ok(())
}
