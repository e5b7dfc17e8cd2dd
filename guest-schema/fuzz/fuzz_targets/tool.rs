//! `invariants::tool` on arbitrary input (`guest-schema/fuzz/README.md`).
#![no_main]

// Each target uses one of its checks.
#[allow(dead_code)]
#[path = "../../tests/support/invariants.rs"]
mod invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        invariants::tool(text);
    }
});
