//! Process hygiene around stdio servers, which run as the same user as edgar:
//!
//! - edgar makes itself not dumpable before it starts the first server, so a server
//!   cannot read edgar's environment, memory or descriptors through `/proc/<pid>` or
//!   attach to it with `ptrace` (the kernel then checks `CAP_SYS_PTRACE`, which a user's
//!   process does not have);
//! - edgar becomes a child subreaper (Linux), so a server's descendant that leaves its
//!   process group and session (`setsid`, a daemon's double fork) is adopted by edgar
//!   instead of by init, and
//!   `sweep` ends it once no server runs any more.
//!
//! Elsewhere (macOS) neither exists: there, only the process group is reached at close.

use std::collections::BTreeSet;
use std::sync::{Mutex, Once};

/// The process ids of the stdio servers running now (each leads its own group).
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
/// Held from a server's fork until its pid is in [`LIVE`], and by [`sweep`]: a server
/// runs in a session of its own, so in between it would look like an escaped descendant.
static SPAWNING: Mutex<()> = Mutex::new(());
static HARDEN: Once = Once::new();
/// Rounds of [`sweep`]: an adopted process killed may leave children of its own, which
/// are adopted in turn.
const SWEEP_ROUNDS: usize = 16;

/// Makes this process not dumpable and a child subreaper, once, before any server starts.
pub(crate) fn harden() {
    HARDEN.call_once(|| {
        #[cfg(target_os = "linux")]
        {
            use rustix::process::{DumpableBehavior, getpid, set_child_subreaper};
            if let Err(e) = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable)
            {
                tracing::warn!("cannot hide edgar's memory from its servers (PR_SET_DUMPABLE): {e}");
            }
            if let Err(e) = set_child_subreaper(Some(getpid())) {
                tracing::warn!(
                    "servers' escaped descendants will not be ended at close (PR_SET_CHILD_SUBREAPER): {e}"
                );
            }
        }
    });
}

/// Whether this process is dumpable (Linux; elsewhere always true).
pub fn is_dumpable() -> bool {
    #[cfg(target_os = "linux")]
    {
        !matches!(
            rustix::process::dumpable_behavior(),
            Ok(rustix::process::DumpableBehavior::NotDumpable)
        )
    }
    #[cfg(not(target_os = "linux"))]
    true
}

/// Held around a server's spawn and its [`started`]: no [`sweep`] runs in between.
pub(crate) fn spawning() -> std::sync::MutexGuard<'static, ()> {
    SPAWNING.lock().unwrap_or_else(|p| p.into_inner())
}

/// A server started: its group is its own to signal, and it is not an orphan.
pub(crate) fn started(pid: i32) {
    LIVE.lock().unwrap_or_else(|p| p.into_inner()).insert(pid);
}

/// A server was reaped. When it was the last, every process edgar adopted that left
/// edgar's process group and session (a server's descendant that escaped) is killed and
/// reaped (`sweep`).
pub(crate) fn ended(pid: i32) {
    let last = {
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        live.remove(&pid);
        live.is_empty()
    };
    if last {
        sweep();
    }
}

/// A server dropped without `close` (its group was killed): no longer live. Nothing is
/// swept here, since a drop must not block.
pub(crate) fn forget(pid: i32) {
    LIVE.lock().unwrap_or_else(|p| p.into_inner()).remove(&pid);
}

/// Kills and reaps the adopted descendants of servers: children of this process that
/// edgar did not start as a server (not live, and no server is between its fork and
/// `started`: [`spawning`]), outside edgar's own process group, and in another session
/// than edgar's (a server's own session, or one they made with `setsid`). Everything else edgar
/// or a program embedding it runs (a key command, a browser opener, an embedder's own
/// helper in a process group of its own) stays in edgar's session and is left alone. A
/// descendant that only changed its process group (`setpgid`, no `setsid`) is not
/// recognized: that gap is documented.
#[cfg(target_os = "linux")]
pub(crate) fn sweep() {
    use rustix::process::{Pid, Signal, WaitOptions, getpid, kill_process, waitpid};
    let me = getpid().as_raw_nonzero().get();
    // From /proc, not getsid/getpgrp: in a container whose session or group leader is
    // outside this pid namespace those ids read as 0, which the syscall wrappers cannot
    // represent.
    let Some(own) = stat_of("self") else {
        return;
    };
    let (own_group, own_session) = (own.group, own.session);
    // A server being spawned is a child in another session not yet live: wait for it.
    let _spawning = spawning();
    for _ in 0..SWEEP_ROUNDS {
        let live = LIVE.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let adopted: Vec<i32> = children_of(me)
            .into_iter()
            .filter(|c| c.group != own_group && c.session != own_session && !live.contains(&c.pid))
            .map(|c| c.pid)
            .collect();
        if adopted.is_empty() {
            return;
        }
        for pid in adopted {
            let Some(pid) = Pid::from_raw(pid) else {
                continue;
            };
            let _ = kill_process(pid, Signal::KILL);
            // Reaps it (it is our child now); an error means someone else already did.
            let _ = waitpid(Some(pid), WaitOptions::empty());
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn sweep() {}

/// A child process as `/proc` shows it.
#[cfg(target_os = "linux")]
#[derive(Debug, PartialEq, Eq)]
struct Child {
    pid: i32,
    group: i32,
    session: i32,
}

/// Every process whose parent is `parent`, from `/proc`.
#[cfg(target_os = "linux")]
fn children_of(parent: i32) -> Vec<Child> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = stat_of(&pid.to_string())?;
            (stat.parent == parent).then_some(Child {
                pid,
                group: stat.group,
                session: stat.session,
            })
        })
        .collect()
}

/// The ids `/proc/<pid>/stat` holds for a process (`pid` may be `self`). Ids of processes
/// outside this pid namespace read as 0.
#[cfg(target_os = "linux")]
struct Stat {
    parent: i32,
    group: i32,
    session: i32,
}

#[cfg(target_os = "linux")]
fn stat_of(pid: &str) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name, which may hold spaces and parentheses: state, ppid, pgrp,
    // session.
    let mut rest = stat.rsplit_once(") ")?.1.split(' ');
    let _state = rest.next()?;
    Some(Stat {
        parent: rest.next()?.parse().ok()?,
        group: rest.next()?.parse().ok()?,
        session: rest.next()?.parse().ok()?,
    })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    #[test]
    fn before_a_server_starts_edgar_is_not_dumpable_and_adopts_escaped_descendants() {
        harden();
        assert!(
            !is_dumpable(),
            "a server could read edgar's memory through /proc"
        );
        // PR_GET_CHILD_SUBREAPER answers the flag (rustix gives a nonzero one as `Some`).
        let subreaper = rustix::process::child_subreaper().ok().flatten();
        assert!(subreaper.is_some(), "not a child subreaper");
    }

    #[test]
    fn children_are_read_from_proc_with_their_group() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let pid = child.id() as i32;
        let found = children_of(me);
        let _ = child.kill();
        let _ = child.wait();
        // Read as `sweep` reads it: in a container the session leader may be outside this
        // pid namespace, and the session then reads as 0.
        let session = stat_of("self").map(|s| s.session).unwrap_or(-1);
        // In its own group but edgar's session: an embedder's helper, never swept.
        assert!(
            found.contains(&Child {
                pid,
                group: pid,
                session
            }),
            "{found:?} lacks {pid}"
        );
    }

    /// Every server runs in a session of its own, so between its fork and `started` it
    /// looks like an escaped descendant: a sweep then (another server's close) must wait.
    #[test]
    fn a_server_between_its_spawn_and_started_is_not_swept() {
        harden();
        let guard = spawning();
        // `setsid` (util-linux) makes a new session and execs `sleep`, as a server does.
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "30"])
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let pid = child.id() as i32;
        // Until it has left edgar's session it is not what a sweep looks for.
        for _ in 0..500 {
            if stat_of(&pid.to_string()).is_some_and(|c| c.session == pid) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let sweeper = std::thread::spawn(sweep);
        std::thread::sleep(std::time::Duration::from_millis(200));
        started(pid);
        drop(guard);
        sweeper
            .join()
            .unwrap_or_else(|_| panic!("the sweep panicked"));
        let alive = matches!(child.try_wait(), Ok(None));
        forget(pid);
        let _ = child.kill();
        let _ = child.wait();
        assert!(alive, "a server being started was swept");
    }
}
