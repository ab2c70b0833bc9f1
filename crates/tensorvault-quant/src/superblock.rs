//! Fitting one super-block of the v4 segment (`docs/formats/quant.md` §11): every group's
//! range (min/max, or the error-minimising clip search of [`crate::asym`]), then the
//! super-block's two f16 units and each group's scale and min codes, k-quant style:
//!
//! * `d` (f16, >= 0): a group's scale is `d * sc`, `sc` in `0..2^scale_bits`;
//! * `m` (f16, any sign): a group's min is `m * mc`, `mc` in `0..2^min_bits`.
//!
//! The arithmetic here is the format's (f32, multiply then add, no fused multiply-add):
//! [`group_params`] is what a decoder computes, and the encoder scores every candidate
//! pair of codes with exactly those decoded values.

use half::f16;

use crate::asym::{min_max, search_clip, Range};

/// One super-block's coded side data.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SuperFit {
    /// f16 bits of the scale unit `d`.
    pub d: u16,
    /// f16 bits of the min unit `m`.
    pub m: u16,
    /// `(sc, mc)` per group.
    pub codes: Vec<(u8, u8)>,
}

/// A group's decoded `(min, scale)` from its super-block's units and its codes.
#[inline]
#[must_use]
pub(crate) fn group_params(d: f32, m: f32, sc: u8, mc: u8) -> (f32, f32) {
    (m * f32::from(mc), d * f32::from(sc))
}

/// Largest code of a `bits`-bit field, as f32.
fn top(bits: u8) -> f32 {
    f32::from((1u16 << bits) - 1)
}

/// The smallest f16 whose magnitude is at least `|v|` with the sign of `v` (so a unit
/// times the largest code still reaches `v`); `v` must be finite.
fn f16_covering(v: f32) -> f16 {
    let h = f16::from_f32(v);
    if h.to_f32().abs() >= v.abs() || h.is_infinite() {
        return h;
    }
    // One ulp away from zero: the next bit pattern of the same sign.
    let next = f16::from_bits(h.to_bits() + 1);
    if next.is_finite() {
        next
    } else {
        h
    }
}

/// Squared error of quantizing `vals` with the decoded `(min, scale)` at `levels` top
/// code, as the decoder reconstructs them.
fn sse(vals: &[f32], min: f32, scale: f32, levels: f32) -> f32 {
    let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    vals.iter()
        .map(|&v| {
            let u = ((v - min) * inv).round().clamp(0.0, levels);
            let e = min + scale * u - v;
            e * e
        })
        .sum()
}

/// Codes of `vals` against a group's decoded `(min, scale)` (written into `out`).
pub(crate) fn quantize(vals: &[f32], min: f32, scale: f32, bits: u8, out: &mut [u8]) {
    let levels = top(bits);
    let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    for (o, &v) in out.iter_mut().zip(vals) {
        *o = ((v - min) * inv).round().clamp(0.0, levels) as u8;
    }
}

/// Settings of one fit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FitParams {
    pub group: usize,
    pub bits: u8,
    pub scale_bits: u8,
    pub min_bits: u8,
    pub clip_search: bool,
}

/// Fit one super-block's values `vals` (already rotated when the segment is): group
/// ranges, units covering the largest scale and the most extreme min, then per group the
/// pair of codes around the rounded ones (±1 each) with the least squared error.
/// `None` when a unit overflows f16 (the caller reports the scale overflow).
pub(crate) fn fit(vals: &[f32], p: FitParams) -> Option<SuperFit> {
    let levels = top(p.bits);
    let ranges: Vec<Range> = vals
        .chunks(p.group)
        .map(|c| {
            let full = min_max(c.iter().copied());
            if p.clip_search {
                search_clip(c, full, p.bits)
            } else {
                full
            }
        })
        .collect();
    let smax = ranges
        .iter()
        .fold(0f32, |a, r| a.max((r.hi - r.lo) / levels));
    let (sc_top, mc_top) = (top(p.scale_bits), top(p.min_bits));
    // Mins share the sign of the unit: negative when any group's min is below zero (a
    // group whose min is above zero then takes min 0, which still covers it).
    let lo_min = ranges.iter().fold(0f32, |a, r| a.min(r.lo));
    let hi_min = ranges.iter().fold(0f32, |a, r| a.max(r.lo));
    let m_want = if lo_min < 0.0 { lo_min } else { hi_min } / mc_top;
    let d = f16_covering(smax / sc_top);
    let m = f16_covering(m_want);
    if !(d.is_finite() && m.is_finite()) {
        return None;
    }
    let (df, mf) = (d.to_f32(), m.to_f32());
    let codes = vals
        .chunks(p.group)
        .zip(&ranges)
        .map(|(c, r)| best_codes(c, *r, df, mf, levels, sc_top, mc_top))
        .collect();
    Some(SuperFit {
        d: d.to_bits(),
        m: m.to_bits(),
        codes,
    })
}

/// The `(sc, mc)` pair near the range `r`'s rounded codes with the least squared error.
fn best_codes(
    vals: &[f32],
    r: Range,
    d: f32,
    m: f32,
    levels: f32,
    sc_top: f32,
    mc_top: f32,
) -> (u8, u8) {
    let round = |v: f32, t: f32| {
        if v.is_finite() {
            v.round().clamp(0.0, t)
        } else {
            0.0
        }
    };
    let mc0 = if m != 0.0 {
        round(r.lo / m, mc_top)
    } else {
        0.0
    };
    let mut best = (f32::INFINITY, 0u8, 0u8);
    for dm in [0.0f32, -1.0, 1.0] {
        let mc = mc0 + dm;
        if !(0.0..=mc_top).contains(&mc) || (m == 0.0 && mc != 0.0) {
            continue;
        }
        let min = m * mc;
        let sc0 = if d > 0.0 {
            round((r.hi - min) / levels / d, sc_top)
        } else {
            0.0
        };
        for ds in [0.0f32, 1.0, -1.0] {
            let sc = sc0 + ds;
            if !(0.0..=sc_top).contains(&sc) || (d == 0.0 && sc != 0.0) {
                continue;
            }
            let (gm, gs) = group_params(d, m, sc as u8, mc as u8);
            let e = sse(vals, gm, gs, levels);
            if e < best.0 {
                best = (e, sc as u8, mc as u8);
            }
        }
    }
    (best.1, best.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_f16_reaches_the_value() {
        for v in [1e-3f32, 0.123_456, -0.987_654, 3.3e-6, -7.77e-5, 1000.1] {
            let h = f16_covering(v).to_f32();
            assert!(h.abs() >= v.abs() && h.signum() == v.signum(), "{v} -> {h}");
            assert!((h - v).abs() <= v.abs() * 2e-3 + 1e-7, "{v} -> {h}");
        }
        assert_eq!(f16_covering(0.0).to_f32(), 0.0);
    }

    #[test]
    fn fit_covers_every_group_and_constant_blocks_are_exact() {
        let vals: Vec<f32> = (0..256)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.01)
            .collect();
        let p = FitParams {
            group: 32,
            bits: 4,
            scale_bits: 6,
            min_bits: 6,
            clip_search: false,
        };
        let f = fit(&vals, p).unwrap();
        assert_eq!(f.codes.len(), 8);
        let (d, m) = (f16::from_bits(f.d).to_f32(), f16::from_bits(f.m).to_f32());
        assert!(d > 0.0 && m < 0.0);
        let mut codes = [0u8; 32];
        for (c, &(sc, mc)) in vals.chunks(32).zip(&f.codes) {
            let (gm, gs) = group_params(d, m, sc, mc);
            quantize(c, gm, gs, 4, &mut codes);
            for (&v, &q) in c.iter().zip(&codes) {
                let y = gm + gs * f32::from(q);
                // Within a step of the true value (coded units cost up to one step).
                assert!((y - v).abs() <= gs, "{v} vs {y} (scale {gs})");
            }
        }
        let zeros = fit(&[0.0; 64], p).unwrap();
        assert_eq!((zeros.d, zeros.m), (0, 0));
        assert!(zeros.codes.iter().all(|&c| c == (0, 0)));
    }
}
