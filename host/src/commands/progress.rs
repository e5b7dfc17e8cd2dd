//! A one-line progress report on stderr while several servers are discovered at once:
//! how many are done, and which has kept us waiting longest. Only on a terminal; on a
//! pipe nothing is printed.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use edgar_host::mcp::client::join_all;
use edgar_host::sync::lock;

/// How often the line is redrawn.
const TICK: Duration = Duration::from_millis(200);

#[derive(Default)]
struct State {
    done: usize,
    waiting: BTreeMap<String, Instant>,
}

/// Runs `work` for every name concurrently, reporting progress while any is pending.
pub async fn each<T, F, Fut>(names: &[String], work: F) -> Vec<T>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = T>,
{
    let show = names.len() > 1 && std::io::stderr().is_terminal();
    let state = Arc::new(Mutex::new(State::default()));
    let futures = names.iter().map(|name| {
        let state = state.clone();
        let job = work(name.clone());
        async move {
            lock(&state).waiting.insert(name.clone(), Instant::now());
            let out = job.await;
            let mut s = lock(&state);
            s.waiting.remove(name);
            s.done += 1;
            out
        }
    });
    if !show {
        return join_all(futures).await;
    }
    let total = names.len();
    let report = {
        let state = state.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(TICK).await;
                let line = {
                    let s = lock(&state);
                    let slowest = s.waiting.iter().min_by_key(|(_, at)| **at);
                    match slowest {
                        Some((name, at)) => format!(
                            "discovering MCP servers: {}/{total} done; waiting on {} ({:.1} s)",
                            s.done,
                            edgar_host::text::shown(name),
                            at.elapsed().as_secs_f32()
                        ),
                        None => continue,
                    }
                };
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[K{line}");
                let _ = err.flush();
            }
        })
    };
    let out = join_all(futures).await;
    report.abort();
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[K");
    let _ = err.flush();
    out
}
