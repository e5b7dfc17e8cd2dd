//! The search model: all-MiniLM-L6-v2, a 6-layer sentence encoder (22.7M parameters,
//! 384-dimensional mean-pooled, normalized embeddings), run in-process on the CPU. It
//! turns a query and each tool's text into vectors whose cosine says how close their
//! meanings are, so "hop over to another branch" finds `git_checkout`.
//!
//! The weights file is mapped, not read: loading checks every tensor's shape, bounds and
//! alignment and copies nothing, and a query touches only the pages it uses (the layers'
//! 42 MB and the word-embedding rows of its tokens, from the page cache when warm).

use std::fs::File;
use std::path::Path;

use memmap2::{Mmap, MmapOptions};
use ndarray::{Array2, ArrayView1, ArrayView2, Axis, s};
use zerocopy::FromBytes;

use super::wordpiece::WordPiece;

pub const DIM: usize = 384;
const LAYERS: usize = 6;
const HEADS: usize = 12;
const HEAD_DIM: usize = DIM / HEADS;
const FFN: usize = 1536;
const MAX_POSITIONS: usize = 512;
const LN_EPS: f32 = 1e-12;
/// Largest safetensors header read (the model's is 10 KB).
const MAX_HEADER: u64 = 1 << 20;
/// Sequences packed into one batch (the linear layers run over all their tokens at once).
const BATCH: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read the search model's {file}: {source}")]
    Io {
        file: &'static str,
        source: std::io::Error,
    },
    #[error("the search model's {0} is not what edgar expects: {1}")]
    Format(&'static str, String),
}

/// Where a tensor's f32 values are in the mapped file: byte offset and count.
#[derive(Clone, Copy)]
struct Span {
    at: usize,
    len: usize,
}

struct Layer {
    /// Query, key and value projections, each [DIM, DIM], with their biases.
    qkv: [Span; 3],
    qkv_b: [Span; 3],
    out: Span,
    out_b: Span,
    ln1: (Span, Span),
    up: Span,
    up_b: Span,
    down: Span,
    down_b: Span,
    ln2: (Span, Span),
}

/// A loaded encoder: tokenizer and the mapped weights file (read in place, so loading
/// costs no copy and a query touches only the pages it needs).
pub struct Encoder {
    tokens: WordPiece,
    map: Mmap,
    words: Span,
    vocab: usize,
    positions: Span,
    token_type: Span,
    ln: (Span, Span),
    layers: Vec<Layer>,
}

/// The safetensors header, checked against the mapped file.
struct Tensors<'a> {
    header: serde_json::Map<String, serde_json::Value>,
    map: &'a [u8],
    data_at: usize,
}

impl<'a> Tensors<'a> {
    fn read(map: &'a [u8]) -> Result<Tensors<'a>, ModelError> {
        let len = map
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| bad("shorter than its header".into()))?;
        if len > MAX_HEADER {
            return Err(bad(format!("a {len}-byte header")));
        }
        let end = 8 + len as usize;
        let header = map
            .get(8..end)
            .ok_or_else(|| bad("shorter than its header".into()))?;
        let header = serde_json::from_slice(header).map_err(|e| bad(e.to_string()))?;
        Ok(Tensors {
            header,
            map,
            data_at: end,
        })
    }

    /// Where `name`'s f32 data is, checked against `shape`, the file's length and f32
    /// alignment.
    fn locate(&self, name: &str, shape: &[usize]) -> Result<Span, ModelError> {
        let t = self
            .header
            .get(name)
            .ok_or_else(|| bad(format!("no tensor {name}")))?;
        let dims: Vec<usize> = t["shape"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_u64().map(|d| d as usize))
            .collect();
        if t["dtype"] != "F32" || dims != shape {
            return Err(bad(format!("{name} is {} {:?}", t["dtype"], dims)));
        }
        let offsets: Vec<usize> = t["data_offsets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o.as_u64().map(|o| o as usize))
            .collect();
        let len: usize = shape.iter().product();
        let span = match offsets[..] {
            [start, end] if end.checked_sub(start) == Some(len * 4) => Span {
                at: self
                    .data_at
                    .checked_add(start)
                    .ok_or_else(|| bad(format!("{name} starts past any file")))?,
                len,
            },
            _ => return Err(bad(format!("{name} has offsets {offsets:?}"))),
        };
        floats(self.map, span).map_err(|e| bad(format!("{name}: {e}")))?;
        Ok(span)
    }
}

/// The f32 values at `span` in `map`: little-endian on disk, used in place (the load
/// refuses a big-endian machine), their bounds and alignment checked.
fn floats(map: &[u8], span: Span) -> Result<&[f32], String> {
    let bytes = span
        .at
        .checked_add(span.len * 4)
        .and_then(|end| map.get(span.at..end))
        .ok_or("past the end of the file")?;
    <[f32]>::ref_from_bytes(bytes).map_err(|_| "not aligned for f32".to_string())
}

fn bad(what: String) -> ModelError {
    ModelError::Format("model.safetensors", what)
}

impl Encoder {
    /// Loads `vocab.txt` and maps `model.safetensors` from `dir`, checking every tensor
    /// it will use.
    pub fn load(dir: &Path) -> Result<Encoder, ModelError> {
        if cfg!(target_endian = "big") {
            return Err(bad("a little-endian file on a big-endian machine".into()));
        }
        let vocab_text =
            std::fs::read_to_string(dir.join("vocab.txt")).map_err(|source| ModelError::Io {
                file: "vocab.txt",
                source,
            })?;
        let tokens = WordPiece::new(&vocab_text)
            .ok_or_else(|| ModelError::Format("vocab.txt", "no [CLS], [SEP] or [UNK]".into()))?;
        let io = |source| ModelError::Io {
            file: "model.safetensors",
            source,
        };
        let file = File::open(dir.join("model.safetensors")).map_err(io)?;
        // SAFETY: the map is read-only and private to this process. The file is the
        // installed model (checked by digest when installed); were it truncated while
        // mapped, reading the lost pages would fault: the same contract as every
        // memory-mapped model loader. Every tensor's bounds are checked below.
        #[allow(unsafe_code)]
        let map = unsafe { MmapOptions::new().map(&file) }.map_err(io)?;
        let t = Tensors::read(&map)?;
        let vocab = tokens.len();
        let vec = |name: &str, n: usize| t.locate(name, &[n]);
        let mut layers = Vec::with_capacity(LAYERS);
        for l in 0..LAYERS {
            let p = |n: &str| format!("encoder.layer.{l}.{n}");
            let part = |part: &str, what: &str, shape: &[usize]| {
                t.locate(&p(&format!("attention.self.{part}.{what}")), shape)
            };
            layers.push(Layer {
                qkv: [
                    part("query", "weight", &[DIM, DIM])?,
                    part("key", "weight", &[DIM, DIM])?,
                    part("value", "weight", &[DIM, DIM])?,
                ],
                qkv_b: [
                    part("query", "bias", &[DIM])?,
                    part("key", "bias", &[DIM])?,
                    part("value", "bias", &[DIM])?,
                ],
                out: t.locate(&p("attention.output.dense.weight"), &[DIM, DIM])?,
                out_b: vec(&p("attention.output.dense.bias"), DIM)?,
                ln1: (
                    vec(&p("attention.output.LayerNorm.weight"), DIM)?,
                    vec(&p("attention.output.LayerNorm.bias"), DIM)?,
                ),
                up: t.locate(&p("intermediate.dense.weight"), &[FFN, DIM])?,
                up_b: vec(&p("intermediate.dense.bias"), FFN)?,
                down: t.locate(&p("output.dense.weight"), &[DIM, FFN])?,
                down_b: vec(&p("output.dense.bias"), DIM)?,
                ln2: (
                    vec(&p("output.LayerNorm.weight"), DIM)?,
                    vec(&p("output.LayerNorm.bias"), DIM)?,
                ),
            });
        }
        let words = t.locate("embeddings.word_embeddings.weight", &[vocab, DIM])?;
        let positions = t.locate(
            "embeddings.position_embeddings.weight",
            &[MAX_POSITIONS, DIM],
        )?;
        let token_type = t.locate("embeddings.token_type_embeddings.weight", &[2, DIM])?;
        let ln = (
            vec("embeddings.LayerNorm.weight", DIM)?,
            vec("embeddings.LayerNorm.bias", DIM)?,
        );
        drop(t);
        Ok(Encoder {
            tokens,
            words,
            vocab,
            positions,
            token_type,
            ln,
            layers,
            map,
        })
    }

    /// The checked tensor at `span` (checked again: cheap, and no panic path).
    fn f(&self, span: Span) -> Result<&[f32], ModelError> {
        floats(&self.map, span).map_err(bad)
    }

    /// The [rows, cols] matrix at `span`.
    fn matrix(
        &self,
        span: Span,
        rows: usize,
        cols: usize,
    ) -> Result<ArrayView2<'_, f32>, ModelError> {
        ArrayView2::from_shape((rows, cols), self.f(span)?).map_err(|e| bad(e.to_string()))
    }

    /// Normalized embeddings of `texts`, each cut to `max_tokens` word pieces, in order.
    /// Large inputs are split over the available cores.
    pub fn embed(&self, texts: &[&str], max_tokens: usize) -> Result<Vec<Vec<f32>>, ModelError> {
        let max_tokens = max_tokens.clamp(2, MAX_POSITIONS);
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.tokens.encode(t, max_tokens))
            .collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if threads < 2 || ids.len() < 2 * BATCH {
            return ids
                .chunks(BATCH)
                .map(|b| self.batch(b))
                .collect::<Result<Vec<_>, _>>()
                .map(|v| v.concat());
        }
        let per = ids.len().div_ceil(threads);
        let parts: Vec<Result<Vec<Vec<f32>>, ModelError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ids
                .chunks(per)
                .map(|part| {
                    scope.spawn(move || {
                        part.chunks(BATCH)
                            .map(|b| self.batch(b))
                            .collect::<Result<Vec<_>, _>>()
                            .map(|v| v.concat())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut out = Vec::with_capacity(texts.len());
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    /// One batch: all sequences' tokens as rows of one matrix for the linear layers;
    /// attention within each sequence.
    fn batch(&self, seqs: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        let rows: usize = seqs.iter().map(Vec::len).sum();
        let mut x = Array2::<f32>::zeros((rows, DIM));
        let mut row = 0;
        let words = self.f(self.words)?;
        let positions = self.f(self.positions)?;
        let token_type = &self.f(self.token_type)?[..DIM];
        for seq in seqs {
            for (pos, &id) in seq.iter().enumerate() {
                let id = (id as usize).min(self.vocab - 1);
                let word = &words[id * DIM..(id + 1) * DIM];
                let position = &positions[pos * DIM..(pos + 1) * DIM];
                for (k, v) in x.row_mut(row).iter_mut().enumerate() {
                    *v = word[k] + position[k] + token_type[k];
                }
                row += 1;
            }
        }
        let ln = |(g, b): (Span, Span)| Ok::<_, ModelError>((self.f(g)?, self.f(b)?));
        layer_norm(&mut x, ln(self.ln)?);
        let scale = 1.0 / (HEAD_DIM as f32).sqrt();
        for layer in &self.layers {
            let project = |i: usize| {
                Ok::<_, ModelError>(linear(
                    &x,
                    self.matrix(layer.qkv[i], DIM, DIM)?,
                    self.f(layer.qkv_b[i])?,
                ))
            };
            let (query, key, value) = (project(0)?, project(1)?, project(2)?);
            let mut ctx = Array2::<f32>::zeros((rows, DIM));
            let mut start = 0;
            for seq in seqs {
                let end = start + seq.len();
                for h in 0..HEADS {
                    let c = h * HEAD_DIM;
                    let head = s![start..end, c..c + HEAD_DIM];
                    let (q, k, v) = (query.slice(head), key.slice(head), value.slice(head));
                    let mut scores = q.dot(&k.t());
                    for mut r in scores.rows_mut() {
                        let max = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let mut sum = 0.0;
                        for e in r.iter_mut() {
                            *e = ((*e - max) * scale).exp();
                            sum += *e;
                        }
                        r.mapv_inplace(|e| e / sum);
                    }
                    ctx.slice_mut(s![start..end, c..c + HEAD_DIM])
                        .assign(&scores.dot(&v));
                }
                start = end;
            }
            let mut attended = linear(
                &ctx,
                self.matrix(layer.out, DIM, DIM)?,
                self.f(layer.out_b)?,
            );
            attended += &x;
            layer_norm(&mut attended, ln(layer.ln1)?);
            let mut hidden = linear(
                &attended,
                self.matrix(layer.up, FFN, DIM)?,
                self.f(layer.up_b)?,
            );
            hidden.mapv_inplace(gelu);
            let mut out = linear(
                &hidden,
                self.matrix(layer.down, DIM, FFN)?,
                self.f(layer.down_b)?,
            );
            out += &attended;
            layer_norm(&mut out, ln(layer.ln2)?);
            x = out;
        }
        let mut out = Vec::with_capacity(seqs.len());
        let mut start = 0;
        for seq in seqs {
            let end = start + seq.len();
            let mean = x.slice(s![start..end, ..]).mean_axis(Axis(0));
            out.push(normalized(mean.as_ref().map(|m| m.view())));
            start = end;
        }
        Ok(out)
    }
}

/// `x · wᵀ + b`, `w` stored as [out, in] as PyTorch keeps it.
fn linear(x: &Array2<f32>, w: ArrayView2<f32>, b: &[f32]) -> Array2<f32> {
    let mut y = x.dot(&w.t());
    for mut r in y.rows_mut() {
        for (v, b) in r.iter_mut().zip(b) {
            *v += b;
        }
    }
    y
}

fn layer_norm(x: &mut Array2<f32>, (g, b): (&[f32], &[f32])) {
    for mut r in x.rows_mut() {
        let n = r.len() as f32;
        let mean = r.sum() / n;
        let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let inv = 1.0 / (var + LN_EPS).sqrt();
        for ((v, g), b) in r.iter_mut().zip(g).zip(b) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// GELU with the error function (as BERT defines it), erf by Abramowitz and Stegun 7.1.26
/// (error under 1.5e-7).
fn gelu(x: f32) -> f32 {
    let z = x / std::f32::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z.abs());
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let erf = (1.0 - poly * (-z * z).exp()).copysign(z);
    0.5 * x * (1.0 + erf)
}

fn normalized(v: Option<ArrayView1<f32>>) -> Vec<f32> {
    let Some(v) = v else {
        return vec![0.0; DIM];
    };
    let norm = v.dot(&v).sqrt().max(1e-12);
    v.iter().map(|x| x / norm).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_matches_the_error_function_form() {
        // Reference values of 0.5 x (1 + erf(x / sqrt 2)).
        for (x, want) in [
            (-3.0f32, -0.004_049_69),
            (-1.0, -0.158_655_25),
            (0.0, 0.0),
            (0.5, 0.345_731_3),
            (2.0, 1.954_499_7),
        ] {
            assert!((gelu(x) - want).abs() < 1e-5, "gelu({x}) = {}", gelu(x));
        }
    }

    #[test]
    fn layer_norm_centres_and_scales_each_row() {
        let mut x = Array2::from_shape_vec((1, 4), vec![1.0, 2.0, 3.0, 4.0])
            .unwrap_or_else(|e| panic!("{e}"));
        layer_norm(&mut x, (&[1.0; 4], &[0.0; 4]));
        assert!(x.sum().abs() < 1e-5);
        assert!((x.mapv(|v| v * v).sum() / 4.0 - 1.0).abs() < 1e-4);
    }
}
