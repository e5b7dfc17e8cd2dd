//! `edgar mcp serve --unix PATH`: the same gateway on a Unix domain socket, the
//! transport MCP's transports working group recommends after stdio. The socket is made
//! mode 0600 before anything is accepted, and each connection's peer credentials
//! (`SO_PEERCRED`) must be this user's: the kernel, not a bearer secret, says who may
//! talk to it. No `Host` check (no name was resolved); any `Origin` is refused.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use tokio::net::UnixListener;
use tokio::task::JoinSet;

use super::session::Sessions;
use super::{Auth, Front, MAX_CONNECTIONS, PATH, drain};
use crate::gateway::Gateway;
use crate::seal::Sealer;

/// Serves `gateway` on `listener` (bound at `path` by [`bind`]) until `shutdown`; the
/// socket file is removed after.
pub async fn serve_until(
    gateway: Arc<Gateway>,
    listener: UnixListener,
    path: &Path,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let served = accept_loop(gateway, listener, shutdown).await;
    let _ = std::fs::remove_file(path);
    served
}

/// Binds `path`, mode 0600, replacing a stale socket left by a crash but never another
/// kind of file or a socket in use.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(std::io::Error::other(format!(
                "{} exists and is not a socket; not replacing it",
                path.display()
            )));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::other(format!(
                "{} is in use by another server",
                path.display()
            )));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

async fn accept_loop(
    gateway: Arc<Gateway>,
    listener: UnixListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let me = rustix::process::getuid().as_raw();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    gateway.hand_out_tasks();
    let front = Arc::new(Front {
        gateway,
        auth: Auth::Peer,
        authorities: Vec::new(),
        path: PATH.to_owned(),
        sessions: Sessions::new(Sealer::random()?),
        stop: stop.clone(),
        parked: Arc::default(),
    });
    let mut connections = JoinSet::new();
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = open.clone().acquire_owned() => p,
            () = &mut shutdown => break,
        };
        let Ok(permit) = permit else {
            break;
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("cannot accept a connection on the Unix socket: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        // Only this user's processes: the socket's mode says so, the kernel confirms.
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == me => {}
            Ok(cred) => {
                tracing::warn!(
                    "refused a connection from uid {} on the Unix socket",
                    cred.uid()
                );
                continue;
            }
            Err(e) => {
                tracing::warn!("cannot tell who connected to the Unix socket: {e}");
                continue;
            }
        }
        while connections.try_join_next().is_some() {}
        let (front, stop) = (front.clone(), stop.clone());
        connections.spawn(async move {
            let _permit = permit;
            front.connection(stream, None, stop).await;
        });
    }
    drop(listener);
    drain(connections, stop_tx).await;
    Ok(())
}
