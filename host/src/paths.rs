//! Where edgar keeps its files: XDG directories, with `EDGAR_*` overrides for tests.

use std::path::PathBuf;

/// The cache directory: `$EDGAR_CACHE_DIR`, else `$XDG_CACHE_HOME/edgar`, else
/// `~/.cache/edgar`. `None` when no home is known; callers then skip caching.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = non_empty("EDGAR_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = non_empty("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("edgar"));
    }
    non_empty("HOME").map(|home| PathBuf::from(home).join(".cache").join("edgar"))
}

/// The user's config directory: `$XDG_CONFIG_HOME/edgar`, else `~/.config/edgar`.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(dir) = non_empty("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(dir).join("edgar"));
    }
    non_empty("HOME").map(|home| PathBuf::from(home).join(".config").join("edgar"))
}

fn non_empty(var: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(var).filter(|v| !v.is_empty())
}
