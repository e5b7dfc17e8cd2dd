//! The install a confined server's program lives in, readable with the program: a
//! Node.js package needs its `node_modules` (its dependencies sit beside it, its
//! `package.json` above its script), a script of a Python virtual environment needs the
//! environment and the Python it was made from, and a runtime a version manager put in
//! the home (pyenv, nvm, conda, uv's Pythons) needs its prefix. Without them a profile
//! that names only the server's data fails at start with a bare "module not found" or
//! a refused `exec`.
//!
//! Only for the user's own entries (their config is trusted as written). A project's
//! entry gets nothing here: a link in a cloned repository could otherwise make any
//! `node_modules` on the machine its server's install; its profile names what it reads,
//! and the approval shows it. Nothing found here is the home itself or above it.

use std::path::{Component, Path, PathBuf};

/// The installs `path` (a program or a script an entry names, as written or with its
/// links resolved) needs: the outermost `node_modules` above it, else the virtual
/// environment whose `bin` holds it and the Python prefix that environment was made
/// from; and, for the `program` itself (not a path its arguments name), the runtime
/// above it ([`runtime`]). Empty for a relative path or one with `..`. `home` is never
/// returned, nor anything above it.
pub(super) fn of(path: &Path, program: bool, home: Option<&Path>) -> Vec<PathBuf> {
    let lexical = path.is_absolute()
        && !path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir));
    if !lexical {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(dir) = node_modules(path) {
        out.push(dir);
    } else if let Some(env) = venv(path) {
        if let Some(bin) = base_python(&env) {
            out.extend(runtime(&bin.join("python"), home));
        }
        out.push(env);
    }
    if program {
        out.extend(runtime(path, home));
    }
    out.retain(|p| !is_system(p));
    out
}

/// Under a directory every confined server reads anyway ([`super::SYSTEM_READ`]).
fn is_system(path: &Path) -> bool {
    super::SYSTEM_READ.iter().any(|s| path.starts_with(s))
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

/// The directory of the Python a virtual environment was made from: its `pyvenv.cfg`'s
/// `home` (an absolute path; anything else is not believed). Only the file's first
/// 16 KiB are read (a real one is a few lines).
fn base_python(env: &Path) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut cfg = String::new();
    std::fs::File::open(env.join("pyvenv.cfg"))
        .ok()?
        .take(16 << 10)
        .read_to_string(&mut cfg)
        .ok()?;
    cfg.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        let dir = Path::new(value.trim());
        (key.trim() == "home" && dir.is_absolute()).then(|| dir.to_owned())
    })
}

/// What the runtime `path` belongs to needs read, when it lives outside the system's
/// directories (a version manager's or the user's own install), from the nearest
/// directory above it that is one:
/// - a Python prefix (`lib/python3.*/os.py`, pyenv's versions, uv's Pythons, conda's
///   environments): its `bin` and `lib`;
/// - a Node.js prefix (`bin/node` beside `lib/node_modules`, as nvm lays it out): its
///   `bin/node`;
/// - a version manager whose `shims` holds it (pyenv, rbenv, asdf, mise: a directory
///   with `versions` or `installs` beside its `shims`): the manager's directory, whose
///   scripts and versions a shim runs.
///
/// The walk stops below `home` and at the root: neither is ever a runtime.
fn runtime(path: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    if is_system(path) {
        return Vec::new();
    }
    let above_home =
        |dir: &Path| dir.parent().is_none() || home.is_some_and(|h| h.starts_with(dir));
    for dir in path.ancestors().skip(1) {
        if above_home(dir) {
            break;
        }
        if dir.file_name().is_some_and(|n| n == "shims") {
            let manager = dir.parent().filter(|m| {
                !above_home(m) && (m.join("versions").is_dir() || m.join("installs").is_dir())
            });
            return manager.map(|m| vec![m.to_owned()]).unwrap_or_default();
        }
        if dir.join("bin").is_dir() && has_python_stdlib(&dir.join("lib")) {
            return vec![dir.join("bin"), dir.join("lib")];
        }
        if dir.join("bin/node").is_file() && dir.join("lib/node_modules").is_dir() {
            return vec![dir.join("bin/node")];
        }
    }
    Vec::new()
}

/// `lib` holds a Python's standard library (`python3.N/os.py`).
fn has_python_stdlib(lib: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(lib) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("python3"))
            && e.path().join("os.py").is_file()
    })
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

    fn temp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_package_script_brings_its_outermost_node_modules() {
        let dir = temp();
        let top = dir.path().join("lib/node_modules");
        let script = top.join("@scope/server/node_modules/inner/dist/index.js");
        touch(&script);
        assert_eq!(of(&script, true, None), vec![top.clone()]);
        assert_eq!(of(&top.join(".bin/server"), true, None), vec![top]);
    }

    #[test]
    fn a_venv_program_brings_its_environment_and_the_python_it_was_made_from() {
        let dir = temp();
        let venv = dir.path().join("venv");
        touch(&venv.join("bin/mcp-server"));
        // A Python outside the system's directories, as pyenv or uv puts one.
        let prefix = dir.path().join("pyenv/versions/3.11.7");
        touch(&prefix.join("bin/python3.11"));
        touch(&prefix.join("lib/python3.11/os.py"));
        let cfg = format!(
            "home = {}\nversion = 3.11.7\n",
            prefix.join("bin").display()
        );
        std::fs::write(venv.join("pyvenv.cfg"), cfg).unwrap_or_else(|e| panic!("{e}"));
        let want = vec![prefix.join("bin"), prefix.join("lib"), venv.clone()];
        assert_eq!(of(&venv.join("bin/mcp-server"), true, None), want);
        assert_eq!(of(&venv.join("bin/python"), true, None), want);
        // The system's Python adds nothing: every server reads it anyway.
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(of(&venv.join("bin/python"), true, None), vec![venv.clone()]);
        // A relative or missing `home` is not believed.
        std::fs::write(venv.join("pyvenv.cfg"), "home = ../../x/bin\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(of(&venv.join("bin/python"), true, None), vec![venv.clone()]);
        // A `bin` without `pyvenv.cfg` beside it is no environment.
        assert_eq!(
            of(&dir.path().join("bin/tool"), true, None),
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn a_runtime_a_version_manager_installed_brings_what_it_runs_from() {
        let home = temp();
        let h = home.path();
        // pyenv's interpreter, run by its real path: its prefix's `bin` and `lib`.
        let py = h.join(".pyenv/versions/3.12.1");
        touch(&py.join("lib/python3.12/os.py"));
        touch(&py.join("bin/python3.12"));
        assert_eq!(
            of(&py.join("bin/python3.12"), true, Some(h)),
            vec![py.join("bin"), py.join("lib")]
        );
        // Its shim: the manager's whole directory (its scripts and versions).
        touch(&h.join(".pyenv/shims/python3"));
        assert_eq!(
            of(&h.join(".pyenv/shims/python3"), true, Some(h)),
            vec![h.join(".pyenv")]
        );
        // A path an argument names brings no runtime, nor does a `shims` directory
        // without a manager's versions beside it.
        assert_eq!(
            of(&py.join("bin/python3.12"), false, Some(h)),
            Vec::<PathBuf>::new()
        );
        touch(&h.join("work/shims/tool"));
        assert_eq!(
            of(&h.join("work/shims/tool"), true, Some(h)),
            Vec::<PathBuf>::new()
        );
        // nvm's npx resolves into its npm: that node_modules, and the node beside it.
        let node = h.join(".nvm/versions/node/v24.1.0");
        touch(&node.join("bin/node"));
        let npx = node.join("lib/node_modules/npm/bin/npx-cli.js");
        touch(&npx);
        assert_eq!(
            of(&npx, true, Some(h)),
            vec![node.join("lib/node_modules"), node.join("bin/node")]
        );
    }

    #[test]
    fn the_home_and_above_are_never_a_runtime() {
        let home = temp();
        let h = home.path();
        // A home laid out as a prefix (`~/bin`, `~/lib/python3.11/os.py`, `~/shims`).
        touch(&h.join("lib/python3.11/os.py"));
        touch(&h.join("bin/tool"));
        touch(&h.join("shims/python3"));
        touch(&h.join("lib/node_modules/.keep"));
        touch(&h.join("bin/node"));
        for p in ["bin/tool", "shims/python3", "bin/node", "work/x/run"] {
            assert_eq!(of(&h.join(p), true, Some(h)), Vec::<PathBuf>::new(), "{p}");
        }
    }

    #[test]
    fn nothing_for_other_paths() {
        for p in [
            "/usr/bin/node",
            "/usr/lib/node_modules/npm/bin/npx-cli.js",
            "relative/node_modules/x.js",
            "/srv/node_modules/../etc/x",
            "/node_modules",
        ] {
            assert_eq!(of(Path::new(p), true, None), Vec::<PathBuf>::new(), "{p}");
        }
    }
}
