//! The bundled vocabulary's pieces in byte order, written to `$OUT_DIR/vocab-order.bin`,
//! so the tokenizer finds a piece by binary search in a table compiled in rather than
//! hashing 30,522 pieces at every start (`src/tools/search/wordpiece.rs` reads it).
//!
//! Each entry is 8 bytes, little-endian: the piece's byte offset in `vocab.txt` (u32),
//! its length (u16) and its line, which is its id (u16).

use std::path::Path;

/// Where the bundled vocabulary lives, under the crate's directory.
const VOCAB: &str = "assets/minilm-l6-q4/vocab.txt";

pub fn emit(manifest_dir: &Path, out_dir: &Path) -> Result<(), String> {
    let path = manifest_dir.join(VOCAB);
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut pieces: Vec<(&str, u32, u16, u16)> = Vec::new();
    for (line, piece) in text.lines().enumerate() {
        let offset = piece.as_ptr() as usize - text.as_ptr() as usize;
        let too_big = |what: &str| format!("{}: {what} past the table's range", path.display());
        pieces.push((
            piece,
            u32::try_from(offset).map_err(|_| too_big("an offset"))?,
            u16::try_from(piece.len()).map_err(|_| too_big("a piece's length"))?,
            u16::try_from(line).map_err(|_| too_big("a line"))?,
        ));
    }
    pieces.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if let Some(w) = pieces.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("{}: the piece {:?} twice", path.display(), w[0].0));
    }
    let mut table = Vec::with_capacity(pieces.len() * 8);
    for (_, offset, len, line) in pieces {
        table.extend_from_slice(&offset.to_le_bytes());
        table.extend_from_slice(&len.to_le_bytes());
        table.extend_from_slice(&line.to_le_bytes());
    }
    let to = out_dir.join("vocab-order.bin");
    std::fs::write(&to, table).map_err(|e| format!("cannot write {}: {e}", to.display()))
}
