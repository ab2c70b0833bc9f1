//! Fixed scalar levels for rotated values (TQTC version 3, `docs/formats/quant.md` §6):
//! after a randomized Hadamard rotation a block's values are close to N(0, sigma^2), so
//! each code indexes a level of a table fitted to N(0, 1) and the block stores one scale.
//! Two level sets per bit width, both generated once by `scripts/gaussian_levels.py`
//! (the tables are in `levels_table.rs`):
//!
//! * [`LevelSet::LloydMax`]: the minimum-MSE levels of N(0, 1) (Lloyd-Max);
//! * [`LevelSet::Uniform`]: evenly spaced levels with the MSE-optimal step for N(0, 1).
//!
//! A block's scale is coded as one byte `c` against a per-segment `scale_base`:
//! `scale = scale_base * STEP[c]`, `STEP[0] = 0` and `STEP[c] = 2^(c >> 4) * 2^((c & 15) / 16)`
//! (sixteen steps per octave, 4.4% apart; [`scale_step`]).

use crate::layout::{MAX_BITS, MIN_BITS, V3_LEVELS_LLOYD_MAX, V3_LEVELS_UNIFORM};
use crate::levels_table as t;

/// Which level table the codes index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LevelSet {
    /// Lloyd-Max levels of N(0, 1).
    LloydMax,
    /// Uniform levels with the MSE-optimal step for N(0, 1).
    Uniform,
}

impl LevelSet {
    /// The on-disk byte.
    #[must_use]
    pub const fn byte(self) -> u8 {
        match self {
            LevelSet::LloydMax => V3_LEVELS_LLOYD_MAX,
            LevelSet::Uniform => V3_LEVELS_UNIFORM,
        }
    }

    /// From the on-disk byte; `None` for unknown values.
    #[must_use]
    pub const fn from_byte(b: u8) -> Option<Self> {
        match b {
            V3_LEVELS_LLOYD_MAX => Some(LevelSet::LloydMax),
            V3_LEVELS_UNIFORM => Some(LevelSet::Uniform),
            _ => None,
        }
    }

    /// The `2^bits` ascending levels for `bits` in 2..=8 (`None` outside).
    #[must_use]
    pub fn table(self, bits: u8) -> Option<&'static [f32]> {
        if !(MIN_BITS..=MAX_BITS).contains(&bits) {
            return None;
        }
        Some(match (self, bits) {
            (LevelSet::LloydMax, 2) => &t::LLOYD_MAX_2,
            (LevelSet::LloydMax, 3) => &t::LLOYD_MAX_3,
            (LevelSet::LloydMax, 4) => &t::LLOYD_MAX_4,
            (LevelSet::LloydMax, 5) => &t::LLOYD_MAX_5,
            (LevelSet::LloydMax, 6) => &t::LLOYD_MAX_6,
            (LevelSet::LloydMax, 7) => &t::LLOYD_MAX_7,
            (LevelSet::LloydMax, _) => &t::LLOYD_MAX_8,
            (LevelSet::Uniform, 2) => &t::UNIFORM_2,
            (LevelSet::Uniform, 3) => &t::UNIFORM_3,
            (LevelSet::Uniform, 4) => &t::UNIFORM_4,
            (LevelSet::Uniform, 5) => &t::UNIFORM_5,
            (LevelSet::Uniform, 6) => &t::UNIFORM_6,
            (LevelSet::Uniform, 7) => &t::UNIFORM_7,
            (LevelSet::Uniform, _) => &t::UNIFORM_8,
        })
    }
}

/// `2^(k / 16)` for `k` in 0..16, rounded to f32.
const SIXTEENTHS: [f32; 16] = [
    1.0,
    1.0442737,
    1.0905077,
    1.1387886,
    1.1892071,
    1.2418578,
    1.2968396,
    1.3542556,
    std::f32::consts::SQRT_2,
    1.4768262,
    1.5422108,
    1.6104903,
    1.6817929,
    1.7562522,
    1.8340081,
    1.9152066,
];

/// Number of scale steps per octave.
pub const STEPS_PER_OCTAVE: f32 = 16.0;

/// The multiplier of scale code `c`: 0 for `c = 0`, else `2^(c >> 4) * 2^((c & 15) / 16)`
/// (exact: a power of two times a table entry).
#[must_use]
pub fn scale_step(c: u8) -> f32 {
    if c == 0 {
        0.0
    } else {
        SIXTEENTHS[usize::from(c & 15)] * f32::from(1u16 << (c >> 4))
    }
}

/// The code whose step is nearest to `s / base` in the log domain (1..=255), or 0 for
/// `s <= 0` or a zero `base`.
#[must_use]
pub fn scale_code(s: f32, base: f32) -> u8 {
    if s <= 0.0 || base <= 0.0 {
        return 0;
    }
    let c = ((s / base).log2() * STEPS_PER_OCTAVE).round();
    c.clamp(1.0, 255.0) as u8
}

/// Thresholds between adjacent levels (midpoints), for the encoder's nearest-level search.
#[derive(Clone, Debug)]
pub struct Quantizer {
    levels: &'static [f32],
    mids: Vec<f32>,
    /// Uniform tables: `1 / step` of the table, for a first guess of the code (the search
    /// then settles it against `mids`, so the result is the same as a binary search).
    inv_step: Option<f32>,
}

impl Quantizer {
    /// The quantizer of `set` at `bits` (`None` for bits outside 2..=8).
    #[must_use]
    pub fn new(set: LevelSet, bits: u8) -> Option<Self> {
        let levels = set.table(bits)?;
        let mids = levels.windows(2).map(|w| 0.5 * (w[0] + w[1])).collect();
        let inv_step = (set == LevelSet::Uniform).then(|| {
            let span = levels[levels.len() - 1] - levels[0];
            (levels.len() - 1) as f32 / span
        });
        Some(Self {
            levels,
            mids,
            inv_step,
        })
    }

    /// The levels.
    #[must_use]
    pub fn levels(&self) -> &'static [f32] {
        self.levels
    }

    /// The largest level (the positive end of the table).
    #[must_use]
    pub fn max_level(&self) -> f32 {
        self.levels.last().copied().unwrap_or(1.0)
    }

    /// The code of the level nearest to `v` (ties go up): the number of midpoints `<= v`
    /// (0 for NaN). Uniform tables guess the code from the step and settle it with one
    /// or two comparisons against the midpoints (the encoder's hot loop: a binary search
    /// took a third of the ECSQ encoder's time); the answer is the binary search's.
    #[must_use]
    #[inline]
    pub fn code(&self, v: f32) -> u8 {
        let Some(inv) = self.inv_step else {
            return self.mids.partition_point(|&m| m <= v) as u8;
        };
        let last = self.mids.len();
        // `as` saturates (NaN -> 0): any guess in 0..=last is settled below.
        let mut c = (((v - self.levels[0]) * inv + 0.5) as usize).min(last);
        while c > 0 && self.mids[c - 1] > v {
            c -= 1;
        }
        while c < last && self.mids[c] <= v {
            c += 1;
        }
        c as u8
    }

    /// `out[i] = self.code(vals[i] * inv)` for every value. Tables of at most 16 levels
    /// count the thresholds at or below each value (the same number as the search: the
    /// thresholds ascend; none is <= NaN) in a fixed loop the compiler unrolls and
    /// vectorizes across values.
    pub fn codes(&self, vals: &[f32], inv: f32, out: &mut [u8]) {
        match self.mids.len() {
            3 => count_codes::<3>(&self.mids, vals, inv, out),
            7 => count_codes::<7>(&self.mids, vals, inv, out),
            15 => count_codes::<15>(&self.mids, vals, inv, out),
            _ => {
                for (o, &v) in out.iter_mut().zip(vals) {
                    *o = self.code(v * inv);
                }
            }
        }
    }
}

/// [`Quantizer::codes`] over `M` thresholds.
fn count_codes<const M: usize>(mids: &[f32], vals: &[f32], inv: f32, out: &mut [u8]) {
    let mut m = [0f32; M];
    m.copy_from_slice(&mids[..M]);
    for (o, &v) in out.iter_mut().zip(vals) {
        let x = v * inv;
        *o = m.iter().map(|&t| u8::from(t <= x)).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_symmetric_ascending_and_sized() {
        for set in [LevelSet::LloydMax, LevelSet::Uniform] {
            assert_eq!(LevelSet::from_byte(set.byte()), Some(set));
            for bits in 2..=8u8 {
                let t = set.table(bits).unwrap();
                assert_eq!(t.len(), 1 << bits);
                assert!(t.windows(2).all(|w| w[0] < w[1]), "{set:?} {bits}");
                for (a, b) in t.iter().zip(t.iter().rev()) {
                    assert_eq!(*a, -*b);
                }
            }
            assert!(set.table(1).is_none() && set.table(9).is_none());
        }
        assert_eq!(LevelSet::from_byte(2), None);
        // Lloyd-Max 3-bit levels of N(0, 1) (Max 1960: 0.2451, 0.7560, 1.3440, 2.1520).
        let t = LevelSet::LloydMax.table(3).unwrap();
        for (a, b) in t[4..].iter().zip([0.2451, 0.7560, 1.3440, 2.1520]) {
            assert!((a - b).abs() < 2e-4, "{a} vs {b}");
        }
    }

    #[test]
    fn scale_steps_are_log_spaced_and_codes_round_trip() {
        assert_eq!(scale_step(0), 0.0);
        assert_eq!(scale_step(16), 2.0);
        assert_eq!(scale_step(255), 32768.0 * SIXTEENTHS[15]);
        for c in 1..=255u8 {
            let s = scale_step(c);
            assert_eq!(scale_code(s * 3.0, 3.0), c, "{c}");
            if c > 1 {
                let r = s / scale_step(c - 1);
                assert!((r - 2f32.powf(1.0 / 16.0)).abs() < 1e-5, "{c}");
            }
        }
        assert_eq!(scale_code(0.0, 1.0), 0);
        assert_eq!(scale_code(1e-30, 1.0), 1);
        assert_eq!(scale_code(1e30, 1.0), 255);
        assert_eq!(scale_code(1.0, 0.0), 0);
    }

    /// The uniform tables' guessed search gives the binary search's code for every value:
    /// each table's midpoints and their f32 neighbours, and arbitrary bit patterns (NaN,
    /// infinities, subnormals, huge values).
    #[test]
    fn guessed_code_is_the_binary_search() {
        let reference = |q: &Quantizer, v: f32| q.mids.partition_point(|&m| m <= v) as u8;
        let mut s = 0x9E37_79B9u32;
        for bits in 2..=8u8 {
            let q = Quantizer::new(LevelSet::Uniform, bits).unwrap();
            assert!(q.inv_step.is_some());
            let mut probe: Vec<f32> = vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
            for &m in q.mids.iter().chain(q.levels) {
                probe.extend([m, m.next_up(), m.next_down(), m * 1.5, -m * 7.0]);
            }
            for _ in 0..200_000 {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                probe.push(f32::from_bits(s));
                probe.push((s as f32 / u32::MAX as f32 - 0.5) * 12.0);
            }
            for v in probe {
                assert_eq!(q.code(v), reference(&q, v), "bits {bits}, v {v:e}");
            }
        }
    }

    #[test]
    fn counted_codes_are_the_search() {
        let mut s = 0x9e37_79b9u32;
        let mut vs = vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            vs.push((s >> 8) as f32 / (1u32 << 24) as f32 * 12.0 - 6.0);
        }
        for set in [LevelSet::LloydMax, LevelSet::Uniform] {
            for bits in 2..=8u8 {
                let q = Quantizer::new(set, bits).unwrap();
                let mut xs = vs.clone();
                for &m in &q.mids {
                    xs.extend([m, m.next_up(), m.next_down()]);
                }
                for inv in [1.0f32, 0.37, 3.0] {
                    let mut out = vec![0u8; xs.len()];
                    q.codes(&xs, inv, &mut out);
                    for (&x, &c) in xs.iter().zip(&out) {
                        assert_eq!(c, q.code(x * inv), "{set:?} {bits} {x} {inv}");
                    }
                }
            }
        }
    }

    #[test]
    fn nearest_level_search() {
        for set in [LevelSet::LloydMax, LevelSet::Uniform] {
            for bits in 2..=8u8 {
                let q = Quantizer::new(set, bits).unwrap();
                for (i, &l) in q.levels().iter().enumerate() {
                    assert_eq!(usize::from(q.code(l)), i);
                }
                assert_eq!(q.code(-1e9), 0);
                assert_eq!(usize::from(q.code(1e9)), (1 << bits) - 1);
                let v = 0.3f32;
                let c = usize::from(q.code(v));
                let best = q
                    .levels()
                    .iter()
                    .map(|l| (l - v).abs())
                    .fold(f32::INFINITY, f32::min);
                assert_eq!((q.levels()[c] - v).abs(), best);
            }
        }
    }
}
