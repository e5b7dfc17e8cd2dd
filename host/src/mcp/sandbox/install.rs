//! The install a confined server's program lives in, readable with the program: a
//! Node.js package needs its `node_modules` (its dependencies sit beside it, its
//! `package.json` above its script), a script of a Python virtual environment needs the
//! environment. Without them a profile that names only the server's data fails at start
//! with a bare "module not found".
//!
//! Only for the user's own entries (their config is trusted as written). A project's
//! entry gets nothing here: a link in a cloned repository could otherwise make any
//! `node_modules` on the machine its server's install; its profile names what it reads,
//! and the approval shows it.

use std::path::{Component, Path, PathBuf};

/// The install `path` (a program or a script an entry names, as written or with its
/// links resolved) lives in: the outermost `node_modules` above it, else the virtual
/// environment whose `bin` holds it. `None` for a relative path or one with `..`.
pub(super) fn of(path: &Path) -> Option<PathBuf> {
    let lexical = path.is_absolute()
        && !path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir));
    if !lexical {
        return None;
    }
    node_modules(path).or_else(|| venv(path))
}

/// The outermost `node_modules` directory above `path`: with npm's flat layout, the
/// package's dependencies are its other entries.
fn node_modules(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .map(Path::to_owned)
}

/// The virtual environment `path` is a program of (`<venv>/bin/<name>`, with a
/// `pyvenv.cfg` beside that `bin`).
fn venv(path: &Path) -> Option<PathBuf> {
    let bin = path.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let root = bin.parent()?;
    root.join("pyvenv.cfg").is_file().then(|| root.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(path, b"").unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_package_script_brings_its_outermost_node_modules() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let top = dir.path().join("lib/node_modules");
        let script = top.join("@scope/server/node_modules/inner/dist/index.js");
        touch(&script);
        assert_eq!(of(&script), Some(top.clone()));
        assert_eq!(of(&top.join(".bin/server")), Some(top));
    }

    #[test]
    fn a_venv_program_brings_its_environment() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let venv = dir.path().join("venv");
        touch(&venv.join("pyvenv.cfg"));
        touch(&venv.join("bin/mcp-server"));
        assert_eq!(of(&venv.join("bin/mcp-server")), Some(venv.clone()));
        assert_eq!(of(&venv.join("bin/python")), Some(venv.clone()));
        // A `bin` without `pyvenv.cfg` beside it is no environment.
        assert_eq!(of(&dir.path().join("bin/tool")), None);
    }

    #[test]
    fn nothing_for_other_paths() {
        for p in [
            "/usr/bin/node",
            "relative/node_modules/x.js",
            "/srv/node_modules/../etc/x",
            "/node_modules",
        ] {
            assert_eq!(of(Path::new(p)), None, "{p}");
        }
    }
}
