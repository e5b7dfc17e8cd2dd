//! The inverted index: term -> (tool, BM25F-weighted frequency in its name, and in the
//! other fields). Built in memory, or used in place from an index file's bytes (terms
//! sorted, found by binary search), so loading an index allocates nothing per term.

use std::collections::HashMap;
use std::sync::Arc;

/// One tool's entry in a term's list: (tool, weight in the name, weight elsewhere).
pub type Posting = (u32, f32, f32);

/// Bytes of one stored posting.
pub const POSTING_BYTES: usize = 12;

pub enum Postings {
    Built(HashMap<String, Vec<Posting>>),
    Stored(Stored),
}

/// Bytes read in place (an index file's head, mapped), shared by what is read from them.
pub type Shared = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Postings read in place: the file's head, and where each term and its list are.
pub struct Stored {
    bytes: Shared,
    /// (term start, term length, list start, postings), sorted by term.
    terms: Vec<(u32, u32, u32, u32)>,
}

/// One term's postings.
#[derive(Clone, Copy)]
pub enum List<'a> {
    Built(&'a [Posting]),
    Stored(&'a [u8]),
}

impl List<'_> {
    pub fn len(&self) -> usize {
        match self {
            List::Built(v) => v.len(),
            List::Stored(b) => b.len() / POSTING_BYTES,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = Posting> + '_ {
        (0..self.len()).map(move |i| match self {
            List::Built(v) => v[i],
            List::Stored(b) => decode(&b[i * POSTING_BYTES..(i + 1) * POSTING_BYTES]),
        })
    }
}

fn decode(b: &[u8]) -> Posting {
    let word = |k: usize| u32::from_le_bytes([b[k], b[k + 1], b[k + 2], b[k + 3]]);
    (word(0), f32::from_bits(word(4)), f32::from_bits(word(8)))
}

impl Postings {
    pub fn get(&self, term: &str) -> Option<List<'_>> {
        match self {
            Postings::Built(map) => map.get(term).map(|v| List::Built(v)),
            Postings::Stored(s) => {
                let i = s
                    .terms
                    .binary_search_by(|&(at, len, _, _)| s.term_bytes(at, len).cmp(term.as_bytes()))
                    .ok()?;
                let (_, _, list, count) = s.terms[i];
                let start = list as usize;
                Some(List::Stored(
                    &s.bytes()[start..start + count as usize * POSTING_BYTES],
                ))
            }
        }
    }

    /// How many distinct terms.
    pub fn len(&self) -> usize {
        match self {
            Postings::Built(map) => map.len(),
            Postings::Stored(s) => s.terms.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every term with its list, sorted by term (so a written index is deterministic).
    pub fn sorted(&self) -> Vec<(&str, List<'_>)> {
        match self {
            Postings::Built(map) => {
                let mut all: Vec<(&str, List<'_>)> = map
                    .iter()
                    .map(|(t, v)| (t.as_str(), List::Built(v)))
                    .collect();
                all.sort_by(|a, b| a.0.cmp(b.0));
                all
            }
            Postings::Stored(s) => s
                .terms
                .iter()
                .map(|&(at, len, list, count)| {
                    let start = list as usize;
                    (
                        // Checked to be UTF-8 when read.
                        std::str::from_utf8(s.term_bytes(at, len)).unwrap_or(""),
                        List::Stored(&s.bytes()[start..start + count as usize * POSTING_BYTES]),
                    )
                })
                .collect(),
        }
    }
}

impl Stored {
    fn term_bytes(&self, at: u32, len: u32) -> &[u8] {
        &self.bytes()[at as usize..(at + len) as usize]
    }

    /// Reads `terms` terms starting at `at` in `bytes` (each: u32 length, the term, u32
    /// count, count postings) for a catalog of `tools`; `None` unless every term is UTF-8
    /// and in strictly ascending order and every posting names a tool. Returns the
    /// postings and where they end.
    pub fn read(shared: Shared, at: usize, terms: usize, tools: usize) -> Option<(Stored, usize)> {
        let bytes: &[u8] = (*shared).as_ref();
        if bytes.len() > u32::MAX as usize {
            return None;
        }
        let word = |p: usize| -> Option<u32> {
            let b = bytes.get(p..p.checked_add(4)?)?;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let mut table: Vec<(u32, u32, u32, u32)> = Vec::with_capacity(terms.min(bytes.len() / 8));
        let mut p = at;
        let mut previous: Option<&[u8]> = None;
        for _ in 0..terms {
            let len = word(p)? as usize;
            let term_at = p + 4;
            let term = bytes.get(term_at..term_at.checked_add(len)?)?;
            std::str::from_utf8(term).ok()?;
            if previous.is_some_and(|prev| prev >= term) {
                return None;
            }
            previous = Some(term);
            let count = word(term_at + len)? as usize;
            let list_at = term_at + len + 4;
            if count > tools {
                return None;
            }
            let list =
                bytes.get(list_at..list_at.checked_add(count.checked_mul(POSTING_BYTES)?)?)?;
            if list
                .chunks_exact(POSTING_BYTES)
                .any(|c| decode(c).0 as usize >= tools)
            {
                return None;
            }
            table.push((term_at as u32, len as u32, list_at as u32, count as u32));
            p = list_at + list.len();
        }
        Some((
            Stored {
                bytes: shared,
                terms: table,
            },
            p,
        ))
    }

    /// The bytes the postings were read from (the rest of the head follows them).
    pub fn bytes(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }
}
