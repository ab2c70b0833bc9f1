//! The parametric model of TQTC version 7 (`docs/formats/quant.md` §14.3): the rANS
//! frequencies of a rotated block's codes are a discretised zero-mean Gaussian whose
//! standard deviation (in quantizer steps) the block's side byte gives, so a segment
//! stores one byte per block instead of a frequency table.
//!
//! The tables must be bit-identical on every platform, because the decoder rebuilds
//! them: they are derived with IEEE 754 basic operations only (`+ - * /`, `sqrt`,
//! `floor`, all correctly rounded or exact), in f64, in a fixed order, never with the
//! platform's `exp` or `erf`. [`exp_ieee`] is a Cody-Waite reduction and a fixed Taylor
//! polynomial; [`erfc_ieee`] a fixed Chebyshev-fitted expression (fractional error below
//! 1.2e-7, far below what a 2^15 table resolves). Rust never contracts `a * b + c` into a
//! fused multiply-add on its own, and every supported target does f64 arithmetic in
//! IEEE double (SSE2 on x86), so the same operations give the same bits everywhere.
//!
//! Each table is built once and kept in a bounded cache (the 256 most recently used): a
//! decode looks it up.
//!
//! ```
//! use tensorvault_quant::ecsq_model::frequencies;
//! let f = frequencies(6, 64)?; // 64 codes, sigma = one step
//! assert_eq!(f.len(), 64);
//! assert_eq!(f.iter().map(|&c| u32::from(c)).sum::<u32>(), 1 << 15);
//! assert!(f.iter().all(|&c| c >= 1));
//! assert!(f[31] >= f[32] && f[32] > f[40]); // peaked at zero
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::entropy_rans::WideTable;
use crate::layout::{
    V7_BITS_OFFSET, V7_MAX_BITS, V7_MIN_BITS, V7_PROB_BITS, V7_SIGMA_PER_OCTAVE, V7_SIGMA_ZERO,
};
use crate::QuantError;

/// High part of ln 2 (its low 32 bits zero, so `n * LN2_HI` is exact for |n| < 2^20).
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
/// ln 2 - `LN2_HI`.
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// ln 2 (rounded to nearest).
const LN2: f64 = std::f64::consts::LN_2;
/// 1 / ln 2 (rounded to nearest).
const LOG2E: f64 = std::f64::consts::LOG2_E;
/// Degree of the Taylor polynomial of `e^r`, `|r| <= ln2 / 2` (remainder below 1e-17).
const EXP_DEGREE: u32 = 13;
/// Coefficients of the erfc expression, highest power of `t` first (§14.3).
const ERFC_C: [f64; 10] = [
    0.170_872_77,
    -0.822_152_23,
    1.488_515_87,
    -1.135_203_98,
    0.278_868_07,
    -0.186_288_06,
    0.096_784_18,
    0.374_091_96,
    1.000_023_68,
    -1.265_512_23,
];

/// `e^x` from IEEE basic operations only (§14.3): `n = floor(x / ln2 + 1/2)`,
/// `r = (x - n * LN2_HI) - n * LN2_LO`, `p = 1 + r(1 + r/2(1 + r/3(... (1 + r/13))))`
/// (Horner, innermost first), then `p * 2^n` by exponent construction. 0 below -745,
/// infinity above 709.
#[must_use]
pub fn exp_ieee(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < -745.0 {
        return 0.0;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    let n = (x * LOG2E + 0.5).floor();
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.0f64;
    for i in (1..=EXP_DEGREE).rev() {
        p = 1.0 + r * p / f64::from(i);
    }
    // n in -1075..=1023 here.
    let n = n as i32;
    if n >= -1022 {
        p * pow2(n)
    } else {
        // Two exact scalings keep the intermediate normal.
        p * pow2(n + 600) * pow2(-600)
    }
}

/// `2^n` for `n` in -1022..=1023, built from its exponent bits (exact).
fn pow2(n: i32) -> f64 {
    f64::from_bits(((n + 1023) as u64) << 52)
}

/// `erfc(z)` for `z >= 0` (§14.3): `t = 1 / (1 + z/2)`,
/// `erfc = t * exp_ieee(-z*z + P(t))` with `P` the fixed degree-9 polynomial
/// [`ERFC_C`] evaluated by Horner. Fractional error below 1.2e-7.
#[must_use]
pub fn erfc_ieee(z: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let mut p = 0.0f64;
    for c in ERFC_C {
        p = p * t + c;
    }
    t * exp_ieee(-z * z + p)
}

/// The upper tail of the standard normal, `Q(u) = erfc(u / sqrt 2) / 2`, `u >= 0`.
fn upper_tail(u: f64) -> f64 {
    0.5 * erfc_ieee(u / 2f64.sqrt())
}

/// The model's standard deviation, in steps, of side byte `j`:
/// `exp_ieee(((j - 64) / 16) * ln2)`, i.e. `2^((j - 64) / 16)`, 1/16 ..= ~3900.
#[must_use]
pub fn sigma_of(j: u8) -> f64 {
    let e = f64::from(i32::from(j) - V7_SIGMA_ZERO) / f64::from(V7_SIGMA_PER_OCTAVE);
    exp_ieee(e * LN2)
}

/// The frequency table of `k`-bit codes under side byte `j` (§14.3): symbol `s` is the
/// interval `[q, q + 1)` steps with `q = s - 2^(k-1)` (the end symbols open to infinity);
/// for `q >= 0` its probability is `p_q = Q(q / sigma) - Q((q + 1) / sigma)` (`Q(q /
/// sigma)` for the top symbol), mirrored to symbol `2^(k-1) - 1 - q`; each count is
/// `1 + floor(p * (2^15 - 2^k))` and the remainder to `2^15` goes to symbol
/// `2^(k-1) - 1`.
fn derive(k: u8, j: u8) -> Vec<u16> {
    let a = 1usize << k;
    let h = a / 2;
    let sigma = sigma_of(j);
    let spread = f64::from((1u32 << V7_PROB_BITS) - a as u32);
    let mut freqs = vec![0u16; a];
    let mut hi = upper_tail(0.0);
    for q in 0..h {
        let lo_tail = if q + 1 < h {
            upper_tail((q + 1) as f64 / sigma)
        } else {
            0.0
        };
        let p = hi - lo_tail;
        hi = lo_tail;
        // p <= 1/2, so the count is at most 1 + 2^14: a u16.
        let c = 1 + (p * spread).floor() as u16;
        freqs[h + q] = c;
        freqs[h - 1 - q] = c;
    }
    let sum: u32 = freqs.iter().map(|&c| u32::from(c)).sum();
    // Each floor loses less than 1, so the remainder is in 0..2^k.
    freqs[h - 1] += ((1u32 << V7_PROB_BITS) - sum) as u16;
    freqs
}

/// Most tables kept at once. Real data uses a few dozen side bytes per code width, so
/// this holds every table a run needs; a hostile stream of segments naming every
/// `(k, j)` cannot make the cache hold more than this many (about 50 MiB at `k = 12`
/// with the encoder's constants, 25 MiB for `k <= 10`).
const CACHE_TABLES: usize = 256;

/// The tables built so far, most recently used first (at most [`CACHE_TABLES`]), keyed by
/// `k << 8 | j`.
static CACHE: Mutex<Vec<(u16, Arc<WideTable>)>> = Mutex::new(Vec::new());

#[cfg(test)]
thread_local! {
    /// Calls of [`table`] on this thread (tests count a decode's cache lookups).
    pub(crate) static LOOKUPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn check_bits(k: u8) -> Result<(), QuantError> {
    if (V7_MIN_BITS..=V7_MAX_BITS).contains(&k) {
        Ok(())
    } else {
        Err(crate::error::corrupt(
            "bits",
            V7_BITS_OFFSET,
            k.into(),
            "must be in 2..=12",
        ))
    }
}

/// The coder table of `k`-bit codes under side byte `j` (`k` checked by the caller:
/// 2..=12), from the cache or built and cached.
pub(crate) fn table(k: u8, j: u8) -> Arc<WideTable> {
    #[cfg(test)]
    LOOKUPS.with(|n| n.set(n.get() + 1));
    let key = u16::from(k) << 8 | u16::from(j);
    {
        // Nothing panics while the lock is held: a poisoned cache is still consistent.
        let mut c = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = c.iter().position(|(kk, _)| *kk == key) {
            if i > 0 {
                let e = c.remove(i);
                c.insert(0, e);
            }
            return Arc::clone(&c[0].1);
        }
    }
    // Built outside the lock (20 µs at k = 10); two threads may build the same table,
    // which is the same table.
    // derive() sums to 2^15 with every count >= 1 over 2^k >= 4 symbols.
    let t = Arc::new(WideTable::new(derive(k, j), V7_PROB_BITS).unwrap_or_else(|| unreachable!()));
    let mut c = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if !c.iter().any(|(kk, _)| *kk == key) {
        c.insert(0, (key, Arc::clone(&t)));
        c.truncate(CACHE_TABLES);
    }
    t
}

/// The model's frequencies of `k`-bit codes under side byte `j` (2^k counts, each >= 1,
/// summing to 2^15), as every encoder and decoder of version 7 must use them.
///
/// # Errors
/// [`QuantError::CorruptField`] `bits` for `k` outside 2..=12.
pub fn frequencies(k: u8, j: u8) -> Result<Vec<u16>, QuantError> {
    check_bits(k)?;
    Ok(table(k, j).freqs().to_vec())
}

/// The model's frequencies of `k`-bit codes under side byte `j`, derived anew (what
/// [`frequencies`] caches; for measuring what the cache saves).
///
/// # Errors
/// [`QuantError::CorruptField`] `bits` for `k` outside 2..=12.
pub fn derive_frequencies(k: u8, j: u8) -> Result<Vec<u16>, QuantError> {
    check_bits(k)?;
    Ok(derive(k, j))
}

/// The side byte whose `sigma` is nearest `r` (a block's RMS in steps) on a log scale:
/// the number of geometric midpoints `2^((j - 64 + 1/2) / 16)`, `j = 0..=254`, below `r`
/// (deterministic: the midpoints come from [`exp_ieee`]). Encoder policy.
#[must_use]
pub fn side_byte(r: f64) -> u8 {
    static MIDS: OnceLock<[f64; 255]> = OnceLock::new();
    let mids = MIDS.get_or_init(|| {
        let mut m = [0f64; 255];
        for (j, v) in m.iter_mut().enumerate() {
            let e = (f64::from(j as i32 - V7_SIGMA_ZERO) + 0.5) / f64::from(V7_SIGMA_PER_OCTAVE);
            *v = exp_ieee(e * LN2);
        }
        m
    });
    // At most 255: a u8.
    mids.partition_point(|&m| m < r) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a over the little-endian bytes of `f`.
    fn fnv(f: &[u16]) -> u64 {
        f.iter()
            .flat_map(|c| c.to_le_bytes())
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
    }

    #[test]
    fn exp_and_erfc_match_the_platform_closely() {
        for i in -400..=40 {
            let x = f64::from(i) * 0.37;
            let (a, b) = (exp_ieee(x), x.exp());
            assert!(((a - b) / b).abs() < 1e-14, "exp({x}): {a} vs {b}");
        }
        // erfc against known values (Abramowitz and Stegun, table 7.1).
        for (z, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_13),
            (2.0, 0.004_677_734_981_047_266),
            (4.0, 1.541_725_790_028_002e-8),
        ] {
            let got = erfc_ieee(z);
            assert!(((got - want) / want).abs() < 2e-7, "erfc({z}) = {got}");
        }
    }

    #[test]
    fn every_table_sums_to_2_15_with_counts_at_least_1() {
        for k in V7_MIN_BITS..=V7_MAX_BITS {
            for j in [0u8, 1, 63, 64, 100, 200, 255] {
                let f = frequencies(k, j).unwrap();
                assert_eq!(f.len(), 1 << k);
                assert_eq!(f.iter().map(|&c| u32::from(c)).sum::<u32>(), 1 << 15);
                assert!(f.iter().all(|&c| c >= 1));
                // Symmetric but for the remainder on symbol 2^(k-1) - 1.
                let h = f.len() / 2;
                for q in 1..h {
                    assert_eq!(f[h + q], f[h - 1 - q], "k {k} j {j} q {q}");
                }
                assert!(f[h - 1] >= f[h]);
            }
        }
        assert!(frequencies(13, 0).is_err());
        assert!(frequencies(1, 0).is_err());
    }

    #[test]
    fn every_side_byte_of_every_width_gives_a_valid_table() {
        // review14: the extreme side bytes (sigma 1/16 and ~3900 steps) at every width:
        // the derivation terminates, never underflows the remainder, and the coder
        // accepts every table (`table` would otherwise hit its `unreachable!`).
        for k in V7_MIN_BITS..=V7_MAX_BITS {
            for j in 0..=255u8 {
                let f = derive(k, j);
                assert_eq!(f.len(), 1 << k);
                assert_eq!(
                    f.iter().map(|&c| u32::from(c)).sum::<u32>(),
                    1 << V7_PROB_BITS,
                    "k {k} j {j}"
                );
                assert!(WideTable::new(f, V7_PROB_BITS).is_some(), "k {k} j {j}");
            }
        }
        // sigma stays finite and positive at both ends of the ladder.
        assert!(sigma_of(0) > 0.06 && sigma_of(255) < 4000.0);
    }

    #[test]
    fn tables_are_pinned() {
        // Any change to the derivation changes these: the format would change with it.
        let pins: [(u8, u8, u64); 6] = [
            (2, 0, 7_453_737_363_697_278_345),
            (6, 64, 3_405_388_821_594_929_133),
            (7, 90, 17_570_068_476_921_877_955),
            (10, 120, 10_706_159_509_788_713_851),
            (12, 255, 6_724_757_678_863_549_473),
            (5, 30, 4_176_514_177_889_129_895),
        ];
        let got: Vec<(u8, u8, u64)> = pins
            .iter()
            .map(|&(k, j, _)| (k, j, fnv(&frequencies(k, j).unwrap())))
            .collect();
        assert_eq!(got, pins.to_vec());
    }

    #[test]
    fn the_cache_is_bounded_and_gives_the_same_tables() {
        let first = table(9, 200);
        // More distinct tables than the cache holds: it keeps the most recent ones only.
        for k in [3u8, 4] {
            for j in 0..=255u8 {
                table(k, j);
            }
        }
        assert!(CACHE.lock().unwrap().len() <= CACHE_TABLES);
        let again = table(9, 200); // evicted, rebuilt: the same frequencies
        assert_eq!(first.freqs(), again.freqs());
        assert!(Arc::ptr_eq(&again, &table(9, 200))); // now cached
    }

    #[test]
    fn side_byte_is_the_nearest_rung() {
        assert_eq!(side_byte(1.0), 64);
        assert_eq!(side_byte(0.0), 0);
        assert_eq!(side_byte(1e30), 255);
        for j in 1..=254u8 {
            assert_eq!(side_byte(sigma_of(j)), j);
            assert_eq!(side_byte(sigma_of(j) * 1.02), j);
            assert_eq!(side_byte(sigma_of(j) / 1.02), j);
        }
    }

    #[test]
    fn the_model_codes_a_gaussian_near_its_entropy() {
        // The table of sigma = 4 steps against the ideal code length of the exact
        // Gaussian bins: the 2^15 floor and the tail floor cost well under 1%.
        let f = frequencies(8, 64 + 32).unwrap();
        let sigma = sigma_of(64 + 32);
        assert!((sigma - 4.0).abs() < 1e-12);
        let mut h_model = 0f64;
        let mut h_true = 0f64;
        let n = f.len() as i64 / 2;
        for (s, &c) in f.iter().enumerate() {
            let q = s as i64 - n;
            let cdf = |u: f64| 1.0 - upper_tail_signed(u / sigma);
            let p = cdf((q + 1) as f64) - cdf(q as f64);
            if p > 0.0 {
                h_true -= p * p.log2();
                h_model -= p * (f64::from(c) / 32768.0).log2();
            }
        }
        assert!(h_model - h_true < 0.01 * h_true, "{h_model} vs {h_true}");
    }

    fn upper_tail_signed(u: f64) -> f64 {
        if u >= 0.0 {
            upper_tail(u)
        } else {
            1.0 - upper_tail(-u)
        }
    }
}
