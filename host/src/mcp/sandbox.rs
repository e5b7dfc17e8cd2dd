//! Confining a stdio server's process to what its entry declares (Linux): Landlock for
//! the filesystem and TCP, seccomp-bpf for the system calls and socket families no MCP
//! server needs, and `no_new_privs`. Everything is built in edgar before the fork
//! ([`prepare`]); the forked child only applies it ([`Prepared::apply`]: two system calls
//! and a `prctl`, nothing that allocates), so it binds the server and everything it
//! starts.
//!
//! Landlock only adds what is allowed, so a denied subtree inside an allowed one (edgar's
//! own config, state and cache under an allowed `~`) is made by allowing the allowed
//! directory's other entries instead (`allow_except`).

use std::path::{Path, PathBuf};

use crate::config::{HostPort, Net, SandboxProfile};

mod grant;
mod install;
mod launcher;
#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
mod privileges;
pub(crate) mod proxy;
#[cfg(target_os = "linux")]
mod seccomp;

/// The Landlock ABI edgar asks for (Linux 6.10: files, TCP bind and connect, device
/// ioctls); a kernel without it leaves the server unconfined, which is reported.
#[cfg(target_os = "linux")]
const ABI: landlock::ABI = landlock::ABI::V5;

/// System directories every server may read and run programs from (those that exist).
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/etc",
    "/opt",
    "/nix/store",
    "/snap",
    "/proc",
    "/sys",
];
/// Of `/dev`, what servers use: no terminal (`/dev/tty`, `/dev/pts`, `/dev/console`), so
/// a server can neither read the user's keystrokes nor push its own into their shell.
/// Its standard streams are pipes, reached through `/proc/self/fd` (`/dev/stdin`).
const DEVICE_READ: &[&str] = &["/dev/random", "/dev/urandom"];
/// Device files every server may write.
const DEVICE_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// One line for a human: how this server runs.
pub fn describe(profile: &SandboxProfile) -> String {
    let net = match &profile.net {
        Net::None => "none".to_owned(),
        Net::All => "all".to_owned(),
        Net::Hosts(h) => format!(
            "{} (by name, through edgar's proxy)",
            h.iter()
                .map(|h| crate::text::visible(&h.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let list = |v: &[PathBuf]| {
        if v.is_empty() {
            "-".to_owned()
        } else {
            v.iter()
                .map(|p| {
                    let shown = crate::text::visible(&p.display().to_string());
                    // What it resolves to now, when a link makes that another path.
                    match p.canonicalize() {
                        Ok(t) if t != grant::lexical(p) => format!(
                            "{shown} (-> {})",
                            crate::text::visible(&t.display().to_string())
                        ),
                        _ => shown,
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let implied = if profile.implied {
        " (edgar's default for a project server; its entry's \"sandbox\" changes it)"
    } else {
        ""
    };
    format!(
        "confined: landlock + seccomp, net: {net}, read: {}, write: {}{implied}",
        list(&profile.read),
        list(&profile.write)
    )
}

/// Allows `dir` except the `protected` paths under it: the entries of each directory on
/// the way to a protected path are allowed one by one, the protected one skipped.
fn allow_except(out: &mut Vec<PathBuf>, dir: &Path, protected: &[PathBuf]) {
    let inside: Vec<&PathBuf> = protected
        .iter()
        .filter(|p| p.starts_with(dir) && p.as_path() != dir)
        .collect();
    if protected.iter().any(|p| dir.starts_with(p)) {
        return;
    }
    if inside.is_empty() {
        out.push(dir.to_owned());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        allow_except(out, &e.path(), protected);
    }
}

/// A confinement built before the fork, applied in the child.
pub struct Prepared {
    #[cfg(target_os = "linux")]
    ruleset: Option<landlock::RulesetCreated>,
    #[cfg(target_os = "linux")]
    filters: Vec<seccompiler::BpfProgram>,
    /// The network namespace a `"net"` host list runs in: the child's half.
    #[cfg(target_os = "linux")]
    netns: Option<netns::Child>,
    egress: Option<Outside>,
    /// The user's own install read with its program ([`own_installs`]), as found here.
    pub installs: Vec<PathBuf>,
    /// The variables that point its launchers at its own caches (`sandbox/launcher.rs`).
    pub cache_env: Vec<(&'static str, PathBuf)>,
}

/// edgar's side of a host list: where the namespace's listeners arrive, and the hosts.
pub struct Outside {
    #[cfg(target_os = "linux")]
    parent: netns::Parent,
    pub hosts: Vec<HostPort>,
}

impl Outside {
    /// The variables that point the server's HTTP clients at the proxy.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        #[cfg(target_os = "linux")]
        let url = format!("http://127.0.0.1:{}", self.parent.proxy_port());
        #[cfg(not(target_os = "linux"))]
        let url = String::new();
        let mut env: Vec<(&'static str, String)> = [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ]
        .into_iter()
        .map(|k| (k, url.clone()))
        .collect();
        // Nothing bypasses it (a bypass would only meet the namespace's empty loopback).
        env.push(("NO_PROXY", String::new()));
        env.push(("no_proxy", String::new()));
        // Node 24 and later read the variables above only when asked.
        env.push(("NODE_USE_ENV_PROXY", "1".into()));
        env
    }

    /// Starts the proxy and forwarders once the server runs (its listeners have arrived).
    pub(crate) fn start(self, server: &str, tell: proxy::Tell) -> std::io::Result<proxy::Egress> {
        #[cfg(target_os = "linux")]
        {
            let port = self.parent.proxy_port();
            let listeners = self.parent.receive()?;
            proxy::start(server, listeners, port, &self.hosts, tell)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (server, tell);
            Err(std::io::Error::other("network namespaces need Linux"))
        }
    }
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").finish_non_exhaustive()
    }
}

/// The program a confined server runs, as its entry names it.
pub struct Program<'a> {
    /// The command, found through `path` (the `PATH` it runs with) as exec will find it.
    pub command: &'a str,
    pub path: Option<&'a std::ffi::OsStr>,
    pub args: &'a [String],
    /// Where it runs (read), if its entry or project says.
    pub cwd: Option<&'a Path>,
    /// The server's name.
    pub server: &'a str,
    /// The project whose entry it is (canonical), or `None` for the user's own config,
    /// whose entries get the install their program or script lives in read with them
    /// (`sandbox/install.rs`).
    pub project: Option<&'a Path>,
}

impl Program<'_> {
    /// What makes this entry itself, for its private caches: whose config it is in (the
    /// user's, or which project), its name, command and arguments. A project's server
    /// never shares a cache with the user's server of the same command.
    fn identity(&self) -> Vec<String> {
        let scope = match self.project {
            Some(p) => format!("project\0{}", p.display()),
            None => "user".to_owned(),
        };
        [scope, self.server.to_owned(), self.command.to_owned()]
            .into_iter()
            .chain(self.args.iter().cloned())
            .collect()
    }
}

/// What a program's entry names on disk: the program as found and the paths its
/// arguments name (read), and the installs they live in (`sandbox/install.rs`).
struct Named {
    /// The program as found.
    program: Option<PathBuf>,
    /// The existing paths its arguments name.
    read: Vec<PathBuf>,
    installs: Vec<PathBuf>,
}

impl Named {
    fn of(program: &Program<'_>) -> Named {
        let against = |c: &str| match program.cwd {
            Some(d) => d.join(c),
            None => PathBuf::from(c),
        };
        let mut read = Vec::new();
        // The program and each path its arguments name, as written and as found; `true`
        // for the program.
        let mut named = Vec::new();
        if program.command.contains('/') {
            named.push((against(program.command), true));
        }
        let found =
            crate::trust::policy::resolve_program(program.command, program.path, program.cwd);
        if let Some(p) = &found {
            named.push((p.clone(), true));
        }
        for a in program.args {
            let candidates = [Some(a.as_str()), a.split_once('=').map(|(_, v)| v)];
            for c in candidates.into_iter().flatten() {
                let p = against(c);
                if p.is_absolute() && p.exists() {
                    read.push(p.clone());
                    if let Ok(found) = p.canonicalize() {
                        named.push((found, false));
                    }
                    named.push((p, false));
                }
            }
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        // A project's entry gets no install from the paths it names (a link in the
        // repository could make any `node_modules` on the machine its install, and the
        // files its paths lead to, a `pyvenv.cfg`, are not even read). Only a program
        // found on the user's own PATH (which a project entry may not set) outside the
        // project brings the runtime it belongs to: `python3` from pyenv, `npx` from nvm.
        if let Some(project) = program.project {
            let outside = |p: &Path| {
                !grant::lexical(p).starts_with(project)
                    && !p.canonicalize().is_ok_and(|c| c.starts_with(project))
            };
            let mut installs = Vec::new();
            if !program.command.contains('/')
                && let Some(p) = found.as_deref().filter(|p| outside(p))
            {
                installs.extend(install::of(p, true, home.as_deref()));
                if let Ok(real) = p.canonicalize()
                    && outside(&real)
                {
                    installs.extend(install::of(&real, true, home.as_deref()));
                }
            }
            installs.sort();
            installs.dedup();
            return Named {
                program: found,
                read,
                installs,
            };
        }
        let mut installs: Vec<PathBuf> = named
            .iter()
            .flat_map(|(p, program)| install::of(p, *program, home.as_deref()))
            .collect();
        installs.sort();
        installs.dedup();
        Named {
            program: found,
            read,
            installs,
        }
    }
}

/// The installs a server reads with its program (`sandbox/install.rs`), for showing how
/// it runs: a user's own entry's install, or for a project's entry only the runtime of
/// a program found on the user's PATH.
pub fn own_installs(program: &Program<'_>) -> Vec<PathBuf> {
    Named::of(program).installs
}

/// Builds the confinement of one server running `program`: the system's directories,
/// the program and the paths its arguments name, its `cwd` (read), its working and
/// temporary directory `workdir` (written), and what its profile adds.
/// `protected` are edgar's own directories, never readable, whatever the profile says.
/// A project's server is refused a path of the project that is a link out of it
/// (`sandbox/grant.rs`).
pub fn prepare(
    profile: &SandboxProfile,
    program: &Program<'_>,
    workdir: &Path,
    protected: &[PathBuf],
) -> Result<Prepared, String> {
    let Program { cwd, .. } = *program;
    // Each path with whether the entry named it (its arguments, `cwd` or profile): those
    // a project's link could widen.
    let mut read: Vec<(PathBuf, bool)> = SYSTEM_READ
        .iter()
        .map(|p| (PathBuf::from(p), false))
        .collect();
    let named = Named::of(program);
    read.extend(named.program.into_iter().map(|p| (p, false)));
    read.extend(named.read.into_iter().map(|p| (p, true)));
    let installs = named.installs;
    read.extend(installs.iter().map(|p| (p.clone(), false)));
    if let Some(d) = cwd {
        read.push((d.to_owned(), true));
    }
    read.extend(profile.read.iter().map(|p| (p.clone(), true)));
    let mut write: Vec<(PathBuf, bool)> = profile.write.iter().map(|p| (p.clone(), true)).collect();
    write.push((workdir.to_owned(), false));
    // Its launchers' caches are its own, never the user's nor another entry's
    // (`sandbox/launcher.rs`).
    let caches = std::env::var_os("HOME")
        .and_then(|home| launcher::private(&program.identity(), Path::new(&home)));
    if let Some(c) = &caches {
        write.push((c.dir.clone(), false));
    }
    let mut grants = Grants::default();
    for (list, writes) in [(&read, false), (&write, true)] {
        for (path, named) in list {
            let project = program.project.filter(|_| *named);
            grants.add(path, writes, project, protected)?;
        }
    }
    build(profile, grants).map(|p| Prepared {
        installs,
        cache_env: caches.map(|c| c.env).unwrap_or_default(),
        ..p
    })
}

/// The opened paths a confinement grants: read (and run), or everything.
#[derive(Default)]
struct Grants {
    opened: Vec<(grant::Opened, bool)>,
}

impl Grants {
    /// Opens `path` and grants what it resolves to, unless that is edgar's own (a
    /// directory holding edgar's files is granted entry by entry, `Rules::allow_except`).
    /// A path that does not exist grants nothing. `project`: the path was named by a
    /// project's entry, and must not lead out of it.
    fn add(
        &mut self,
        path: &Path,
        writes: bool,
        project: Option<&Path>,
        protected: &[PathBuf],
    ) -> Result<(), String> {
        let Ok(opened) = grant::open(path) else {
            return Ok(());
        };
        if let Some(project) = project {
            grant::stays_inside(path, &opened.target, project)?;
        }
        let t = &opened.target;
        if !protected
            .iter()
            .any(|p| p.starts_with(t) || t.starts_with(p))
        {
            self.opened.push((opened, writes));
            return Ok(());
        }
        let mut split = Vec::new();
        allow_except(&mut split, t, protected);
        for p in split {
            // Each entry is opened again and judged by what it resolves to: a link among
            // them must not lead into edgar's files.
            if let Ok(o) = grant::open(&p)
                && !protected
                    .iter()
                    .any(|x| x.starts_with(&o.target) || o.target.starts_with(x))
            {
                self.opened.push((o, writes));
            }
        }
        Ok(())
    }
}

impl Prepared {
    /// edgar's side of its host list, taken before the child is started.
    pub fn take_outside(&mut self) -> Option<Outside> {
        self.egress.take()
    }
}

#[cfg(target_os = "linux")]
fn build(profile: &SandboxProfile, grants: Grants) -> Result<Prepared, String> {
    use landlock::{
        Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
        Ruleset, RulesetAttr, RulesetCreatedAttr,
    };
    let fail = |e: &dyn std::fmt::Display| format!("cannot build its Landlock rules: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI))
        .map_err(|e| fail(&e))?;
    // A host list runs in its own namespace, whose listeners are edgar's: it may connect
    // to those ports only.
    let (netns, egress) = match &profile.net {
        Net::Hosts(hosts) => {
            let mut loopback: Vec<u16> = hosts
                .iter()
                .filter(|h| h.is_loopback())
                .map(|h| h.port)
                .collect();
            loopback.sort_unstable();
            loopback.dedup();
            let (child, parent) = netns::pair(&loopback)
                .map_err(|e| format!("cannot make its network namespace's socket: {e}"))?;
            (
                Some(child),
                Some(Outside {
                    parent,
                    hosts: hosts.clone(),
                }),
            )
        }
        _ => (None, None),
    };
    match &profile.net {
        Net::None => {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(ABI))
                .map_err(|e| fail(&e))?;
        }
        Net::Hosts(_) => {
            ruleset = ruleset
                .handle_access(AccessNet::ConnectTcp)
                .map_err(|e| fail(&e))?;
        }
        Net::All => {}
    }
    let mut created = ruleset.create().map_err(|e| {
        format!(
            "the kernel does not offer Landlock ABI {} ({e}); it cannot be confined",
            ABI as u32
        )
    })?;
    // A file gets the file rights only (Landlock refuses directory rights on it).
    let rights = |writes: bool, is_dir: bool| {
        let access = if writes {
            AccessFs::from_all(ABI)
        } else {
            AccessFs::from_read(ABI)
        };
        if is_dir {
            access
        } else {
            access & AccessFs::from_file(ABI)
        }
    };
    for (o, writes) in grants.opened {
        created = created
            .add_rule(PathBeneath::new(o.fd, rights(writes, o.is_dir)))
            .map_err(|e| fail(&e))?;
    }
    // Devices that vanished or cannot be opened are skipped: nothing is granted for them.
    let devices = DEVICE_READ
        .iter()
        .map(|d| (*d, false))
        .chain(DEVICE_WRITE.iter().map(|d| (*d, true)));
    for (device, writes) in devices {
        let Ok(fd) = PathFd::new(device) else {
            continue;
        };
        created = created
            .add_rule(PathBeneath::new(fd, rights(writes, false)))
            .map_err(|e| fail(&e))?;
    }
    if let (Some(child), Some(_)) = (&netns, &egress) {
        for port in child.ports() {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(|e| fail(&e))?;
        }
    }
    let filters = seccomp::filters(&profile.net)?;
    Ok(Prepared {
        ruleset: Some(created),
        filters,
        netns,
        egress,
        installs: Vec::new(),
        cache_env: Vec::new(),
    })
}

#[cfg(not(target_os = "linux"))]
fn build(_profile: &SandboxProfile, _grants: Grants) -> Result<Prepared, String> {
    Err(
        "confinement needs Linux (Landlock and seccomp); on this system it cannot be confined"
            .into(),
    )
}

impl Prepared {
    /// Applies the confinement to the calling process: its network namespace when it has
    /// a host list, every capability dropped and `no_new_privs`, Landlock, then the
    /// seccomp filters. Called in the forked child before exec: it allocates nothing and
    /// makes only system calls.
    pub fn apply(&mut self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            if let Some(ns) = self.netns.as_mut() {
                ns.enter()?;
            }
            privileges::drop_all()?;
            if let Some(ruleset) = self.ruleset.take() {
                let status = ruleset
                    .restrict_self()
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                if status.ruleset == landlock::RulesetStatus::NotEnforced {
                    return Err(std::io::Error::other("Landlock was not enforced"));
                }
            }
            for f in &self.filters {
                seccompiler::apply_filter(f).map_err(|e| std::io::Error::other(e.to_string()))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
