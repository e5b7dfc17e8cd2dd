//! The guest's world: a WASI context with no preopens, environment, network, clock or
//! randomness, output captured into bounded buffers, and the store-wide budget.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use super::GUARD_DEADLINE;
use super::cpu_clock::CallClock;
use super::limits::{MAX_HOST_RESOURCES, StoreBudget};
use crate::sync::lock;

/// Bytes of a guest's stdout and of its stderr kept for the log; the rest is counted.
const GUEST_OUTPUT_BYTES: usize = 16 << 10;

/// Per-store state: the locked-down WASI context and the budget.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    budget: StoreBudget,
    stdout: BoundedSink,
    stderr: BoundedSink,
    clock: CallClock,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl HostState {
    /// Linear memory the instance holds, in bytes.
    pub(super) fn memory_bytes(&self) -> usize {
        self.budget.memory_bytes()
    }
}

/// A fresh store with the guard's limits.
pub(super) fn store(engine: &Engine) -> Store<HostState> {
    let stdout = BoundedSink::default();
    let stderr = BoundedSink::default();
    let wasi = WasiCtx::builder()
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .wall_clock(FrozenClock)
        .monotonic_clock(FrozenClock)
        .secure_random(wasmtime_wasi::Deterministic::new(vec![4; 32]))
        .insecure_random(wasmtime_wasi::Deterministic::new(vec![4; 32]))
        .insecure_random_seed(0)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build();
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_HOST_RESOURCES);
    let mut store = Store::new(
        engine,
        HostState {
            wasi,
            table,
            budget: StoreBudget::default(),
            stdout,
            stderr,
            clock: CallClock::start(GUARD_DEADLINE),
        },
    );
    store.limiter(|s| &mut s.budget);
    store.epoch_deadline_callback(|ctx| Ok(ctx.data().clock.on_deadline()));
    store
}

/// Starts the clock of the next guest call on `store`: `limit` of the calling thread's
/// CPU time (see [`super::cpu_clock`]).
pub(super) fn start_clock(store: &mut Store<HostState>, limit: Duration) {
    let clock = CallClock::start(limit);
    store.set_epoch_deadline(clock.first_ticks());
    store.data_mut().clock = clock;
}

/// Logs and clears whatever the guest printed during the last call.
pub(super) fn log_guest_output(store: &mut Store<HostState>, adapter: &str) {
    for (stream, sink) in [
        ("stdout", &store.data().stdout),
        ("stderr", &store.data().stderr),
    ] {
        if let Some((text, dropped)) = sink.take() {
            tracing::warn!(
                adapter,
                stream,
                dropped_bytes = dropped,
                "schema adapter printed: {text}"
            );
        }
    }
}

/// A clock stuck at zero: adapters must be deterministic.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// Keeps the first [`GUEST_OUTPUT_BYTES`] written and counts the rest, never failing the
/// guest (wasmtime's own memory pipe traps the guest when full).
#[derive(Clone, Default)]
struct BoundedSink(Arc<Mutex<SinkState>>);

#[derive(Default)]
struct SinkState {
    kept: Vec<u8>,
    dropped: usize,
}

impl BoundedSink {
    fn write(&self, bytes: &[u8]) {
        let mut s = lock(&self.0);
        let room = GUEST_OUTPUT_BYTES.saturating_sub(s.kept.len());
        let keep = bytes.len().min(room);
        s.kept.extend_from_slice(&bytes[..keep]);
        s.dropped += bytes.len() - keep;
    }

    fn take(&self) -> Option<(String, usize)> {
        let mut s = lock(&self.0);
        if s.kept.is_empty() && s.dropped == 0 {
            return None;
        }
        let text = String::from_utf8_lossy(&s.kept).escape_debug().to_string();
        let dropped = s.dropped;
        *s = SinkState::default();
        Some((text, dropped))
    }
}

impl IsTerminal for BoundedSink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for BoundedSink {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for BoundedSink {
    async fn ready(&mut self) {}
}

impl OutputStream for BoundedSink {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        BoundedSink::write(self, &bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 << 10)
    }
}

impl AsyncWrite for BoundedSink {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        BoundedSink::write(&self, buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
