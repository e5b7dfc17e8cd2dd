//! Locking shared state that a panicking thread may have poisoned.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking the value as it is if a thread panicked while holding it: every
/// lock here guards state that stays consistent between statements (maps, lists,
/// counters), and one panicked request must not take the process with it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
