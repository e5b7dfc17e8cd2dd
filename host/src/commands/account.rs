//! `edgar login`, `edgar logout`, `edgar account`: provider keys. No key is ever printed.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};
use edgar_host::auth::Secret;
use edgar_host::auth::keys::Keys;
use edgar_host::paths;

use super::context::runtime;

fn keys() -> anyhow::Result<Keys> {
    Ok(Keys::load(paths::config_dir().as_deref())?)
}

pub fn login(provider: &str) -> anyhow::Result<ExitCode> {
    let keys = keys()?;
    let env = keys.provider(provider).env;
    let key = read_key(&format!("API key for {provider}: "))?;
    runtime()?.block_on(keys.login(provider, &key))?;
    super::context::audit("key_stored", serde_json::json!({"provider": provider}));
    println!("stored the key for {provider} in {}", keys.store.describe());
    if std::env::var_os(&env).is_some() {
        println!("note: {env} is set in this shell and takes precedence over the stored key");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn logout(provider: &str) -> anyhow::Result<ExitCode> {
    let keys = keys()?;
    runtime()?.block_on(keys.logout(provider))?;
    super::context::audit("key_erased", serde_json::json!({"provider": provider}));
    println!("erased the stored key for {provider}");
    Ok(ExitCode::SUCCESS)
}

pub fn account(provider: Option<&str>) -> anyhow::Result<ExitCode> {
    let keys = keys()?;
    let rt = runtime()?;
    let names: Vec<String> = match provider {
        Some(p) => vec![p.to_owned()],
        None => {
            // Those configured, and those whose keys `edgar login` stored (an unusable
            // store lists none here; each name still says why below).
            let mut names: std::collections::BTreeSet<String> =
                keys.configured().map(|p| p.name.clone()).collect();
            match rt.block_on(keys.stored()) {
                Ok(stored) => names.extend(stored),
                Err(e) => eprintln!("edgar: the stored keys cannot be listed: {e}"),
            }
            names.into_iter().collect()
        }
    };
    if names.is_empty() {
        println!(
            "no providers configured in config.json and no key stored with `edgar login`; `edgar account NAME` checks one (the environment's NAME_API_KEY wins)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    let mut missing = false;
    for name in names {
        match rt.block_on(keys.sign_in(&name)) {
            Ok((key, source)) => writeln!(out, "{name}: {} from {source}", key.masked())?,
            Err(e) => {
                missing = true;
                writeln!(out, "{name}: {e}")?
            }
        }
    }
    // A script asking "is there a key?" gets the answer in the exit code too.
    Ok(if missing {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// A key from the terminal without echo, or the first line of piped stdin.
fn read_key(prompt: &str) -> anyhow::Result<Secret> {
    let stdin = std::io::stdin();
    let line = if stdin.is_terminal() {
        eprint!("{prompt}");
        std::io::stderr().flush()?;
        let line = without_echo(|| read_line(&stdin))?;
        eprintln!();
        line
    } else {
        read_line(&stdin)?
    };
    let key = line.trim();
    if key.is_empty() {
        bail!("no key given");
    }
    Ok(Secret::new(key))
}

fn read_line(stdin: &std::io::Stdin) -> anyhow::Result<String> {
    let mut line = String::new();
    stdin
        .lock()
        .take_line(&mut line)
        .context("cannot read the key")?;
    Ok(line)
}

trait TakeLine {
    fn take_line(&mut self, buf: &mut String) -> std::io::Result<usize>;
}

impl<R: BufRead> TakeLine for R {
    /// One line, at most 64 KiB.
    fn take_line(&mut self, buf: &mut String) -> std::io::Result<usize> {
        use std::io::Read;
        self.take(64 << 10).read_line(buf)
    }
}

/// Runs `f` with the terminal's echo off, restoring it afterwards.
fn without_echo<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let fd = std::io::stdin();
    let original = tcgetattr(&fd).context("cannot read the terminal settings")?;
    let mut quiet = original.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&fd, OptionalActions::Now, &quiet).context("cannot turn off echo")?;
    let result = f();
    let _ = tcsetattr(&fd, OptionalActions::Now, &original);
    result
}
