//! FullyConnected for one row (batch 1): `y = act(x * W^T + b)` over `W^T` packed once
//! ([`PackedB`]: panels of [`NR`] columns, `[k][NR]` each).
//!
//! The gemm would pack `x` into a panel of [`super::super::gemm::MR`] rows (five of them
//! zeros) and run its 6 x 16 tile: six times the multiply-adds for one useful row. Here
//! one row is multiplied into four column panels at a time (eight 8-float accumulators
//! with AVX2 + FMA, enough independent chains to keep both FMA units busy while the
//! weights stream in). The sums follow the gemm's order exactly (per block of
//! [`KC`] rows of `W^T`, fused multiply-adds from zero; the blocks' sums added in
//! order; then the bias, then the activation), so the result has the same bits as the
//! gemm path on the same CPU (AVX2 or AVX-512 with FMA; the portable path multiplies
//! then adds, as the portable gemm kernel does).

use crate::ops::act::{clip, relu, Act};
use crate::ops::gemm::{PackedB, KC, NR};

/// Column panels per step of the AVX2 kernel.
const PANELS: usize = 4;

/// `y[j] = act(sum_p x[p] * w[p][j] + bias[j])` for the `k x n` packed `w`.
///
/// # Panics
/// If `x.len() != w.depth()`, `y.len() != w.cols()` or a bias shorter than `n` (the
/// caller checked the shapes).
pub(crate) fn gemv(x: &[f32], w: &PackedB, bias: Option<&[f32]>, act: Option<Act>, y: &mut [f32]) {
    let (k, n) = (w.depth(), w.cols());
    assert!(
        x.len() == k && y.len() == n && bias.is_none_or(|b| b.len() >= n),
        "gemv operands do not match [{k}, {n}]"
    );
    let panels = w.panels();
    let mut j = 0;
    while j < n {
        let count = PANELS.min(n.div_ceil(NR) - j / NR);
        let block = &panels[(j / NR) * k * NR..][..count * k * NR];
        let mut sums = [0f32; PANELS * NR];
        let sums = &mut sums[..count * NR];
        sums_fma_or_plain(x, block, count, sums);
        let cols = (count * NR).min(n - j);
        for (jj, (out, &s)) in y[j..j + cols].iter_mut().zip(sums.iter()).enumerate() {
            let v = s + bias.map_or(0.0, |b| b[j + jj]);
            *out = match act {
                None => v,
                Some(Act::Relu) => relu(v),
                Some(Act::Clip { lo, hi }) => clip(v, lo, hi),
            };
        }
        j += cols;
    }
}

/// `sums[q * NR + c] = sum_p x[p] * panel_q[p][c]` for the `count` panels of `block`
/// (each `[k][NR]`), summed per block of [`KC`] as the gemm does.
fn sums_fma_or_plain(x: &[f32], block: &[f32], count: usize, sums: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: AVX2 and FMA were detected just above, the function's only requirement.
        unsafe { avx2::sums(x, block, count, sums) };
        return;
    }
    sums_plain(x, block, count, sums);
}

/// The portable sums: multiply, then add (as the portable gemm kernel).
fn sums_plain(x: &[f32], block: &[f32], count: usize, sums: &mut [f32]) {
    let k = x.len();
    for (q, total) in sums.chunks_exact_mut(NR).enumerate().take(count) {
        let panel = &block[q * k * NR..][..k * NR];
        for (kb, p0) in (0..k).step_by(KC).enumerate() {
            let mut acc = [0f32; NR];
            let rows = panel[p0 * NR..].chunks_exact(NR).take(KC.min(k - p0));
            for (&xv, row) in x[p0..].iter().zip(rows) {
                for (a, &w) in acc.iter_mut().zip(row) {
                    *a += xv * w;
                }
            }
            for (t, a) in total.iter_mut().zip(acc) {
                *t = if kb == 0 { a } else { a + *t };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256, _mm256_add_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps,
        _mm256_setzero_ps, _mm256_storeu_ps,
    };

    use super::{KC, NR, PANELS};

    /// [`super::sums_fma_or_plain`] with AVX2 + FMA: `count` (at most [`PANELS`])
    /// panels at once, two 8-float accumulators each.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    ///
    /// # Panics
    /// If `count > PANELS`, `block` is shorter than `count * x.len() * NR` or `sums`
    /// shorter than `count * NR`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn sums(x: &[f32], block: &[f32], count: usize, sums: &mut [f32]) {
        // SAFETY: the caller's guarantee (AVX2 and FMA) is the callee's only requirement.
        unsafe {
            match count {
                4 => sums_n::<4>(x, block, sums),
                3 => sums_n::<3>(x, block, sums),
                2 => sums_n::<2>(x, block, sums),
                _ => sums_n::<1>(x, block, sums),
            }
        }
    }

    /// `P` panels at once (see [`sums`]).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn sums_n<const P: usize>(x: &[f32], block: &[f32], sums: &mut [f32]) {
        let k = x.len();
        assert!(P <= PANELS && block.len() >= P * k * NR && sums.len() >= P * NR);
        let bp = block.as_ptr();
        let mut total = [[_mm256_setzero_ps(); 2]; P];
        for (kb, p0) in (0..k).step_by(KC).enumerate() {
            let kc = KC.min(k - p0);
            let mut acc: [[__m256; 2]; P] = [[_mm256_setzero_ps(); 2]; P];
            for (p, xv) in x[p0..p0 + kc].iter().enumerate() {
                let xb = _mm256_broadcast_ss(xv);
                for (q, a) in acc.iter_mut().enumerate() {
                    // SAFETY: q < P, p0 + p < k: the 16 floats at (q * k + p0 + p) * NR
                    // end at most at P * k * NR <= block.len() (asserted above).
                    unsafe {
                        let w = bp.add((q * k + p0 + p) * NR);
                        a[0] = _mm256_fmadd_ps(xb, _mm256_loadu_ps(w), a[0]);
                        a[1] = _mm256_fmadd_ps(xb, _mm256_loadu_ps(w.add(8)), a[1]);
                    }
                }
            }
            for (t, a) in total.iter_mut().zip(&acc) {
                for h in 0..2 {
                    // The gemm stores a block's sum, then adds the next block's to it.
                    t[h] = if kb == 0 {
                        a[h]
                    } else {
                        _mm256_add_ps(a[h], t[h])
                    };
                }
            }
        }
        for (q, t) in total.iter().enumerate() {
            let out = &mut sums[q * NR..][..NR];
            // SAFETY: `out` has NR = 16 floats: two 8-float stores at 0 and 8.
            unsafe {
                _mm256_storeu_ps(out.as_mut_ptr(), t[0]);
                _mm256_storeu_ps(out.as_mut_ptr().add(8), t[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::{gemm, Bias, Epilogue, Kernel, Lhs, Rhs};

    fn vals(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 + seed * 31) % 97) as f32 / 48.0 - 1.0)
            .collect()
    }

    /// Bit for bit the gemm's result, across panel counts, partial panels, blocks of k
    /// and epilogues.
    #[test]
    fn gemv_equals_the_gemm_bit_for_bit() {
        for &(k, n) in &[
            (1, 1),
            (3, 17),
            (64, 10),
            (256, 64),
            (257, 80),
            (300, 120),
            (1280, 1000),
            (0, 5),
        ] {
            let (x, wt) = (vals(k, 1), vals(k * n, 2));
            let b = vals(n, 3);
            let packed = PackedB::from_cols(k, n, |j, col| {
                for (p, c) in col.iter_mut().enumerate() {
                    *c = wt[p * n + j];
                }
            });
            for (bias, act) in [
                (None, None),
                (Some(&b[..]), Some(Act::Relu)),
                (Some(&b[..]), Some(Act::Clip { lo: -0.5, hi: 0.75 })),
            ] {
                let mut want = vec![f32::NAN; n];
                let epi = Epilogue {
                    bias: bias.map_or(Bias::None, Bias::Cols),
                    act,
                };
                let lhs = Lhs::Strided {
                    data: &x,
                    rs: k,
                    cs: 1,
                };
                gemm(
                    [1, k, n],
                    lhs,
                    Rhs::Packed(&packed),
                    &mut want,
                    n,
                    epi,
                    Kernel::Auto,
                );
                let mut got = vec![f32::NAN; n];
                gemv(&x, &packed, bias, act, &mut got);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "k {k} n {n} {act:?}");
            }
        }
    }

    /// The portable sums equal the portable gemm kernel bit for bit.
    #[test]
    fn plain_sums_equal_the_portable_gemm() {
        let (k, n) = (600, 40);
        let (x, wt) = (vals(k, 4), vals(k * n, 5));
        let packed = PackedB::from_cols(k, n, |j, col| {
            for (p, c) in col.iter_mut().enumerate() {
                *c = wt[p * n + j];
            }
        });
        let mut want = vec![0f32; n];
        let lhs = Lhs::Strided {
            data: &x,
            rs: k,
            cs: 1,
        };
        let epi = Epilogue::default();
        gemm(
            [1, k, n],
            lhs,
            Rhs::Packed(&packed),
            &mut want,
            n,
            epi,
            Kernel::Portable,
        );
        let panels = n.div_ceil(NR);
        let mut sums = vec![0f32; panels * NR];
        for q in (0..panels).step_by(PANELS) {
            let count = PANELS.min(panels - q);
            let block = &packed.panels()[q * k * NR..][..count * k * NR];
            sums_plain(&x, block, count, &mut sums[q * NR..][..count * NR]);
        }
        assert_eq!(&sums[..n], &want[..]);
    }
}
