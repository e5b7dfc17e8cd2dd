//! A confined server's own caches. A launcher (`npx -y`, `uvx`, `pipx run`, `pnpm dlx`,
//! `bunx`) fetches packages into a cache and runs code from it later; the user's own
//! caches are where their unconfined tools run code from, so a confined server that
//! could write them could plant code that runs outside its confinement. Each confined
//! server gets a directory of its own instead, keyed by its entry's identity (whose
//! config it is in, the user's or which project's, its name, command and arguments: a
//! project's server never shares one with the user's server of the same command), and
//! its launchers are pointed at it by their own variables (not `XDG_*`, which a server
//! may read its data by). It is the only place in the home a server writes that its
//! profile does not name.

use std::path::{Path, PathBuf};

/// What each launcher reads for where its caches are, and the directory under the
/// server's own that each gets.
const POINTED: &[(&str, &str)] = &[
    ("npm_config_cache", "npm"),
    ("npm_config_store_dir", "pnpm-store"),
    ("YARN_CACHE_FOLDER", "yarn"),
    ("BUN_INSTALL_CACHE_DIR", "bun"),
    ("UV_CACHE_DIR", "uv/cache"),
    ("UV_TOOL_DIR", "uv/tools"),
    ("UV_PYTHON_INSTALL_DIR", "uv/python"),
    ("PIP_CACHE_DIR", "pip"),
    ("PIPX_HOME", "pipx"),
];

/// A confined server's own cache directory and the variables that point its launchers
/// there.
pub(super) struct Caches {
    pub dir: PathBuf,
    pub env: Vec<(&'static str, PathBuf)>,
}

/// The caches of the entry whose identity is `identity` (`Program::identity`):
/// `<XDG_CACHE_HOME or ~/.cache>/edgar-sandbox/<digest>`, made (0700) if missing.
/// `None` without a home, or when it cannot be made (a launcher then says what it
/// could not write).
pub(super) fn private(identity: &[String], home: &Path) -> Option<Caches> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".cache"));
    // Each part's length first, so no two identities join to the same bytes.
    let mut bytes = Vec::new();
    for part in identity {
        bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
        bytes.extend_from_slice(part.as_bytes());
    }
    let key = crate::digest::sha256_hex(&bytes);
    let dir = base.join("edgar-sandbox").join(&key[..16]);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .ok()?;
    }
    let env = POINTED
        .iter()
        .map(|(var, sub)| (*var, dir.join(sub)))
        .collect();
    Some(Caches { dir, env })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_gets_a_private_cache_that_its_launchers_are_pointed_at() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let h = home.path();
        let id = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let a = private(&id(&["user", "a", "npx", "-y", "pkg-a"]), h);
        let b = private(&id(&["user", "b", "npx", "-y", "pkg-b"]), h);
        let (Some(a), Some(b)) = (a, b) else {
            panic!("no private cache was made");
        };
        assert_ne!(a.dir, b.dir, "two servers share nothing");
        let mode = std::fs::metadata(&a.dir)
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
            .unwrap_or_default();
        assert_eq!(mode, 0o700);
        let npm = a.env.iter().find(|(k, _)| *k == "npm_config_cache");
        assert_eq!(npm.map(|(_, p)| p.clone()), Some(a.dir.join("npm")));
        assert!(a.env.iter().all(|(_, p)| p.starts_with(&a.dir)));
        // The same entry again: the same cache, so a warm start stays warm.
        let again = private(&id(&["user", "a", "npx", "-y", "pkg-a"]), h).map(|c| c.dir);
        assert_eq!(again, Some(a.dir.clone()));
        // A project's entry of the same name and command is not the user's.
        let project = private(&id(&["project\0/src/repo", "a", "npx", "-y", "pkg-a"]), h);
        assert_ne!(project.map(|c| c.dir), Some(a.dir.clone()));
        // Parts are not joined ambiguously.
        let x = private(&id(&["user", "a b", "c"]), h).map(|c| c.dir);
        let y = private(&id(&["user", "a", "b c"]), h).map(|c| c.dir);
        assert_ne!(x, y);
        // The user's own caches are not made.
        assert!(!h.join(".npm").exists() && !h.join(".cache/uv").exists());
    }
}
