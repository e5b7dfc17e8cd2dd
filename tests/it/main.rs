//! One integration-test binary: the guard through real components, the MCP session
//! against fake and real servers, and the `edgar` CLI.

mod approved_only;
mod auth_cli;
mod content;
mod escape;
mod findings;
mod gateway;
mod guard;
mod guard_cli;
mod hardening;
mod house;
mod instant_on;
mod inventory;
mod loopback;
mod mcp_auth;
mod mcp_cli;
mod mcp_http_faults;
mod mcp_http_real;
mod mcp_machine;
mod mcp_real;
mod mcp_stateless;
mod mcp_stdio;
mod news;
mod postgres;
mod replicas;
mod sandbox;
mod search;
mod search_model;
mod signals;
mod tasks;

mod team_content;
mod team_gateway;
mod team_sign_in;
mod traces;
mod trust;
