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

/// A directory variable's value when it is an absolute path. A relative one (`.`,
/// `state`) is ignored, as the XDG base directory specification asks: it would put
/// edgar's config, approvals or cache inside whatever directory edgar runs in, a cloned
/// repository's included.
pub fn absolute_var(var: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(var).filter(|v| !v.is_empty() && Path::new(v).is_absolute())
}

fn non_empty(var: &str) -> Option<std::ffi::OsString> {
    absolute_var(var)
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

/// Whether [`read_regular`] follows a final symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// A file in a repository or named by one: a link is refused (it could point anywhere).
    Refuse,
    /// The user's own file (a dotfile manager links them).
    Follow,
}

/// A file a repository or another program may control, read safely: opened without
/// following a final symbolic link and without blocking (a FIFO or a device never holds
/// edgar), then checked on the open descriptor to be a regular file of at most `max`
/// bytes. `None` when it does not exist.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    read_regular_with(path, max, Links::Refuse)
}

/// [`read_regular`], choosing whether a final symbolic link is followed.
pub fn read_regular_with(path: &Path, max: u64, links: Links) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let flags = match links {
        Links::Refuse => libc_flags::NOFOLLOW | libc_flags::NONBLOCK,
        Links::Follow => libc_flags::NONBLOCK,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc_flags::ELOOP) => {
            return Err(std::io::Error::other(
                "a symbolic link, which edgar does not follow here",
            ));
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > max {
        return Err(std::io::Error::other(format!(
            "{} bytes, over the {max}-byte limit",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!("over the {max}-byte limit")));
    }
    Ok(Some(bytes))
}

/// The open flags [`read_regular`] needs, from rustix's constants.
mod libc_flags {
    pub const NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;
    pub const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    pub const ELOOP: i32 = rustix::io::Errno::LOOP.raw_os_error();
}

/// Takes an exclusive `flock` on `path` (created 0600 in a private directory), held until
/// the returned file is dropped: read-modify-write of a shared file by several edgar
/// processes.
pub fn lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    let file = open_lock_file(path)?;
    lock_exclusive(&file, path)?;
    Ok(file)
}

/// Opens (creating 0600 in a private directory) the file a lock is taken on, unlocked:
/// for a writer that keeps it and locks it for each write ([`lock_exclusive`]).
pub fn open_lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
}

/// Takes an exclusive `flock` on `file` (opened from `path`, which errors name), waiting
/// at most [`LOCK_WAIT`]; held until it is released or the file closed.
pub fn lock_exclusive(file: &std::fs::File, path: &Path) -> std::io::Result<()> {
    // Bounded: a process that holds the lock for ever (a stuck edgar, or another program
    // of the user's taking it on purpose) gets an error, never a hang.
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK) if std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(std::io::Error::other(format!(
                    "{} is locked by another process for over {} s",
                    path.display(),
                    LOCK_WAIT.as_secs()
                )));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Longest [`lock_file`] waits for another process's lock.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where edgar keeps what it must not lose with the cache (approvals, pins, the audit
/// trail): `$EDGAR_STATE_DIR`, else `$XDG_STATE_HOME/edgar`, else `~/.local/state/edgar`.
pub fn state_dir() -> Option<PathBuf> {
    let var = absolute_var;
    if let Some(dir) = var("EDGAR_STATE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_STATE_HOME") {
        return Some(PathBuf::from(dir).join("edgar"));
    }
    var("HOME").map(|h| PathBuf::from(h).join(".local").join("state").join("edgar"))
}

/// Where the system-wide policy lives; when it exists, `$EDGAR_POLICY` is ignored, so a
/// user cannot swap the administrator's policy for their own.
pub const SYSTEM_POLICY: &str = "/etc/edgar/policy.json";
/// The policy file that applies: the system one when it exists, else `$EDGAR_POLICY`.
pub fn policy_file() -> Option<PathBuf> {
    choose_policy(Path::new(SYSTEM_POLICY), std::env::var_os("EDGAR_POLICY"))
}

/// The system file wins whenever it may exist: only a definite "no such file" lets
/// `$EDGAR_POLICY` apply (a file or directory edgar cannot look into is the system
/// policy, which then fails to load and stops everything). A relative `$EDGAR_POLICY`
/// is kept as given, and refused when loaded.
pub(crate) fn choose_policy(system: &Path, env: Option<std::ffi::OsString>) -> Option<PathBuf> {
    match std::fs::symlink_metadata(system) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        _ => return Some(system.to_owned()),
    }
    env.filter(|v| !v.is_empty()).map(PathBuf::from)
}
