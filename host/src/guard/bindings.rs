//! Host bindings generated from `wit/schema.wit`, kept apart from hand-written code.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "schema-adapter",
});

/// The exported interface's generated types and call wrappers.
pub use exports::edgar::schema::adapter as wit;

/// The interface a compatible component must export (semver-compatible minor versions match).
pub const ADAPTER_EXPORT: &str = "edgar:schema/adapter@0.1.0";
