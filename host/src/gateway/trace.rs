//! W3C Trace Context (`traceparent`) on a request to the gateway: the gateway's span for
//! the request joins that trace, its trace id is written on every audit line the request
//! leaves, and requests to upstreams carry it on (`telemetry`). Only exactly one
//! well-formed header is believed; anything else is ignored, never echoed. A stateless
//! client may carry it in the request's `_meta` instead (the MCP convention for
//! transports without headers, such as stdio).

use hyper::header::HeaderMap;
use serde_json::Value;

use crate::telemetry::Context;

/// The trace context `headers` carry, if exactly one well-formed `traceparent` does.
pub fn from_headers(headers: &HeaderMap) -> Option<Context> {
    let mut values = headers.get_all("traceparent").iter();
    let value = values.next()?.to_str().ok()?;
    if values.next().is_some() {
        return None;
    }
    Context::parse(value.trim())
}

/// The trace context a request's `params._meta.traceparent` carries, if well-formed.
pub fn from_meta(params: &Value) -> Option<Context> {
    Context::parse(params.get("_meta")?.get("traceparent")?.as_str()?)
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
}
