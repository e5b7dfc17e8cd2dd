//! Builds the reference guest component (`guest-schema`) so a plain `cargo build`
//! produces it, and passes its path to the crate as `EDGAR_GUEST_WASM`. Set
//! `EDGAR_GUEST_WASM` to an already built component to skip the nested build. Also
//! writes the bundled vocabulary's sorted table (`build/vocab.rs`).

#[path = "build/guest.rs"]
mod guest;
#[path = "build/vocab.rs"]
mod vocab;

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
    let dir = |var: &str| {
        std::env::var_os(var)
            .map(std::path::PathBuf::from)
            .ok_or_else(|| format!("cargo set no {var}"))
    };
    vocab::emit(&dir("CARGO_MANIFEST_DIR")?, &dir("OUT_DIR")?)?;
    println!("cargo:rerun-if-env-changed=EDGAR_GUEST_WASM");
    if let Ok(prebuilt) = std::env::var("EDGAR_GUEST_WASM") {
        println!("cargo:rerun-if-changed={prebuilt}");
        println!("cargo:rustc-env=EDGAR_GUEST_WASM={prebuilt}");
        return emit_digest(std::path::Path::new(&prebuilt));
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
    emit_digest(&wasm)
}

/// The component's sha256, so cached guard outputs can be keyed by it without hashing
/// 170 KB at every start.
fn emit_digest(wasm: &std::path::Path) -> Result<(), String> {
    use sha2::Digest;
    let bytes = std::fs::read(wasm).map_err(|e| format!("cannot read {}: {e}", wasm.display()))?;
    let digest: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("cargo:rustc-env=EDGAR_GUEST_DIGEST={digest}");
    Ok(())
}
