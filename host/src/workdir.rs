//! The private working directory of a program edgar starts (a stdio server, an
//! `api_key_command`): fresh, empty, only this user's (0700), so `python -m`, `npx` and
//! `uv` find no code of the directory edgar was started in, and a confined server has
//! somewhere to write.
//!
//! It goes when dropped. An edgar killed outright (SIGKILL) cannot remove its own, so
//! the first one a process makes also removes those whose process is gone: each is named
//! `edgar-cwd-<pid>-<random>` and holds a shared `flock` on itself while in use, and one
//! is removed only when its process no longer runs and no one holds it (a process of
//! another pid namespace sharing the directory, a reused pid).

use std::fs::File;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Once;

use rustix::fs::FlockOperation;

/// What every working directory's name starts with.
const PREFIX: &str = "edgar-cwd-";

/// A working directory in use: removed when dropped.
pub struct Workdir {
    dir: tempfile::TempDir,
    /// The directory itself, opened and share-locked: a sweep leaves it alone.
    _held: File,
}

impl Workdir {
    /// Makes one under the system's temporary directory.
    pub fn new() -> std::io::Result<Workdir> {
        static SWEPT: Once = Once::new();
        let temp = std::env::temp_dir();
        SWEPT.call_once(|| sweep(&temp));
        Workdir::new_in(&temp)
    }

    fn new_in(parent: &Path) -> std::io::Result<Workdir> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(parent)?;
        let held = File::open(dir.path())?;
        rustix::fs::flock(&held, FlockOperation::NonBlockingLockShared)?;
        Ok(Workdir { dir, _held: held })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes `parent`'s working directories that this user owns, whose process no longer
/// runs and that no one holds. Best effort: whatever cannot be read or removed stays.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let ours = path
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !ours || runs(pid) {
            continue;
        }
        let Ok(dir) = File::open(&path) else {
            continue;
        };
        if rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive).is_ok()
            && let Err(e) = std::fs::remove_dir_all(&path)
        {
            tracing::debug!("cannot remove {}: {e}", path.display());
        }
    }
}

/// Whether process `pid` may still run (a pid that cannot be asked about counts as
/// running: nothing of it is removed).
fn runs(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return true;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_working_directory_is_private_and_goes_when_dropped() {
        let parent = tmp();
        let dir = Workdir::new_in(parent.path()).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().to_owned();
        let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o700));
        drop(dir);
        assert!(!path.exists());
    }

    /// Left by a killed process: removed, with what its server wrote in it. In use, of
    /// a live process, or not edgar's: kept.
    #[test]
    fn a_sweep_removes_only_what_a_gone_process_left() {
        let parent = tmp();
        // A pid that runs no process: past the kernel's largest.
        let gone = parent.path().join(format!("{PREFIX}{}-abc123", i32::MAX));
        std::fs::create_dir_all(gone.join("cache")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(gone.join("cache/x"), b"x").unwrap_or_else(|e| panic!("{e}"));
        // Of a gone pid, but still held (a process of another pid namespace).
        let held_path = parent.path().join(format!("{PREFIX}{}-def456", i32::MAX));
        std::fs::create_dir(&held_path).unwrap_or_else(|e| panic!("{e}"));
        let held = File::open(&held_path).unwrap_or_else(|e| panic!("{e}"));
        rustix::fs::flock(&held, FlockOperation::NonBlockingLockShared)
            .unwrap_or_else(|e| panic!("{e}"));
        let live = Workdir::new_in(parent.path()).unwrap_or_else(|e| panic!("{e}"));
        let others = ["edgar-cwd-Xy12ab", "edgar-cwd-", "something-else"];
        for name in others {
            std::fs::create_dir(parent.path().join(name)).unwrap_or_else(|e| panic!("{e}"));
        }
        sweep(parent.path());
        assert!(!gone.exists());
        assert!(held_path.exists());
        assert!(live.path().exists());
        for name in others {
            assert!(parent.path().join(name).exists(), "{name}");
        }
        drop(held);
        sweep(parent.path());
        assert!(!held_path.exists());
    }
}
