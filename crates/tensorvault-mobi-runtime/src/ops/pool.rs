//! Pooling, NCHW: MaxPool2D / AvgPool2D over windows (stride, dilation, pads, ceil mode,
//! count_include_pad) and GlobalAveragePool / GlobalMaxPool.

use super::window::{geometry, nchw, Axis, Span};
use super::{f32_tensor, to_usize, Ctx, OpError, OpResult};
use crate::tensor::Tensor;

#[cfg(all(target_arch = "x86_64", tv_avx512))]
#[allow(
    clippy::incompatible_msrv,
    reason = "compiled only by compilers with AVX-512 support (cfg tv_avx512, set by build.rs \
              for Rust >= 1.89); the MSRV build runs the scalar loop"
)]
mod avx512;

/// MaxPool2D / AvgPool2D. Row-wise like the depthwise kernel: each window tap combines
/// an input row into an output row over the outputs that read inside the input
/// (`Axis::span`); the divisor of AvgPool2D is the product of the per-axis counts of
/// taps inside the input (or inside the padded input, with `count_include_pad`).
pub(crate) fn pool2d(cx: &Ctx<'_>, max: bool) -> OpResult<Tensor> {
    let [n, c, h, w] = nchw(cx)?;
    let x = cx.f32(0)?;
    let p = cx.params();
    let k = p.ints("kernel").unwrap_or(&[1, 1]);
    let (kh, kw) = (to_usize("kernel", k[0])?, to_usize("kernel", k[1])?);
    let (ay, ax) = geometry(cx, h, w, kh, kw, cx.int("ceil_mode") == 1)?;
    let include_pad = cx.int("count_include_pad") == 1;
    let out_shape = vec![n, c, ay.out, ax.out];
    let total = cx.alloc(&out_shape)?;
    let (oh, ow) = (ay.out, ax.out);
    let spans: Vec<Span> = (0..kw).map(|k| ax.span(k)).collect();
    let divisor = if max {
        Vec::new()
    } else {
        let (cy, cx_) = (
            tap_counts(&ay, kh, include_pad),
            tap_counts(&ax, kw, include_pad),
        );
        cy.iter()
            .flat_map(|&a| cx_.iter().map(move |&b| (a * b).max(1) as f32))
            .collect()
    };
    let mut y = cx.buffer(total);
    let inside = |a: &Axis| a.pad_begin == 0 && a.dilation == 1 && a.stride * a.out <= a.input;
    if max && kh == 2 && kw == 2 && ay.stride == 2 && ax.stride == 2 && inside(&ay) && inside(&ax) {
        // The common 2x2/2 max pool with every window inside: four loads per output.
        max_2x2(x, [n * c, h, w], [oh, ow], &mut y);
        return Ok(f32_tensor(out_shape, y));
    }
    let init = if max { f32::NEG_INFINITY } else { 0.0 };
    y.fill(init);
    for (plane, out) in y.chunks_exact_mut((oh * ow).max(1)).enumerate().take(n * c) {
        let xin = &x[plane * h * w..][..h * w];
        for (oy, orow) in out.chunks_exact_mut(ow.max(1)).enumerate().take(oh) {
            for ky in 0..kh {
                let Some(iy) = ay.at(oy, ky) else { continue };
                let xrow = &xin[iy * w..][..w];
                for s in &spans {
                    if s.lo >= s.hi {
                        continue;
                    }
                    let dst = &mut orow[s.lo..s.hi];
                    let src = xrow[s.at(s.lo, ax.stride)..].iter().step_by(ax.stride);
                    if max {
                        // NaN sticks: once an output is NaN, `v > NaN` is false.
                        dst.iter_mut().zip(src).for_each(|(o, &v)| {
                            if v > *o || v.is_nan() {
                                *o = v;
                            }
                        });
                    } else {
                        dst.iter_mut().zip(src).for_each(|(o, &v)| *o += v);
                    }
                }
            }
        }
        if !max {
            out.iter_mut().zip(&divisor).for_each(|(o, &d)| *o /= d);
        }
    }
    Ok(f32_tensor(out_shape, y))
}

/// MaxPool 2x2, stride 2, windows inside the input (NaN propagates, as in the general
/// loop: once the running maximum is NaN, `v > NaN` is false). Rows run through the
/// AVX-512 kernel when the CPU has it (16 outputs per step; the scalar loop was 7-12% of
/// the CIFAR-shaped CNN's run), else [`max_2x2_row`].
pub(crate) fn max_2x2(x: &[f32], [planes, h, w]: [usize; 3], [oh, ow]: [usize; 2], y: &mut [f32]) {
    #[cfg(all(target_arch = "x86_64", tv_avx512))]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F, the only requirement of the target-feature function.
        unsafe { avx512::max_2x2(x, [planes, h, w], [oh, ow], y) };
        return;
    }
    max_2x2_rows(x, [planes, h, w], [oh, ow], y, max_2x2_row);
}

/// The output rows of a 2x2 / stride 2 max pool, each from two input rows by `row`.
#[inline(always)]
fn max_2x2_rows(
    x: &[f32],
    [planes, h, w]: [usize; 3],
    [oh, ow]: [usize; 2],
    y: &mut [f32],
    row: impl Fn(&[f32], &[f32], &mut [f32]),
) {
    for (p, out) in y
        .chunks_exact_mut((oh * ow).max(1))
        .enumerate()
        .take(planes)
    {
        let xin = &x[p * h * w..][..h * w];
        for (oy, orow) in out.chunks_exact_mut(ow.max(1)).enumerate().take(oh) {
            let r0 = &xin[2 * oy * w..][..2 * ow];
            let r1 = &xin[(2 * oy + 1) * w..][..2 * ow];
            row(r0, r1, orow);
        }
    }
}

/// One output row of a 2x2 / stride 2 max pool, element by element.
fn max_2x2_row(r0: &[f32], r1: &[f32], orow: &mut [f32]) {
    for ((o, a), b) in orow
        .iter_mut()
        .zip(r0.chunks_exact(2))
        .zip(r1.chunks_exact(2))
    {
        let mut m = f32::NEG_INFINITY;
        for v in [a[0], a[1], b[0], b[1]] {
            if v > m || v.is_nan() {
                m = v;
            }
        }
        *o = m;
    }
}

/// Per output along one axis, how many window taps fall inside the input (or inside the
/// padded input when `include_pad`: ceil mode can put taps past the end padding).
fn tap_counts(a: &Axis, kernel: usize, include_pad: bool) -> Vec<usize> {
    let padded = a.input + a.pad_begin + a.pad_end;
    (0..a.out)
        .map(|o| {
            (0..kernel)
                .filter(|&k| {
                    if include_pad {
                        o * a.stride + k * a.dilation < padded
                    } else {
                        a.at(o, k).is_some()
                    }
                })
                .count()
        })
        .collect()
}

/// GlobalAveragePool / GlobalMaxPool over every axis after the first two.
pub(crate) fn global_pool(cx: &Ctx<'_>, max: bool) -> OpResult<Tensor> {
    let s = cx.shape(0)?;
    if s.len() < 3 {
        return Err(OpError::Shape {
            input: 0,
            rule: "must be rank >= 3 ([N, C, spatial...])",
        });
    }
    let x = cx.f32(0)?;
    let planes = s[0] * s[1];
    let size: usize = s[2..].iter().product();
    let mut out_shape = s[..2].to_vec();
    out_shape.extend(std::iter::repeat_n(1, s.len() - 2));
    let y = (0..planes)
        .map(|p| {
            let v = &x[p * size..][..size];
            if max {
                v.iter().fold(f32::NEG_INFINITY, |a, &b| {
                    if a.is_nan() || b.is_nan() {
                        f32::NAN
                    } else {
                        a.max(b)
                    }
                })
            } else {
                (v.iter().map(|&a| f64::from(a)).sum::<f64>() / size as f64) as f32
            }
        })
        .collect();
    Ok(f32_tensor(out_shape, y))
}
