//! A stateless client's call while it runs: its future, what it says on the way
//! (notifications), the questions it asks (pauses), and whether its upstream made it a
//! task. Both a paused call (`parked.rs`) and a task (`tasks.rs`) hold one.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::gateway::questions::Pause;

/// A call running for a stateless client: what it says, and the call itself (ended
/// when this is dropped: nobody will hear its end).
pub struct Running {
    pub(super) notes: mpsc::Receiver<Vec<u8>>,
    pub(super) pauses: mpsc::Receiver<Pause>,
    /// Told when the upstream made the call a task, for a client that takes tasks.
    pub(super) tasked: Option<mpsc::Receiver<()>>,
    pub(super) call: Call,
}

/// The call's future: polled by the request waiting for it, until it pauses and must
/// outlive that request; then a task of its own.
pub(super) enum Call {
    Inline(Pin<Box<dyn Future<Output = Vec<u8>> + Send>>),
    Task {
        done: oneshot::Receiver<Vec<u8>>,
        task: AbortHandle,
    },
}

impl Call {
    /// The call's reply (empty if its task died).
    pub(super) async fn reply(&mut self) -> Vec<u8> {
        match self {
            Call::Inline(call) => call.as_mut().await,
            Call::Task { done, .. } => done.await.unwrap_or_default(),
        }
    }

    /// The call as a task, so it goes on without the request that began it.
    pub(super) fn detach(&mut self) {
        let Call::Inline(call) = self else {
            return;
        };
        let call = std::mem::replace(call, Box::pin(async { Vec::new() }));
        let (tx, done) = oneshot::channel();
        let task = tokio::spawn(async move {
            let _ = tx.send(call.await);
        });
        *self = Call::Task {
            done,
            task: task.abort_handle(),
        };
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Call::Task { task, .. } = &self.call {
            task.abort();
        }
    }
}

/// What a running call did next.
pub(super) enum Next {
    /// It ended with this reply (empty: its task died).
    Reply(Vec<u8>),
    /// It asks the client.
    Ask(Pause),
    /// Its upstream made it a task (the client takes tasks).
    Tasked,
}

/// What the call does next: its reply, questions, or becoming a task.
pub(super) async fn next(
    call: &mut Call,
    pauses: &mut mpsc::Receiver<Pause>,
    tasked: &mut Option<mpsc::Receiver<()>>,
) -> Next {
    let escalated = async {
        match tasked.as_mut() {
            Some(rx) => {
                if rx.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        reply = call.reply() => Next::Reply(reply),
        Some(pause) = pauses.recv() => Next::Ask(pause),
        () = escalated => Next::Tasked,
    }
}
