//! A confined server holds no privilege: every capability dropped (bounding, ambient,
//! inheritable, permitted and effective sets) and `no_new_privs` set, before exec. When
//! edgar runs as root (a container), a server would otherwise keep root's capabilities,
//! and inside a host list's own user namespace it would keep full capabilities there:
//! root execs with its bounding set as its permitted set, so an empty bounding set is
//! what makes exec grant nothing. `no_new_privs` keeps a set-user-id program or file
//! capabilities from handing any back.
//!
//! Called in the forked child between fork and exec: system calls on the stack only.

use rustix::io::Errno;
use rustix::thread::{CapabilitySet, CapabilitySets};

/// Drops every capability of the calling thread and sets `no_new_privs`.
pub(super) fn drop_all() -> std::io::Result<()> {
    let held = rustix::thread::capabilities(None)?;
    // Without CAP_SETPCAP the bounding set cannot be changed, and need not be: a process
    // that holds no capability gets none back from exec once `no_new_privs` is set.
    if held.permitted.contains(CapabilitySet::SETPCAP) {
        for bit in 0..64u32 {
            match rustix::thread::remove_capability_from_bounding_set(
                CapabilitySet::from_bits_retain(1 << bit),
            ) {
                Ok(()) => {}
                // Past the kernel's last capability.
                Err(Errno::INVAL) => break,
                Err(e) => return Err(e.into()),
            }
        }
    }
    match rustix::thread::clear_ambient_capability_set() {
        // A kernel before 4.3 has no ambient set.
        Ok(()) | Err(Errno::INVAL) => {}
        Err(e) => return Err(e.into()),
    }
    if !held.permitted.is_empty() || !held.inheritable.is_empty() {
        rustix::thread::set_capabilities(
            None,
            CapabilitySets {
                effective: CapabilitySet::empty(),
                permitted: CapabilitySet::empty(),
                inheritable: CapabilitySet::empty(),
            },
        )?;
    }
    rustix::thread::set_no_new_privs(true)?;
    Ok(())
}
