//! A granted path is what it resolves to. Each path a confinement grants is opened once
//! (`O_PATH`, links followed), what the descriptor really is comes from the kernel
//! (`/proc/self/fd`), the check is made on that, and the Landlock rule is made from the
//! same descriptor: nothing can swap a link in between.
//!
//! For a project's server, a path the repository names (an argument, its `cwd`, a
//! profile's `read`/`write`) that lies inside the project must resolve inside it: a
//! link in a cloned repository (or one a `git pull` turned a directory into) would
//! otherwise widen the confinement to the link's target, while the approval prompt
//! showed a path inside the project.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// A granted path, opened.
pub(super) struct Opened {
    pub fd: OwnedFd,
    /// What the descriptor is, as the kernel names it.
    pub target: PathBuf,
    pub is_dir: bool,
}

/// Opens `path` for a Landlock rule, following links, and names what it opened.
#[cfg(target_os = "linux")]
pub(super) fn open(path: &Path) -> std::io::Result<Opened> {
    use rustix::fs::{FileType, Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
    let stat = rustix::fs::fstat(&fd)?;
    let target = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    Ok(Opened {
        fd,
        target,
        is_dir: FileType::from_raw_mode(stat.st_mode) == FileType::Directory,
    })
}

/// Confinement needs Linux; elsewhere nothing is opened.
#[cfg(not(target_os = "linux"))]
pub(super) fn open(_: &Path) -> std::io::Result<Opened> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// `path` with `.` and `..` taken lexically (no link followed).
pub(super) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// For a project's server: refuses a path written inside `project` whose target is not
/// inside it. The error names both, escaped, on one line.
pub(super) fn stays_inside(path: &Path, target: &Path, project: &Path) -> Result<(), String> {
    let written = lexical(path);
    if !written.starts_with(project) || target.starts_with(project) {
        return Ok(());
    }
    Err(format!(
        "edgar's sandbox refused {}: it is a link in the project to {}, outside the project (a project may grant only its own files; name that path in your own config if you mean it)",
        crate::text::visible(&written.display().to_string()),
        crate::text::visible(&target.display().to_string()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_out_of_the_project_is_refused_by_what_it_resolves_to() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = d.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let project = root.join("repo");
        let secret = root.join("home/.ssh");
        std::fs::create_dir_all(project.join("docs")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(&secret).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&secret, project.join("data")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("docs", project.join("inner")).unwrap_or_else(|e| panic!("{e}"));
        let check = |p: &Path| {
            let o = open(p).unwrap_or_else(|e| panic!("{e}"));
            stays_inside(p, &o.target, &project).map(|()| o.target)
        };
        assert_eq!(check(&project.join("docs")), Ok(project.join("docs")));
        // A link that stays inside is its target.
        assert_eq!(check(&project.join("inner")), Ok(project.join("docs")));
        let Err(refused) = check(&project.join("data")) else {
            panic!("a link out of the project was granted");
        };
        assert!(refused.contains("home/.ssh"), "{refused}");
        // `..` is taken lexically: a path written outside is not the project's to check.
        assert!(check(&project.join("../home/.ssh")).is_ok());
        assert!(check(&project.join("docs/../data")).is_err());
        assert!(open(&project.join("missing")).is_err());
    }
}
