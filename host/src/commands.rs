//! Runs a parsed command: glue over the library, and the only place that prints.

mod account;
mod arguments;
mod content;
mod context;
mod dev;
mod guard;
mod inventory;
mod mcp;
mod output;
mod progress;
mod search;
mod serve;
mod sign_in;
mod trust;

use std::process::ExitCode;

use crate::cli::{AuditCommand, Cli, Command, SearchModelCommand};

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Guard(cmd) => guard::run(cmd),
        Command::SearchModel { cmd } => search::model(cmd.unwrap_or(SearchModelCommand::Status)),
        Command::Dev(cmd) => dev::run(cmd),
        Command::Mcp(cmd) => mcp::run(cmd),
        Command::Audit(AuditCommand::Verify { gateway_config }) => {
            trust::audit_verify(gateway_config.as_deref())
        }
        Command::Audit(AuditCommand::Tail {
            n,
            json,
            gateway_config,
        }) => trust::audit_tail(n, json, gateway_config.as_deref()),
        Command::Login { provider } => account::login(&provider),
        Command::Logout { provider } => account::logout(&provider),
        Command::Account { provider } => account::account(provider.as_deref()),
        Command::ToolSearch {
            query,
            reserve,
            json,
            provider,
        } => search::run(&query, reserve, json, provider.provider),
    }
}
