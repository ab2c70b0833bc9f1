//! Asymmetric group fitting for the v2 segment: per-group ranges, an optional
//! error-minimising clip search, and the coding of every group's scale and min as a u8
//! against two per-segment units (so a group costs 16 bits of side data).
//!
//! The arithmetic here is the format's: a decoder computes a group's min as
//! `min_base + min_unit * mc` and its scale as `scale_unit * sc` in f32, exactly as
//! [`GroupCoder::min_of`] and [`GroupCoder::scale_of`] do, and every value as
//! `min + scale * u`.

use crate::layout::V2_MAX_CODE;
use crate::QuantError;

/// One group's fitted range `[lo, hi]` (before coding).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// Smallest value the group represents.
    pub lo: f32,
    /// Largest value the group represents.
    pub hi: f32,
}

/// Shrink factors the clip search tries for each end of a group's range.
const CLIP_STEPS: [f32; 5] = [0.0, 0.02, 0.05, 0.1, 0.15];

/// The range of `vals` (min and max).
#[must_use]
pub fn min_max(vals: impl Iterator<Item = f32>) -> Range {
    let (lo, hi) = vals.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    Range { lo, hi }
}

/// Sum of squared errors of quantizing `vals` to `levels` uniform steps over `r`.
fn sse(vals: &[f32], r: Range, levels: f32) -> f32 {
    let s = (r.hi - r.lo) / levels;
    if s <= 0.0 {
        return vals.iter().map(|v| (v - r.lo) * (v - r.lo)).sum();
    }
    let inv = 1.0 / s;
    vals.iter()
        .map(|&v| {
            let u = ((v - r.lo) * inv).round().clamp(0.0, levels);
            let e = r.lo + s * u - v;
            e * e
        })
        .sum()
}

/// Least-squares refit of a range: with the codes `r` assigns, the `(min, scale)` that
/// minimise the squared error (`None` when all codes are equal).
fn refit(vals: &[f32], r: Range, levels: f32) -> Option<Range> {
    let s = (r.hi - r.lo) / levels;
    if s <= 0.0 {
        return None;
    }
    let inv = 1.0 / s;
    let (mut su, mut suu, mut sx, mut sxu) = (0f64, 0f64, 0f64, 0f64);
    for &v in vals {
        let u = f64::from(((v - r.lo) * inv).round().clamp(0.0, levels));
        let x = f64::from(v);
        su += u;
        suu += u * u;
        sx += x;
        sxu += x * u;
    }
    let n = vals.len() as f64;
    let det = n * suu - su * su;
    if det <= 0.0 {
        return None;
    }
    let scale = (n * sxu - sx * su) / det;
    let min = (sx - scale * su) / n;
    let out = Range {
        lo: min as f32,
        hi: (min + scale * f64::from(levels)) as f32,
    };
    (scale > 0.0 && out.lo.is_finite() && out.hi.is_finite()).then_some(out)
}

/// The range that minimises the squared error of `vals` at `bits` bits: each end of
/// `full` (the group's min/max) is pulled in by 0-15% of the range, every combination is
/// tried, then the best is refitted by least squares (codes fixed, then re-assigned) up
/// to three times. The full range wins ties.
#[must_use]
pub fn search_clip(vals: &[f32], full: Range, bits: u8) -> Range {
    let levels = f32::from((1u16 << bits) - 1);
    let width = full.hi - full.lo;
    if width <= 0.0 {
        return full;
    }
    let mut best = (sse(vals, full, levels), full);
    for &a in &CLIP_STEPS {
        for &b in &CLIP_STEPS {
            if a == 0.0 && b == 0.0 {
                continue;
            }
            let r = Range {
                lo: full.lo + a * width,
                hi: full.hi - b * width,
            };
            let e = sse(vals, r, levels);
            if e < best.0 {
                best = (e, r);
            }
        }
    }
    for _ in 0..3 {
        let Some(r) = refit(vals, best.1, levels) else {
            break;
        };
        let e = sse(vals, r, levels);
        if e < best.0 {
            best = (e, r);
        } else {
            break;
        }
    }
    best.1
}

/// The per-segment units and the coded parameters of every group.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupCoder {
    /// Scale of code 1 (`scale = scale_unit * sc`).
    pub scale_unit: f32,
    /// Min of code 0.
    pub min_base: f32,
    /// Min step (`min = min_base + min_unit * mc`).
    pub min_unit: f32,
    /// `(sc, mc)` per group.
    pub codes: Vec<[u8; 2]>,
}

impl GroupCoder {
    /// A group's decoded min.
    #[inline]
    #[must_use]
    pub fn min_of(min_base: f32, min_unit: f32, mc: u8) -> f32 {
        min_base + min_unit * f32::from(mc)
    }

    /// A group's decoded scale.
    #[inline]
    #[must_use]
    pub fn scale_of(scale_unit: f32, sc: u8) -> f32 {
        scale_unit * f32::from(sc)
    }

    /// Code the ranges of all groups at `bits` bits. Every group's coded min is `<=` its
    /// `lo` and its coded `min + scale * (2^bits - 1)` is `>=` its `hi` (up to one f32
    /// rounding), so a value inside its group's range is never clamped by more than that.
    ///
    /// # Errors
    /// [`QuantError::ScaleOverflow`] naming the first group whose range overflows f32
    /// (values near `f32::MAX` of both signs).
    pub fn fit(ranges: &[Range], bits: u8) -> Result<Self, QuantError> {
        let levels = f32::from((1u16 << bits) - 1);
        let max_code = f32::from(V2_MAX_CODE);
        let lows = min_max(ranges.iter().map(|r| r.lo));
        let (min_base, min_unit) = if ranges.is_empty() {
            (0.0, 0.0)
        } else {
            (lows.lo, (lows.hi - lows.lo) / max_code)
        };
        let mut codes = Vec::with_capacity(ranges.len());
        let mut need = Vec::with_capacity(ranges.len());
        let mut max_need = 0.0f32;
        for (g, r) in ranges.iter().enumerate() {
            let mut mc = if min_unit > 0.0 {
                ((r.lo - min_base) / min_unit).floor().clamp(0.0, max_code) as u8
            } else {
                0
            };
            while mc > 0 && Self::min_of(min_base, min_unit, mc) > r.lo {
                mc -= 1;
            }
            let m = Self::min_of(min_base, min_unit, mc);
            let s = (r.hi - m) / levels;
            if !s.is_finite() || !min_unit.is_finite() {
                return Err(QuantError::ScaleOverflow {
                    group: g,
                    max_abs: r.lo.abs().max(r.hi.abs()),
                });
            }
            max_need = max_need.max(s);
            need.push(s);
            codes.push([0u8, mc]);
        }
        let scale_unit = max_need / max_code;
        if scale_unit > 0.0 {
            for (g, (c, &s)) in codes.iter_mut().zip(&need).enumerate() {
                let mut sc = (s / scale_unit).ceil().clamp(0.0, max_code) as u8;
                let m = Self::min_of(min_base, min_unit, c[1]);
                let hi = ranges[g].hi;
                while sc < V2_MAX_CODE && m + Self::scale_of(scale_unit, sc) * levels < hi {
                    sc += 1;
                }
                c[0] = sc;
            }
        }
        Ok(Self {
            scale_unit,
            min_base,
            min_unit,
            codes,
        })
    }
}

/// Quantize `vals` with one group's decoded `min` and `scale` into `out` (codes
/// `0..=2^bits-1`, round half away from zero, clamped).
#[inline]
pub fn quantize_group(vals: &[f32], min: f32, scale: f32, bits: u8, out: &mut [u8]) {
    let top = f32::from((1u16 << bits) - 1);
    let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    for (o, &v) in out.iter_mut().zip(vals) {
        *o = round_code((v - min) * inv, top);
    }
}

/// `x.round().clamp(0.0, top) as u8` for `top` in 1..=255, bit for bit (NaN gives 0,
/// halves round away from zero), without a call to libm's `roundf` per value (x86-64's
/// baseline has no rounding instruction): the fraction left by truncation decides.
#[inline(always)]
pub(crate) fn round_code(x: f32, top: f32) -> u8 {
    // Past [-1, top + 1] the result is 0 or top either way; NaN stays NaN.
    let y = x.clamp(-1.0, top + 1.0);
    let t = y as i32; // toward zero; NaN -> 0
    let f = y - t as f32; // exact: |y| <= 256
    let r = t + i32::from(f >= 0.5) - i32::from(f <= -0.5);
    r.clamp(0, top as i32) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_code_is_round_then_clamp() {
        let mut xs = vec![
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
        ];
        // Every half and its neighbours, and a dense sweep around the range.
        for k in -4..=2 * 260 {
            let h = k as f32 * 0.5;
            xs.extend([h, h.next_down(), h.next_up()]);
        }
        let mut s = 0x2545_f491u32;
        for _ in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            xs.push((s >> 8) as f32 / (1u32 << 24) as f32 * 300.0 - 20.0);
        }
        for bits in 1..=8u32 {
            let top = ((1u32 << bits) - 1) as f32;
            for &x in &xs {
                assert_eq!(
                    round_code(x, top),
                    x.round().clamp(0.0, top) as u8,
                    "{x} {top}"
                );
            }
        }
    }

    #[test]
    fn coded_ranges_cover_the_groups() {
        let ranges = [
            Range { lo: -3.0, hi: 2.0 },
            Range { lo: 0.5, hi: 0.6 },
            Range { lo: 7.0, hi: 7.0 },
            Range {
                lo: -0.01,
                hi: 40.0,
            },
        ];
        for bits in 2..=8u8 {
            let c = GroupCoder::fit(&ranges, bits).unwrap();
            let top = f32::from((1u16 << bits) - 1);
            for (r, code) in ranges.iter().zip(&c.codes) {
                let m = GroupCoder::min_of(c.min_base, c.min_unit, code[1]);
                let s = GroupCoder::scale_of(c.scale_unit, code[0]);
                assert!(m <= r.lo, "bits {bits}: min {m} > lo {}", r.lo);
                assert!(m + s * top >= r.hi * (1.0 - 1e-6), "bits {bits}: {r:?}");
            }
        }
    }

    #[test]
    fn clip_search_never_does_worse_than_the_full_range() {
        let mut vals: Vec<f32> = (0..64).map(|i| ((i as f32) * 0.37).sin()).collect();
        vals[5] = 9.0; // one outlier
        let full = min_max(vals.iter().copied());
        for bits in [2u8, 3, 5, 8] {
            let levels = f32::from((1u16 << bits) - 1);
            let r = search_clip(&vals, full, bits);
            assert!(sse(&vals, r, levels) <= sse(&vals, full, levels));
            assert!(r.hi > r.lo);
        }
    }

    #[test]
    fn overflowing_ranges_are_typed_errors() {
        let ranges = [Range {
            lo: -f32::MAX,
            hi: f32::MAX,
        }];
        assert!(matches!(
            GroupCoder::fit(&ranges, 3),
            Err(QuantError::ScaleOverflow { group: 0, .. })
        ));
    }
}
