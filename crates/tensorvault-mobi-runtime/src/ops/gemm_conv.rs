//! A convolution's im2col matrix as the gemm's right operand, packed straight from the
//! input images ([`ConvCols`], `Rhs::Conv`): row `p = (ci, ky, kx)`, column
//! `j = (image, oy, ox)`. No im2col buffer is written and read back: each `KC x NC`
//! block is gathered into the panel layout directly (the im2col + pack passes were over
//! half of LeNet-5's batch-64 time).

use super::gemm::NR;

/// The im2col matrix of a 2-D convolution (NCHW), read in place from the input.
#[derive(Debug, Clone, Copy)]
pub struct ConvCols<'a> {
    /// The input: image `b`'s first channel starts at `x[b * image_stride]`, channels are
    /// `in_hw[0] * in_hw[1]` apart.
    pub x: &'a [f32],
    /// Images side by side in the columns (1 for one image).
    pub images: usize,
    /// Elements from one image's first channel to the next image's.
    pub image_stride: usize,
    /// Input channels (of the group).
    pub channels: usize,
    /// Input height and width.
    pub in_hw: [usize; 2],
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Strides (y, x).
    pub stride: [usize; 2],
    /// Dilations (y, x).
    pub dilation: [usize; 2],
    /// Padding before the first row and column (top, left).
    pub pad: [usize; 2],
    /// Output height and width.
    pub out_hw: [usize; 2],
}

impl ConvCols<'_> {
    /// Rows of the matrix: `channels * kh * kw`.
    pub fn depth(&self) -> Option<usize> {
        self.channels
            .checked_mul(self.kernel[0])?
            .checked_mul(self.kernel[1])
    }

    /// Columns of the matrix: `images * oh * ow`.
    pub fn cols(&self) -> Option<usize> {
        self.images
            .checked_mul(self.out_hw[0])?
            .checked_mul(self.out_hw[1])
    }

    /// Whether every element the matrix names lies in `x` (the last image's last
    /// channel ends inside it) and the output fits the strides (checked once per
    /// product: the packing indexes `x` with bounds checks all the same).
    pub(crate) fn fits(&self) -> bool {
        let [h, w] = self.in_hw;
        let need = (self.images.max(1) - 1)
            .checked_mul(self.image_stride)
            .zip(self.channels.checked_mul(h).and_then(|v| v.checked_mul(w)))
            .and_then(|(a, b)| a.checked_add(b));
        let positive = self.stride.iter().chain(&self.dilation).all(|&v| v > 0);
        positive && need.is_some_and(|n| self.images == 0 || n <= self.x.len())
    }
}

/// Pack depth `ks` x columns `cols` of `s`'s matrix into `dst` as panels of `NR` columns
/// (`[ks.len()][NR]` each, zero-padded). `table` is scratch for one entry per column.
pub(crate) fn pack(
    s: &ConvCols<'_>,
    ks: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    dst: &mut [f32],
    table: &mut Vec<[isize; 3]>,
) {
    let kc = ks.len();
    let ([h, w], [kh, kw]) = (s.in_hw, s.kernel);
    let ([sy, sx], [dy, dx]) = (s.stride, s.dilation);
    let ([pt, pl], [oh, ow]) = (s.pad, s.out_hw);
    let plane_out = oh * ow;
    // Per column: the image's offset, and the input row and column of tap (0, 0)
    // (negative in the padding). Every value is bounded by a slice length or a checked
    // output extent, so it fits isize.
    table.clear();
    table.extend(cols.clone().map(|j| {
        let (b, r) = (j / plane_out, j % plane_out);
        let (oy, ox) = (r / ow, r % ow);
        [
            (b * s.image_stride) as isize,
            (oy * sy) as isize - pt as isize,
            (ox * sx) as isize - pl as isize,
        ]
    }));
    let (h, w) = (h as isize, w as isize);
    for (pi, p) in ks.enumerate() {
        let (ci, t) = (p / (kh * kw), p % (kh * kw));
        let (ky, kx) = (((t / kw) * dy) as isize, ((t % kw) * dx) as isize);
        let channel = (ci as isize) * h * w;
        for (q, chunk) in table.chunks(NR).enumerate() {
            let d = &mut dst[q * kc * NR + pi * NR..][..NR];
            let (first, last) = (chunk[0], chunk[chunk.len() - 1]);
            let iy = first[1] + ky;
            // Stride 1, 16 columns of one input row inside the image: one fixed copy.
            if sx == 1
                && chunk.len() == NR
                && first[0] == last[0]
                && first[1] == last[1]
                && last[2] - first[2] == NR as isize - 1
                && (0..h).contains(&iy)
                && first[2] + kx >= 0
                && last[2] + kx < w
            {
                let at = (first[0] + channel + iy * w + first[2] + kx) as usize;
                let src: &[f32; NR] = s.x[at..at + NR].try_into().unwrap_or(&[0.0; NR]);
                d.copy_from_slice(src);
                continue;
            }
            for (v, e) in d.iter_mut().zip(chunk) {
                let (iy, ix) = (e[1] + ky, e[2] + kx);
                *v = if (0..h).contains(&iy) && (0..w).contains(&ix) {
                    s.x[(e[0] + channel + iy * w + ix) as usize]
                } else {
                    0.0
                };
            }
            d[chunk.len()..].fill(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::gemm::{gemm, Epilogue, Kernel, Lhs, Rhs};
    use super::*;

    /// The im2col matrix, element by element.
    fn naive_cols(s: &ConvCols<'_>) -> Vec<f32> {
        let (k, n) = (s.depth().unwrap(), s.cols().unwrap());
        let ([h, w], [kh, kw], [oh, ow]) = (s.in_hw, s.kernel, s.out_hw);
        let mut m = vec![0f32; k * n];
        for p in 0..k {
            let (ci, ky, kx) = (p / (kh * kw), p / kw % kh, p % kw);
            for j in 0..n {
                let (b, oy, ox) = (j / (oh * ow), j / ow % oh, j % ow);
                let iy = (oy * s.stride[0] + ky * s.dilation[0]) as isize - s.pad[0] as isize;
                let ix = (ox * s.stride[1] + kx * s.dilation[1]) as isize - s.pad[1] as isize;
                if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                    m[p * n + j] =
                        s.x[b * s.image_stride + ci * h * w + iy as usize * w + ix as usize];
                }
            }
        }
        m
    }

    #[test]
    fn gathered_panels_equal_an_explicit_im2col() {
        // (channels, h, w, kernel, stride, dilation, pad, images): wide rows (the
        // 16-column copy), strides, dilation, pads, several images, odd widths.
        let cases = [
            (3, 5, 40, [3, 3], [1, 1], [1, 1], [1, 1], 2),
            (2, 9, 37, [5, 5], [1, 1], [1, 1], [2, 2], 1),
            (3, 12, 21, [3, 3], [2, 2], [1, 1], [1, 0], 3),
            (1, 10, 33, [3, 2], [1, 3], [2, 1], [0, 2], 2),
        ];
        for (ch, h, w, [kh, kw], st, dl, pad, images) in cases {
            let oh = (h + 2 * pad[0] - dl[0] * (kh - 1) - 1) / st[0] + 1;
            let ow = (w + 2 * pad[1] - dl[1] * (kw - 1) - 1) / st[1] + 1;
            let x: Vec<f32> = (0..images * ch * h * w)
                .map(|i| (i % 97) as f32 - 48.0)
                .collect();
            let s = ConvCols {
                x: &x,
                images,
                image_stride: ch * h * w,
                channels: ch,
                in_hw: [h, w],
                kernel: [kh, kw],
                stride: st,
                dilation: dl,
                pad,
                out_hw: [oh, ow],
            };
            let (k, n) = (s.depth().unwrap(), s.cols().unwrap());
            let cols = naive_cols(&s);
            let m = 7;
            let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 / 13.0).collect();
            let lhs = Lhs::Strided {
                data: &a,
                rs: k,
                cs: 1,
            };
            let explicit = Rhs::Strided {
                data: &cols,
                rs: n,
                cs: 1,
            };
            let (mut want, mut got) = (vec![0f32; m * n], vec![0f32; m * n]);
            let e = Epilogue::default();
            gemm([m, k, n], lhs, explicit, &mut want, n, e, Kernel::Portable);
            gemm(
                [m, k, n],
                lhs,
                Rhs::Conv(s),
                &mut got,
                n,
                e,
                Kernel::Portable,
            );
            assert_eq!(
                got, want,
                "{ch}x{h}x{w} k{kh}x{kw} s{st:?} d{dl:?} p{pad:?}"
            );
        }
    }
}
