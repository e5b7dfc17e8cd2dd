//! Where the encoder's numbers come from: a safetensors file, read one of two ways.
//!
//! - The installed model (all-MiniLM-L6-v2, f32) is mapped and used in place: loading
//!   checks every tensor's dtype, shape, bounds and alignment and copies nothing.
//! - The bundled model (the same, 4-bit, compiled into the binary) keeps its 30,522-row
//!   word table packed, expanding only the rows a text uses. Its other tensors (10.8M
//!   values) are expanded once (vectors to f32, the weight matrices to f16 panels for
//!   a query's kernel, [`Expander::take_paneled`]) and kept in the cache directory, so
//!   later processes map them as they map the installed model (expanding costs ~25 ms,
//!   mapping ~2 ms).
//!
//! Both end as [`Span`]s into one [`Store`], so the forward pass does not know which.

use std::path::Path;

use memmap2::{Mmap, MmapOptions};
use zerocopy::{FromBytes, IntoBytes};

use super::ModelError;

/// Largest safetensors header read (the models' are 10 KB and 8 KB).
const MAX_HEADER: u64 = 1 << 20;
/// Values that share one scale in the bundled model's 4-bit tensors.
const GROUP: usize = 32;
/// The kept expansion's header: this magic, the count of f32s that follow, the model's
/// id (zero-padded).
/// (3: every weight matrix is kept in panels of f16, `Expander::take_paneled`.)
const KEPT_MAGIC: &[u8; 8] = b"edgkept3";
const KEPT_HEADER: usize = 64;

/// Where a tensor's f32 values are in a [`Store`]: byte offset and count.
#[derive(Clone, Copy)]
pub(super) struct Span {
    pub at: usize,
    pub len: usize,
}

/// The f32 values behind the spans.
pub(super) enum Store {
    /// A file, mapped read-only: the installed model, or a kept expansion.
    Mapped(Mmap),
    /// The bundled model's tensors, expanded by this process.
    Owned(Vec<f32>),
}

impl Store {
    fn bytes(&self) -> &[u8] {
        match self {
            Store::Mapped(m) => m,
            Store::Owned(v) => v.as_bytes(),
        }
    }

    /// The f32 values at `span`: little-endian on disk, used in place (loading refuses a
    /// big-endian machine), their bounds and alignment checked.
    pub fn floats(&self, span: Span) -> Result<&[f32], ModelError> {
        floats(self.bytes(), span).map_err(bad)
    }

    /// The f16 values (as their bits) at `span` (`len` counts them), checked likewise.
    pub fn halves(&self, span: Span) -> Result<&[u16], ModelError> {
        let bytes = span
            .len
            .checked_mul(2)
            .and_then(|n| span.at.checked_add(n))
            .and_then(|end| self.bytes().get(span.at..end))
            .ok_or_else(|| bad("past the end of the file".into()))?;
        <[u16]>::ref_from_bytes(bytes).map_err(|_| bad("not aligned for f16".into()))
    }

    /// Keeps an expansion at `path` for later processes to map (best effort: a search
    /// that cannot write its cache still works).
    pub fn keep(&self, path: &Path, id: &str) {
        let Store::Owned(v) = self else { return };
        let mut bytes = kept_header(v.len(), id);
        bytes.extend_from_slice(v.as_bytes());
        if let Err(e) = crate::paths::write_atomic(path, &bytes) {
            tracing::debug!("the search model's expansion is not kept: {e}");
        }
    }
}

fn floats(bytes: &[u8], span: Span) -> Result<&[f32], String> {
    let bytes = span
        .len
        .checked_mul(4)
        .and_then(|n| span.at.checked_add(n))
        .and_then(|end| bytes.get(span.at..end))
        .ok_or("past the end of the file")?;
    <[f32]>::ref_from_bytes(bytes).map_err(|_| "not aligned for f32".to_string())
}

pub(super) fn bad(what: String) -> ModelError {
    ModelError::Format("model.safetensors", what)
}

fn kept_header(len: usize, id: &str) -> Vec<u8> {
    let mut h = KEPT_MAGIC.to_vec();
    h.extend_from_slice(&(len as u64).to_le_bytes());
    h.extend(
        id.bytes()
            .chain(std::iter::repeat(0))
            .take(KEPT_HEADER - h.len()),
    );
    h
}

/// The bundled word table: 4-bit values, low nibble first, each group of 32 scaled by
/// its f16 (symmetric: a nibble `q` is `(q - 8) * scale`). Rows hold whole groups.
pub(super) struct Packed {
    values: &'static [u8],
    scales: &'static [u8],
    pub rows: usize,
    cols: usize,
}

impl Packed {
    /// Expands row `i` into `out` (`cols` long); a row past the table is zeros.
    pub fn row(&self, i: usize, out: &mut [f32]) {
        let (from, n) = (i * self.cols, self.cols);
        match (
            self.values.get(from / 2..(from + n) / 2),
            self.scales.get(from / GROUP * 2..(from + n) / GROUP * 2),
        ) {
            (Some(values), Some(scales)) => expand(values, scales, out),
            _ => out.fill(0.0),
        }
    }
}

/// Expands packed 4-bit `values` with their f16 `scales` into `out`, a group at a time.
fn expand(values: &[u8], scales: &[u8], out: &mut [f32]) {
    let groups = out
        .chunks_exact_mut(GROUP)
        .zip(values.chunks_exact(GROUP / 2))
        .zip(scales.chunks_exact(2));
    for ((out, values), scale) in groups {
        let scale = half::f16::from_le_bytes([scale[0], scale[1]]).to_f32();
        for (pair, &b) in out.chunks_exact_mut(2).zip(values) {
            pair[0] = (f32::from(b & 15) - 8.0) * scale;
            pair[1] = (f32::from(b >> 4) - 8.0) * scale;
        }
    }
}

/// A safetensors header, checked against the bytes it describes.
pub(super) struct Tensors<'a> {
    header: serde_json::Map<String, serde_json::Value>,
    bytes: &'a [u8],
    data_at: usize,
}

impl<'a> Tensors<'a> {
    pub fn read(bytes: &'a [u8]) -> Result<Tensors<'a>, ModelError> {
        if cfg!(target_endian = "big") {
            return Err(bad("a little-endian file on a big-endian machine".into()));
        }
        let len = bytes
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| bad("shorter than its header".into()))?;
        if len > MAX_HEADER {
            return Err(bad(format!("a {len}-byte header")));
        }
        let end = 8 + len as usize;
        let header = bytes
            .get(8..end)
            .ok_or_else(|| bad("shorter than its header".into()))?;
        let header = serde_json::from_slice(header).map_err(|e| bad(e.to_string()))?;
        Ok(Tensors {
            header,
            bytes,
            data_at: end,
        })
    }

    pub fn has(&self, name: &str) -> bool {
        self.header.contains_key(name)
    }

    /// The byte range of `name`'s data, checked: its dtype, its shape, its offsets
    /// against the data's size and the file's length.
    fn range(
        &self,
        name: &str,
        dtype: &str,
        shape: &[usize],
        size: usize,
    ) -> Result<std::ops::Range<usize>, ModelError> {
        let t = self
            .header
            .get(name)
            .ok_or_else(|| bad(format!("no tensor {name}")))?;
        let numbers = |key: &str| -> Vec<usize> {
            t[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_u64().map(|d| d as usize))
                .collect()
        };
        let dims = numbers("shape");
        if t["dtype"] != dtype || dims != shape {
            return Err(bad(format!("{name} is {} {:?}", t["dtype"], dims)));
        }
        let len = shape.iter().product::<usize>() * size;
        let (start, end) = match numbers("data_offsets")[..] {
            [start, end] if end.checked_sub(start) == Some(len) => (start, end),
            ref offsets => return Err(bad(format!("{name} has offsets {offsets:?}"))),
        };
        self.data_at
            .checked_add(start)
            .zip(self.data_at.checked_add(end))
            .map(|(s, e)| s..e)
            .filter(|r| r.end <= self.bytes.len())
            .ok_or_else(|| bad(format!("{name}: past the end of the file")))
    }

    /// Where `name`'s f32 data is, to be used in place in these bytes (aligned).
    pub fn locate(&self, name: &str, shape: &[usize]) -> Result<Span, ModelError> {
        let range = self.range(name, "F32", shape, 4)?;
        let span = Span {
            at: range.start,
            len: range.len() / 4,
        };
        floats(self.bytes, span).map_err(|e| bad(format!("{name}: {e}")))?;
        Ok(span)
    }
}

/// Reads the bundled model's tensors into one store as they are asked for: expanding
/// them, or only planning where each is in the kept expansion (checking them either way).
pub(super) struct Expander {
    tensors: Tensors<'static>,
    out: Vec<f32>,
    /// f32s placed so far.
    len: usize,
    /// Where the first f32 is: 0 in memory, after the header in a kept file.
    base: usize,
    expand: bool,
}

impl Expander {
    /// Expands every tensor asked for into memory.
    pub fn expand(bytes: &'static [u8]) -> Result<Expander, ModelError> {
        Ok(Expander {
            tensors: Tensors::read(bytes)?,
            out: Vec::with_capacity(11 << 20),
            len: 0,
            base: 0,
            expand: true,
        })
    }

    /// Places every tensor asked for where the kept expansion has it, expanding nothing.
    pub fn plan(bytes: &'static [u8]) -> Result<Expander, ModelError> {
        Ok(Expander {
            tensors: Tensors::read(bytes)?,
            out: Vec::new(),
            len: 0,
            base: KEPT_HEADER,
            expand: false,
        })
    }

    pub fn has(&self, name: &str) -> bool {
        self.tensors.has(name) || self.tensors.has(&format!("{name}.q4"))
    }

    /// `name` as f32: a vector is stored as f32, a matrix as 4-bit groups (`.q4`,
    /// `.scales`).
    pub fn take(&mut self, name: &str, shape: &[usize]) -> Result<Span, ModelError> {
        let n: usize = shape.iter().product();
        let at = self.len;
        self.len += n;
        if let [_] = shape {
            let range = self.tensors.range(name, "F32", shape, 4)?;
            if self.expand {
                self.out.extend(
                    self.tensors.bytes[range]
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                );
            }
        } else {
            let (values, scales) = self.packed(name, n)?;
            if self.expand {
                self.out.resize(at + n, 0.0);
                expand(values, scales, &mut self.out[at..]);
            }
        }
        Ok(Span {
            at: self.base + at * 4,
            len: n,
        })
    }

    /// `name`'s [rows, cols] weight matrix as f16, in panels of `panel` rows: panel `p`
    /// holds, for each column `k`, rows `p * panel..(p + 1) * panel` of it side by side
    /// ([rows / panel][cols][panel]), so a query's few tokens are multiplied reading the
    /// weights in order, half the bytes of f32, without a horizontal sum
    /// (`model::paneled_rows`). A 4-bit value times its f16 scale rounds to f16 within
    /// 2⁻¹¹ of itself, far inside the 4-bit step. `rows` must be a multiple of `panel`.
    pub fn take_paneled(
        &mut self,
        name: &str,
        (rows, cols): (usize, usize),
        panel: usize,
    ) -> Result<Span, ModelError> {
        if panel == 0 || !rows.is_multiple_of(panel) || !cols.is_multiple_of(2) {
            return Err(bad(format!(
                "{name}: {rows}x{cols}, not whole panels of {panel}"
            )));
        }
        let n = rows * cols;
        let (values, scales) = self.packed(name, n)?;
        // Two f16s to each f32 slot of the store.
        let at = self.len;
        self.len += n / 2;
        if self.expand {
            let mut halves = vec![0u16; n];
            let mut row = vec![0f32; cols];
            for r in 0..rows {
                let v = values.get(r * cols / 2..(r + 1) * cols / 2);
                let sc = scales.get(r * cols / GROUP * 2..(r + 1) * cols / GROUP * 2);
                let (Some(v), Some(sc)) = (v, sc) else {
                    return Err(bad(format!("{name}: a short row")));
                };
                expand(v, sc, &mut row);
                let base = r / panel * cols * panel + r % panel;
                for (k, &w) in row.iter().enumerate() {
                    if let Some(slot) = halves.get_mut(base + k * panel) {
                        *slot = half::f16::from_f32(w).to_bits();
                    }
                }
            }
            self.out.resize(at + n / 2, 0.0);
            if let Some(slots) = self.out.get_mut(at..) {
                slots.as_mut_bytes().copy_from_slice(halves.as_bytes());
            }
        }
        Ok(Span {
            at: self.base + at * 4,
            len: n,
        })
    }

    /// `name`'s [rows, cols] matrix, left packed (the word table: a text uses a few rows).
    pub fn keep_packed(&self, name: &str, rows: usize, cols: usize) -> Result<Packed, ModelError> {
        if !cols.is_multiple_of(GROUP) {
            return Err(bad(format!("{name}: rows of {cols}, not whole groups")));
        }
        let (values, scales) = self.packed(name, rows * cols)?;
        Ok(Packed {
            values,
            scales,
            rows,
            cols,
        })
    }

    fn packed(&self, name: &str, n: usize) -> Result<(&'static [u8], &'static [u8]), ModelError> {
        if !n.is_multiple_of(GROUP) {
            return Err(bad(format!("{name}: {n} values, not whole groups")));
        }
        let bytes: &'static [u8] = self.tensors.bytes;
        let values = self
            .tensors
            .range(&format!("{name}.q4"), "U8", &[n / 2], 1)?;
        let scales = self
            .tensors
            .range(&format!("{name}.scales"), "F16", &[n / GROUP], 2)?;
        Ok((&bytes[values], &bytes[scales]))
    }

    /// The kept expansion at `path`, mapped, if it is the one this plan describes: its
    /// magic, its model `id` and its exact length.
    pub fn map_kept(&self, path: &Path, id: &str) -> Option<Store> {
        let file = std::fs::File::open(path).ok()?;
        let want = (KEPT_HEADER + self.len * 4) as u64;
        if file.metadata().ok()?.len() != want {
            return None;
        }
        // SAFETY: read-only and private to this process. The file is replaced only by
        // rename (`paths::write_atomic`), never truncated in place, so the mapped pages
        // stay; its length is checked above and every tensor's bounds at each use. It
        // sits in the user's own cache directory: a changed file can change rankings,
        // nothing else (as the installed model's file can). Populated: every page is
        // used by each query.
        #[allow(unsafe_code)]
        let map = unsafe { MmapOptions::new().populate().map(&file) }.ok()?;
        (map.get(..KEPT_HEADER)? == kept_header(self.len, id)).then_some(Store::Mapped(map))
    }

    pub fn finish(self) -> Store {
        Store::Owned(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bit_groups_expand_around_eight_with_their_scale() {
        // Two groups: scale 0.5 (f16 0x3800), then 2.0 (0x4000).
        let mut values = vec![0x8F_u8; 16]; // low nibble 15 -> +7, high nibble 8 -> 0
        values.extend([0x10_u8; 16]); // low 0 -> -8, high 1 -> -7
        let scales = [0x00, 0x38, 0x00, 0x40];
        let mut out = [0f32; 64];
        expand(&values, &scales, &mut out);
        assert_eq!(&out[..2], &[3.5, 0.0]);
        assert_eq!(&out[32..34], &[-16.0, -14.0]);
        let table = Packed {
            values: Box::leak(values.into_boxed_slice()),
            scales: Box::leak(Box::new(scales)),
            rows: 2,
            cols: 32,
        };
        let mut row = [1f32; 32];
        table.row(1, &mut row);
        assert_eq!(row[1], -14.0);
        table.row(2, &mut row);
        assert!(
            row.iter().all(|&v| v == 0.0),
            "a row past the table is zeros"
        );
    }

    #[test]
    fn a_header_that_lies_is_refused() {
        let header = br#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header);
        file.extend_from_slice(&[0u8; 8]);
        let t = Tensors::read(&file).unwrap_or_else(|e| panic!("{e}"));
        let err = |r: Result<Span, ModelError>| r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(t.locate("a", &[4])).contains("past the end"));
        assert!(err(t.locate("a", &[2])).contains("is \"F32\" [4]"));
        assert!(err(t.locate("b", &[4])).contains("no tensor b"));
        assert!(Tensors::read(&u64::MAX.to_le_bytes()).is_err());
    }
}
