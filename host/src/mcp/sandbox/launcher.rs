//! The caches a launcher (`npx`, `uvx`, `pipx`, ...) writes in the home, which a
//! confined server running it may write: only those, never the rest of the home.

use std::path::{Path, PathBuf};

/// The caches `command` writes, as they are on disk: each made first when the launcher
/// fetches packages at its start and its own is missing (0700).
pub(super) fn caches(command: &str, home: &Path) -> Vec<PathBuf> {
    let (made, dirs) = dirs(command);
    let dirs: Vec<PathBuf> = dirs.iter().map(|d| in_home(home, d)).collect();
    for own in dirs.iter().take(made) {
        use std::os::unix::fs::DirBuilderExt;
        // Failing here is not fatal: the launcher then says what it could not make.
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(own);
    }
    dirs.into_iter().filter(|p| p.exists()).collect()
}

/// What a launcher needs beyond the system, relative to the home: its caches, written.
/// The first `made` of them are made when missing, for a launcher that fetches packages
/// at its start (a cold `uvx` or `npx -y` cannot make them in a home it may not write).
fn dirs(program: &str) -> (usize, &'static [&'static str]) {
    const JS: &[&str] = &[
        ".npm",
        ".cache/node",
        ".cache/yarn",
        ".local/share/pnpm",
        ".bun",
    ];
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    match name {
        "npx" | "npm" => (1, JS),
        "node" => (0, JS),
        "pnpm" => (1, &[".local/share/pnpm", ".npm", ".cache/node"]),
        "yarn" => (1, &[".cache/yarn", ".npm", ".cache/node"]),
        "bun" | "bunx" => (1, &[".bun", ".npm"]),
        // uv keeps its tools' environments in its data directory.
        "uvx" | "uv" => (2, &[".cache/uv", ".local/share/uv"]),
        "pipx" => (1, &[".local/share/pipx", ".local/pipx", ".cache/pipx"]),
        n if n.starts_with("python") => (0, &[".cache/pip"]),
        _ => (0, &[]),
    }
}

/// Where a launcher's directory `rel` (written as under a default home) is: under
/// `XDG_CACHE_HOME` or `XDG_DATA_HOME` when set (the server gets them too), else `home`.
fn in_home(home: &Path, rel: &str) -> PathBuf {
    for (default, var) in [
        (".cache/", "XDG_CACHE_HOME"),
        (".local/share/", "XDG_DATA_HOME"),
    ] {
        if let Some(rest) = rel.strip_prefix(default)
            && let Some(base) = std::env::var_os(var).map(PathBuf::from)
            && base.is_absolute()
        {
            return base.join(rest);
        }
    }
    home.join(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fetching_launcher_gets_its_own_cache_made_and_nothing_else_is() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let h = home.path();
        // `node` runs what is installed: nothing is made for it.
        assert_eq!(caches("/usr/bin/node", h), Vec::<PathBuf>::new());
        assert!(!h.join(".npm").exists());
        // `npx -y` fetches: its cache is made, private, and only that one.
        assert_eq!(caches("npx", h), vec![h.join(".npm")]);
        let mode = std::fs::metadata(h.join(".npm"))
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
            .unwrap_or_default();
        assert_eq!(mode, 0o700);
        assert!(!h.join(".cache/yarn").exists() && !h.join(".bun").exists());
        // An unknown program writes nothing of the home.
        assert_eq!(caches("my-server", h), Vec::<PathBuf>::new());
    }
}
