//! The filtering proxy a confined server with a `"net"` host list reaches from its own
//! network namespace: HTTP `CONNECT` (for TLS and any TCP) and plain `http://` requests
//! in absolute form, each let through only when one of the profile's hosts admits its
//! name and port. A loopback host of the list also gets a plain TCP forwarder, so a
//! client that knows nothing of proxies (a database driver) reaches it too.
//!
//! Everything runs in edgar's runtime, on listeners that live in the server's namespace
//! (`netns`); dropping the [`Egress`] stops the listeners and their connections. A
//! `CONNECT` tunnel runs on after its HTTP connection, holding a connection slot of its
//! own, until either end closes (the server's end does when it is closed).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::config::HostPort;

/// Where a refusal is told (the server's stderr tail, which a failed start's error shows).
pub(crate) type Tell = Arc<dyn Fn(&str) + Send + Sync>;

/// Connections a server may have open through edgar at once (each holds two sockets).
const MAX_CONNECTIONS: usize = 256;
/// How long reaching a host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's head may take to arrive.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

type Body = BoxBody<Bytes, hyper::Error>;

/// The running proxy and forwarders of one server; dropped, they stop.
#[derive(Debug)]
pub struct Egress {
    tasks: JoinSet<()>,
}

/// Who may be reached, and where a refusal is told.
struct Rules {
    server: String,
    hosts: Vec<HostPort>,
    tell: Tell,
    slots: Arc<Semaphore>,
}

impl Rules {
    /// The host of the list that admits `host:port`; a refusal is written where a failed
    /// start's error will show it.
    fn admits(&self, host: &str, port: u16) -> Option<&HostPort> {
        let by = self.hosts.iter().find(|h| h.admits(host, port));
        if by.is_none() {
            self.refuse(&format!(
                "edgar's sandbox refused {}:{port} (not in its \"net\" list)",
                crate::text::visible(host)
            ));
        }
        by
    }

    /// Tells a refusal: edgar's log and the server's stderr tail.
    fn refuse(&self, line: &str) {
        tracing::warn!(server = %self.server, "{line}");
        (self.tell)(line);
    }
}

/// The addresses `host` may be reached at, as edgar resolves it (the server has no DNS):
/// a name the list admits by a name of its own reaches only public addresses, so a
/// listed wildcard that resolves to this machine, its private networks or a cloud's
/// metadata service (DNS the server's author controls, or rebinding) reaches nothing. A
/// host the entry lists as an address or as `localhost` literally reaches what it names.
/// The connection is made to exactly these addresses: no second lookup.
async fn addresses(host: &str, port: u16, by: &HostPort) -> Result<Vec<SocketAddr>, String> {
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("cannot resolve {}: {e}", crate::text::visible(host)))?
        .collect();
    let literal = by.host.eq_ignore_ascii_case("localhost")
        || by
            .host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok();
    if literal {
        return Ok(resolved);
    }
    let (public, local): (Vec<SocketAddr>, Vec<SocketAddr>) = resolved
        .into_iter()
        .partition(|a| !crate::net::is_local_ip(a.ip()));
    if public.is_empty() {
        let shown: Vec<String> = local.iter().map(|a| a.ip().to_string()).collect();
        return Err(format!(
            "edgar's sandbox refused {}:{port}: it resolves to {} (this machine or a private network), which its \"net\" list does not name",
            crate::text::visible(host),
            if shown.is_empty() {
                "nothing".to_owned()
            } else {
                shown.join(", ")
            }
        ));
    }
    Ok(public)
}

/// Serves `listeners` (from `netns::Parent::receive`): the one on `proxy_port` is the
/// proxy, each other one forwards to the loopback host of the list with its port.
pub(crate) fn start(
    server: &str,
    listeners: Vec<(u16, std::net::TcpListener)>,
    proxy_port: u16,
    hosts: &[HostPort],
    tell: Tell,
) -> std::io::Result<Egress> {
    let rules = Arc::new(Rules {
        server: server.to_owned(),
        hosts: hosts.to_vec(),
        tell,
        slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
    });
    let mut tasks = JoinSet::new();
    for (port, listener) in listeners {
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        if port == proxy_port {
            tasks.spawn(serve_proxy(listener, rules.clone()));
        } else if let Some(host) = hosts.iter().find(|h| h.port == port && h.is_loopback()) {
            let target = host.host.trim_start_matches('[').trim_end_matches(']');
            tasks.spawn(forward(listener, (target.to_owned(), port), rules.clone()));
        }
    }
    Ok(Egress { tasks })
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.tasks.abort_all();
    }
}

/// Accepts connections on `listener`, each served by `serve` in a task of its own while
/// it holds one of the connection slots.
async fn accept_each<F>(listener: TcpListener, rules: Arc<Rules>, serve: impl Fn(TcpStream) -> F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    loop {
        let Ok(permit) = rules.slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        let work = serve(stream);
        connections.spawn(async move {
            let _permit = permit;
            work.await;
        });
    }
}

/// Serves the server's proxy connections.
async fn serve_proxy(listener: TcpListener, rules: Arc<Rules>) {
    accept_each(listener, rules.clone(), move |stream| {
        let rules = rules.clone();
        async move {
            let service = hyper::service::service_fn(move |req| {
                let rules = rules.clone();
                async move { Ok::<_, Infallible>(handle(req, rules).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        }
    })
    .await;
}

/// One request to the proxy.
async fn handle(req: Request<Incoming>, rules: Arc<Rules>) -> Response<Body> {
    let Some(authority) = req.uri().authority().cloned() else {
        return text(
            StatusCode::BAD_REQUEST,
            "edgar's sandbox proxy takes CONNECT host:port or an absolute http:// URL",
        );
    };
    let host = authority.host().to_owned();
    let connect = req.method() == Method::CONNECT;
    let port = match (authority.port_u16(), connect, req.uri().scheme_str()) {
        (Some(p), _, _) => p,
        (None, false, Some("http")) => 80,
        (None, true, _) => {
            return text(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        }
        _ => {
            return text(
                StatusCode::BAD_REQUEST,
                "only http:// is sent in absolute form; https goes through CONNECT",
            );
        }
    };
    let Some(by) = rules.admits(&host, port) else {
        return text(
            StatusCode::FORBIDDEN,
            &format!("edgar's sandbox: {host}:{port} is not in this server's \"net\" list"),
        );
    };
    // A plain request goes to the name it was admitted by: another `Host` would reach a
    // site the list does not name behind the same address (domain fronting).
    if !connect && let Err(why) = same_host(&req, &host, port) {
        rules.refuse(&why);
        return text(StatusCode::FORBIDDEN, &why);
    }
    let target = host.trim_start_matches('[').trim_end_matches(']');
    let addrs = match addresses(target, port, by).await {
        Ok(a) => a,
        Err(why) => {
            rules.refuse(&why);
            return text(StatusCode::FORBIDDEN, &why);
        }
    };
    let upstream = match reach(&addrs).await {
        Ok(s) => s,
        Err(e) => {
            return text(
                StatusCode::BAD_GATEWAY,
                &format!("cannot reach {host}:{port}: {e}"),
            );
        }
    };
    if connect {
        // The tunnel outlives its HTTP connection (and that connection's slot): it takes
        // a slot of its own, so a server cannot open tunnels without bound.
        let Ok(slot) = rules.slots.clone().try_acquire_owned() else {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                "edgar's sandbox: too many connections at once",
            );
        };
        tokio::spawn(async move {
            let _slot = slot;
            if let Ok(upgraded) = hyper::upgrade::on(req).await {
                let mut upstream = upstream;
                let _ =
                    tokio::io::copy_bidirectional(&mut TokioIo::new(upgraded), &mut upstream).await;
            }
        });
        return Response::new(empty());
    }
    relay(req, upstream).await
}

/// Whether a plain request's `Host` header, when it has one, names the host and port
/// of its absolute URL.
fn same_host(req: &Request<Incoming>, host: &str, port: u16) -> Result<(), String> {
    let Some(value) = req.headers().get(hyper::header::HOST) else {
        return Ok(());
    };
    let given = value.to_str().unwrap_or_default().to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    let matches = given == format!("{host}:{port}") || (port == 80 && given == host);
    if matches {
        return Ok(());
    }
    Err(format!(
        "edgar's sandbox refused a request for {host}:{port} with Host '{}' (a request goes to the name its \"net\" list admitted)",
        crate::text::visible(&given)
    ))
}

/// Sends a plain `http://` request on to its host, in origin form, and returns the answer.
async fn relay(mut req: Request<Incoming>, upstream: TcpStream) -> Response<Body> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    match path.parse() {
        Ok(uri) => *req.uri_mut() = uri,
        Err(_) => return text(StatusCode::BAD_REQUEST, "the request's path cannot be read"),
    }
    for h in ["proxy-authorization", "proxy-connection"] {
        req.headers_mut().remove(h);
    }
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(e) => return text(StatusCode::BAD_GATEWAY, &format!("upstream: {e}")),
        };
    tokio::spawn(conn);
    match sender.send_request(req).await {
        Ok(resp) => resp.map(BodyExt::boxed),
        Err(e) => text(StatusCode::BAD_GATEWAY, &format!("upstream: {e}")),
    }
}

/// Forwards each connection to `listener` (a loopback port in the server's namespace) to
/// the same port on this machine's loopback.
async fn forward(listener: TcpListener, target: (String, u16), rules: Arc<Rules>) {
    accept_each(listener, rules, move |mut inside| {
        let target = target.clone();
        async move {
            let connected = tokio::time::timeout(
                CONNECT_TIMEOUT,
                TcpStream::connect((target.0.as_str(), target.1)),
            )
            .await;
            if let Ok(Ok(mut outside)) = connected {
                let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
            }
        }
    })
    .await;
}

/// Connects to the first of `addrs` that answers, within [`CONNECT_TIMEOUT`] in all.
async fn reach(addrs: &[SocketAddr]) -> std::io::Result<TcpStream> {
    tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addrs))
        .await
        .map_err(|_| std::io::Error::other("timed out"))?
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

fn text(status: StatusCode, message: &str) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(format!("{message}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r
}
