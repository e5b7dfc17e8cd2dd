//! Where a secret may travel: HTTPS, or plain HTTP that never leaves the machine.

use std::net::{IpAddr, SocketAddr};

use reqwest::Url;

/// Whether `url`'s host is this machine (`localhost`, `127.0.0.0/8`, `::1`), parsed, never
/// compared as a prefix (`127.0.0.1.nip.io` is not loopback).
pub fn is_loopback(url: &Url) -> bool {
    let host = host_of(url);
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip_v4_mapped(ip).is_some_and(|v4| v4.is_loopback()))
}

/// A URL's host without IPv6 brackets or the trailing dot of a fully qualified name
/// (`localhost.` is `localhost`).
fn host_of(url: &Url) -> &str {
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.strip_suffix('.').unwrap_or(host)
}

fn ip_v4_mapped(ip: IpAddr) -> Option<std::net::Ipv4Addr> {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
        IpAddr::V4(_) => None,
    }
}

/// Whether `url` points into this machine or its private networks: loopback, RFC 1918 and
/// unique-local ranges, link-local (cloud metadata services live at 169.254.169.254),
/// carrier-grade NAT, unspecified addresses, or `localhost`. Only literal addresses are
/// recognised here; names are checked when they resolve ([`PublicOnly`]).
pub fn is_local(url: &Url) -> bool {
    let host = host_of(url);
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(is_local_ip)
}

/// Whether `ip` is loopback, private, link-local, carrier-grade NAT or unspecified.
pub fn is_local_ip(ip: IpAddr) -> bool {
    let local_v4 = |ip: std::net::Ipv4Addr| {
        let [a, b, ..] = ip.octets();
        ip.is_loopback()
            || ip.is_private()
            || ip.is_link_local()
            || ip.is_unspecified()
            || ip.is_broadcast()
            || (a == 100 && (64..128).contains(&b))
    };
    match ip {
        IpAddr::V4(ip) => local_v4(ip),
        IpAddr::V6(ip) => {
            let first = ip.segments()[0];
            ip.is_loopback()
                || ip.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || ip.to_ipv4_mapped().is_some_and(local_v4)
        }
    }
}

/// A DNS resolver that keeps only public addresses, for requests to URLs a remote server
/// named: a name that resolves into this machine or its networks (including by DNS
/// rebinding, since the connection uses exactly the addresses checked) is refused.
pub struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let public: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| !is_local_ip(a.ip()))
                .collect();
            if public.is_empty() {
                return Err(format!(
                    "{} resolves only to local or private addresses, which a remote server may not send edgar to",
                    crate::text::shown(&host)
                )
                .into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
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

/// What went wrong with an HTTP request, in one line: the kind and the root cause
/// (`Connection refused`, a DNS failure, a TLS error), never the URL.
pub(crate) fn request_error(e: &reqwest::Error) -> String {
    let mut root: &dyn std::error::Error = e;
    while let Some(s) = root.source() {
        root = s;
    }
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "the body broke off"
    } else {
        "the request failed"
    };
    let cause = root.to_string();
    let cause = match e.url() {
        Some(u) => cause.replace(u.as_str(), "the server"),
        None => cause,
    };
    crate::text::shown_message(&format!("{kind}: {cause}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::dns::Resolve;

    #[tokio::test]
    async fn names_that_resolve_to_local_addresses_are_refused() {
        // `localhost` resolves through /etc/hosts, no network needed.
        let name = "localhost".parse::<reqwest::dns::Name>();
        let name = name.unwrap_or_else(|_| panic!("a valid name"));
        let e = PublicOnly.resolve(name).await.err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("only to local or private addresses")),
            "{e:?}"
        );
    }

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
