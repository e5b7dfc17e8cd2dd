//! A test adapter for `edgar:schema@0.3.0`: the host must refuse it by version.
#![cfg(target_arch = "wasm32")]
// wit-bindgen's generated export glue is `unsafe`.
#![allow(unsafe_code)]

wit_bindgen::generate!({ path: "wit", world: "schema-adapter" });

struct Adapter;
export!(Adapter);

impl exports::edgar::schema::adapter::Guest for Adapter {
    fn tool_name(server: String, tool: String) -> Result<String, String> {
        Ok(format!("{server}__{tool}"))
    }
}
