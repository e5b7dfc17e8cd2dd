//! W3C Trace Context (`traceparent`) on a request to the gateway: its trace id is written
//! on every audit line the request leaves, so a client's trace and edgar's audit trail
//! can be joined. Only a well-formed header is taken (version 00, lowercase hex, ids not
//! all zeros; a later version by its first four fields, as the spec says); anything
//! else is ignored, never echoed.

use hyper::header::HeaderMap;

/// The trace id `headers` carry, if exactly one well-formed `traceparent` does.
pub fn trace_id(headers: &HeaderMap) -> Option<String> {
    let mut values = headers.get_all("traceparent").iter();
    let value = values.next()?.to_str().ok()?;
    if values.next().is_some() {
        return None;
    }
    parse(value.trim())
}

fn parse(value: &str) -> Option<String> {
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let mut parts = value.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let rest = parts.next();
    if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(parent, 16) || !hex(flags, 2)
    {
        return None;
    }
    // Version 00 has exactly four fields; a later one may add fields after them.
    if version == "00" && rest.is_some() {
        return None;
    }
    if trace.bytes().all(|b| b == b'0') || parent.bytes().all(|b| b == b'0') {
        return None;
    }
    Some(trace.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_traceparent_gives_its_trace_id() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            parse(good).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(
            parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later").as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736"),
            "a later version, by its first fields"
        );
        for bad in [
            "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736\u{0}-00f067aa0ba902b7-01",
            "00-\"injected\":\"x\"-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        let mut two = HeaderMap::new();
        two.append(
            "traceparent",
            good.parse().unwrap_or_else(|_| panic!("value")),
        );
        assert!(trace_id(&two).is_some());
        two.append(
            "traceparent",
            good.parse().unwrap_or_else(|_| panic!("value")),
        );
        assert_eq!(trace_id(&two), None, "two headers: neither is believed");
    }
}
