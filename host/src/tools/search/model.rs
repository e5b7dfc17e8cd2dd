//! The search models: BERT-style sentence encoders (384-dimensional mean-pooled,
//! normalized embeddings) run in-process on the CPU. They turn a query and each tool's
//! text into vectors whose cosine says how close their meanings are, so "hop over to
//! another branch" finds `git_checkout`.
//!
//! One model, two forms: all-MiniLM-L6-v2 (6 layers, 22.7M parameters) bundled in 4 bits
//! (12.8 MB compiled in, so search is semantic on a fresh machine) and installed in f32
//! (91 MB, fetched by `edgar search-model install`). `model/weights.rs` reads either; the
//! forward pass here does not know which.

use std::fs::File;
use std::path::Path;

use memmap2::MmapOptions;
use ndarray::{Array2, ArrayView1, ArrayView2, Axis, s};

use super::wordpiece::WordPiece;

mod kernel;
mod weights;

pub(super) use kernel::dot_product;
use kernel::{FEW_ROWS, PANEL, few_rows, paneled_rows, unpaneled};
use weights::{Expander, Packed, Span, Store, Tensors, bad};

pub const DIM: usize = 384;
/// The most layers a model file may have (BERT-base has 12).
const MAX_LAYERS: usize = 24;
const HEADS: usize = 12;
const HEAD_DIM: usize = DIM / HEADS;
const FFN: usize = 1536;
const MAX_POSITIONS: usize = 512;
const LN_EPS: f32 = 1e-12;
/// Sequences packed into one batch (the linear layers run over all their tokens at once).
const BATCH: usize = 32;

/// The bundled model (`host/assets/minilm-l6-q4/README.md` says where it comes from and
/// how to make it again).
static BUNDLED: &[u8] = include_bytes!("../../../assets/minilm-l6-q4/model.safetensors");
/// Names the bundled model in cache keys: its weights' SHA-256, shortened (a test checks).
pub const BUNDLED_ID: &str = "minilm-l6-q4-8c50991d";

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
    /// Query, key and value projections, each [DIM, DIM], with their biases.
    qkv: [Matrix; 3],
    qkv_b: [Span; 3],
    out: Matrix,
    out_b: Span,
    ln1: (Span, Span),
    up: Matrix,
    up_b: Span,
    down: Matrix,
    down_b: Span,
    ln2: (Span, Span),
}

/// A matrix of f32s in the store: where, and [rows, cols].
#[derive(Clone, Copy)]
struct Matrix {
    span: Span,
    rows: usize,
    cols: usize,
    /// Stored in panels of [`PANEL`] rows (the bundled model's weights; see
    /// `Expander::take_paneled`), else as [rows, cols].
    paneled: bool,
}

/// The word-embedding table: in the store, or packed in the binary.
enum Words {
    Floats(Matrix),
    Packed(Packed),
}

/// A loaded encoder: tokenizer, weights and where each tensor is in them.
pub struct Encoder {
    tokens: WordPiece,
    store: Store,
    words: Words,
    positions: Span,
    token_type: Span,
    ln: (Span, Span),
    layers: Vec<Layer>,
}

/// How a loader gets a tensor's f32s in the store, by name and shape.
trait Source {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Span, ModelError>;
    fn has(&self, name: &str) -> bool;
    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Matrix, ModelError> {
        Ok(Matrix {
            span: self.tensor(name, &[rows, cols])?,
            rows,
            cols,
            paneled: false,
        })
    }
}

impl Source for Tensors<'_> {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Span, ModelError> {
        self.locate(name, shape)
    }
    fn has(&self, name: &str) -> bool {
        Tensors::has(self, name)
    }
}

impl Source for Expander {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Span, ModelError> {
        self.take(name, shape)
    }
    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Matrix, ModelError> {
        Ok(Matrix {
            span: self.take_paneled(name, (rows, cols), PANEL)?,
            rows,
            cols,
            paneled: true,
        })
    }
    fn has(&self, name: &str) -> bool {
        Expander::has(self, name)
    }
}

/// The encoder's layers, as many as the file has (at least one).
fn layers(src: &mut dyn Source) -> Result<Vec<Layer>, ModelError> {
    let mut layers = Vec::new();
    while layers.len() < MAX_LAYERS {
        let l = layers.len();
        let p = |n: &str| format!("encoder.layer.{l}.{n}");
        if !src.has(&p("attention.self.query.weight")) {
            break;
        }
        let mut m = |n: &str, rows: usize, cols: usize| src.matrix(&p(n), rows, cols);
        let qkv = [
            m("attention.self.query.weight", DIM, DIM)?,
            m("attention.self.key.weight", DIM, DIM)?,
            m("attention.self.value.weight", DIM, DIM)?,
        ];
        let out = m("attention.output.dense.weight", DIM, DIM)?;
        let up = m("intermediate.dense.weight", FFN, DIM)?;
        let down = m("output.dense.weight", DIM, FFN)?;
        let mut t = |n: &str, shape: &[usize]| src.tensor(&p(n), shape);
        layers.push(Layer {
            qkv,
            qkv_b: [
                t("attention.self.query.bias", &[DIM])?,
                t("attention.self.key.bias", &[DIM])?,
                t("attention.self.value.bias", &[DIM])?,
            ],
            out,
            out_b: t("attention.output.dense.bias", &[DIM])?,
            ln1: (
                t("attention.output.LayerNorm.weight", &[DIM])?,
                t("attention.output.LayerNorm.bias", &[DIM])?,
            ),
            up,
            up_b: t("intermediate.dense.bias", &[FFN])?,
            down,
            down_b: t("output.dense.bias", &[DIM])?,
            ln2: (
                t("output.LayerNorm.weight", &[DIM])?,
                t("output.LayerNorm.bias", &[DIM])?,
            ),
        });
    }
    if layers.is_empty() {
        return Err(bad("no encoder layers".into()));
    }
    Ok(layers)
}

/// The embeddings' positions, token type and norm.
fn embeddings(src: &mut dyn Source) -> Result<(Span, Span, (Span, Span)), ModelError> {
    Ok((
        src.tensor(
            "embeddings.position_embeddings.weight",
            &[MAX_POSITIONS, DIM],
        )?,
        src.tensor("embeddings.token_type_embeddings.weight", &[2, DIM])?,
        (
            src.tensor("embeddings.LayerNorm.weight", &[DIM])?,
            src.tensor("embeddings.LayerNorm.bias", &[DIM])?,
        ),
    ))
}

fn vocabulary(text: &'static str) -> Result<WordPiece, ModelError> {
    WordPiece::new(text)
        .ok_or_else(|| ModelError::Format("vocab.txt", "no [CLS], [SEP] or [UNK]".into()))
}

impl Encoder {
    /// Loads `vocab.txt` and maps `model.safetensors` from `dir` (the installed model),
    /// checking every tensor it will use. A vocabulary other than the bundled one is
    /// kept for the process (231 kB; an encoder is loaded once per process).
    pub fn load(dir: &Path) -> Result<Encoder, ModelError> {
        let vocab_text =
            std::fs::read_to_string(dir.join("vocab.txt")).map_err(|source| ModelError::Io {
                file: "vocab.txt",
                source,
            })?;
        let tokens = if vocab_text == super::wordpiece::BUNDLED {
            vocabulary(super::wordpiece::BUNDLED)?
        } else {
            vocabulary(Box::leak(vocab_text.into_boxed_str()))?
        };
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
        let mut t = Tensors::read(&map)?;
        let vocab = tokens.len();
        let layers = layers(&mut t)?;
        let words = t.matrix("embeddings.word_embeddings.weight", vocab, DIM)?;
        let (positions, token_type, ln) = embeddings(&mut t)?;
        drop(t);
        Ok(Encoder {
            tokens,
            store: Store::Mapped(map),
            words: Words::Floats(words),
            positions,
            token_type,
            ln,
            layers,
        })
    }

    /// The bundled model: its word table left packed, its other tensors expanded from
    /// 4 bits. The expansion (10.8M values, ~25 ms) is kept at `kept` and mapped from
    /// there by later processes; without `kept`, or when that file is not right, it is
    /// done again.
    pub fn bundled(kept: Option<&Path>) -> Result<Encoder, ModelError> {
        let tokens = vocabulary(super::wordpiece::BUNDLED)?;
        let parts = |x: &mut Expander| {
            let words = x.keep_packed("embeddings.word_embeddings.weight", tokens.len(), DIM)?;
            let layers = layers(x)?;
            let (positions, token_type, ln) = embeddings(x)?;
            Ok::<_, ModelError>((words, layers, positions, token_type, ln))
        };
        let mut plan = Expander::plan(BUNDLED)?;
        let planned = parts(&mut plan)?;
        let (store, (words, layers, positions, token_type, ln)) =
            match kept.and_then(|path| plan.map_kept(path, BUNDLED_ID)) {
                Some(store) => (store, planned),
                None => {
                    let mut x = Expander::expand(BUNDLED)?;
                    let parts = parts(&mut x)?;
                    let store = x.finish();
                    if let Some(path) = kept {
                        store.keep(path, BUNDLED_ID);
                    }
                    (store, parts)
                }
            };
        Ok(Encoder {
            tokens,
            store,
            words: Words::Packed(words),
            positions,
            token_type,
            ln,
            layers,
        })
    }

    /// How many layers the model runs.
    pub fn depth(&self) -> usize {
        self.layers.len()
    }

    /// The checked tensor at `span` (checked again: cheap, and no panic path).
    fn f(&self, span: Span) -> Result<&[f32], ModelError> {
        self.store.floats(span)
    }

    /// Writes word `id`'s embedding into `out` (an id past the table: its last row).
    fn word(&self, id: u32, out: &mut [f32]) -> Result<(), ModelError> {
        match &self.words {
            Words::Floats(m) => {
                let i = (id as usize).min(m.rows.saturating_sub(1));
                let row = self.f(m.span)?.get(i * m.cols..(i + 1) * m.cols);
                out.copy_from_slice(row.ok_or_else(|| bad("a short word table".into()))?);
            }
            Words::Packed(table) => table.row((id as usize).min(table.rows - 1), out),
        }
        Ok(())
    }

    /// `x · wᵀ + b`, `w` stored as [out, in] as PyTorch keeps it. A few rows (a query)
    /// are multiplied a weight row at a time; more by a general product.
    fn linear(&self, x: &Array2<f32>, w: &Matrix, b: Span) -> Result<Array2<f32>, ModelError> {
        let b = self.f(b)?;
        if w.paneled {
            let wh = self.store.halves(w.span)?;
            if x.nrows() <= FEW_ROWS {
                return Ok(paneled_rows(x, wh, b));
            }
        } else if x.nrows() <= FEW_ROWS {
            return Ok(few_rows(x, self.f(w.span)?, b));
        }
        let mut y = if w.paneled {
            // Many rows: the panels laid out again as wᵀ in f32, [cols, rows], for the
            // general product (a copy of the matrix, small beside the product).
            let wt = unpaneled(self.store.halves(w.span)?, w.rows, w.cols);
            let wt = ArrayView2::from_shape((w.cols, w.rows), &wt);
            x.dot(&wt.map_err(|e| bad(e.to_string()))?)
        } else {
            let w = ArrayView2::from_shape((w.rows, w.cols), self.f(w.span)?);
            x.dot(&w.map_err(|e| bad(e.to_string()))?.t())
        };
        for mut r in y.rows_mut() {
            for (v, b) in r.iter_mut().zip(b) {
                *v += b;
            }
        }
        Ok(y)
    }

    /// Normalized embeddings of `texts`, each cut to `max_tokens` word pieces, in order.
    /// Large inputs are split over the available cores.
    pub fn embed(&self, texts: &[&str], max_tokens: usize) -> Result<Vec<Vec<f32>>, ModelError> {
        let max_tokens = max_tokens.clamp(2, MAX_POSITIONS);
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.tokens.encode(t, max_tokens))
            .collect();
        // (Asking for the cores reads cgroup files: not for a query.)
        let threads = if ids.len() < 2 * BATCH {
            1
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        };
        if threads < 2 {
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
        let positions = self.f(self.positions)?;
        let token_type = &self.f(self.token_type)?[..DIM];
        let mut word = [0f32; DIM];
        for seq in seqs {
            for (pos, &id) in seq.iter().enumerate() {
                self.word(id, &mut word)?;
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
            let project = |i: usize| self.linear(&x, &layer.qkv[i], layer.qkv_b[i]);
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
            let mut attended = self.linear(&ctx, &layer.out, layer.out_b)?;
            attended += &x;
            layer_norm(&mut attended, ln(layer.ln1)?);
            let mut hidden = self.linear(&attended, &layer.up, layer.up_b)?;
            hidden.mapv_inplace(gelu);
            let mut out = self.linear(&hidden, &layer.down, layer.down_b)?;
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

    /// The bundled 4-bit encoder stays close to the same model in f32: the reference
    /// vectors are the f32 weights' (the installed form, which
    /// `tests/it/search_model.rs` checks against sentence-transformers to 2e-4), whole.
    #[test]
    fn the_bundled_encoder_stays_close_to_the_f32_model() {
        let encoder = Encoder::bundled(None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(encoder.depth(), 6);
        let reference: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../tests/fixtures/minilm-l6-reference.json"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let texts: Vec<&str> = reference["texts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str())
            .collect();
        assert_eq!(texts.len(), 4);
        let got = encoder.embed(&texts, 128).unwrap_or_else(|e| panic!("{e}"));
        let want: Vec<Vec<f32>> = reference["embeddings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                r.as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_f64().map(|v| v as f32))
                    .collect()
            })
            .collect();
        assert_eq!(want.len(), texts.len());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(w.len(), DIM);
            let cos: f32 = g.iter().zip(w).map(|(a, b)| a * b).sum();
            assert!(cos > 0.94, "cosine with the f32 model {cos}");
        }
        // Many rows take the general product, a few the row-at-a-time one: same vectors.
        let many: Vec<&str> = std::iter::repeat_n(texts[0], 40).collect();
        let batch = encoder.embed(&many, 128).unwrap_or_else(|e| panic!("{e}"));
        for (a, b) in batch[39].iter().zip(&got[0]) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn the_bundled_id_names_the_bundled_weights() {
        use sha2::{Digest, Sha256};
        let digest = crate::digest::hex(&Sha256::digest(BUNDLED));
        assert_eq!(BUNDLED_ID, format!("minilm-l6-q4-{}", &digest[..8]));
    }

    /// The expansion is kept and mapped by later loads; a kept file that is damaged or of
    /// another model is not used, and is written again.
    #[test]
    fn the_kept_expansion_is_reused_and_a_damaged_one_is_not() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let kept = dir.path().join("search/expanded.f32");
        let embed = |e: &Encoder| {
            e.embed(&["open a pull request"], 128)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let fresh = embed(&Encoder::bundled(None).unwrap_or_else(|e| panic!("{e}")));
        let first = Encoder::bundled(Some(&kept)).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(first.store, Store::Owned(_)));
        assert_eq!(embed(&first), fresh);
        let bytes = std::fs::read(&kept).unwrap_or_else(|e| panic!("{e}"));
        let mapped = Encoder::bundled(Some(&kept)).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(mapped.store, Store::Mapped(_)));
        assert_eq!(embed(&mapped), fresh);
        let mut other = bytes.clone();
        other[16] ^= 1; // another model's id
        for damaged in [&bytes[..bytes.len() - 4], &other[..], b"edgkept1"] {
            std::fs::write(&kept, damaged).unwrap_or_else(|e| panic!("{e}"));
            let e = Encoder::bundled(Some(&kept)).unwrap_or_else(|e| panic!("{e}"));
            assert!(matches!(e.store, Store::Owned(_)));
            assert_eq!(embed(&e), fresh);
            assert_eq!(
                std::fs::read(&kept).ok(),
                Some(bytes.clone()),
                "written again"
            );
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
