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
