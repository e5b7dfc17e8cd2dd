//! Where a secret may travel: HTTPS, or plain HTTP that never leaves the machine.

use reqwest::Url;

/// Whether `url`'s host is this machine (`localhost`, `127.0.0.0/8`, `::1`), parsed, never
/// compared as a prefix (`127.0.0.1.nip.io` is not loopback).
pub fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether `url` points into this machine or its private networks: loopback, RFC 1918 and
/// unique-local ranges, link-local (cloud metadata services live at 169.254.169.254),
/// carrier-grade NAT, unspecified addresses, or `localhost`. Only literal addresses are
/// recognised; a name is not resolved here.
pub fn is_local(url: &Url) -> bool {
    use std::net::IpAddr;
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    let local_v4 = |ip: std::net::Ipv4Addr| {
        let [a, b, ..] = ip.octets();
        ip.is_loopback()
            || ip.is_private()
            || ip.is_link_local()
            || ip.is_unspecified()
            || ip.is_broadcast()
            || (a == 100 && (64..128).contains(&b))
    };
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => local_v4(ip),
        Ok(IpAddr::V6(ip)) => {
            let first = ip.segments()[0];
            ip.is_loopback()
                || ip.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || ip.to_ipv4_mapped().is_some_and(local_v4)
        }
        Err(_) => false,
    }
}

/// Whether headers, tokens or keys may be sent to `url`: HTTPS, or HTTP on loopback.
pub fn is_https_or_loopback(url: &str) -> bool {
    match Url::parse(url) {
        Ok(u) if u.scheme() == "https" => true,
        Ok(u) if u.scheme() == "http" => is_loopback(&u),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_and_private_addresses_are_recognised() {
        for (url, local) in [
            ("http://169.254.169.254/latest/meta-data", true),
            ("https://10.1.2.3/", true),
            ("https://172.16.0.1/", true),
            ("https://192.168.1.1/", true),
            ("https://100.64.0.1/", true),
            ("https://127.0.0.1/", true),
            ("https://0.0.0.0/", true),
            ("https://[::1]/", true),
            ("https://[fd00::1]/", true),
            ("https://[fe80::1]/", true),
            ("https://[::ffff:10.0.0.1]/", true),
            ("https://localhost/", true),
            ("https://auth.localhost/", true),
            ("https://8.8.8.8/", false),
            ("https://auth.example.com/", false),
            ("https://172.32.0.1/", false),
        ] {
            let u = Url::parse(url).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(is_local(&u), local, "{url}");
        }
    }

    #[test]
    fn only_https_or_loopback_http() {
        for (url, ok) in [
            ("https://example.com/mcp", true),
            ("http://127.0.0.1:8080/mcp", true),
            ("http://127.1.2.3/mcp", true),
            ("http://[::1]:8080/mcp", true),
            ("http://LOCALHOST/mcp", true),
            ("http://example.com/mcp", false),
            ("http://127.0.0.1.nip.io/mcp", false),
            ("http://10.0.0.1/mcp", false),
            ("ftp://127.0.0.1/", false),
        ] {
            assert_eq!(is_https_or_loopback(url), ok, "{url}");
        }
    }
}
