//! The seeded randomized Hadamard transform of the rotated segment (TQTC version 3,
//! `docs/formats/quant.md` §6): flip the signs of a block of `b = 2^k` values by a sign
//! pattern drawn from a 32-bit seed, apply the fast Walsh-Hadamard transform and scale by
//! `1/sqrt(b)`. The transform is orthonormal, so it spreads an outlier over the whole
//! block and leaves values close to Gaussian (what the level tables of [`crate::levels`]
//! are fitted to) without changing their norm; it is data-oblivious, so a store that
//! sees one block at a time can apply it.
//!
//! ```
//! use tensorvault_quant::rotation::Rotation;
//! let r = Rotation::new(7, 64)?;
//! let x: Vec<f32> = (0..64).map(|i| if i == 5 { 8.0 } else { 0.0 }).collect();
//! let mut y = x.clone();
//! r.forward(&mut y);
//! assert!(y.iter().all(|v| (v.abs() - 1.0).abs() < 1e-6)); // the spike is spread out
//! r.inverse(&mut y);
//! assert!(y.iter().zip(&x).all(|(a, b)| (a - b).abs() < 1e-5));
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::layout::{V3_MAX_BLOCK_LOG2, V3_MIN_BLOCK_LOG2};
use crate::QuantError;

/// The `i`-th 64-bit output of SplitMix64 started from `seed` (the sign source; the
/// format fixes this generator, see `docs/formats/quant.md` §6.2).
#[must_use]
pub fn splitmix64(seed: u32, i: u64) -> u64 {
    let mut z = u64::from(seed).wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// In-place fast Walsh-Hadamard transform (unnormalized) of a power-of-two block:
/// stages `h = 1, 2, 4, ..`, each replacing the pairs `(x[j], x[j + h])` of every run of
/// `2h` values by `(x[j] + x[j + h], x[j] - x[j + h])`.
///
/// On x86-64 CPUs with AVX2 (detected at run time) blocks of 8 values or more run the
/// same butterflies 8 lanes at a time, with bit-identical results.
pub fn fwht(x: &mut [f32]) {
    let n = x.len();
    #[cfg(target_arch = "x86_64")]
    if n >= 8 && n.is_power_of_two() && crate::fwht_avx2::available() {
        // SAFETY: AVX2 was detected and n is a power of two >= 8 (the function's contract).
        unsafe { crate::fwht_avx2::fwht(x) };
        return;
    }
    fwht_scalar(x);
}

/// [`fwht`] without SIMD (the reference the AVX2 path must match bit for bit).
pub fn fwht_scalar(x: &mut [f32]) {
    let n = x.len();
    let mut h = 1;
    if n >= 8 && n.is_multiple_of(8) {
        // Stages 1, 2 and 4 within each run of 8, unrolled (the same butterflies, so the
        // same f32 results as the loop below; only their order changes).
        for c in x.chunks_exact_mut(8) {
            wht8(c);
        }
        h = 8;
    }
    while h < n {
        for run in x.chunks_exact_mut(2 * h) {
            let (a, b) = run.split_at_mut(h);
            for (u, v) in a.iter_mut().zip(b.iter_mut()) {
                let (p, q) = (*u, *v);
                *u = p + q;
                *v = p - q;
            }
        }
        h *= 2;
    }
}

/// Stages `h = 1, 2, 4` of [`fwht`] on 8 values.
#[inline]
fn wht8(c: &mut [f32]) {
    let mut v = [0f32; 8];
    v.copy_from_slice(c);
    for h in [1usize, 2, 4] {
        for base in (0..8).step_by(2 * h) {
            for j in base..base + h {
                let (p, q) = (v[j], v[j + h]);
                v[j] = p + q;
                v[j + h] = p - q;
            }
        }
    }
    c.copy_from_slice(&v);
}

/// The sign words of a block of `block` values: generator output `w` holds the signs of
/// positions `64w .. 64w + 64`, bit `b` for position `64w + b` (1 = flip).
pub(crate) fn sign_words(seed: u32, block: usize) -> impl Iterator<Item = u64> {
    (0..block.div_ceil(64)).map(move |w| splitmix64(seed, w as u64))
}

/// `f32(1 / sqrt(block))`, the transform's normalization.
pub(crate) fn norm_of(block: usize) -> f32 {
    (1.0 / (block as f64).sqrt()) as f32
}

/// A randomized Hadamard transform of blocks of `b` values: signs from a seed, FWHT,
/// `1/sqrt(b)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Rotation {
    seed: u32,
    /// Sign-bit masks (`0` or `0x8000_0000`) per position in the block.
    masks: Vec<u32>,
    /// `f32(1 / sqrt(b))`.
    norm: f32,
}

impl Rotation {
    /// The rotation of blocks of `block` values with the sign pattern of `seed`.
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] unless `block` is a power of two in 4..=1024.
    pub fn new(seed: u32, block: usize) -> Result<Self, QuantError> {
        let ok = (1usize << V3_MIN_BLOCK_LOG2..=1usize << V3_MAX_BLOCK_LOG2).contains(&block)
            && block.is_power_of_two();
        if !ok {
            return Err(QuantError::InvalidParam {
                field: "rotation block",
                value: block as f64,
                reason: "must be a power of two in 4..=1024",
            });
        }
        // One generator output per 64 positions, its bits in order (bit b of word w is
        // position 64w + b), as sign-bit masks.
        let mut masks = Vec::with_capacity(block);
        for (w, word) in sign_words(seed, block).enumerate() {
            let take = (block - w * 64).min(64);
            masks.extend((0..take).map(|b| (((word >> b) & 1) as u32) << 31));
        }
        Ok(Self {
            seed,
            masks,
            norm: norm_of(block),
        })
    }

    /// The seed.
    #[must_use]
    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// Values per block.
    #[must_use]
    pub fn block(&self) -> usize {
        self.masks.len()
    }

    /// `f32(1 / sqrt(block))`, the normalization the decoder folds into the scale.
    #[must_use]
    pub fn norm(&self) -> f32 {
        self.norm
    }

    fn flip(&self, x: &mut [f32]) {
        for (v, &m) in x.iter_mut().zip(&self.masks) {
            *v = f32::from_bits(v.to_bits() ^ m);
        }
    }

    /// Rotate one block in place: signs, FWHT, times `1/sqrt(b)`. `x` must hold exactly
    /// [`Rotation::block`] values (other lengths leave the tail unflipped: callers pass
    /// whole blocks).
    pub fn forward(&self, x: &mut [f32]) {
        self.flip(x);
        fwht(x);
        for v in x.iter_mut() {
            *v *= self.norm;
        }
    }

    /// Undo [`Rotation::forward`] on one block: times `1/sqrt(b)`, FWHT, signs.
    pub fn inverse(&self, x: &mut [f32]) {
        for v in x.iter_mut() {
            *v *= self.norm;
        }
        self.inverse_prescaled(x);
    }

    /// [`Rotation::inverse`] for a block already multiplied by `1/sqrt(b)` (the decoder
    /// folds the normalization into each block's scale): FWHT, then signs.
    pub fn inverse_prescaled(&self, x: &mut [f32]) {
        fwht(x);
        self.flip(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        // SplitMix64 from state 0: the published first outputs.
        assert_eq!(splitmix64(0, 0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(0, 1), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(splitmix64(0, 2), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn fwht_is_its_own_inverse_up_to_n() {
        let mut x: Vec<f32> = (0..16).map(|i| (i * i % 7) as f32 - 3.0).collect();
        let orig = x.clone();
        fwht(&mut x);
        assert_eq!(x[0], orig.iter().sum::<f32>());
        fwht(&mut x);
        for (a, b) in x.iter().zip(&orig) {
            assert_eq!(*a, b * 16.0);
        }
    }

    /// The unrolled first stages give the same bits as the plain butterfly loop.
    #[test]
    fn fast_fwht_matches_the_plain_loop_bit_for_bit() {
        fn plain(x: &mut [f32]) {
            let mut h = 1;
            while h < x.len() {
                for run in x.chunks_exact_mut(2 * h) {
                    let (a, b) = run.split_at_mut(h);
                    for (u, v) in a.iter_mut().zip(b.iter_mut()) {
                        let (p, q) = (*u, *v);
                        *u = p + q;
                        *v = p - q;
                    }
                }
                h *= 2;
            }
        }
        for n in [8usize, 16, 64, 1024] {
            let x: Vec<f32> = (0..n)
                .map(|i| (splitmix64(3, i as u64) >> 40) as f32 / 1e5 - 83.0)
                .collect();
            let (mut a, mut b) = (x.clone(), x);
            fwht(&mut a);
            plain(&mut b);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b), "{n}");
        }
    }

    /// The runtime-selected transform (AVX2 where the CPU has it) gives the scalar
    /// path's bits for every power-of-two length, including values whose sums round.
    #[test]
    fn dispatched_fwht_matches_the_scalar_path_bit_for_bit() {
        for n in [4usize, 8, 16, 32, 64, 128, 256, 1024] {
            for seed in 0..4u32 {
                let x: Vec<f32> = (0..n)
                    .map(|i| {
                        let u = splitmix64(seed, i as u64);
                        // Random sign and mantissa, exponents over 2^-31..2^0.
                        let exp = 0x3000_0000 + ((u >> 40) as u32 & 0x0F80_0000);
                        f32::from_bits((u as u32 & 0x807F_FFFF) | exp)
                    })
                    .collect();
                let (mut a, mut b) = (x.clone(), x);
                fwht(&mut a);
                fwht_scalar(&mut b);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "{n} {seed}");
            }
        }
    }

    #[test]
    fn rotation_preserves_norm_and_inverts() {
        for block in [4usize, 64, 128, 1024] {
            let r = Rotation::new(0x1234, block).unwrap();
            let x: Vec<f32> = (0..block).map(|i| ((i * 37 % 11) as f32) - 5.0).collect();
            let mut y = x.clone();
            r.forward(&mut y);
            let n0: f32 = x.iter().map(|v| v * v).sum();
            let n1: f32 = y.iter().map(|v| v * v).sum();
            assert!((n0 - n1).abs() <= 1e-4 * n0, "{block}: {n0} vs {n1}");
            r.inverse(&mut y);
            for (a, b) in y.iter().zip(&x) {
                assert!((a - b).abs() < 1e-4, "{block}");
            }
        }
    }

    #[test]
    fn seeds_give_different_signs_and_bad_blocks_fail() {
        let a = Rotation::new(1, 64).unwrap();
        let b = Rotation::new(2, 64).unwrap();
        assert_ne!(a.masks, b.masks);
        let flips = a.masks.iter().filter(|&&m| m != 0).count();
        assert!((16..=48).contains(&flips), "{flips}");
        for bad in [0usize, 2, 48, 2048] {
            assert!(
                matches!(Rotation::new(1, bad), Err(QuantError::InvalidParam { .. })),
                "{bad}"
            );
        }
    }
}
