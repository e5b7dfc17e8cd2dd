//! The search index on disk, so a warm `tool_search` loads in milliseconds what took a
//! third of a second to build: the tools' names, schema token counts, postings and
//! semantic vectors, in one head that is mapped and used in place (nothing copied, and no
//! fresh memory to fault in: most of a warm search's loading cost); each tool's
//! definition behind it, read only when a search returns that tool.
//!
//! The file is named and headed by a key the caller derives from everything the index
//! depends on (the configuration's servers, their adapters, the model); the discovery
//! cache deletes it whenever any server's entry is written or removed. A file that is
//! truncated, corrupt, from another format or for another key reads as absent, and every
//! definition read from it is re-admitted through the guard's cheap checks.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use memmap2::{Mmap, MmapOptions};
use zerocopy::FromBytes;

use super::postings::{Postings, Shared, Stored as StoredPostings};
use super::{SearchIndex, Vectors, model};
use crate::guard::ToolName;
use crate::guard::{CachedTool, SanitizedTool};

/// The format, and what is indexed: changed whenever either changes, so a kept file of an
/// older edgar reads as absent and is built again (3: parameters' enum values indexed).
const MAGIC: &[u8; 8] = b"edgsrch\x03";
/// Largest index file read (a 10,000-tool catalog with vectors is about 40 MB).
const MAX_FILE: u64 = 1 << 30;
/// Most tools one file may claim (bounds what a corrupt count can allocate).
const MAX_TOOLS: usize = 1 << 20;

/// The file's head, mapped read-only.
struct Head {
    map: Mmap,
}

impl AsRef<[u8]> for Head {
    fn as_ref(&self) -> &[u8] {
        self.map.get(8..).unwrap_or_default()
    }
}

/// The tools' vectors in place in a mapped head: `len` f32s at byte `at`, checked
/// aligned and in bounds when read.
pub struct Floats {
    head: Shared,
    at: usize,
    len: usize,
}

impl Floats {
    /// The vectors (checked again: cheap, and no panic path).
    pub fn get(&self) -> &[f32] {
        let bytes: &[u8] = (*self.head).as_ref();
        self.at
            .checked_add(self.len * 4)
            .and_then(|end| bytes.get(self.at..end))
            .and_then(|b| <[f32]>::ref_from_bytes(b).ok())
            .unwrap_or_default()
    }
}

/// The stored tool definitions: where each is in the file, decoded on first use.
pub struct Stored {
    file: File,
    at: Vec<(u64, u32)>,
    decoded: Vec<OnceLock<Option<SanitizedTool>>>,
}

impl Stored {
    pub(super) fn get(&self, i: usize, names: &ToolName) -> Option<&SanitizedTool> {
        self.decoded
            .get(i)?
            .get_or_init(|| match self.decode(i, names) {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::warn!(
                        tool = names.name,
                        "cannot read a tool from the search index: {e}"
                    );
                    None
                }
            })
            .as_ref()
    }

    fn decode(&self, i: usize, names: &ToolName) -> Result<SanitizedTool, String> {
        let &(offset, len) = self.at.get(i).ok_or("no such tool")?;
        let mut buf = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| e.to_string())?;
        let cached: CachedTool = serde_json::from_slice(&buf).map_err(|e| e.to_string())?;
        let tool = SanitizedTool::from_cache(cached)?;
        // The definition must be the one the index ranked under these names.
        if tool.name() != names.name || tool.server() != names.server || tool.tool() != names.tool {
            return Err("the stored definition is of another tool".into());
        }
        Ok(tool)
    }
}

/// Writes `index` to `path` under `key` (atomically; computes every tool's token count
/// first, so a loaded index never needs the tokenizer).
pub fn write(index: &SearchIndex, path: &Path, key: &str) -> std::io::Result<()> {
    let n = index.len();
    let mut bodies = Vec::with_capacity(n);
    for i in 0..n {
        let tool = index
            .tool(i)
            .ok_or_else(|| std::io::Error::other("a tool of the index cannot be read"))?;
        bodies.push(serde_json::to_vec(tool).map_err(std::io::Error::other)?);
    }
    let dim = if index.vectors.is_some() {
        model::DIM
    } else {
        0
    };
    let mut head = Vec::new();
    head.extend_from_slice(MAGIC);
    put_str(&mut head, key);
    put_u32(&mut head, n as u32);
    put_u32(&mut head, index.postings.len() as u32);
    put_u32(&mut head, dim as u32);
    let mut body_offset = 0u64;
    for (i, (t, body)) in index.names.iter().zip(&bodies).enumerate() {
        put_str(&mut head, &t.name);
        put_str(&mut head, &t.server);
        put_str(&mut head, &t.tool);
        put_u32(&mut head, index.schema_tokens(i) as u32);
        head.extend_from_slice(&body_offset.to_le_bytes());
        put_u32(&mut head, body.len() as u32);
        body_offset += body.len() as u64;
    }
    // Sorted terms: a loaded index finds them by binary search, and the same index
    // always writes the same bytes.
    for (term, list) in index.postings.sorted() {
        put_str(&mut head, term);
        put_u32(&mut head, list.len() as u32);
        for (doc, name, rest) in list.iter() {
            put_u32(&mut head, doc);
            head.extend_from_slice(&name.to_le_bytes());
            head.extend_from_slice(&rest.to_le_bytes());
        }
    }
    if let Some(v) = &index.vectors {
        // Aligned for f32 in the file (the head starts at byte 8), so a reader maps them
        // and uses them in place.
        while !(8 + head.len()).is_multiple_of(4) {
            head.push(0);
        }
        for x in v.floats() {
            head.extend_from_slice(&x.to_le_bytes());
        }
    }
    // The head's length first, so a reader reads exactly the head in one call.
    let mut out = Vec::with_capacity(8 + head.len() + body_offset as usize);
    out.extend_from_slice(&(head.len() as u64).to_le_bytes());
    out.extend_from_slice(&head);
    for b in &bodies {
        out.extend_from_slice(b);
    }
    crate::paths::write_atomic(path, &out)
}

/// The index stored at `path` under `key`, or `None` when there is none or it cannot
/// be trusted to be that index.
pub fn load(path: &Path, key: &str) -> Option<SearchIndex> {
    let file = File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    if !(8..=MAX_FILE).contains(&size) {
        return None;
    }
    let mut len = [0u8; 8];
    file.read_exact_at(&mut len, 0).ok()?;
    let head_len = u64::from_le_bytes(len);
    if head_len > size - 8 {
        return None;
    }
    // SAFETY: the map is read-only and private to this process. The file is edgar's own
    // cache file, only ever replaced whole by a rename (`paths::write_atomic`), which
    // leaves this map on the file it had; were it truncated in place while mapped,
    // reading the lost pages would fault: the contract of the kept model weights
    // (`model/weights.rs`). Every read from it below is bounds-checked.
    #[allow(unsafe_code)]
    let map = unsafe {
        MmapOptions::new()
            .len(usize::try_from(8 + head_len).ok()?)
            .populate()
            .map(&file)
    }
    .ok()?;
    let shared: Shared = Arc::new(Head { map });
    let head: &[u8] = (*shared).as_ref();
    let bodies_at = 8 + head_len;
    let mut r = Reader { bytes: head, at: 0 };
    if r.take(MAGIC.len())? != MAGIC || r.str()? != key {
        return None;
    }
    let n = r.u32()? as usize;
    let terms = r.u32()? as usize;
    let dim = r.u32()? as usize;
    if n > MAX_TOOLS || (dim != 0 && dim != model::DIM) {
        return None;
    }
    let mut names = Vec::with_capacity(n);
    let mut tokens = Vec::with_capacity(n);
    let mut at = Vec::with_capacity(n);
    for _ in 0..n {
        let name = ToolName {
            name: r.str()?.to_owned(),
            server: r.str()?.to_owned(),
            tool: r.str()?.to_owned(),
        };
        // These names reach the prompt: check them as the guard would.
        if crate::guard::check::name(&name.name).is_err()
            || name.server.is_empty()
            || name.tool.is_empty()
        {
            return None;
        }
        names.push(name);
        let count = OnceLock::new();
        let _ = count.set(r.u32()? as usize);
        tokens.push(count);
        let offset = r.u64()?;
        let len = r.u32()?;
        let start = bodies_at.checked_add(offset)?;
        if start.checked_add(u64::from(len))? > size {
            return None;
        }
        at.push((start, len));
    }
    // The postings and the vectors stay in the head's bytes, used in place.
    let start = r.at;
    let (postings, end) = StoredPostings::read(shared.clone(), start, terms, n)?;
    let mut r = Reader {
        bytes: head,
        at: end,
    };
    let vectors = if dim == 0 {
        None
    } else {
        while !(8 + r.at).is_multiple_of(4) {
            if r.take(1)? != [0] {
                return None;
            }
        }
        let (at, len) = (r.at, n.checked_mul(dim)?);
        let bytes = r.take(len.checked_mul(4)?)?;
        // In place where the file's order is the machine's and the floats are aligned
        // (they are written so), else converted.
        let in_place = cfg!(target_endian = "little") && <[f32]>::ref_from_bytes(bytes).is_ok();
        Some(if in_place {
            Vectors::InPlace(Floats {
                head: shared.clone(),
                at,
                len,
            })
        } else {
            Vectors::Held(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            )
        })
    };
    if r.left() != 0 {
        return None;
    }
    let bodies = Stored {
        file,
        at,
        decoded: (0..n).map(|_| OnceLock::new()).collect(),
    };
    let index = SearchIndex::from_parts(
        names,
        super::Bodies::Stored(bodies),
        Postings::Stored(postings),
        tokens,
    );
    Some(match vectors {
        Some(Vectors::InPlace(v)) => index.with_stored_vectors(v),
        Some(Vectors::Held(v)) => index.with_vectors(v),
        None => index,
    })
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
}

/// Reads the head; every read is bounds-checked and `None` past the end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(out)
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    }

    fn str(&mut self) -> Option<&'a str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(server: &str, name: &str, description: &str) -> SanitizedTool {
        SanitizedTool::from_cache(CachedTool {
            server: server.into(),
            tool: name.into(),
            name: format!("{server}__{name}"),
            description: description.into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            output_schema: None,
            hints: Default::default(),
            dropped: Vec::new(),
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn index() -> SearchIndex {
        let tools = vec![
            tool("fs", "read_file", "Read the contents of a file"),
            tool("fs", "move_file", "Move or rename a file"),
            tool("github", "create_issue", "Open a new issue in a repository"),
        ];
        let n = tools.len();
        let vectors = (0..n * model::DIM).map(|i| (i % 7) as f32 / 7.0).collect();
        SearchIndex::new(tools).with_vectors(vectors)
    }

    fn ranked(ix: &SearchIndex, q: &str, v: Option<&[f32]>) -> Vec<(String, u32)> {
        ix.rank_with(q, v, 10)
            .into_iter()
            .map(|(i, s)| (ix.names(i).name.clone(), s.to_bits()))
            .collect()
    }

    #[test]
    fn a_stored_index_ranks_and_returns_exactly_what_the_built_one_did() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("index-k.search");
        let built = index();
        write(&built, &path, "k").unwrap_or_else(|e| panic!("{e}"));
        let loaded = load(&path, "k").unwrap_or_else(|| panic!("not loaded"));
        assert_eq!(loaded.len(), built.len());
        assert!(loaded.has_vectors());
        // Used in place in the mapped head, not copied (they are written aligned).
        assert_eq!(
            matches!(loaded.vectors, Some(Vectors::InPlace(_))),
            cfg!(target_endian = "little")
        );
        let q = vec![0.1f32; model::DIM];
        for query in ["rename a file", "create_issue", "fs/read_flie", "issue"] {
            assert_eq!(ranked(&loaded, query, None), ranked(&built, query, None));
            assert_eq!(
                ranked(&loaded, query, Some(&q)),
                ranked(&built, query, Some(&q))
            );
        }
        for i in 0..built.len() {
            assert_eq!(loaded.tool(i), built.tool(i));
            assert_eq!(loaded.schema_tokens(i), built.schema_tokens(i));
        }
        // The same index always writes the same bytes.
        let again = dir.path().join("again.search");
        write(&loaded, &again, "k").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(&path).ok(), std::fs::read(&again).ok());
    }

    #[test]
    fn another_key_or_a_damaged_file_reads_as_absent() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("index-k.search");
        write(&index(), &path, "k").unwrap_or_else(|e| panic!("{e}"));
        assert!(load(&path, "other").is_none());
        assert!(load(&dir.path().join("missing"), "k").is_none());
        let good = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
        // Every truncation is refused; none panics.
        for cut in (0..good.len()).step_by(97) {
            std::fs::write(&path, &good[..cut]).unwrap_or_else(|e| panic!("{e}"));
            let loaded = load(&path, "k");
            assert!(loaded.is_none(), "a file cut at {cut} bytes loaded");
        }
        // A flipped byte anywhere either refuses the file or leaves a usable index.
        for at in (0..good.len()).step_by(13) {
            let mut bad = good.clone();
            bad[at] ^= 0x5a;
            std::fs::write(&path, &bad).unwrap_or_else(|e| panic!("{e}"));
            if let Some(ix) = load(&path, "k") {
                let _ = ix.rank("read a file", 5);
                for i in 0..ix.len() {
                    let _ = ix.tool(i);
                }
            }
        }
    }

    #[test]
    fn a_definition_swapped_for_another_tools_is_not_returned() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("index-k.search");
        write(&index(), &path, "k").unwrap_or_else(|e| panic!("{e}"));
        let good = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
        // Same length names: swap `read_file` for `move_file` inside its definition.
        let (from, to) = (b"\"tool\":\"read_file\"", b"\"tool\":\"move_file\"");
        let body = good
            .windows(from.len())
            .rposition(|w| w == from)
            .unwrap_or_else(|| panic!("no body"));
        let mut bad = good.clone();
        bad[body..body + to.len()].copy_from_slice(to);
        std::fs::write(&path, &bad).unwrap_or_else(|e| panic!("{e}"));
        let ix = load(&path, "k").unwrap_or_else(|| panic!("not loaded"));
        let i = (0..ix.len())
            .find(|&i| ix.names(i).tool == "read_file")
            .unwrap_or_else(|| panic!("no read_file"));
        assert!(ix.tool(i).is_none());
    }
}
