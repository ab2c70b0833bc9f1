//! Single-precision matrix product `C = A * B` (then a bias and an activation, fused into
//! the store) with operands that may be packed once ahead of time.
//!
//! Convolution and FullyConnected weights are constants, so the session packs each of them
//! once ([`PackedA`] for a convolution's `[M, C*kh*kw]` weights, [`PackedB`] for a
//! FullyConnected's `W^T`) into the panel layout the micro-kernel reads; at run time only
//! the activations are packed. (matrixmultiply, used before, repacked the weights on every
//! call: about half of EfficientNet-Lite0's sgemm time at batch 1.)
//!
//! Layout and blocking (BLIS's loop order):
//! - the AVX2 micro-kernel computes a 6 x 16 tile of `C`: twelve AVX2 accumulators
//!   (6 rows x two 8-float vectors), two loads of `B` and one broadcast of `A` per step of
//!   `k`, 15 of the 16 vector registers;
//! - `A` is packed in panels of `mr` rows (`[k][mr]` per panel): 8 when the AVX-512 kernel
//!   runs, 6 otherwise ([`panel_rows`]); `B` in panels of `NR` columns (`[k][NR]` per
//!   panel); both zero-padded to whole panels, so the kernel has no edge cases (a partial
//!   tile is stored with masks, AVX-512, or through a stack tile);
//! - `KC` = 256: one `B` micro-panel (256 x 16 floats, 16 KiB) stays in the 48 KiB L1
//!   while the kernel walks the `A` panels of a block; `MC` = 144 rows: an `A` block
//!   (144 x 256 floats, 144 KiB) stays in L2 (2 MiB per core here); `NC` = 1024 columns: a
//!   packed `B` block (256 x 1024 floats, 1 MiB) also fits L2 next to it.
//!
//! The kernel is written three times: with `std::arch` AVX-512 intrinsics (an 8 x 32 tile
//! over one 8-row `A` panel and two adjacent `B` panels, fewer rows for a short `A`; built
//! when the compiler has them, Rust >= 1.89, see build.rs), with AVX2 + FMA intrinsics, and as
//! plain loops the compiler vectorizes for the baseline target ([`Kernel::Portable`]).
//! The widest the CPU has is chosen at run time; tests check each against a naive
//! product. (matrixmultiply 0.3.11 also runs AVX-512 on this machine: with only an AVX2
//! kernel this gemm measured half its speed.) The AVX-512 panels are 8 rows, not 6 (its
//! earlier 12 x 32 tile over two 6-row panels): the convolutions of small CNNs have 16, 32
//! or 64 output channels, which 6-row panels cover as 18, 36 and 66 rows with a partial
//! tile stored element by element; 8-row panels cover them exactly.
//! Bias and activation are applied to a tile in registers when the last `KC` block of
//! `k` is stored, so `C` is written once per `KC` block and read back only for `k > KC`.

use std::cell::RefCell;

pub use super::act::Act;
use super::act::{clip, relu};

/// The most rows of one packed `A` panel (the AVX-512 kernel's; the others read 6-row
/// panels, [`panel_rows`]): a bound for the size of a [`PackedA`].
pub const MR: usize = 8;
/// Rows of an `A` panel for the AVX2 and portable kernels.
const MR_NARROW: usize = 6;
/// Columns of `B` (and of a `C` tile) per micro-kernel call.
pub const NR: usize = 16;
/// Depth of one block of `k` (see the module documentation); a product's sums are
/// accumulated per block of `KC` and the blocks' sums added in order (a kernel that
/// must give the same bits, as FullyConnected's batch-1 path does, follows it).
pub const KC: usize = 256;
/// Rows of one block of `A` (a multiple of both panel heights).
const MC: usize = 144;
/// Columns of one block of `B` (a multiple of `NR`).
const NC: usize = 64 * NR;

/// Which micro-kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// The widest the CPU has (detected at run time): AVX-512 (a 12 x 32 tile over two
    /// column panels, when the crate was built by a compiler with AVX-512 support), else
    /// AVX2 + FMA, else [`Kernel::Portable`].
    Auto,
    /// AVX2 + FMA when the CPU has both, else [`Kernel::Portable`] (for comparisons).
    Avx2,
    /// Plain loops, vectorized by the compiler for the baseline target.
    Portable,
}

/// The instruction set a product runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    Portable,
    Avx2,
    Avx512,
}

/// Rows per packed `A` panel for products run by `kernel` on this CPU: 8 for the AVX-512
/// kernel, 6 for the others. [`PackedA::new`] packs for [`Kernel::Auto`]; the other
/// kernels also read an 8-row panel (as two 4-row halves).
pub fn panel_rows(kernel: Kernel) -> usize {
    match kernel.isa() {
        Isa::Avx512 => MR,
        _ => MR_NARROW,
    }
}

impl Kernel {
    fn isa(self) -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 = std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma");
            #[cfg(tv_avx512)]
            if self == Kernel::Auto && avx2 && std::arch::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if self != Kernel::Portable && avx2 {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }
}

/// A bias added to `C` before the activation: one value per row (a convolution's output
/// channels) or per column (FullyConnected's output features).
#[derive(Debug, Clone, Copy, Default)]
pub enum Bias<'a> {
    /// No bias.
    #[default]
    None,
    /// `C[i][j] += bias[i]` (`bias.len() >= m`).
    Rows(&'a [f32]),
    /// `C[i][j] += bias[j]` (`bias.len() >= n`).
    Cols(&'a [f32]),
}

/// What is applied to every element of `C` when it is stored: `act(sum + bias)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Epilogue<'a> {
    /// The bias.
    pub bias: Bias<'a>,
    /// The activation (Relu or Clip), if any.
    pub act: Option<Act>,
}

/// An `m x k` left operand packed once into panels of `mr` rows (`[k][mr]` each, the
/// last panel zero-padded; `mr` = [`panel_rows`] of [`Kernel::Auto`]), as the
/// micro-kernel reads it.
#[derive(Debug, Clone)]
pub struct PackedA {
    m: usize,
    k: usize,
    mr: usize,
    data: Vec<f32>,
}

impl PackedA {
    /// Pack `a` (element `(i, p)` at `a[i * rs + p * cs]`).
    ///
    /// # Panics
    /// If `a` is too short for `m x k` with these strides (the caller checked the shape).
    pub fn new(m: usize, k: usize, a: &[f32], (rs, cs): (usize, usize)) -> Self {
        let mr = panel_rows(Kernel::Auto);
        let panels = m.div_ceil(mr);
        let mut data = vec![0f32; panels * mr * k];
        pack_a(a, (rs, cs), 0..m, 0..k, mr, &mut data);
        PackedA { m, k, mr, data }
    }

    /// Pack an `m x k` operand given row by row: `row(i, buf)` writes row `i` (`k`
    /// values) into `buf`. Only one panel's rows (`MR x k`) are held besides the packed
    /// values: weights decoded row by row (dequantized) are never whole in f32.
    pub fn from_rows(m: usize, k: usize, mut row: impl FnMut(usize, &mut [f32])) -> Self {
        let mr = panel_rows(Kernel::Auto);
        let mut data = vec![0f32; m.div_ceil(mr) * mr * k];
        let mut rows = vec![0f32; mr * k];
        for (pi, i0) in (0..m).step_by(mr).enumerate() {
            let nrows = mr.min(m - i0);
            for (ii, buf) in rows.chunks_exact_mut(k.max(1)).take(nrows).enumerate() {
                row(i0 + ii, &mut buf[..k]);
            }
            pack_a(&rows, (k, 1), 0..nrows, 0..k, mr, &mut data[pi * mr * k..]);
        }
        PackedA { m, k, mr, data }
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Depth.
    pub fn depth(&self) -> usize {
        self.k
    }

    /// Bytes of packed values.
    pub fn bytes(&self) -> usize {
        4 * self.data.len()
    }
}

/// A `k x n` right operand packed once into panels of [`NR`] columns (`[k][NR]` each,
/// the last panel zero-padded).
#[derive(Debug, Clone)]
pub struct PackedB {
    k: usize,
    n: usize,
    data: Vec<f32>,
}

impl PackedB {
    /// Pack `b` (element `(p, j)` at `b[p * rs + j * cs]`).
    ///
    /// # Panics
    /// If `b` is too short for `k x n` with these strides (the caller checked the shape).
    pub fn new(k: usize, n: usize, b: &[f32], (rs, cs): (usize, usize)) -> Self {
        let panels = n.div_ceil(NR);
        let mut data = vec![0f32; panels * NR * k];
        pack_b(b, (rs, cs), 0..k, 0..n, &mut data);
        PackedB { k, n, data }
    }

    /// Depth.
    pub fn depth(&self) -> usize {
        self.k
    }

    /// Pack a `k x n` operand given column by column: `col(j, buf)` writes column `j`
    /// (`k` values) into `buf` (for FullyConnected's `W^T`, row `j` of `W`). Only one
    /// panel's columns (`NR x k`) are held besides the packed values.
    pub fn from_cols(k: usize, n: usize, mut col: impl FnMut(usize, &mut [f32])) -> Self {
        let mut data = vec![0f32; n.div_ceil(NR) * NR * k];
        let mut cols = vec![0f32; NR * k];
        for (pj, j0) in (0..n).step_by(NR).enumerate() {
            let ncols = NR.min(n - j0);
            for (jj, buf) in cols.chunks_exact_mut(k.max(1)).take(ncols).enumerate() {
                col(j0 + jj, &mut buf[..k]);
            }
            pack_b(&cols, (1, k), 0..k, 0..ncols, &mut data[pj * NR * k..]);
        }
        PackedB { k, n, data }
    }

    /// The packed values: `n.div_ceil(NR)` panels of `[k][NR]`, one after the other
    /// (the columns past `n` of the last panel are zeros).
    pub fn panels(&self) -> &[f32] {
        &self.data
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.n
    }

    /// Bytes of packed values.
    pub fn bytes(&self) -> usize {
        4 * self.data.len()
    }
}

/// The left operand: packed ahead of time or a strided matrix packed per block.
#[derive(Debug, Clone, Copy)]
pub enum Lhs<'a> {
    /// Packed once ([`PackedA::new`]).
    Packed(&'a PackedA),
    /// Element `(i, p)` at `data[i * rs + p * cs]`.
    Strided {
        /// The values.
        data: &'a [f32],
        /// Row stride.
        rs: usize,
        /// Column stride.
        cs: usize,
    },
}

/// The right operand: packed ahead of time, already in panels, or a strided matrix packed
/// per block.
#[derive(Debug, Clone, Copy)]
pub enum Rhs<'a> {
    /// Packed once ([`PackedB::new`]).
    Packed(&'a PackedB),
    /// A `k x n` operand already in [`PackedB`]'s layout: `n.div_ceil(NR)` panels of
    /// `[k][NR]` values each, one after the other (e.g. written straight into panels by a
    /// convolution's im2col). Values in the columns past `n` of the last panel only reach
    /// results that are not stored.
    Panels(&'a [f32]),
    /// Element `(p, j)` at `data[p * rs + j * cs]`.
    Strided {
        /// The values.
        data: &'a [f32],
        /// Row stride.
        rs: usize,
        /// Column stride.
        cs: usize,
    },
    /// Read in place: the [`NR`] columns of column panel `q` in row `p` are the
    /// consecutive values `data[bases[q] + rows[p]..][..NR]` (a stride-1 convolution's
    /// columns straight from its padded input, when no panel crosses an output row: no
    /// im2col copy). Values read past column `n` in the last panel only reach results
    /// that are not stored.
    Rows {
        /// The values.
        data: &'a [f32],
        /// Offset of each row (`k` of them).
        rows: &'a [usize],
        /// Offset of each column panel (`n.div_ceil(NR)` of them).
        bases: &'a [usize],
    },
}

thread_local! {
    /// Packing space of the running thread: `MC x KC` of `A` and `KC x NC` of `B` at
    /// most (fixed sizes, independent of any shape a model claims).
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `c[m x n] = a[m x k] * b[k x n]` with row/column strides `(rs, cs)` for `a` and `b`;
/// `c` is row-major with rows `rsc` apart (`rsc >= n`), its elements outside the `m x n`
/// block are left as they are. `k == 0` gives zeros.
///
/// This is the entry point for other kernels: it packs both operands per block. Use
/// [`gemm`] to pass pre-packed operands, a bias or an activation.
///
/// # Panics
/// If an operand slice is too short for its shape and strides (callers check shapes
/// first; the check keeps every access in bounds).
#[allow(clippy::too_many_arguments, reason = "a gemm's operands")]
pub fn sgemm(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    (rsa, csa): (usize, usize),
    b: &[f32],
    (rsb, csb): (usize, usize),
    c: &mut [f32],
    rsc: usize,
) {
    let lhs = Lhs::Strided {
        data: a,
        rs: rsa,
        cs: csa,
    };
    let rhs = Rhs::Strided {
        data: b,
        rs: rsb,
        cs: csb,
    };
    gemm(
        [m, k, n],
        lhs,
        rhs,
        c,
        rsc,
        Epilogue::default(),
        Kernel::Auto,
    );
}

/// The furthest element a `rows x cols` strided matrix reads, plus one (0 when empty).
fn extent(rs: usize, cs: usize, rows: usize, cols: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * rs + (cols - 1) * cs + 1
    }
}

/// Values in `n.div_ceil(NR)` panels of `k` rows of [`NR`] (the length of an
/// [`Rhs::Panels`] operand), `None` on overflow.
pub fn panels_len(k: usize, n: usize) -> Option<usize> {
    n.div_ceil(NR).checked_mul(NR)?.checked_mul(k)
}

/// `c = epilogue(a * b)` for `[m, k, n]`, `c` row-major with rows `rsc` apart; see
/// [`sgemm`]. A packed operand must have the shape given (`m x k` / `k x n`).
///
/// # Panics
/// If an operand does not have the stated shape or a slice is too short (callers check
/// shapes first; the check keeps every access in bounds).
pub fn gemm(
    [m, k, n]: [usize; 3],
    a: Lhs<'_>,
    b: Rhs<'_>,
    c: &mut [f32],
    rsc: usize,
    epi: Epilogue<'_>,
    kernel: Kernel,
) {
    if m == 0 || n == 0 {
        return;
    }
    let a_ok = match a {
        Lhs::Packed(p) => p.m == m && p.k == k,
        Lhs::Strided { data, rs, cs } => extent(rs, cs, m, k) <= data.len(),
    };
    let b_ok = match b {
        Rhs::Packed(p) => p.k == k && p.n == n,
        Rhs::Panels(d) => panels_len(k, n).is_some_and(|l| l <= d.len()),
        Rhs::Strided { data, rs, cs } => extent(rs, cs, k, n) <= data.len(),
        Rhs::Rows { data, rows, bases } => {
            rows_fit(data.len(), &rows[..k.min(rows.len())], bases, k, n)
        }
    };
    let bias_ok = match epi.bias {
        Bias::None => true,
        Bias::Rows(v) => v.len() >= m,
        Bias::Cols(v) => v.len() >= n,
    };
    assert!(
        a_ok && b_ok && bias_ok && n <= rsc && extent(rsc, 1, m, n) <= c.len(),
        "gemm operands do not match [{m}, {k}, {n}]"
    );
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let (abuf, bbuf) = &mut *s;
        let need_a = if matches!(a, Lhs::Strided { .. }) {
            MC * KC.min(k)
        } else {
            0
        };
        let packs_b = match b {
            Rhs::Strided { .. } => true,
            // Only the AVX-512 kernel reads rows in place; the others read packed panels.
            Rhs::Rows { .. } => kernel.isa() != Isa::Avx512,
            _ => false,
        };
        let need_b = if packs_b {
            KC.min(k) * NC.min(n.div_ceil(NR) * NR)
        } else {
            0
        };
        if abuf.len() < need_a {
            abuf.resize(need_a, 0.0);
        }
        if bbuf.len() < need_b {
            bbuf.resize(need_b, 0.0);
        }
        let mr = match a {
            Lhs::Packed(p) => p.mr,
            Lhs::Strided { .. } => panel_rows(kernel),
        };
        let row_max = match b {
            Rhs::Rows { rows, .. } => rows.iter().max().copied().unwrap_or(0),
            _ => 0,
        };
        let mut blocks = Blocks {
            mkn: [m, k, n],
            mr,
            row_max,
            a,
            b,
            epi,
            isa: kernel.isa(),
            abuf,
            bbuf,
        };
        blocks.run(c, rsc);
    });
}

/// One product's operands and packing space.
struct Blocks<'a, 's> {
    mkn: [usize; 3],
    /// Rows per `A` panel.
    mr: usize,
    /// The largest row offset of an `Rhs::Rows` operand.
    row_max: usize,
    a: Lhs<'a>,
    b: Rhs<'a>,
    epi: Epilogue<'a>,
    isa: Isa,
    abuf: &'s mut Vec<f32>,
    bbuf: &'s mut Vec<f32>,
}

impl Blocks<'_, '_> {
    fn run(&mut self, c: &mut [f32], rsc: usize) {
        let [m, k, n] = self.mkn;
        // At least one block of k, so that k == 0 stores zeros (and the epilogue).
        let kblocks = k.div_ceil(KC).max(1);
        for jc in (0..n).step_by(NC) {
            let nc = NC.min(n - jc);
            for kb in 0..kblocks {
                let pc = kb * KC;
                let kc = KC.min(k - pc);
                match self.b {
                    Rhs::Strided { data, rs, cs } => {
                        pack_b(data, (rs, cs), pc..pc + kc, jc..jc + nc, self.bbuf);
                    }
                    Rhs::Rows { data, rows, bases } if self.isa != Isa::Avx512 => {
                        let panels = &bases[jc / NR..][..nc.div_ceil(NR)];
                        pack::pack_b_rows(data, &rows[pc..pc + kc], panels, self.bbuf);
                    }
                    _ => {}
                }
                let store = Store {
                    accumulate: kb > 0,
                    last: kb + 1 == kblocks,
                };
                for ic in (0..m).step_by(MC) {
                    let mc = MC.min(m - ic);
                    if let Lhs::Strided { data, rs, cs } = self.a {
                        pack_a(data, (rs, cs), ic..ic + mc, pc..pc + kc, self.mr, self.abuf);
                    }
                    self.macro_kernel([ic, pc, jc], [mc, kc, nc], c, rsc, store);
                }
            }
        }
    }

    /// The `mc x nc` block of `C` at `(ic, jc)` from the `kc`-deep blocks at `pc`.
    fn macro_kernel(
        &self,
        [ic, pc, jc]: [usize; 3],
        [mc, kc, nc]: [usize; 3],
        c: &mut [f32],
        rsc: usize,
        store: Store,
    ) {
        let (k, mr) = (self.mkn[1], self.mr);
        let mut jr = 0;
        while jr < nc {
            // Two column panels at once for the AVX-512 kernel (an 8 x 32 tile).
            let wide = self.isa == Isa::Avx512 && jr + NR < nc;
            let cols = (if wide { 2 * NR } else { NR }).min(nc - jr);
            let j = jc + jr;
            let bpanel = |q: usize| match self.b {
                Rhs::Packed(p) => &p.data[(q / NR) * p.k * NR + pc * NR..][..kc * NR],
                Rhs::Panels(d) => &d[(q / NR) * k * NR + pc * NR..][..kc * NR],
                Rhs::Strided { .. } | Rhs::Rows { .. } => {
                    &self.bbuf[((q - jc) / NR) * kc * NR..][..kc * NR]
                }
            };
            // The AVX-512 kernel reads `Rhs::Rows` in place (nothing was packed).
            let in_place = match self.b {
                Rhs::Rows { data, rows, bases } if self.isa == Isa::Avx512 => {
                    let rows = &rows[pc..pc + kc];
                    let at = |q: usize| pack::InPlace::new(data, bases[q / NR], rows, self.row_max);
                    Some([at(j), if wide { at(j + NR) } else { at(j) }])
                }
                _ => None,
            };
            let (bp, bp2) = match in_place {
                Some(_) => (&[][..], &[][..]),
                None => {
                    let bp = bpanel(j);
                    (bp, if wide { bpanel(j + NR) } else { bp })
                }
            };
            for ir in (0..mc).step_by(mr) {
                let rows = mr.min(mc - ir);
                let i = ic + ir;
                let ap = match self.a {
                    Lhs::Packed(p) => &p.data[(i / mr) * p.k * mr + pc * mr..][..kc * mr],
                    Lhs::Strided { .. } => &self.abuf[(ir / mr) * kc * mr..][..kc * mr],
                };
                let bias = match self.epi.bias {
                    Bias::None => TileBias::None,
                    Bias::Rows(v) => TileBias::Rows(&v[i..i + rows]),
                    Bias::Cols(v) => TileBias::Cols(&v[j..j + cols]),
                };
                let tile = Tile {
                    rows,
                    cols,
                    store,
                    bias,
                    act: self.epi.act,
                };
                let ct = &mut c[i * rsc + j..];
                match self.isa {
                    #[cfg(all(target_arch = "x86_64", tv_avx512))]
                    Isa::Avx512 => match in_place {
                        // SAFETY: `Isa::Avx512` is only chosen when the CPU has AVX-512F
                        // (`Kernel::isa`), the only requirement of the target-feature function.
                        Some(b) => unsafe { avx512::tile(kc, ap, mr, b, wide, ct, rsc, &tile) },
                        None => {
                            let b = [pack::Packed(bp), pack::Packed(bp2)];
                            // SAFETY: as above.
                            unsafe { avx512::tile(kc, ap, mr, b, wide, ct, rsc, &tile) }
                        }
                    },
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2 => {
                        // SAFETY: both are only chosen when the CPU has AVX2 and FMA
                        // (`Kernel::isa`), the only requirement of the target-feature function.
                        unsafe { avx2::tile(kc, ap, mr, bp, ct, rsc, &tile) }
                    }
                    _ => kernel_portable(kc, ap, mr, bp, ct, rsc, &tile),
                }
            }
            jr += cols;
        }
    }
}

/// How a tile is stored after one block of `k`.
#[derive(Debug, Clone, Copy)]
struct Store {
    /// Add to `C` (a later block of `k`) instead of overwriting it.
    accumulate: bool,
    /// The last block of `k`: apply the bias and the activation.
    last: bool,
}

/// The bias values of one tile.
#[derive(Debug, Clone, Copy)]
enum TileBias<'a> {
    None,
    Rows(&'a [f32]),
    Cols(&'a [f32]),
}

/// One `rows x cols` tile of `C` (at most `MR x NR`, or `MR x 2 NR` for AVX-512).
struct Tile<'a> {
    rows: usize,
    cols: usize,
    store: Store,
    bias: TileBias<'a>,
    act: Option<Act>,
}

impl Tile<'_> {
    /// The part of this tile from row `r0` on, at most `count` rows.
    fn rows_from(&self, r0: usize, count: usize) -> Tile<'_> {
        Tile {
            rows: self.rows.saturating_sub(r0).min(count),
            cols: self.cols,
            store: self.store,
            bias: match self.bias {
                TileBias::Rows(b) => TileBias::Rows(&b[r0.min(b.len())..]),
                other => other,
            },
            act: self.act,
        }
    }

    /// Store `acc` into `c` (rows `rsc` apart) with the accumulation, bias and
    /// activation of this tile, element by element.
    #[inline(always)]
    fn store_scalar<const R: usize, const W: usize>(
        &self,
        acc: &[[f32; W]; R],
        c: &mut [f32],
        rsc: usize,
    ) {
        for (i, arow) in acc.iter().enumerate().take(self.rows) {
            let crow = &mut c[i * rsc..][..self.cols];
            for (j, (cv, &s)) in crow.iter_mut().zip(arow).enumerate() {
                let mut v = if self.store.accumulate { *cv + s } else { s };
                if self.store.last {
                    v += match self.bias {
                        TileBias::None => 0.0,
                        TileBias::Rows(b) => b[i],
                        TileBias::Cols(b) => b[j],
                    };
                    v = match self.act {
                        None => v,
                        Some(Act::Relu) => relu(v),
                        Some(Act::Clip { lo, hi }) => clip(v, lo, hi),
                    };
                }
                *cv = v;
            }
        }
    }
}

/// The portable micro-kernel: `acc = a_panel * b_panel` over `kc` (an `A` panel of `mr`
/// rows), then stored.
fn kernel_portable(
    kc: usize,
    a: &[f32],
    mr: usize,
    b: &[f32],
    c: &mut [f32],
    rsc: usize,
    tile: &Tile<'_>,
) {
    let mut acc = [[0f32; NR]; MR];
    for (ap, bp) in a.chunks_exact(mr).zip(b.chunks_exact(NR)).take(kc) {
        for (row, &av) in acc.iter_mut().zip(ap) {
            for (r, &bv) in row.iter_mut().zip(bp) {
                *r += av * bv;
            }
        }
    }
    tile.store_scalar(&acc, c, rsc);
}

/// Whether `Rhs::Rows` operands stay inside `data`: `k` row offsets and one base per
/// column panel, every 16-value run in bounds.
fn rows_fit(len: usize, rows: &[usize], bases: &[usize], k: usize, n: usize) -> bool {
    let (Some(&r), Some(&b)) = (rows.iter().max(), bases.iter().max()) else {
        return rows.len() == k && k == 0 && bases.len() >= n.div_ceil(NR);
    };
    rows.len() == k
        && bases.len() >= n.div_ceil(NR)
        && r.checked_add(b)
            .and_then(|v| v.checked_add(NR))
            .is_some_and(|end| end <= len)
}

mod pack;
use pack::{pack_a, pack_b};

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(all(target_arch = "x86_64", tv_avx512))]
#[allow(
    clippy::incompatible_msrv,
    reason = "compiled only by compilers with AVX-512 support (cfg tv_avx512, set by build.rs \
              for Rust >= 1.89); the MSRV build uses the AVX2 kernel"
)]
mod avx512;
