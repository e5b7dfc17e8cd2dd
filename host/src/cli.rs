//! What the user typed: clap types only, no I/O.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "edgar",
    version,
    about = "The MCP and sign-in core of the edgar coding agent"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the border guard by hand: what the model would see of a server's tools.
    #[command(subcommand)]
    Guard(GuardCommand),
}

#[derive(Debug, Subcommand)]
pub enum GuardCommand {
    /// Print the model-visible name of TOOL on SERVER.
    ToolName {
        server: String,
        tool: String,
        #[command(flatten)]
        adapter: AdapterArg,
    },
    /// Read one tool object (JSON) on stdin and print the accepted tool.
    ToSchema {
        /// The server the tool came from.
        #[arg(long, default_value = "server")]
        server: String,
        #[command(flatten)]
        adapter: AdapterArg,
    },
    /// Read one CallToolResult (JSON) on stdin and print the content blocks.
    ToResult {
        #[command(flatten)]
        adapter: AdapterArg,
    },
}

#[derive(Debug, Args)]
pub struct AdapterArg {
    /// A schema-adapter component (.wasm) to use instead of the built-in one.
    #[arg(long, value_name = "FILE.wasm")]
    pub adapter: Option<PathBuf>,
}
