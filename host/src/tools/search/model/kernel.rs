//! The matrix products of a query's few tokens: `x · wᵀ + b` a weight row at a time (the
//! installed model's f32 rows) or a panel at a time (the bundled model's f16 panels), in
//! kernels chosen at run time for what the processor has (the build targets baseline
//! x86-64).

use ndarray::Array2;

/// Rows up to which [`Encoder::linear`](super::Encoder) takes each weight row's dot
/// products itself: for a query's few tokens a general product spends more in packing
/// the weights (into a fresh buffer, in a new process) than in multiplying.
pub(super) const FEW_ROWS: usize = 24;

/// `x · wᵀ + b` for a few rows of `x`, one weight row at a time (read once, its dot
/// products with every row of `x` taken while it is in cache).
pub(super) fn few_rows(x: &Array2<f32>, ws: &[f32], b: &[f32]) -> Array2<f32> {
    with_kernel(
        x,
        ws,
        b,
        Kernels {
            plain: few_rows_in::<false>,
            #[cfg(target_arch = "x86_64")]
            fma: few_rows_fma,
            #[cfg(target_arch = "x86_64")]
            wide: None,
        },
    )
}

/// A kernel: `(x, its row length, the weights, the biases, y)`.
type Kernel<W> = fn(&[f32], usize, &[W], &[f32], &mut [f32]);
/// A kernel compiled for features the processor may lack.
#[cfg(target_arch = "x86_64")]
type FeatureKernel<W> = unsafe fn(&[f32], usize, &[W], &[f32], &mut [f32]);

/// The forms of one product's kernel.
struct Kernels<W> {
    plain: Kernel<W>,
    /// Compiled for AVX2, FMA and F16C, callable only where the processor has them.
    #[cfg(target_arch = "x86_64")]
    fma: FeatureKernel<W>,
    /// Compiled for AVX-512 (F and VL) besides, callable only where the processor has it.
    #[cfg(target_arch = "x86_64")]
    wide: Option<FeatureKernel<W>>,
}

/// What the processor running us has, of what the kernels can use.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Tier {
    Plain,
    /// AVX2, FMA and F16C.
    Fma,
    /// AVX-512 F and VL besides.
    Wide,
}

/// This processor's [`Tier`] (the standard library caches what it detects).
fn tier() -> Tier {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") && has!("f16c") {
            if has!("avx512f") && has!("avx512vl") {
                return Tier::Wide;
            }
            return Tier::Fma;
        }
    }
    Tier::Plain
}

/// A few rows' product by the best of `kernels` this processor runs, into a fresh [rows
/// of `x`, outputs] matrix.
fn with_kernel<W>(x: &Array2<f32>, ws: &[W], b: &[f32], kernels: Kernels<W>) -> Array2<f32> {
    let mut y = Array2::<f32>::zeros((x.nrows(), b.len()));
    let (Some(xs), Some(ys)) = (x.as_slice(), y.as_slice_mut()) else {
        return y;
    };
    let inner = x.ncols().max(1);
    run(tier(), &kernels, (xs, inner, ws, b, ys));
    y
}

/// Runs the form of `kernels` for `tier`, which must be this processor's or below (the
/// tests run each form the processor has).
fn run<W>(
    tier: Tier,
    kernels: &Kernels<W>,
    (xs, inner, ws, b, ys): (&[f32], usize, &[W], &[f32], &mut [f32]),
) {
    #[cfg(target_arch = "x86_64")]
    {
        let best = match (tier, kernels.wide) {
            (Tier::Wide, Some(wide)) => Some(wide),
            (Tier::Wide | Tier::Fma, _) => Some(kernels.fma),
            (Tier::Plain, _) => None,
        };
        if let Some(kernel) = best {
            debug_assert!(tier <= self::tier());
            // SAFETY: `kernel` is one of this file's `target_feature` functions, whose
            // only requirement is that the processor has the features they enable:
            // `tier` is at most this processor's (`tier()`), and the wide kernels are
            // chosen only at `Tier::Wide` (AVX-512 F and VL, AVX2, FMA, F16C), the
            // others at `Tier::Fma` or above (AVX2, FMA, F16C).
            #[allow(unsafe_code)]
            unsafe {
                kernel(xs, inner, ws, b, ys)
            };
            return;
        }
    }
    let _ = tier;
    (kernels.plain)(xs, inner, ws, b, ys);
}

/// Rows of a weight matrix in one panel of the bundled model's layout: three vectors of
/// eight outputs (with AVX-512, one of sixteen and one of eight).
pub(super) const PANEL: usize = 24;
/// Rows of `x` one AVX2 pass takes: with [`PANEL`], nine sums, three widened weights and
/// a broadcast input in the sixteen vector registers (four rows spilled a sum to memory).
const ROWS_AT_ONCE: usize = 3;
/// Rows of `x` one AVX-512 pass takes: 24 sums (two vectors a row), two widened weights
/// and the broadcast inputs in the 32 vector registers, so a query of up to 12 word
/// pieces reads and widens each weight once.
#[cfg(target_arch = "x86_64")]
const WIDE_ROWS: usize = 12;

/// `x · wᵀ + b` for a few rows of `x`, `w` stored in panels of f16
/// (`Expander::take_paneled`): for each input, its value times its weights to a panel's
/// outputs (widened to f32) is added to their sums, for several rows of `x` at a time.
/// No horizontal sums, and the weights are read in order, half the bytes of f32 (a panel
/// at a time, from cache after its first pass).
pub(super) fn paneled_rows(x: &Array2<f32>, wh: &[u16], b: &[f32]) -> Array2<f32> {
    with_kernel(x, wh, b, PANELED)
}

/// The paneled product's kernels.
const PANELED: Kernels<u16> = Kernels {
    plain: paneled_in::<false>,
    #[cfg(target_arch = "x86_64")]
    fma: paneled_fma,
    #[cfg(target_arch = "x86_64")]
    wide: Some(paneled_wide),
};

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
fn paneled_fma(xs: &[f32], inner: usize, wh: &[u16], b: &[f32], ys: &mut [f32]) {
    paneled_in::<true>(xs, inner, wh, b, ys);
}

/// With `FMA`, inlined only into [`paneled_fma`] (the processor has AVX2, FMA and F16C).
#[inline(always)]
fn paneled_in<const FMA: bool>(xs: &[f32], inner: usize, wh: &[u16], b: &[f32], ys: &mut [f32]) {
    let out = b.len();
    let rows = xs.len() / inner;
    for (p, panel) in wh.chunks_exact(inner * PANEL).enumerate() {
        let mut t = 0;
        while t + ROWS_AT_ONCE <= rows {
            one_panel::<FMA, ROWS_AT_ONCE>(xs, inner, panel, (t, p * PANEL, out), ys);
            t += ROWS_AT_ONCE;
        }
        while t < rows {
            one_panel::<FMA, 1>(xs, inner, panel, (t, p * PANEL, out), ys);
            t += 1;
        }
    }
    add_biases(ys, b);
}

/// Adds `b` to each row of `ys`.
#[inline(always)]
fn add_biases(ys: &mut [f32], b: &[f32]) {
    for row in ys.chunks_exact_mut(b.len().max(1)) {
        for (y, b) in row.iter_mut().zip(b) {
            *y += b;
        }
    }
}

/// The paneled product with AVX-512: up to [`WIDE_ROWS`] rows of `x` a pass.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma,f16c")]
fn paneled_wide(xs: &[f32], inner: usize, wh: &[u16], b: &[f32], ys: &mut [f32]) {
    let rows = xs.len() / inner;
    let mut t = 0;
    while t < rows {
        let n = (rows - t).min(WIDE_ROWS);
        let at = (t, b.len());
        match n {
            12.. => wide_rows::<12>(xs, inner, wh, at, ys),
            11 => wide_rows::<11>(xs, inner, wh, at, ys),
            10 => wide_rows::<10>(xs, inner, wh, at, ys),
            9 => wide_rows::<9>(xs, inner, wh, at, ys),
            8 => wide_rows::<8>(xs, inner, wh, at, ys),
            7 => wide_rows::<7>(xs, inner, wh, at, ys),
            6 => wide_rows::<6>(xs, inner, wh, at, ys),
            5 => wide_rows::<5>(xs, inner, wh, at, ys),
            4 => wide_rows::<4>(xs, inner, wh, at, ys),
            3 => wide_rows::<3>(xs, inner, wh, at, ys),
            2 => wide_rows::<2>(xs, inner, wh, at, ys),
            _ => wide_rows::<1>(xs, inner, wh, at, ys),
        }
        t += n;
    }
    add_biases(ys, b);
}

/// Rows `t..t + R` of `x · wᵀ` (of `out` outputs) into `ys`, panel by panel. `x`'s rows
/// are interleaved first, each input's `R` values side by side, so the inner loop reads
/// them in order and unchecked.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma,f16c")]
#[inline]
fn wide_rows<const R: usize>(
    xs: &[f32],
    inner: usize,
    wh: &[u16],
    (t, out): (usize, usize),
    ys: &mut [f32],
) {
    let Some(xs) = xs.get(t * inner..(t + R) * inner) else {
        return;
    };
    let xt: Vec<[f32; R]> = (0..inner)
        .map(|k| std::array::from_fn(|r| xs[r * inner + k]))
        .collect();
    for (p, panel) in wh.chunks_exact(inner * PANEL).enumerate() {
        wide_panel::<R>(&xt, panel, (t, p * PANEL, out), ys);
    }
}

/// [`one_panel`] with AVX-512: each row's 24 sums in a 16-wide and an 8-wide vector.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma,f16c")]
#[inline]
fn wide_panel<const R: usize>(
    xt: &[[f32; R]],
    panel: &[u16],
    (t, j, out): (usize, usize, usize),
    ys: &mut [f32],
) {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_fmadd_ps, _mm256_loadu_si256,
        _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps, _mm512_cvtph_ps, _mm512_fmadd_ps,
        _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
    };
    let mut low = [_mm512_setzero_ps(); R];
    let mut high = [_mm256_setzero_ps(); R];
    for (h, x) in panel.chunks_exact(PANEL).zip(xt) {
        let (h16, h8) = h.split_at(16);
        // SAFETY: `h16` is 16 u16s (32 readable bytes), `h8` 8 (16 bytes), both loaded
        // unaligned; AVX and AVX-512 are there (this function's features).
        #[allow(unsafe_code)]
        let (wl, wh) = unsafe {
            (
                _mm512_cvtph_ps(_mm256_loadu_si256(h16.as_ptr().cast::<__m256i>())),
                _mm256_cvtph_ps(_mm_loadu_si128(h8.as_ptr().cast::<__m128i>())),
            )
        };
        for r in 0..R {
            low[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r]), wl, low[r]);
            high[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[r]), wh, high[r]);
        }
    }
    for r in 0..R {
        let at = (t + r) * out + j;
        if let Some(y) = ys.get_mut(at..at + PANEL) {
            let (y16, y8) = y.split_at_mut(16);
            // SAFETY: `y16` is 16 f32s (64 writable bytes), `y8` 8 (32 bytes), both
            // stored unaligned; AVX and AVX-512 are there (this function's features).
            #[allow(unsafe_code)]
            unsafe {
                _mm512_storeu_ps(y16.as_mut_ptr(), low[r]);
                _mm256_storeu_ps(y8.as_mut_ptr(), high[r]);
            }
        }
    }
}

/// Outputs `j..j + PANEL` (of `out`) of rows `t..t + R` of `x`, their sums kept in
/// registers across every input.
#[inline(always)]
fn one_panel<const FMA: bool, const R: usize>(
    xs: &[f32],
    inner: usize,
    panel: &[u16],
    (t, j, out): (usize, usize, usize),
    ys: &mut [f32],
) {
    let Some(xs) = xs.get(t * inner..(t + R) * inner) else {
        return;
    };
    let mut sums = [[0f32; PANEL]; R];
    for (k, h) in panel.chunks_exact(PANEL).enumerate().take(inner) {
        let w = widen::<FMA>(h);
        for (r, sum) in sums.iter_mut().enumerate() {
            let x = xs[r * inner + k];
            for (s, &w) in sum.iter_mut().zip(&w) {
                *s = if FMA { x.mul_add(w, *s) } else { *s + x * w };
            }
        }
    }
    for (r, sum) in sums.iter().enumerate() {
        let at = (t + r) * out + j;
        if let Some(y) = ys.get_mut(at..at + PANEL) {
            y.copy_from_slice(sum);
        }
    }
}

/// One input's [`PANEL`] f16 weights as f32: by F16C with `FAST` (only ever inlined
/// where the processor has it), else one at a time.
#[inline(always)]
fn widen<const FAST: bool>(h: &[u16]) -> [f32; PANEL] {
    let mut w = [0f32; PANEL];
    #[cfg(target_arch = "x86_64")]
    if FAST && h.len() >= PANEL {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_storeu_ps};
        for (to, from) in w.chunks_exact_mut(8).zip(h.chunks_exact(8)) {
            // SAFETY: `from` is 8 u16s (16 readable bytes, loaded unaligned), `to` 8
            // f32s (32 writable bytes, stored unaligned); F16C and AVX are there:
            // `FAST` is true only in `paneled_fma`'s body, run after the check.
            #[allow(unsafe_code)]
            unsafe {
                let v = _mm256_cvtph_ps(_mm_loadu_si128(from.as_ptr().cast::<__m128i>()));
                _mm256_storeu_ps(to.as_mut_ptr(), v);
            }
        }
        return w;
    }
    for (to, &from) in w.iter_mut().zip(h) {
        *to = half::f16::from_bits(from).to_f32();
    }
    w
}

/// A paneled [rows, cols] matrix of f16 laid out as its transpose in f32, [cols, rows].
pub(super) fn unpaneled(wh: &[u16], rows: usize, cols: usize) -> Vec<f32> {
    let mut wt = vec![0f32; rows * cols];
    for (p, panel) in wh.chunks_exact(cols * PANEL).enumerate() {
        for (k, h) in panel.chunks_exact(PANEL).enumerate() {
            if let Some(to) = wt.get_mut(k * rows + p * PANEL..k * rows + (p + 1) * PANEL) {
                to.copy_from_slice(&widen::<false>(h));
            }
        }
    }
    wt
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
fn few_rows_fma(xs: &[f32], inner: usize, ws: &[f32], b: &[f32], ys: &mut [f32]) {
    few_rows_in::<true>(xs, inner, ws, b, ys);
}

#[inline(always)]
fn few_rows_in<const FMA: bool>(xs: &[f32], inner: usize, ws: &[f32], b: &[f32], ys: &mut [f32]) {
    let out = b.len();
    for (j, (w, b)) in ws.chunks_exact(inner).zip(b).enumerate() {
        for (t, x) in xs.chunks_exact(inner).enumerate() {
            if let Some(y) = ys.get_mut(t * out + j) {
                *y = dot::<FMA>(x, w) + b;
            }
        }
    }
}

/// A dot product (the ranking's cosine of normalized vectors too).
pub(in crate::tools::search) fn dot_product(a: &[f32], b: &[f32]) -> f32 {
    dot::<false>(a, b)
}

/// A dot product in sixteen lanes, which the compiler keeps in vector registers.
#[inline(always)]
fn dot<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    for (x, y) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
        for k in 0..16 {
            lanes[k] = if FMA {
                x[k].mul_add(y[k], lanes[k])
            } else {
                lanes[k] + x[k] * y[k]
            };
        }
    }
    let tail: f32 = a
        .chunks_exact(16)
        .remainder()
        .iter()
        .zip(b.chunks_exact(16).remainder())
        .map(|(x, y)| x * y)
        .sum();
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paneled f16 kernel in each form this processor runs (plain, AVX2 and FMA,
    /// AVX-512), and the panels laid out again for the general product, compute what
    /// the plain row-at-a-time kernel does in f32, for one row of `x` to more than two
    /// passes' worth.
    #[test]
    fn paneled_weights_multiply_as_the_plain_ones() {
        let (rows, cols) = (3 * PANEL, 40);
        // Weights f16 holds exactly, so the f32 kernel's result is the one to meet.
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
            .collect();
        let mut paneled = vec![0u16; rows * cols];
        for r in 0..rows {
            for k in 0..cols {
                let h = half::f16::from_f32(w[r * cols + k]).to_bits();
                paneled[r / PANEL * cols * PANEL + k * PANEL + r % PANEL] = h;
            }
        }
        let b: Vec<f32> = (0..rows).map(|j| j as f32 / 10.0).collect();
        let tiers = [Tier::Plain, Tier::Fma, Tier::Wide];
        let tiers: Vec<Tier> = tiers.into_iter().filter(|&t| t <= tier()).collect();
        for n in 1..=2 * 12 + 1 {
            let x = Array2::from_shape_fn((n, cols), |(t, k)| {
                ((t * 7 + k * 3) % 11) as f32 / 11.0 - 0.5
            });
            let want = few_rows(&x, &w, &b);
            let want = want.as_slice().unwrap_or_default();
            let got = paneled_rows(&x, &paneled, &b);
            assert_eq!(got.dim(), (n, rows));
            assert_eq!(got.as_slice().unwrap_or_default().len(), want.len());
            for &t in &tiers {
                let mut got = vec![0f32; n * rows];
                let xs = x.as_slice().unwrap_or_default();
                run(t, &PANELED, (xs, cols, &paneled, &b, &mut got));
                for (g, w) in got.iter().zip(want) {
                    assert!((g - w).abs() < 1e-4, "{t:?}, {n} rows: {g} against {w}");
                }
            }
        }
        println!("paneled kernels checked on this processor: {tiers:?}");
        let wt = unpaneled(&paneled, rows, cols);
        for r in 0..rows {
            for k in 0..cols {
                assert_eq!(wt[k * rows + r], w[r * cols + k]);
            }
        }
    }
}
