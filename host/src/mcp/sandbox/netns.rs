//! A confined server's own network namespace (Linux): made in the forked child with a
//! user namespace that maps only the user's own ids, its loopback brought up, and the
//! listeners edgar serves in it (the filtering proxy, one per loopback host its profile
//! lists) bound there and handed back to edgar over a socket pair before exec. From
//! inside, the namespace's loopback is all there is: every other address is unreachable,
//! and what leaves does so through edgar's proxy, which checks each host by name.
//!
//! The child's part ([`Child::enter`]) allocates nothing: everything it writes was made
//! before the fork, so it is safe between fork and exec of a threaded edgar. Its two
//! `unsafe` blocks are the `unshare` call (rustix marks it unsafe for threaded callers;
//! the child has one thread) and the `SIOCSIFFLAGS` ioctl, which nothing safe wraps.

#![allow(unsafe_code)]

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// The port of the proxy inside the namespace, unless a listed loopback host takes it.
const PROXY_PORT: u16 = 3128;

/// Room for the control message carrying one descriptor.
const ONE_FD: usize = rustix::cmsg_space!(ScmRights(1));

/// The forked child's half: what it sets up, and where it sends the listeners.
pub struct Child {
    sender: OwnedFd,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// Ports to listen on at 127.0.0.1 in the namespace: the proxy's first.
    ports: Vec<u16>,
}

/// edgar's half: the receiving end, and what each received listener is for.
pub struct Parent {
    receiver: OwnedFd,
    ports: Vec<u16>,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("netns::Child")
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

/// The two halves for a namespace whose raw loopback listeners are `loopback` ports.
pub fn pair(loopback: &[u16]) -> io::Result<(Child, Parent)> {
    // A packet socket keeps each listener its own message.
    let (sender, receiver) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let proxy = (PROXY_PORT..=u16::MAX)
        .find(|p| !loopback.contains(p))
        .unwrap_or(PROXY_PORT);
    let mut ports = vec![proxy];
    ports.extend_from_slice(loopback);
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    Ok((
        Child {
            sender,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            ports: ports.clone(),
        },
        Parent { receiver, ports },
    ))
}

impl Parent {
    /// The proxy's port inside the namespace (for `HTTP_PROXY`).
    pub fn proxy_port(&self) -> u16 {
        self.ports[0]
    }

    /// The listeners the child sent before exec, once it runs: the proxy's, then one per
    /// loopback port, each with its port.
    pub fn receive(self) -> io::Result<Vec<(u16, std::net::TcpListener)>> {
        let mut out = Vec::with_capacity(self.ports.len());
        for port in self.ports {
            let mut space = [MaybeUninit::<u8>::uninit(); ONE_FD];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let mut byte = [0u8; 1];
            rustix::net::recvmsg(
                &self.receiver,
                &mut [io::IoSliceMut::new(&mut byte)],
                &mut control,
                RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
            )?;
            let fd = control.drain().find_map(|m| match m {
                RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
                _ => None,
            });
            let Some(fd) = fd else {
                return Err(io::Error::other(
                    "its network namespace did not send its listeners",
                ));
            };
            out.push((port, std::net::TcpListener::from(fd)));
        }
        Ok(out)
    }
}

impl Child {
    /// The ports it listens on in the namespace: the only ones the server may connect to.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Enters a new user and network namespace and sends edgar the listeners. Called in
    /// the forked child before Landlock and seccomp (which forbid `unshare`): only system
    /// calls, on memory made before the fork.
    pub fn enter(&mut self) -> io::Result<()> {
        use rustix::thread::UnshareFlags;
        // SAFETY: the forked child has one thread, so no other thread can see the
        // namespaces change (and FILES, the flag that splits descriptor tables, is not set).
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNET) }?;
        // Its own ids map to themselves: files keep their owners, and it has no
        // capability left once it runs a program.
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", &self.uid_map)?;
        write_proc(c"/proc/self/gid_map", &self.gid_map)?;
        loopback_up()?;
        for port in &self.ports {
            let listener = rustix::net::socket_with(
                AddressFamily::INET,
                SocketType::STREAM,
                SocketFlags::CLOEXEC,
                None,
            )?;
            rustix::net::bind(&listener, &SocketAddrV4::new(Ipv4Addr::LOCALHOST, *port))?;
            rustix::net::listen(&listener, 128)?;
            let mut space = [MaybeUninit::<u8>::uninit(); ONE_FD];
            let mut control = SendAncillaryBuffer::new(&mut space);
            let fds = [listener.as_fd()];
            if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
                return Err(io::Error::from(rustix::io::Errno::NOBUFS));
            }
            rustix::net::sendmsg(
                &self.sender,
                &[io::IoSlice::new(b"l")],
                &mut control,
                SendFlags::NOSIGNAL,
            )?;
            // edgar holds it now; the child's copy is closed here.
        }
        Ok(())
    }
}

/// Writes `bytes` to a `/proc/self` file.
fn write_proc(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    let n = rustix::io::write(&fd, bytes)?;
    if n != bytes.len() {
        return Err(io::Error::from(rustix::io::Errno::IO));
    }
    Ok(())
}

/// Brings up the namespace's loopback interface (it starts down, without 127.0.0.1).
fn loopback_up() -> io::Result<()> {
    let s = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // SAFETY: an all-zero ifreq is a valid value of this plain C struct (and union).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    ifr.ifr_name[0] = b'l' as libc::c_char;
    ifr.ifr_name[1] = b'o' as libc::c_char;
    ifr.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads one ifreq, which `ifr` is, for the duration of the call.
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            libc::SIOCSIFFLAGS,
            &ifr,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
