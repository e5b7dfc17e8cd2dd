//! The one process-wide wasmtime `Engine`, created on first use, its epoch ticker, and
//! the linker that gives guests a WASI with nothing in it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, Thread};

use wasmtime::component::{Component, Linker, ResourceTableError};
use wasmtime::{Config, Engine, OptLevel, Trap};

use super::GUARD_DEADLINE;
use super::bindings::{ADAPTER_EXPORT, AdapterPre, PREVIOUS_EXPORT, Version};
use super::cpu_clock::EPOCH_TICK;
use super::limits::{LimitExceeded, MAX_HOST_RESOURCES};
use super::sandbox::{self, HostState};

/// A guest's native stack; deep recursion traps instead of overflowing the host.
const GUEST_STACK_BYTES: usize = 512 << 10;

static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
static TICKER: OnceLock<Thread> = OnceLock::new();
/// Sessions currently running guest code; the ticker parks once this has been zero for
/// [`IDLE_PARK_TICKS`] ticks, so bursts of calls never pay for waking it.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
const IDLE_PARK_TICKS: u32 = 100;
static TICKER_PARKED: AtomicBool = AtomicBool::new(false);

/// The engine, created (with its ticker thread) on the first call.
pub(super) fn engine() -> Result<&'static Engine, String> {
    ENGINE
        .get_or_init(|| {
            let mut config = Config::new();
            config
                .cranelift_opt_level(OptLevel::Speed)
                .epoch_interruption(true)
                .max_wasm_stack(GUEST_STACK_BYTES)
                .concurrency_support(false);
            let engine =
                Engine::new(&config).map_err(|e| format!("cannot create the wasm engine: {e}"))?;
            start_ticker(&engine)?;
            Ok(engine)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Advances the epoch every [`EPOCH_TICK`] while any session is active and parks
/// otherwise, so an idle host costs no wakeups.
fn start_ticker(engine: &Engine) -> Result<(), String> {
    let weak = engine.weak();
    let handle = thread::Builder::new()
        .name("edgar-guard-epoch".into())
        .spawn(move || {
            let mut idle_ticks = 0u32;
            loop {
                if ACTIVE.load(Ordering::SeqCst) == 0 {
                    idle_ticks += 1;
                } else {
                    idle_ticks = 0;
                }
                if idle_ticks > IDLE_PARK_TICKS {
                    TICKER_PARKED.store(true, Ordering::SeqCst);
                    if ACTIVE.load(Ordering::SeqCst) == 0 {
                        thread::park();
                    }
                    TICKER_PARKED.store(false, Ordering::SeqCst);
                    idle_ticks = 0;
                    continue;
                }
                thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })
        .map_err(|e| format!("cannot start the guard's timer thread: {e}"))?;
    let _ = TICKER.set(handle.thread().clone());
    Ok(())
}

/// Marks a session active for its lifetime, so the ticker runs while guest code may run.
pub(super) struct Ticking;

impl Ticking {
    pub(super) fn start() -> Ticking {
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        if TICKER_PARKED.load(Ordering::SeqCst)
            && let Some(t) = TICKER.get()
        {
            t.unpark();
        }
        Ticking
    }
}

impl Drop for Ticking {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Links the locked-down WASI and type-checks `component` against the adapter world, or
/// against the previous contract (whose types are checked on a trial instance).
pub(super) fn instantiate_pre(
    engine: &Engine,
    component: &Component,
) -> Result<AdapterPre, String> {
    let Some(version) = super::bindings::version(component) else {
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let exports = if exports.is_empty() {
            "nothing".to_owned()
        } else {
            exports.join(", ")
        };
        return Err(format!(
            "it exports {exports}; an adapter must export {ADAPTER_EXPORT} (or the previous {PREVIOUS_EXPORT})"
        ));
    };
    let mut linker = Linker::<HostState>::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
        .map_err(|e| format!("cannot link WASI: {e}"))?;
    let pre = linker
        .instantiate_pre(component)
        .map_err(|e| format!("{e:#}"))?;
    match version {
        Version::Current => AdapterPre::current(component, pre).map_err(|e| format!("{e:#}")),
        Version::Previous(funcs) => {
            let adapter = AdapterPre::Previous { pre, funcs };
            let _ticking = Ticking::start();
            let mut store = sandbox::store(engine);
            sandbox::start_clock(&mut store, GUARD_DEADLINE);
            adapter
                .instantiate(&mut store)
                .and_then(|instance| instance.check_types(&store))
                .map_err(|e| describe_failure(&e))?;
            Ok(adapter)
        }
    }
}

/// A one-line account of why a guest call failed.
pub(super) fn describe_failure(err: &wasmtime::Error) -> String {
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            format!("ran past its {} ms time limit", GUARD_DEADLINE.as_millis())
        }
        Some(Trap::StackOverflow) => "overflowed its stack".into(),
        Some(trap) => format!("trapped: {trap}"),
        None => match err.downcast_ref::<LimitExceeded>() {
            Some(limit) => limit.to_string(),
            None if matches!(
                err.root_cause().downcast_ref::<ResourceTableError>(),
                Some(ResourceTableError::Full)
            ) =>
            {
                format!(
                    "tried to hold more than {MAX_HOST_RESOURCES} host resources (streams, pollables) open"
                )
            }
            None => format!("{err:#}"),
        },
    }
}
