//! The search model: all-MiniLM-L6-v2, a 6-layer sentence encoder (22.7M parameters,
//! 384-dimensional mean-pooled, normalized embeddings), run in-process on the CPU. It
//! turns a query and each tool's text into vectors whose cosine says how close their
//! meanings are, so "hop over to another branch" finds `git_checkout`.
//!
//! Only the transformer layers (42 MB) are read into memory when the model loads; rows of
//! the 47 MB word-embedding table are read from the file as tokens need them.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ndarray::{Array2, ArrayView1, Axis, s};

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

struct Layer {
    /// Query, key and value projections stacked: [3 * DIM, DIM].
    qkv: Array2<f32>,
    qkv_b: Vec<f32>,
    out: Array2<f32>,
    out_b: Vec<f32>,
    ln1: (Vec<f32>, Vec<f32>),
    up: Array2<f32>,
    up_b: Vec<f32>,
    down: Array2<f32>,
    down_b: Vec<f32>,
    ln2: (Vec<f32>, Vec<f32>),
}

/// A loaded encoder: tokenizer, weights, and the open weights file for embedding rows.
pub struct Encoder {
    tokens: WordPiece,
    file: File,
    /// File offset of the word-embedding table.
    words_at: u64,
    vocab: usize,
    positions: Array2<f32>,
    token_type: Vec<f32>,
    ln: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

struct Tensors {
    header: serde_json::Map<String, serde_json::Value>,
    data_at: u64,
}

impl Tensors {
    fn read(file: &File) -> Result<Tensors, ModelError> {
        let io = |source| ModelError::Io {
            file: "model.safetensors",
            source,
        };
        let mut len = [0u8; 8];
        file.read_exact_at(&mut len, 0).map_err(io)?;
        let len = u64::from_le_bytes(len);
        if len > MAX_HEADER {
            return Err(bad(format!("a {len}-byte header")));
        }
        let mut header = vec![0u8; len as usize];
        file.read_exact_at(&mut header, 8).map_err(io)?;
        let header = serde_json::from_slice(&header).map_err(|e| bad(e.to_string()))?;
        Ok(Tensors {
            header,
            data_at: 8 + len,
        })
    }

    /// Where `name`'s f32 data is, checked against `shape`.
    fn locate(&self, name: &str, shape: &[usize]) -> Result<(u64, usize), ModelError> {
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
        let offsets: Vec<u64> = t["data_offsets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_u64)
            .collect();
        let count: usize = shape.iter().product();
        match offsets[..] {
            [start, end] if end.checked_sub(start) == Some(count as u64 * 4) => {
                Ok((self.data_at + start, count))
            }
            _ => Err(bad(format!("{name} has offsets {offsets:?}"))),
        }
    }

    fn load(&self, file: &File, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
        let (at, count) = self.locate(name, shape)?;
        let mut bytes = vec![0u8; count * 4];
        file.read_exact_at(&mut bytes, at)
            .map_err(|source| ModelError::Io {
                file: "model.safetensors",
                source,
            })?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    fn matrix(
        &self,
        file: &File,
        name: &str,
        rows: usize,
        cols: usize,
    ) -> Result<Array2<f32>, ModelError> {
        let v = self.load(file, name, &[rows, cols])?;
        Array2::from_shape_vec((rows, cols), v).map_err(|e| bad(e.to_string()))
    }
}

fn bad(what: String) -> ModelError {
    ModelError::Format("model.safetensors", what)
}

impl Encoder {
    /// Loads `vocab.txt` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<Encoder, ModelError> {
        let vocab_text =
            std::fs::read_to_string(dir.join("vocab.txt")).map_err(|source| ModelError::Io {
                file: "vocab.txt",
                source,
            })?;
        let tokens = WordPiece::new(&vocab_text)
            .ok_or_else(|| ModelError::Format("vocab.txt", "no [CLS], [SEP] or [UNK]".into()))?;
        let file = File::open(dir.join("model.safetensors")).map_err(|source| ModelError::Io {
            file: "model.safetensors",
            source,
        })?;
        let t = Tensors::read(&file)?;
        let vocab = tokens.len();
        let (words_at, _) = t.locate("embeddings.word_embeddings.weight", &[vocab, DIM])?;
        let vec = |name: &str, n: usize| t.load(&file, name, &[n]);
        let mut layers = Vec::with_capacity(LAYERS);
        for l in 0..LAYERS {
            let p = |n: &str| format!("encoder.layer.{l}.{n}");
            let mut qkv = Vec::with_capacity(3 * DIM * DIM);
            let mut qkv_b = Vec::with_capacity(3 * DIM);
            for part in ["query", "key", "value"] {
                qkv.extend(t.load(
                    &file,
                    &p(&format!("attention.self.{part}.weight")),
                    &[DIM, DIM],
                )?);
                qkv_b.extend(vec(&p(&format!("attention.self.{part}.bias")), DIM)?);
            }
            layers.push(Layer {
                qkv: Array2::from_shape_vec((3 * DIM, DIM), qkv).map_err(|e| bad(e.to_string()))?,
                qkv_b,
                out: t.matrix(&file, &p("attention.output.dense.weight"), DIM, DIM)?,
                out_b: vec(&p("attention.output.dense.bias"), DIM)?,
                ln1: (
                    vec(&p("attention.output.LayerNorm.weight"), DIM)?,
                    vec(&p("attention.output.LayerNorm.bias"), DIM)?,
                ),
                up: t.matrix(&file, &p("intermediate.dense.weight"), FFN, DIM)?,
                up_b: vec(&p("intermediate.dense.bias"), FFN)?,
                down: t.matrix(&file, &p("output.dense.weight"), DIM, FFN)?,
                down_b: vec(&p("output.dense.bias"), DIM)?,
                ln2: (
                    vec(&p("output.LayerNorm.weight"), DIM)?,
                    vec(&p("output.LayerNorm.bias"), DIM)?,
                ),
            });
        }
        let token_types = t.load(&file, "embeddings.token_type_embeddings.weight", &[2, DIM])?;
        Ok(Encoder {
            positions: t.matrix(
                &file,
                "embeddings.position_embeddings.weight",
                MAX_POSITIONS,
                DIM,
            )?,
            token_type: token_types[..DIM].to_vec(),
            ln: (
                vec("embeddings.LayerNorm.weight", DIM)?,
                vec("embeddings.LayerNorm.bias", DIM)?,
            ),
            tokens,
            file,
            words_at,
            vocab,
            layers,
        })
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
        let mut bytes = vec![0u8; DIM * 4];
        for seq in seqs {
            for (pos, &id) in seq.iter().enumerate() {
                let id = (id as usize).min(self.vocab - 1);
                self.file
                    .read_exact_at(&mut bytes, self.words_at + (id * DIM * 4) as u64)
                    .map_err(|source| ModelError::Io {
                        file: "model.safetensors",
                        source,
                    })?;
                let mut r = x.row_mut(row);
                for (k, b) in bytes.chunks_exact(4).enumerate() {
                    r[k] = f32::from_le_bytes([b[0], b[1], b[2], b[3]])
                        + self.positions[[pos, k]]
                        + self.token_type[k];
                }
                row += 1;
            }
        }
        layer_norm(&mut x, &self.ln);
        let scale = 1.0 / (HEAD_DIM as f32).sqrt();
        for layer in &self.layers {
            let qkv = linear(&x, &layer.qkv, &layer.qkv_b);
            let mut ctx = Array2::<f32>::zeros((rows, DIM));
            let mut start = 0;
            for seq in seqs {
                let end = start + seq.len();
                for h in 0..HEADS {
                    let c = h * HEAD_DIM;
                    let q = qkv.slice(s![start..end, c..c + HEAD_DIM]);
                    let k = qkv.slice(s![start..end, DIM + c..DIM + c + HEAD_DIM]);
                    let v = qkv.slice(s![start..end, 2 * DIM + c..2 * DIM + c + HEAD_DIM]);
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
            let mut attended = linear(&ctx, &layer.out, &layer.out_b);
            attended += &x;
            layer_norm(&mut attended, &layer.ln1);
            let mut hidden = linear(&attended, &layer.up, &layer.up_b);
            hidden.mapv_inplace(gelu);
            let mut out = linear(&hidden, &layer.down, &layer.down_b);
            out += &attended;
            layer_norm(&mut out, &layer.ln2);
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
fn linear(x: &Array2<f32>, w: &Array2<f32>, b: &[f32]) -> Array2<f32> {
    let mut y = x.dot(&w.t());
    for mut r in y.rows_mut() {
        for (v, b) in r.iter_mut().zip(b) {
            *v += b;
        }
    }
    y
}

fn layer_norm(x: &mut Array2<f32>, (g, b): &(Vec<f32>, Vec<f32>)) {
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
        layer_norm(&mut x, &(vec![1.0; 4], vec![0.0; 4]));
        assert!(x.sum().abs() < 1e-5);
        assert!((x.mapv(|v| v * v).sum() / 4.0 - 1.0).abs() < 1e-4);
    }
}
