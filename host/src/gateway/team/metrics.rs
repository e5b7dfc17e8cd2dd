//! `/metrics`: what the team gateway did, in the OpenMetrics text format Prometheus
//! scrapes. Tool calls by server, tool and outcome with their latency; requests by
//! method; refusals by reason; each upstream server's state, read at scrape time.
//! Labels are configured server names and tool names that passed the guard, never a
//! user or an argument.

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::mcp::client::{ServerState, ServerStatus};

type Labels = Vec<(&'static str, String)>;

/// The content type `/metrics` is served with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The gateway's counters; cheap to update from any task.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    refusals: Family<Labels, Counter>,
    calls: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, fn() -> Histogram>,
    upstream: Family<Labels, Gauge>,
}

/// How a tool call ended, for the `outcome` label.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    Ok,
    /// The tool answered with `isError`, or the upstream failed.
    ToolError,
    Denied,
    Limited,
}

fn latency_buckets() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("edgar_gateway");
        let requests = Family::<Labels, Counter>::default();
        let refusals = Family::<Labels, Counter>::default();
        let calls = Family::<Labels, Counter>::default();
        let latency = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_buckets as fn() -> Histogram,
        );
        let upstream = Family::<Labels, Gauge>::default();
        registry.register("requests", "MCP requests by method", requests.clone());
        registry.register(
            "refusals",
            "Requests refused before they ran, by reason",
            refusals.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls by server, tool and outcome",
            calls.clone(),
        );
        registry.register(
            "tool_call_seconds",
            "Tool call latency through the gateway, by server and tool",
            latency.clone(),
        );
        registry.register(
            "upstream_up",
            "1 when an upstream server is running or its tools are known, 0 when it failed or needs a sign-in",
            upstream.clone(),
        );
        Metrics {
            registry,
            requests,
            refusals,
            calls,
            latency,
            upstream,
        }
    }
}

impl Metrics {
    pub fn request(&self, method: &str) {
        // Only the protocol's own method names become labels; anything else is "other".
        let method = if KNOWN_METHODS.contains(&method) {
            method
        } else {
            "other"
        };
        self.requests
            .get_or_create(&vec![("method", method.to_owned())])
            .inc();
    }

    pub fn refusal(&self, reason: &'static str) {
        self.refusals
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    pub fn call(&self, server: &str, tool: &str, outcome: Outcome, took: Duration) {
        let outcome = match outcome {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Denied => "denied",
            Outcome::Limited => "limited",
        };
        let base = vec![("server", server.to_owned()), ("tool", tool.to_owned())];
        let mut labels = base.clone();
        labels.push(("outcome", outcome.to_owned()));
        self.calls.get_or_create(&labels).inc();
        if matches!(outcome, "ok" | "tool_error") {
            self.latency
                .get_or_create(&base)
                .observe(took.as_secs_f64());
        }
    }

    /// The text served at `/metrics`, with each server's state as of now.
    pub fn render(&self, servers: &[ServerStatus]) -> String {
        for s in servers {
            let up = match s.state {
                ServerState::Running { .. } | ServerState::Cached { .. } => 1,
                ServerState::NeverStarted => 1,
                ServerState::Failed { .. } | ServerState::NeedsLogin => 0,
            };
            self.upstream
                .get_or_create(&vec![("server", s.name.clone())])
                .set(up);
        }
        let mut out = String::new();
        if let Err(e) = encode(&mut out, &self.registry) {
            tracing::warn!("cannot encode the metrics: {e}");
        }
        out
    }
}

const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_refusals_are_counted_with_safe_labels() {
        let m = Metrics::default();
        m.request("tools/call");
        m.request("evil\nmethod");
        m.refusal("invalid_token");
        m.call("gh", "search", Outcome::Ok, Duration::from_millis(3));
        m.call("gh", "search", Outcome::Denied, Duration::ZERO);
        let text = m.render(&[ServerStatus {
            name: "gh".into(),
            kind: "http",
            state: ServerState::NeedsLogin,
        }]);
        for line in [
            "edgar_gateway_requests_total{method=\"tools/call\"} 1",
            "edgar_gateway_requests_total{method=\"other\"} 1",
            "edgar_gateway_refusals_total{reason=\"invalid_token\"} 1",
            "edgar_gateway_tool_calls_total{server=\"gh\",tool=\"search\",outcome=\"ok\"} 1",
            "edgar_gateway_tool_calls_total{server=\"gh\",tool=\"search\",outcome=\"denied\"} 1",
            "edgar_gateway_tool_call_seconds_count{server=\"gh\",tool=\"search\"} 1",
            "edgar_gateway_upstream_up{server=\"gh\"} 0",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }
}
