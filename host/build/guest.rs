//! Builds wasm32-wasip2 guest components from a build script with a nested cargo.
//! Shared by `host/build.rs` and `tests/build.rs` (included with `#[path]`).
//!
//! The nested build uses its own `--target-dir` (sharing the outer one deadlocks on its
//! lock), the `guest` profile, `--locked`, its own rustflags (none of the host's) and no
//! wrappers.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `packages` for `wasm32-wasip2` and returns the directory holding the `.wasm` files.
pub fn build(root: &Path, packages: &[&str]) -> Result<PathBuf, String> {
    let target_dir = match env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir).join("guest-build"),
        None => root.join("target").join("guest-build"),
    };
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root).args(["build", "--quiet", "--lib"]);
    for p in packages {
        cmd.args(["-p", p]);
    }
    cmd.args([
        "--target",
        "wasm32-wasip2",
        "--profile",
        "guest",
        "--locked",
    ])
    .arg("--target-dir")
    .arg(&target_dir);
    if env::var_os("CARGO_NET_OFFLINE").is_some() {
        cmd.arg("--offline");
    }
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    // Inlining more than LLVM's default removes calls, and each call into a wasm function
    // pays an epoch check (the guard's deadline) and a stack check: over the corpus this
    // cut the reference adapter's instructions by a fifth (README, the guard benchmark).
    cmd.env(
        "CARGO_ENCODED_RUSTFLAGS",
        "-Cllvm-args=-inline-threshold=1000",
    );
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo for the guest: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the guest components {packages:?} failed ({status}; see the cargo output above). \
             If the wasm32-wasip2 target is missing, run: rustup target add wasm32-wasip2"
        ));
    }
    Ok(target_dir.join("wasm32-wasip2").join("guest"))
}

/// Prints `rerun-if-changed` for each input below `root`.
pub fn rerun_if_changed(root: &Path, inputs: &[&str]) {
    for input in inputs {
        println!("cargo:rerun-if-changed={}", root.join(input).display());
    }
}

/// The workspace root: the parent of the crate running the build script.
pub fn workspace_root() -> Result<PathBuf, String> {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    manifest
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "the crate has no parent directory".into())
}
