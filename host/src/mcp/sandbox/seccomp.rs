//! The system call policy of a confined server: a deny list reviewed against Docker's
//! default seccomp profile and flatpak's, each family with its reason in
//! `docs/security.md` ("System calls"). A deny list, not an allow list: real servers run
//! whatever their runtime (Node, Python, a launcher, a shell, `git`) needs, and a call
//! a future runtime adds must not break every confined server; what is refused is what
//! reaches past the process's own files and sockets, which Landlock and the network
//! rules bound.
//!
//! Two filters: `clone3` answered `ENOSYS` (the C library then falls back to `clone`,
//! whose flags a filter can read), then `EPERM` for the rest.

use std::collections::BTreeMap;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

use crate::config::Net;

/// Refused outright: each reaches past the process (the kernel, other processes, mounts,
/// keys, the clock) or hides work from the filter (`io_uring` runs `socket`, `openat`
/// and the rest without passing seccomp).
const DENIED: &[(i64, &str)] = &[
    // Other processes.
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_process_vm_readv, "process_vm_readv"),
    (libc::SYS_process_vm_writev, "process_vm_writev"),
    (libc::SYS_kcmp, "kcmp"),
    // Requests the filter cannot see (Docker's default profile refuses them since 2023,
    // Chromium's and Android's too).
    (libc::SYS_io_uring_setup, "io_uring_setup"),
    (libc::SYS_io_uring_enter, "io_uring_enter"),
    (libc::SYS_io_uring_register, "io_uring_register"),
    // Mounts and namespaces (old and new mount API).
    (libc::SYS_mount, "mount"),
    (libc::SYS_umount2, "umount2"),
    (libc::SYS_pivot_root, "pivot_root"),
    (libc::SYS_chroot, "chroot"),
    (libc::SYS_fsopen, "fsopen"),
    (libc::SYS_fsconfig, "fsconfig"),
    (libc::SYS_fsmount, "fsmount"),
    (libc::SYS_fspick, "fspick"),
    (libc::SYS_move_mount, "move_mount"),
    (libc::SYS_open_tree, "open_tree"),
    (libc::SYS_mount_setattr, "mount_setattr"),
    (libc::SYS_unshare, "unshare"),
    (libc::SYS_setns, "setns"),
    // Files by handle, which skips the path Landlock checks.
    (libc::SYS_open_by_handle_at, "open_by_handle_at"),
    (libc::SYS_name_to_handle_at, "name_to_handle_at"),
    (libc::SYS_fanotify_init, "fanotify_init"),
    // The kernel itself.
    (libc::SYS_kexec_load, "kexec_load"),
    (libc::SYS_kexec_file_load, "kexec_file_load"),
    (libc::SYS_init_module, "init_module"),
    (libc::SYS_finit_module, "finit_module"),
    (libc::SYS_delete_module, "delete_module"),
    (libc::SYS_bpf, "bpf"),
    (libc::SYS_perf_event_open, "perf_event_open"),
    (libc::SYS_userfaultfd, "userfaultfd"),
    (libc::SYS_syslog, "syslog"),
    (libc::SYS_acct, "acct"),
    (libc::SYS_quotactl, "quotactl"),
    (libc::SYS_swapon, "swapon"),
    (libc::SYS_swapoff, "swapoff"),
    (libc::SYS_reboot, "reboot"),
    (libc::SYS_lookup_dcookie, "lookup_dcookie"),
    (libc::SYS_vhangup, "vhangup"),
    // Memory placement across the machine's nodes.
    (libc::SYS_mbind, "mbind"),
    (libc::SYS_set_mempolicy, "set_mempolicy"),
    (libc::SYS_migrate_pages, "migrate_pages"),
    (libc::SYS_move_pages, "move_pages"),
    // The kernel's keyring (the user's session keyring holds secrets).
    (libc::SYS_keyctl, "keyctl"),
    (libc::SYS_add_key, "add_key"),
    (libc::SYS_request_key, "request_key"),
    // The machine's clock.
    (libc::SYS_settimeofday, "settimeofday"),
    (libc::SYS_clock_settime, "clock_settime"),
    (libc::SYS_clock_adjtime, "clock_adjtime"),
    // x86 only: port I/O, segment tables, the old library loader.
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_ioperm, "ioperm"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_iopl, "iopl"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_modify_ldt, "modify_ldt"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_uselib, "uselib"),
];

/// `ioctl` requests refused on any descriptor: pushing input into a terminal
/// (`TIOCSTI`, bubblewrap's CVE-2017-5226; `TIOCLINUX`'s selection paste does the same
/// on a virtual console). Compared on the low 32 bits, as the kernel reads the request
/// (flatpak's CVE-2019-10063: a filter that compared 64 bits was passed by setting a
/// high bit).
// The request's type is the C library's (`c_ulong` on glibc, `c_int` on musl).
#[allow(clippy::unnecessary_cast)]
const IOCTLS: &[(u64, &str)] = &[
    (libc::TIOCSTI as u64, "TIOCSTI"),
    (libc::TIOCLINUX as u64, "TIOCLINUX"),
];

/// The socket families a server may make at all, as flatpak allows: local, internet,
/// netlink. Packet, Bluetooth, `AF_ALG`, vsock and the rest are refused in every
/// profile; [`refused_families`] narrows further by the profile's `"net"`.
const FAMILIES: &[libc::c_int] = &[
    libc::AF_UNSPEC,
    libc::AF_UNIX,
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_NETLINK,
];

/// The families refused beyond those outside [`FAMILIES`]: Unix sockets unless the
/// network is `"all"` (the D-Bus session bus, which reaches the keyring, ssh-agent and
/// docker are Unix sockets), and the internet families too under `"none"`.
fn refused_families(net: &Net) -> &'static [libc::c_int] {
    match net {
        Net::All => &[],
        Net::Hosts(_) => &[libc::AF_UNIX],
        Net::None => &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6],
    }
}

/// The system calls refused in every profile, by name.
#[cfg(test)]
fn denied_names() -> impl Iterator<Item = &'static str> {
    DENIED.iter().map(|(_, n)| *n)
}

/// The `ioctl` requests refused in every profile, by name.
#[cfg(test)]
fn denied_ioctls() -> impl Iterator<Item = &'static str> {
    IOCTLS.iter().map(|(_, n)| *n)
}

/// Builds the filters for a server whose network is `net`.
pub(super) fn filters(net: &Net) -> Result<Vec<seccompiler::BpfProgram>, String> {
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
    let condition = |arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, len, op, value).map_err(|e| fail(&e))
    };
    let rule =
        |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions).map_err(|e| fail(&e));

    let mut enosys = BTreeMap::new();
    enosys.insert(libc::SYS_clone3, Vec::new());
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (call, _) in DENIED {
        deny.insert(*call, Vec::new());
    }
    // `clone` with any namespace flag.
    let mut clone_rules = Vec::new();
    for flag in [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ] {
        let flag = flag as u64;
        clone_rules.push(rule(vec![condition(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?);
    }
    deny.insert(libc::SYS_clone, clone_rules);
    let mut ioctl_rules = Vec::new();
    for (request, _) in IOCTLS {
        ioctl_rules.push(rule(vec![condition(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            *request,
        )?])?);
    }
    deny.insert(libc::SYS_ioctl, ioctl_rules);
    // `socket`: a family outside the allowed ones (every condition of a rule must hold),
    // or one of the profile's refused families.
    let mut socket_rules = vec![rule(
        FAMILIES
            .iter()
            .map(|f| condition(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *f as u64))
            .collect::<Result<_, _>>()?,
    )?];
    for family in refused_families(net) {
        socket_rules.push(rule(vec![condition(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            *family as u64,
        )?])?);
    }
    deny.insert(libc::SYS_socket, socket_rules);
    Ok(vec![
        compile(enosys, libc::ENOSYS as u32)?,
        compile(deny, libc::EPERM as u32)?,
    ])
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn every_profile_builds_and_the_lists_name_each_entry_once() {
        for net in [Net::None, Net::All, Net::Hosts(Vec::new())] {
            let f = filters(&net).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(f.len(), 2);
        }
        let mut names: Vec<&str> = denied_names().collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a system call is listed twice");
        assert!(names.contains(&"io_uring_setup") && names.contains(&"ptrace"));
        assert_eq!(
            denied_ioctls().collect::<Vec<_>>(),
            ["TIOCSTI", "TIOCLINUX"]
        );
    }

    #[test]
    fn the_security_guide_lists_every_refusal() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/security.md"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        for name in denied_names().chain(denied_ioctls()) {
            assert!(
                doc.contains(&format!("`{name}`")),
                "docs/security.md does not list {name}"
            );
        }
    }
}
