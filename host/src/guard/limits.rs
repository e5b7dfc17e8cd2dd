//! The store-wide budget of one adapter instance: every limit a third-party component
//! could otherwise get around by spreading its use over many memories, tables or
//! instances, or by asking the host to allocate on its behalf.

use std::fmt;

use wasmtime::ResourceLimiter;

use super::GUARD_MEMORY_BYTES;

/// Table elements across all of a store's tables. Each costs the host a pointer, and
/// `table.grow` allocates in host code, where the deadline cannot interrupt it; Rust
/// adapters use a few hundred (indirect calls).
pub const MAX_TABLE_ELEMENTS: usize = 1 << 16;
/// Core instances per store: a component built by the usual toolchains has fewer than
/// ten (the module, WASI adapters, shims).
pub const MAX_INSTANCES: usize = 32;
/// Tables per store, for the same reason as [`MAX_INSTANCES`].
pub const MAX_TABLES: usize = 32;
/// Linear memories per store; their sizes together stay within [`GUARD_MEMORY_BYTES`].
pub const MAX_MEMORIES: usize = 8;
/// WASI resources (streams, pollables) an instance may hold open at once: the host
/// keeps them in its own memory, outside the guest's. An adapter needs two or three.
pub const MAX_HOST_RESOURCES: usize = 256;

/// What the guest tried to take beyond its budget; the call traps with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitExceeded(pub String);

impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LimitExceeded {}

/// Counts memory bytes and table elements over the whole store, not per memory or per
/// table, and refuses growth past the budget with a trap (never a silent `-1`, which a
/// guest could retry forever).
#[derive(Debug, Default)]
pub struct StoreBudget {
    memory_bytes: usize,
    table_elements: usize,
}

impl StoreBudget {
    /// Linear memory the store's instances hold, in bytes (memory never shrinks).
    pub fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    fn grow(
        used: &mut usize,
        current: usize,
        desired: usize,
        limit: usize,
        what: impl FnOnce() -> String,
    ) -> wasmtime::Result<bool> {
        let more = desired.saturating_sub(current);
        match used.checked_add(more) {
            Some(total) if total <= limit => {
                *used = total;
                Ok(true)
            }
            _ => Err(wasmtime::Error::new(LimitExceeded(what()))),
        }
    }
}

impl ResourceLimiter for StoreBudget {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Self::grow(
            &mut self.memory_bytes,
            current,
            desired,
            GUARD_MEMORY_BYTES,
            || {
                format!(
                    "tried to use more than {} MiB of memory",
                    GUARD_MEMORY_BYTES >> 20
                )
            },
        )
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Self::grow(
            &mut self.table_elements,
            current,
            desired,
            MAX_TABLE_ELEMENTS,
            || format!("tried to hold more than {MAX_TABLE_ELEMENTS} table elements"),
        )
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_counted_across_memories() {
        let mut budget = StoreBudget::default();
        let eighth = GUARD_MEMORY_BYTES / 8;
        for _ in 0..8 {
            assert!(matches!(budget.memory_growing(0, eighth, None), Ok(true)));
        }
        let err = budget.memory_growing(0, 1, None).err();
        assert!(
            err.as_ref()
                .is_some_and(|e| e.downcast_ref::<LimitExceeded>().is_some()),
            "{err:?}"
        );
    }

    #[test]
    fn growth_counts_only_the_new_part() {
        let mut budget = StoreBudget::default();
        assert!(matches!(budget.memory_growing(0, 1 << 20, None), Ok(true)));
        assert!(matches!(
            budget.memory_growing(1 << 20, 2 << 20, None),
            Ok(true)
        ));
        assert_eq!(budget.memory_bytes, 2 << 20);
        // A shrink or a no-op never frees budget a hostile guest could reuse twice.
        assert!(matches!(
            budget.memory_growing(2 << 20, 1 << 20, None),
            Ok(true)
        ));
        assert_eq!(budget.memory_bytes, 2 << 20);
    }

    #[test]
    fn table_elements_are_counted_across_tables() {
        let mut budget = StoreBudget::default();
        assert!(matches!(
            budget.table_growing(0, MAX_TABLE_ELEMENTS / 2, None),
            Ok(true)
        ));
        assert!(matches!(
            budget.table_growing(0, MAX_TABLE_ELEMENTS / 2, None),
            Ok(true)
        ));
        assert!(budget.table_growing(0, 1, None).is_err());
    }

    #[test]
    fn huge_requests_do_not_overflow() {
        let mut budget = StoreBudget::default();
        assert!(matches!(budget.memory_growing(0, 1, None), Ok(true)));
        assert!(budget.memory_growing(0, usize::MAX, None).is_err());
        assert!(budget.table_growing(0, usize::MAX, None).is_err());
    }
}
