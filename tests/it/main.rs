//! One integration-test binary: the guard through real components, and the `edgar` CLI.

mod guard;
mod guard_cli;
