//! Where edgar keeps its files: XDG directories, with `EDGAR_*` overrides for tests.

use std::path::{Path, PathBuf};

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

/// Creates `dir` and its parents, the last one readable only by this user.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Writes `bytes` to `path` atomically: a temp file in the same directory, flushed to
/// disk, then renamed over it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent directory"))?;
    create_private_dir(dir)?;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".tmp{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let tmp = path.with_file_name(name);
    let result = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        // Created private, never narrowed afterwards: caches, pins and approvals are
        // nobody else's business.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A file's bytes, `None` when it does not exist, an error when it is larger than `max`.
pub fn read_capped(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(Some(bytes))
}

/// Takes an exclusive `flock` on `path` (created 0600 in a private directory), held until
/// the returned file is dropped: read-modify-write of a shared file by several edgar
/// processes.
pub fn lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(file)
}
