//! A test adapter naming the previous contract's functions with the wrong types: the
//! host must refuse it.
#![cfg(target_arch = "wasm32")]
// wit-bindgen's generated export glue is `unsafe`.
#![allow(unsafe_code)]

wit_bindgen::generate!({ path: "wit", world: "schema-adapter" });

struct Adapter;
export!(Adapter);

impl exports::edgar::schema::adapter::Guest for Adapter {
    fn tool_name(server: String) -> String {
        server
    }
    fn to_schema(server: String, _tool_json: String) -> String {
        server
    }
    fn to_result(result_json: String) -> String {
        result_json
    }
}
