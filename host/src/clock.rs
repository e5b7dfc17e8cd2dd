//! Wall-clock time as the caches and sign-in record it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch (0 on a clock set before it).
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
