//! W3C Trace Context (`traceparent`, and `tracestate` with it) on a request to the
//! gateway: the gateway's span for
//! the request joins that trace, its trace id is written on every audit line the request
//! leaves, and requests to upstreams carry it on (`telemetry`). Only exactly one
//! well-formed header is believed; anything else is ignored, never echoed. A stateless
//! client may carry it in the request's `_meta` instead (the MCP convention for
//! transports without headers, such as stdio).

use hyper::header::HeaderMap;
use serde_json::Value;

use crate::telemetry::Context;

/// The trace context `headers` carry, if exactly one well-formed `traceparent` does,
/// with its `tracestate` (several headers are one list, joined as the spec says).
pub fn from_headers(headers: &HeaderMap) -> Option<Context> {
    let mut values = headers.get_all("traceparent").iter();
    let value = values.next()?.to_str().ok()?;
    if values.next().is_some() {
        return None;
    }
    let states: Option<Vec<&str>> = headers
        .get_all("tracestate")
        .iter()
        .map(|v| v.to_str().ok())
        .collect();
    let state = states.map(|s| s.join(","));
    Some(Context::parse(value.trim())?.with_state(state.as_deref().filter(|s| !s.is_empty())))
}

/// The trace context a request's `params._meta.traceparent` carries, if well-formed,
/// with its `_meta.tracestate`.
pub fn from_meta(params: &Value) -> Option<Context> {
    let meta = params.get("_meta")?;
    let state = meta.get("tracestate").and_then(Value::as_str);
    Some(Context::parse(meta.get("traceparent")?.as_str()?)?.with_state(state))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn exactly_one_well_formed_header_is_believed() {
        let mut two = HeaderMap::new();
        two.append(
            "traceparent",
            GOOD.parse().unwrap_or_else(|_| panic!("value")),
        );
        assert!(from_headers(&two).is_some());
        two.append(
            "traceparent",
            GOOD.parse().unwrap_or_else(|_| panic!("value")),
        );
        assert_eq!(from_headers(&two), None, "two headers: neither is believed");
    }

    #[test]
    fn a_request_may_carry_its_trace_in_meta() {
        let trace = |meta: Value| from_meta(&json!({"_meta": meta}));
        assert!(trace(json!({"traceparent": GOOD})).is_some());
        assert_eq!(trace(json!({"traceparent": 7})), None);
        assert_eq!(trace(json!({"traceparent": "00-zz"})), None);
        assert_eq!(from_meta(&json!({})), None);
        assert_eq!(from_meta(&json!("not an object")), None);
    }

    #[test]
    fn tracestate_travels_with_its_traceparent_as_one_list() {
        let header = |v: &str| v.parse().unwrap_or_else(|_| panic!("value"));
        let mut h = HeaderMap::new();
        h.append("traceparent", header(GOOD));
        h.append("tracestate", header("congo=t61rcWkgMzE"));
        h.append("tracestate", header("rojo=00f067aa0ba902b7"));
        let c = from_headers(&h).unwrap_or_else(|| panic!("no context"));
        assert_eq!(
            c.tracestate(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
        // A tracestate alone is no trace; a bad one leaves the traceparent believed.
        let mut alone = HeaderMap::new();
        alone.append("tracestate", header("congo=t61rcWkgMzE"));
        assert_eq!(from_headers(&alone), None);
        h.append("tracestate", header("Bad Key=1"));
        let c = from_headers(&h).unwrap_or_else(|| panic!("no context"));
        assert_eq!(c.tracestate(), None);
        let meta = json!({"_meta": {"traceparent": GOOD, "tracestate": "a=1"}});
        assert_eq!(
            from_meta(&meta).and_then(|c| c.tracestate().map(str::to_owned)),
            Some("a=1".into())
        );
    }
}
