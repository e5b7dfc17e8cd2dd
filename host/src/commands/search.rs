//! `edgar tool-search QUERY`: what the model receives from `tool_search`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use edgar_host::config::ConfigPaths;
use edgar_host::tools::search_tool::ToolSearch;

use super::mcp::{load, runtime, session};

pub fn run(query: &str, reserve: usize, json: bool) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let config = load(&ConfigPaths::for_project(&cwd))?;
    super::mcp::note_held(&config);
    runtime()?.block_on(async {
        let session = session(&config, &cwd);
        let search = ToolSearch::new(reserve);
        let reply = super::mcp::guarded(&session, search.search(&session, query)).await;
        session.close().await;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        if json {
            serde_json::to_writer_pretty(&mut out, &reply)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{}", reply.text())?;
        }
        out.flush()?;
        Ok(ExitCode::SUCCESS)
    })
}
