//! The uncased BERT tokenizer the search model was trained with: text cleaned, lower-cased
//! and stripped of accents, split at whitespace and punctuation (each CJK ideograph alone),
//! then each word cut greedily into the longest vocabulary pieces, `##` marking a
//! continuation. A word with no such cut becomes `[UNK]`.

use rustc_hash::FxHashMap;
use unicode_normalization::UnicodeNormalization;

/// Words longer than this (in chars) are `[UNK]`, as in BERT.
const MAX_WORD_CHARS: usize = 100;

/// bert-base-uncased's word pieces, which both the bundled and the installed model use.
pub static BUNDLED: &str = include_str!("../../../assets/minilm-l6-q4/vocab.txt");
/// [`BUNDLED`]'s pieces in byte order, from the build (`build/vocab.rs` says the format).
static BUNDLED_ORDER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/vocab-order.bin"));

pub struct WordPiece {
    vocab: Table,
    pub cls: u32,
    pub sep: u32,
    unk: u32,
}

/// Where a piece's id is found.
enum Table {
    /// [`BUNDLED`], by binary search of its order from the build: nothing to do at load.
    Bundled(&'static [[u8; 8]]),
    /// Another vocabulary, hashed at load. Pieces are borrowed from its text (kept for
    /// the process): no copy of 30,522 strings.
    Hashed(FxHashMap<&'static str, u32>),
}

impl WordPiece {
    /// A tokenizer over `vocab.txt` text: one piece per line, its line number its id.
    /// The bundled vocabulary's text (even read from an installed model) takes the table
    /// from the build.
    pub fn new(vocab_text: &'static str) -> Option<WordPiece> {
        // The bundled text itself is known by its address, without reading it.
        let vocab = if std::ptr::eq(vocab_text, BUNDLED) || vocab_text == BUNDLED {
            let (entries, rest) = BUNDLED_ORDER.as_chunks::<8>();
            if !rest.is_empty() {
                return None;
            }
            Table::Bundled(entries)
        } else {
            let mut map = FxHashMap::default();
            map.reserve(vocab_text.len() / 8);
            for (i, l) in vocab_text.lines().enumerate() {
                map.insert(l, i as u32);
            }
            Table::Hashed(map)
        };
        let mut wp = WordPiece {
            vocab,
            cls: 0,
            sep: 0,
            unk: 0,
        };
        wp.cls = wp.id("[CLS]")?;
        wp.sep = wp.id("[SEP]")?;
        wp.unk = wp.id("[UNK]")?;
        Some(wp)
    }

    /// The bundled vocabulary's tokenizer.
    pub fn bundled() -> Option<WordPiece> {
        WordPiece::new(BUNDLED)
    }

    pub fn len(&self) -> usize {
        match &self.vocab {
            Table::Bundled(entries) => entries.len(),
            Table::Hashed(map) => map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `piece`'s id, if the vocabulary has it.
    fn id(&self, piece: &str) -> Option<u32> {
        match &self.vocab {
            Table::Bundled(entries) => {
                let at = |e: &[u8; 8]| {
                    let offset = u32::from_le_bytes([e[0], e[1], e[2], e[3]]) as usize;
                    let len = u16::from_le_bytes([e[4], e[5]]) as usize;
                    BUNDLED
                        .as_bytes()
                        .get(offset..offset + len)
                        .unwrap_or_default()
                };
                let i = entries
                    .binary_search_by(|e| at(e).cmp(piece.as_bytes()))
                    .ok()?;
                let e = entries.get(i)?;
                Some(u16::from_le_bytes([e[6], e[7]]).into())
            }
            Table::Hashed(map) => map.get(piece).copied(),
        }
    }

    /// `[CLS]`, the text's pieces (at most `max - 2`), `[SEP]`.
    pub fn encode(&self, text: &str, max: usize) -> Vec<u32> {
        let mut ids = vec![self.cls];
        let budget = max.saturating_sub(1);
        'words: for word in basic_words(text) {
            for id in self.pieces(&word) {
                if ids.len() >= budget {
                    break 'words;
                }
                ids.push(id);
            }
        }
        ids.push(self.sep);
        ids
    }

    fn pieces(&self, word: &str) -> Vec<u32> {
        if word.chars().count() > MAX_WORD_CHARS {
            return vec![self.unk];
        }
        let mut out = Vec::new();
        let mut start = 0;
        let mut candidate = String::new();
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while end > start {
                candidate.clear();
                if start > 0 {
                    candidate.push_str("##");
                }
                candidate.push_str(&word[start..end]);
                if let Some(id) = self.id(&candidate) {
                    found = Some(id);
                    break;
                }
                end = word[..end]
                    .char_indices()
                    .next_back()
                    .map_or(start, |(i, _)| i);
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => return vec![self.unk],
            }
        }
        out
    }
}

/// BERT's basic tokenization: lower case, no accents, no control characters, words split
/// at whitespace, punctuation and CJK ideographs kept as words of their own.
fn basic_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    for c in text.nfd() {
        if is_mark(c) || c == '\0' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if c.is_whitespace() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
        } else if is_punctuation(c) || is_cjk(c) {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            words.extend(std::iter::once(c.to_lowercase().collect::<String>()));
        } else {
            cur.extend(c.to_lowercase());
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Combining marks (what stripping accents removes after NFD).
fn is_mark(c: char) -> bool {
    matches!(c as u32, 0x300..=0x36F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

/// ASCII non-alphanumerics count as punctuation (as in BERT); elsewhere the general
/// punctuation blocks do.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c as u32, 0x2010..=0x2027 | 0x2030..=0x205E | 0x3000..=0x303F | 0xFF01..=0xFF0F | 0xFF1A..=0xFF20 | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF65 | 0xA1 | 0xA7 | 0xAB | 0xB6 | 0xB7 | 0xBB | 0xBF)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPiece {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\ncreate\nissue\n##s\ngit\n##hub\n,\nun\n##aff\n##able\ncafe\n工\n";
        WordPiece::new(vocab).unwrap_or_else(|| panic!("special tokens"))
    }

    /// The table from the build finds every bundled piece at its line, and nothing
    /// else; it tokenizes as a hashed table of the same text does.
    #[test]
    fn the_bundled_order_finds_each_piece_at_its_line() {
        let bundled = WordPiece::bundled().unwrap_or_else(|| panic!("the bundled table"));
        assert!(matches!(bundled.vocab, Table::Bundled(_)));
        assert_eq!(bundled.len(), BUNDLED.lines().count());
        for (i, piece) in BUNDLED.lines().enumerate() {
            assert_eq!(bundled.id(piece), Some(i as u32), "{piece}");
        }
        for absent in ["", "##", "zzzzzzzz", "[cls]", "hello world", "\u{0}"] {
            assert_eq!(bundled.id(absent), None, "{absent}");
        }
        // The same text hashed (a copy, so not taken for the bundled one).
        let copy: &'static str = Box::leak(format!("{BUNDLED}\n").into_boxed_str());
        let hashed = WordPiece::new(copy).unwrap_or_else(|| panic!("hashed"));
        assert!(matches!(hashed.vocab, Table::Hashed(_)));
        let text = "Create a GitHub issue about the flaky CI, in Ünïcödé and 工具 too";
        assert_eq!(bundled.encode(text, 64), hashed.encode(text, 64));
    }

    #[test]
    fn words_split_at_punctuation_and_lose_case_and_accents() {
        assert_eq!(
            basic_words("Create GitHub-issues, Café 工具"),
            ["create", "github", "-", "issues", ",", "cafe", "工", "具"]
        );
    }

    #[test]
    fn pieces_are_greedy_longest_first() {
        let wp = tiny();
        assert_eq!(wp.encode("Create GitHub issues", 64), [2, 4, 7, 8, 5, 6, 3]);
        assert_eq!(wp.encode("unaffable", 64), [2, 10, 11, 12, 3]);
        // No cut: the whole word is unknown, not a partial match.
        assert_eq!(wp.encode("gitx", 64), [2, 1, 3]);
    }

    #[test]
    fn encoding_is_capped_with_the_separator_kept() {
        let wp = tiny();
        let ids = wp.encode("create create create create", 4);
        assert_eq!(ids, [2, 4, 4, 3]);
    }
}
