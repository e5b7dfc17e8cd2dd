//! Traces: the W3C trace context a request's work runs in (a task-local the audit trail
//! and requests to upstream servers read), and, when the standard `OTEL_*` variables name
//! an OTLP endpoint, the spans of that work exported there. Nothing here exists unless a
//! request came with a trace context or exporting was asked for: no trace, no span, no
//! HTTP client.

use std::fmt::Write as _;
use std::sync::OnceLock;

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceId,
    TraceState, Tracer as _,
};
use opentelemetry::{KeyValue, trace::TracerProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

tokio::task_local! {
    /// The span the current task's work runs in (a request's, or the trace context it
    /// came with).
    pub static CURRENT: Context;
}

/// The context of the span the current task's work runs in, if any.
pub fn current() -> Option<Context> {
    CURRENT.try_with(Context::clone).ok()
}

/// Longest `tracestate` carried on (the W3C spec asks propagators to pass at least 512
/// characters, and lets them drop a longer one).
const MAX_TRACESTATE: usize = 512;

/// A W3C trace context: which trace, which span in it, whether it is sampled, and the
/// vendors' `tracestate` that travels with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    sampled: bool,
    state: Option<std::sync::Arc<str>>,
}

impl Context {
    /// A `traceparent` header's value, only if well-formed (version 00 exactly, a later
    /// version by its first four fields, lowercase hex, ids not all zeros, as the W3C
    /// spec says); anything else is `None`, never echoed.
    pub fn parse(value: &str) -> Option<Context> {
        let mut parts = value.split('-');
        let (version, trace, parent, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let rest = parts.next();
        let version = hex::<1>(version)?;
        let (trace_id, span_id, flags) = (hex::<16>(trace)?, hex::<8>(parent)?, hex::<1>(flags)?);
        // Version 00 has exactly four fields; a later one may add fields after them.
        if version == [0xff] || (version == [0] && rest.is_some()) {
            return None;
        }
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Context {
            trace_id,
            span_id,
            sampled: flags[0] & 1 == 1,
            state: None,
        })
    }

    /// This context with the `tracestate` that came with it, if well-formed (at most 32
    /// `key=value` members as the W3C spec has them, printable ASCII, 512 bytes at
    /// most); one that is not is dropped whole, as the spec says, never echoed.
    pub fn with_state(mut self, value: Option<&str>) -> Context {
        self.state = value.and_then(tracestate).map(Into::into);
        self
    }

    /// The `tracestate` to pass on with [`Context::traceparent`], if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.state.as_deref()
    }

    /// The trace id, as 32 lowercase hex digits (as audit lines carry it).
    pub fn trace_id(&self) -> String {
        to_hex(&self.trace_id)
    }

    /// This context as a `traceparent` value.
    pub fn traceparent(&self) -> String {
        let flags = u8::from(self.sampled);
        format!(
            "00-{}-{}-{flags:02x}",
            to_hex(&self.trace_id),
            to_hex(&self.span_id)
        )
    }

    /// A new span in the same trace (an id of edgar's own), sampled as this one.
    fn child(&self) -> Context {
        Context {
            span_id: random().unwrap_or(self.span_id),
            ..self.clone()
        }
    }

    fn remote(&self) -> opentelemetry::Context {
        let flags = match self.sampled {
            true => TraceFlags::SAMPLED,
            false => TraceFlags::default(),
        };
        let span = SpanContext::new(
            TraceId::from_bytes(self.trace_id),
            SpanId::from_bytes(self.span_id),
            flags,
            true,
            self.state
                .as_deref()
                .and_then(|s| s.parse().ok())
                .unwrap_or_default(),
        );
        opentelemetry::Context::new().with_remote_span_context(span)
    }
}

/// A well-formed `tracestate` value, normalized (members joined by `,`), or `None`.
fn tracestate(value: &str) -> Option<String> {
    if value.len() > MAX_TRACESTATE
        || !value
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) || b == b'\t')
    {
        return None;
    }
    let members: Vec<&str> = value
        .split(',')
        .map(|m| m.trim_matches([' ', '\t']))
        .filter(|m| !m.is_empty())
        .collect();
    // Keys and values of 1 to 256 characters (the parser below lets empty ones by).
    let whole = |m: &&str| {
        m.split_once('=')
            .is_some_and(|(k, v)| !k.is_empty() && !v.is_empty())
    };
    if members.len() > 32 || !members.iter().all(whole) {
        return None;
    }
    let state: TraceState = value.parse().ok()?;
    let header = state.header();
    (!header.is_empty()).then_some(header)
}

/// `N` bytes from exactly `2 * N` lowercase hex digits.
fn hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let s = s.as_bytes();
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *o = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn random<const N: usize>() -> Option<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).ok()?;
    (bytes != [0; N]).then_some(bytes)
}

/// Which side of a request a span is.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// The gateway serving a client's request.
    Server,
    /// edgar's request to an upstream server.
    Client,
}

/// A span under way: its context (which the work it covers runs in) and, when spans are
/// exported, what is sent when it ends. Attributes are given as text pairs so no other
/// module knows the OpenTelemetry types; they never carry arguments or tokens.
pub struct Span {
    context: Context,
    exported: Option<opentelemetry_sdk::trace::Span>,
}

impl Span {
    /// A span of `kind` in `parent`'s trace (a new trace when there is none and spans are
    /// exported). `None` when there is neither: nothing is traced. `describe` (the name
    /// and attributes) runs only for a span that is exported.
    pub fn start(
        kind: Kind,
        parent: Option<Context>,
        describe: impl FnOnce() -> (String, Vec<(&'static str, String)>),
    ) -> Option<Span> {
        let Some(tracer) = EXPORT.get().and_then(Option::as_ref) else {
            let context = parent?.child();
            return Some(Span {
                context,
                exported: None,
            });
        };
        let (name, attributes) = describe();
        let builder = tracer
            .span_builder(bounded(name))
            .with_kind(match kind {
                Kind::Server => SpanKind::Server,
                Kind::Client => SpanKind::Client,
            })
            .with_attributes(
                attributes
                    .into_iter()
                    .map(|(k, v)| KeyValue::new(k, bounded(v))),
            );
        let within = parent.map_or_else(opentelemetry::Context::new, |p| p.remote());
        let span = tracer.build_with_context(builder, &within);
        let made = span.span_context();
        let state = made.trace_state().header();
        let context = Context {
            trace_id: made.trace_id().to_bytes(),
            span_id: made.span_id().to_bytes(),
            sampled: made.is_sampled(),
            state: (!state.is_empty()).then(|| state.into()),
        };
        Some(Span {
            context,
            exported: Some(span),
        })
    }

    /// The context the work this span covers runs in.
    pub fn context(&self) -> Context {
        self.context.clone()
    }

    /// Ends the span, failed with `error` (its `error.type`) if given.
    pub fn end(self, error: Option<&str>) {
        if let Some(mut span) = self.exported {
            if let Some(error) = error {
                span.set_attribute(KeyValue::new("error.type", error.to_owned()));
                span.set_status(Status::error(error.to_owned()));
            }
            span.end();
        }
    }
}

/// An MCP request's span name and attributes, as OpenTelemetry's MCP conventions have
/// them: `{method} {target}`, the method, the request id, the tool or prompt named;
/// never the arguments (which may carry secrets) or a resource's URI (which may too).
pub fn describe(
    method: &str,
    params: &serde_json::Value,
    id: String,
) -> (String, Vec<(&'static str, String)>) {
    let mut attributes = vec![
        ("mcp.method.name", method.to_owned()),
        ("jsonrpc.request.id", id),
    ];
    let named = match method {
        "tools/call" => Some("gen_ai.tool.name"),
        "prompts/get" => Some("gen_ai.prompt.name"),
        _ => None,
    };
    let target = named.and_then(|key| {
        let name = params["name"].as_str()?;
        attributes.push((key, name.to_owned()));
        Some(name)
    });
    if method == "tools/call" {
        attributes.push(("gen_ai.operation.name", "execute_tool".to_owned()));
    }
    let name = match target {
        Some(t) => format!("{method} {t}"),
        None => method.to_owned(),
    };
    (name, attributes)
}

/// Longest span name or attribute value exported, in bytes. Names and ids come from
/// clients (a tool name, a JSON-RPC id): unbounded, a client could fill the exporter's
/// queue (2,048 spans) with megabytes each. MCP's own names stay under 128.
const MAX_ATTRIBUTE_BYTES: usize = 256;

/// `text` cut to [`MAX_ATTRIBUTE_BYTES`] at a character boundary.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_ATTRIBUTE_BYTES {
        let mut end = MAX_ATTRIBUTE_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The exporter's tracer, when the environment asked for one (set once, at start).
static EXPORT: OnceLock<Option<SdkTracer>> = OnceLock::new();
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// A failure to set up the exporter the environment asked for.
#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry export: {0}")]
pub struct TelemetryError(String);

/// Whether the standard variables ask for spans over OTLP: an endpoint is named
/// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`), and neither
/// `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none` says otherwise.
pub fn asked(var: impl Fn(&str) -> Option<String>) -> bool {
    let set = |k: &str| var(k).is_some_and(|v| !v.trim().is_empty());
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let exporter = var("OTEL_TRACES_EXPORTER").unwrap_or_default();
    let otlp = exporter.is_empty()
        || exporter
            .split(',')
            .any(|e| e.trim().eq_ignore_ascii_case("otlp"));
    !disabled
        && otlp
        && (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT"))
}

/// Starts exporting spans over OTLP/HTTP if the environment asks for it ([`asked`]),
/// configured by the standard variables (endpoint, protocol, headers, timeout, sampler,
/// batching, resource); the service is `edgar` unless they name another. Returns whether
/// spans are exported. Called once, by the gateway, before it serves.
pub fn export_from_env() -> Result<bool, TelemetryError> {
    if !asked(|k| std::env::var(k).ok()) {
        let _ = EXPORT.set(None);
        return Ok(false);
    }
    // The exporter's client speaks TLS through the ring provider edgar builds.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| TelemetryError(e.to_string()))?;
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    let mut resource = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if !named {
        resource = resource.with_service_name("edgar");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let _ = EXPORT.set(Some(provider.tracer("edgar")));
    let _ = PROVIDER.set(provider);
    Ok(true)
}

/// Sends the spans not yet sent and stops exporting (at the gateway's exit; bounded by
/// the exporter's timeout). Blocks: call it off the async runtime's threads.
pub fn flush() {
    if let Some(provider) = PROVIDER.get()
        && let Err(e) = provider.shutdown()
    {
        tracing::debug!("the last spans were not exported: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_traceparent_is_believed() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = Context::parse(good).unwrap_or_else(|| panic!("{good}"));
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.traceparent(), good, "it reads back as it came");
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert_eq!(
            Context::parse(unsampled).map(|c| c.sampled),
            Some(false),
            "{unsampled}"
        );
        assert_eq!(
            Context::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later")
                .map(|c| c.trace_id()),
            Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned()),
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
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            assert_eq!(Context::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_a_well_formed_tracestate_is_carried_whole() {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let with = |state: &str| {
            Context::parse(parent)
                .unwrap_or_else(|| panic!("parent"))
                .with_state(Some(state))
                .tracestate()
                .map(str::to_owned)
        };
        assert_eq!(with("a=1, b@vendor=x-y "), Some("a=1,b@vendor=x-y".into()));
        let many = (0..33)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        for bad in [
            "A=1",
            "a=1,=2",
            "a=b=c",
            "a=1\r\nx-injected: 1",
            "a=\u{7f}",
            &many,
            &format!("a={}", "x".repeat(600)),
            "",
        ] {
            assert_eq!(with(bad), None, "{bad:?}");
        }
        // Children keep it; the exported span's own context keeps it too (below).
        let c = Context::parse(parent)
            .unwrap_or_else(|| panic!("parent"))
            .with_state(Some("a=1"));
        assert_eq!(c.child().tracestate(), Some("a=1"));
        let remote = c.remote();
        use opentelemetry::trace::TraceContextExt as _;
        assert_eq!(remote.span().span_context().trace_state().header(), "a=1");
    }

    #[test]
    fn a_child_is_a_new_span_of_the_same_trace() {
        let parent = Context::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .unwrap_or_else(|| panic!("parsed"));
        let child = parent.child();
        assert_eq!(child.trace_id, parent.trace_id);
        assert_ne!(child.span_id, parent.span_id);
        assert!(child.sampled);
        // Without exporting, a span exists only within a trace that came in.
        assert!(Span::start(Kind::Server, None, || panic!("not described")).is_none());
        let span = Span::start(Kind::Client, Some(parent.clone()), || {
            panic!("not described")
        });
        let span = span.unwrap_or_else(|| panic!("a span in the trace"));
        assert_eq!(span.context().trace_id, parent.trace_id);
    }

    #[test]
    fn what_a_client_names_is_bounded_before_it_is_exported() {
        assert_eq!(bounded("tools/call greet".into()), "tools/call greet");
        let long = "x".repeat(1 << 20);
        assert_eq!(bounded(long).len(), MAX_ATTRIBUTE_BYTES);
        // Cut at a character boundary, never inside one.
        let wide = "é".repeat(MAX_ATTRIBUTE_BYTES);
        let cut = bounded(wide);
        assert!(cut.len() <= MAX_ATTRIBUTE_BYTES && cut.chars().all(|c| c == 'é'));
    }

    #[test]
    fn only_a_named_endpoint_asks_for_export() {
        fn env<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |k| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        }
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert!(!asked(env(&[])));
        assert!(asked(env(&[endpoint])));
        assert!(asked(env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://collector:4318/v1/traces"
        )])));
        assert!(asked(env(&[endpoint, ("OTEL_TRACES_EXPORTER", "otlp")])));
        assert!(!asked(env(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")])));
        assert!(!asked(env(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")])));
        assert!(!asked(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
    }
}
