use proptest::prelude::*;

use super::*;

fn raw(v: &Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).unwrap_or_else(|e| panic!("{e}"))
}

fn one(v: Value) -> Result<Incoming, String> {
    classify(&raw(&v)).map(|mut v| v.remove(0))
}

#[test]
fn classifies_messages() {
    match one(json!({"jsonrpc": "2.0", "id": 3, "result": {"a": 1}})) {
        Ok(Incoming::Response {
            id: Some(3),
            outcome: Ok(r),
        }) => assert_eq!(r.get(), r#"{"a":1}"#),
        other => panic!("{other:?}"),
    }
    match one(json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "no"}})) {
        Ok(Incoming::Response {
            id: None,
            outcome: Err(e),
        }) => assert_eq!(
            e,
            RpcError {
                code: -1,
                message: "no".into(),
                supported: Vec::new(),
                required: None,
            }
        ),
        other => panic!("{other:?}"),
    }
    // A missing capability is named from its data; data of any shape keeps the code.
    for (data, required) in [
        (
            json!({"requiredCapabilities": {"sampling": {}}}),
            Some("sampling"),
        ),
        (
            json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}),
            Some(TASKS_EXTENSION),
        ),
        (
            json!({"requiredCapabilities": {"extensions": {"x/y": {}}}}),
            None,
        ),
        (json!({"requiredCapabilities": {"teleport": {}}}), None),
        (json!("not an object"), None),
    ] {
        match one(
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": MISSING_CAPABILITY, "message": "m", "data": data}}),
        ) {
            Ok(Incoming::Response {
                outcome: Err(e), ..
            }) => {
                assert_eq!((e.code, e.required), (MISSING_CAPABILITY, required));
            }
            other => panic!("{other:?}"),
        }
    }
    match one(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})) {
        Ok(Incoming::Request { id, method, params }) => {
            assert_eq!(
                (id, method.as_str(), params),
                (json!(7), "ping", Value::Null)
            )
        }
        other => panic!("{other:?}"),
    }
    match one(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})) {
        Ok(Incoming::Notification { method, params }) => assert_eq!(
            (method.as_str(), params),
            ("notifications/tools/list_changed", Value::Null)
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn refuses_malformed_messages() {
    for bad in [
        json!(1),
        json!({"id": 1, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 1}),
        json!({"jsonrpc": "2.0", "id": 1, "result": 1, "error": {}}),
        json!({"jsonrpc": "2.0", "method": 5}),
        json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}),
        json!([]),
    ] {
        assert!(classify(&raw(&bad)).is_err(), "{bad}");
        // JSON, so an invalid request rather than a parse error.
        assert_eq!(refusal_code(bad.to_string().as_bytes()), -32600, "{bad}");
    }
    for not_json in [&b"{\"jsonrpc\":"[..], b"\xff", b"", b"[1,]"] {
        assert!(decode(not_json).is_err());
        assert_eq!(refusal_code(not_json), -32700);
    }
}

#[test]
fn batches_yield_each_message_up_to_a_limit() {
    let v = classify(&raw(
        &json!([{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "id": 1, "result": 2}]),
    ));
    assert_eq!(v.map(|v| v.len()), Ok(2));
    let many = Value::Array(vec![
        json!({"jsonrpc": "2.0", "method": "a"});
        MAX_BATCH + 1
    ]);
    let e = classify(&raw(&many)).err().unwrap_or_default();
    assert!(e.contains("more than 1000 items"), "{e}");
}

#[test]
fn large_or_deep_requests_are_refused_not_decoded() {
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create",
                     "params": {"message": "x".repeat(MAX_CONTROL_BYTES)}});
    match one(big) {
        Ok(Incoming::Refused { id, reason }) => {
            assert_eq!(id, json!(1));
            assert!(reason.contains("over the 1048576-byte limit"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"ping\u001b]52;c;x","params":{{"a":{}1{}}}}}"#,
        "[".repeat(500),
        "]".repeat(500)
    );
    let deep = RawValue::from_string(deep).unwrap_or_else(|e| panic!("{e}"));
    match classify(&deep).map(|mut v| v.remove(0)) {
        Ok(Incoming::Refused { reason, .. }) => {
            // The server's method name is shown escaped, never as a terminal sequence.
            assert!(
                reason.contains("deeper") && !reason.contains('\u{1b}'),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A deep result is fine: it stays text.
    let deep_result = format!(
        r#"{{"jsonrpc":"2.0","id":3,"result":{}1{}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let deep_result = RawValue::from_string(deep_result).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        classify(&deep_result).map(|mut v| v.remove(0)),
        Ok(Incoming::Response {
            id: Some(3),
            outcome: Ok(_)
        })
    ));
}

#[test]
fn elements_stop_at_the_cap() {
    assert_eq!(
        elements("[1, {\"a\": 2}, \"x\"]", 3).map(|v| v.len()),
        Ok(3)
    );
    let e = elements("[1, 2, 3, 4]", 3).err().unwrap_or_default();
    assert_eq!(e, "holds more than 3 items");
    assert!(elements("{}", 3).is_err());
}

proptest! {
    /// Every request, notification and batch a peer can write decodes to what it
    /// said, whatever its id, method and params hold.
    #[test]
    fn every_message_decodes_to_what_it_said(
        id in prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ],
        method in any::<String>(),
        params in proptest::collection::vec((any::<String>(), crate::arbitrary::json_value(4)), 0..6)
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        notification in any::<bool>(),
        batch in 0..4usize,
    ) {
        let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if !notification {
            message["id"] = id.clone();
        }
        let text = if batch == 0 {
            message.to_string()
        } else {
            Value::Array(vec![message.clone(); batch]).to_string()
        };
        let decoded = decode(text.as_bytes()).unwrap_or_else(|e| panic!("{e}: {text}"));
        prop_assert_eq!(decoded.len(), batch.max(1));
        for m in decoded {
            match m {
                Incoming::Request { id: got, method: m, params: p } if !notification => {
                    prop_assert_eq!(&got, &id);
                    prop_assert_eq!(&m, &method);
                    prop_assert_eq!(&p, &params);
                }
                Incoming::Notification { method: m, params: p } if notification => {
                    prop_assert_eq!(&m, &method);
                    prop_assert_eq!(&p, &params);
                }
                other => prop_assert!(false, "{other:?} for {text}"),
            }
        }
    }

    /// No bytes panic the decoder: they are a message or a reason.
    #[test]
    fn no_bytes_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes);
        let _ = refusal_code(&bytes);
    }

    /// Nor does any JSON value.
    #[test]
    fn no_json_panics_the_decoder(v in crate::arbitrary::json_value(4)) {
        let _ = decode(v.to_string().as_bytes());
    }
}
