//! Confining a stdio server's process to what its entry declares (Linux): Landlock for
//! the filesystem and TCP, seccomp-bpf for the system calls and socket families no MCP
//! server needs, and `no_new_privs`. Everything is built in edgar before the fork
//! ([`prepare`]); the forked child only applies it ([`Prepared::apply`]: two system calls
//! and a `prctl`, nothing that allocates), so it binds the server and everything it
//! starts.
//!
//! Landlock only adds what is allowed, so a denied subtree inside an allowed one (edgar's
//! own config, state and cache under an allowed `~`) is made by allowing the allowed
//! directory's other entries instead (`Rules::allow_except`).

use std::path::{Path, PathBuf};

use crate::config::{HostPort, Net, SandboxProfile};

mod install;
mod launcher;
#[cfg(target_os = "linux")]
mod netns;
pub(crate) mod proxy;

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
    "/dev",
];
/// Device files every server may write.
const DEVICE_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

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
                .map(|p| crate::text::visible(&p.display().to_string()))
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

/// What a server of this profile may touch, as paths: read (and run), write.
#[derive(Debug, Default)]
struct Rules {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
}

impl Rules {
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
            Rules::allow_except(out, &e.path(), protected);
        }
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
    /// The entry is in the user's own config: the install its program or script lives
    /// in is read with it (`sandbox/install.rs`).
    pub users_own: bool,
}

/// What a program's entry names on disk: the program as found and the paths its
/// arguments name (read), and the installs they live in (`sandbox/install.rs`).
struct Named {
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
        if let Some(p) = found {
            read.push(p.clone());
            named.push((p, true));
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
        // A project's entry gets no install: the files its paths lead to (a
        // `pyvenv.cfg`) are not even read.
        if !program.users_own {
            return Named {
                read,
                installs: Vec::new(),
            };
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut installs: Vec<PathBuf> = named
            .iter()
            .flat_map(|(p, program)| install::of(p, *program, home.as_deref()))
            .collect();
        installs.sort();
        installs.dedup();
        Named { read, installs }
    }
}

/// The installs a user's own server reads with its program (`sandbox/install.rs`), for
/// showing how it runs; empty for a project's entry.
pub fn own_installs(program: &Program<'_>) -> Vec<PathBuf> {
    Named::of(program).installs
}

/// Builds the confinement of one server running `program`: the system's directories,
/// the program and the paths its arguments name, its `cwd` (read), its working and
/// temporary directory `workdir` (written), and what its profile adds.
/// `protected` are edgar's own directories, never readable, whatever the profile says.
pub fn prepare(
    profile: &SandboxProfile,
    program: &Program<'_>,
    workdir: &Path,
    protected: &[PathBuf],
) -> Result<Prepared, String> {
    let Program { command, cwd, .. } = *program;
    let mut rules = Rules::default();
    for p in SYSTEM_READ {
        rules.read.push(PathBuf::from(p));
    }
    let named = Named::of(program);
    rules.read.extend(named.read);
    let installs = named.installs;
    rules.read.extend(installs.iter().cloned());
    if let Some(d) = cwd {
        rules.read.push(d.to_owned());
    }
    // Its launchers' caches are its own, never the user's (`sandbox/launcher.rs`).
    let caches = std::env::var_os("HOME")
        .and_then(|home| launcher::private(command, program.args, Path::new(&home)));
    if let Some(c) = &caches {
        rules.write.push(c.dir.clone());
    }
    rules.read.extend(profile.read.iter().cloned());
    rules.write.extend(profile.write.iter().cloned());
    rules.write.push(workdir.to_owned());
    // Edgar's own files are never the server's, under an allowed parent included.
    let expand = |list: &[PathBuf]| {
        let mut out = Vec::new();
        for p in list {
            let p = p.canonicalize().unwrap_or_else(|_| p.clone());
            Rules::allow_except(&mut out, &p, protected);
        }
        out
    };
    let read = expand(&rules.read);
    let write = expand(&rules.write);
    build(profile, read, write).map(|p| Prepared {
        installs,
        cache_env: caches.map(|c| c.env).unwrap_or_default(),
        ..p
    })
}

impl Prepared {
    /// edgar's side of its host list, taken before the child is started.
    pub fn take_outside(&mut self) -> Option<Outside> {
        self.egress.take()
    }
}

#[cfg(target_os = "linux")]
fn build(
    profile: &SandboxProfile,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
) -> Result<Prepared, String> {
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
    // Rules on paths that vanished or cannot be opened are skipped: nothing is granted
    // for them. A file gets the file rights only (Landlock refuses directory rights on it).
    let all = read
        .iter()
        .map(|p| (p.as_path(), AccessFs::from_read(ABI)))
        .chain(write.iter().map(|p| (p.as_path(), AccessFs::from_all(ABI))))
        .chain(
            DEVICE_WRITE
                .iter()
                .map(|d| (Path::new(*d), AccessFs::from_all(ABI))),
        );
    for (path, access) in all {
        let Ok(fd) = PathFd::new(path) else {
            continue;
        };
        let is_dir = std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false);
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(ABI)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| fail(&e))?;
    }
    if let (Some(child), Some(_)) = (&netns, &egress) {
        for port in child.ports() {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(|e| fail(&e))?;
        }
    }
    let filters = seccomp(&profile.net)?;
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
fn build(
    _profile: &SandboxProfile,
    _read: Vec<PathBuf>,
    _write: Vec<PathBuf>,
) -> Result<Prepared, String> {
    Err(
        "confinement needs Linux (Landlock and seccomp); on this system it cannot be confined"
            .into(),
    )
}

/// The seccomp filters: `clone3` answered `ENOSYS` (so the C library falls back to
/// `clone`, whose flags a filter can read), then `EPERM` for the system calls no MCP
/// server needs, `clone`/`unshare` with a namespace flag, and, unless its network is
/// `"all"`, new sockets of the packet and Unix families (the D-Bus session bus, which
/// reaches the keyring, is a Unix socket), and of the internet families too without any.
#[cfg(target_os = "linux")]
fn seccomp(net: &Net) -> Result<Vec<seccompiler::BpfProgram>, String> {
    use std::collections::BTreeMap;

    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let fail = |e: &dyn std::fmt::Display| format!("cannot build its seccomp filter: {e}");
    #[cfg(target_arch = "x86_64")]
    let arch = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    let arch = TargetArch::aarch64;
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    return Err("seccomp filters are built for x86_64 and aarch64 only".into());

    let compile = |rules: BTreeMap<i64, Vec<SeccompRule>>, errno: u32| {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno),
            arch,
        )
        .map_err(|e| fail(&e))?;
        seccompiler::BpfProgram::try_from(filter).map_err(|e| fail(&e))
    };
    let mut enosys = BTreeMap::new();
    enosys.insert(libc::SYS_clone3, Vec::new());
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_bpf,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_perf_event_open,
        libc::SYS_setns,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_userfaultfd,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_fanotify_init,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_unshare,
    ] {
        deny.insert(call, Vec::new());
    }
    let namespaces = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ];
    let mut clone_rules = Vec::new();
    for flag in namespaces {
        let flag = flag as u64;
        let c = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )
        .map_err(|e| fail(&e))?;
        clone_rules.push(SeccompRule::new(vec![c]).map_err(|e| fail(&e))?);
    }
    deny.insert(libc::SYS_clone, clone_rules);
    let families: &[libc::c_int] = match net {
        Net::All => &[],
        Net::Hosts(_) => &[libc::AF_PACKET, libc::AF_UNIX],
        Net::None => &[
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_PACKET,
            libc::AF_UNIX,
        ],
    };
    if !families.is_empty() {
        let mut socket_rules = Vec::new();
        for &family in families {
            let c =
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family as u64)
                    .map_err(|e| fail(&e))?;
            socket_rules.push(SeccompRule::new(vec![c]).map_err(|e| fail(&e))?);
        }
        deny.insert(libc::SYS_socket, socket_rules);
    }
    Ok(vec![
        compile(enosys, libc::ENOSYS as u32)?,
        compile(deny, libc::EPERM as u32)?,
    ])
}

impl Prepared {
    /// Applies the confinement to the calling process: its network namespace when it has
    /// a host list, Landlock (which sets `no_new_privs`), then the seccomp filters. Called
    /// in the forked child before exec: it allocates nothing and makes only system calls.
    pub fn apply(&mut self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            if let Some(ns) = self.netns.as_mut() {
                ns.enter()?;
            }
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
