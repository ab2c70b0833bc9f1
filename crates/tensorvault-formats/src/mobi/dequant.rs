//! [`Dequantizer`]: a constant's values as f32, any range at a time, read from the
//! stored payload in place. [`ConstantTensor::to_f32`] is one `fill` of the whole
//! range; a consumer that wants no f32 copy of a whole tensor (a runtime packing weights
//! panel by panel) fills one row at a time. Every range gives the same bits as the whole.

use tensorvault_quant::affine::{Affine, AffineCode};
use tensorvault_quant::float::f16_bits_to_f32;
use tensorvault_quant::per_axis::PerAxis;
use tensorvault_quant::QuantError;

use super::error::MobiError;
use super::tensor::{axis_split, ConstantTensor, Quantization};
use super::types::DataType;

/// f16 values widened per call of [`f16_bits_to_f32`] (a stack buffer of their bits).
const F16_CHUNK: usize = 256;

/// How the stored codes become f32.
#[derive(Debug, Clone)]
enum Decode {
    F32,
    F16,
    /// `(code - zero_point) * scale` with the parameters of lane `k / inner` (cycling
    /// over `params`), for codes of `width` bytes.
    Affine {
        code: Code,
        params: Vec<(f32, f32)>,
        inner: usize,
    },
    I32,
    I64,
    Bool,
}

/// The integer type of affine codes.
#[derive(Debug, Clone, Copy)]
enum Code {
    I8,
    U8,
    I16,
}

impl Code {
    fn width(self) -> usize {
        match self {
            Code::I8 | Code::U8 => 1,
            Code::I16 => 2,
        }
    }
}

/// The values of one constant as f32, decoded range by range from its payload (fp16
/// widened, int8 / uint8 / int16 dequantized per tensor or per axis, i32 / i64 / bool
/// converted) with the payload's size and the quantization parameters checked once, by
/// [`ConstantTensor::dequantizer`].
#[derive(Debug, Clone)]
pub struct Dequantizer<'a> {
    data: &'a [u8],
    decode: Decode,
    len: usize,
}

impl ConstantTensor {
    /// A [`Dequantizer`] over this tensor's payload.
    ///
    /// # Errors
    /// [`MobiError::DataSizeMismatch`] if the payload is not `dtype.size() * product(shape)`
    /// bytes, [`MobiError::Codec`] for unusable quantization parameters (a scale that is
    /// not finite and > 0, a zero point outside the code's range, a per-axis parameter
    /// count that is not `shape[axis]`, a missing parameter set).
    pub fn dequantizer(&self) -> Result<Dequantizer<'_>, MobiError> {
        let esize = self.dtype.size();
        let n = self.len();
        if n.checked_mul(esize) != Some(self.data.len() as u64) {
            return Err(MobiError::DataSizeMismatch {
                tensor_id: self.id,
                offset: 0,
                expected: n.saturating_mul(esize),
                found: self.data.len() as u64,
            });
        }
        let codec = |source| MobiError::Codec {
            tensor_id: self.id,
            source,
        };
        // The size check above bounds `len` by the payload's length (a usize).
        let len = self.data.len() / esize as usize;
        let q = self.quant.as_ref();
        let decode = match self.dtype {
            DataType::F32 => Decode::F32,
            DataType::F16 => Decode::F16,
            DataType::I8 => affine::<i8>(Code::I8, q, &self.shape, len).map_err(codec)?,
            DataType::U8 => affine::<u8>(Code::U8, q, &self.shape, len).map_err(codec)?,
            DataType::I16 => affine::<i16>(Code::I16, q, &self.shape, len).map_err(codec)?,
            DataType::I32 => Decode::I32,
            DataType::I64 => Decode::I64,
            DataType::Bool => Decode::Bool,
        };
        Ok(Dequantizer {
            data: &self.data,
            decode,
            len,
        })
    }
}

impl Dequantizer<'_> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Write values `start..start + out.len()` into `out`, clipped to the tensor's end;
    /// returns how many were written (0 when `start` is past the end). The bits are those
    /// of the same positions of [`ConstantTensor::to_f32`], whatever the range.
    pub fn fill(&self, start: usize, out: &mut [f32]) -> usize {
        let n = out.len().min(self.len.saturating_sub(start));
        if n == 0 {
            return 0;
        }
        let out = &mut out[..n];
        let d = self.data;
        match &self.decode {
            Decode::F32 => convert::<4>(&d[start * 4..], out, f32::from_le_bytes),
            Decode::I32 => convert::<4>(&d[start * 4..], out, |b| i32::from_le_bytes(b) as f32),
            Decode::I64 => convert::<8>(&d[start * 8..], out, |b| i64::from_le_bytes(b) as f32),
            Decode::Bool => convert::<1>(&d[start..], out, |[b]| f32::from(b)),
            Decode::F16 => {
                let src = &d[start * 2..][..n * 2];
                let mut bits = [0u16; F16_CHUNK];
                for (s, o) in src.chunks(2 * F16_CHUNK).zip(out.chunks_mut(F16_CHUNK)) {
                    let b = &mut bits[..o.len()];
                    for (v, c) in b.iter_mut().zip(s.chunks_exact(2)) {
                        *v = u16::from_le_bytes([c[0], c[1]]);
                    }
                    // Equal lengths (`o` and `b`): widening cannot fail.
                    let _ = f16_bits_to_f32(b, o);
                }
            }
            Decode::Affine {
                code,
                params,
                inner,
            } => {
                let w = code.width();
                let mut k = start;
                let end = start + n;
                while k < end && *inner > 0 && !params.is_empty() {
                    let lane = k / inner;
                    let (scale, zp) = params[lane % params.len()];
                    let stop = ((lane + 1) * inner).min(end);
                    let qs = &d[k * w..stop * w];
                    let os = &mut out[k - start..stop - start];
                    match code {
                        Code::I8 => lane_loop::<1>(qs, os, scale, zp, |[b]| f32::from(b as i8)),
                        Code::U8 => lane_loop::<1>(qs, os, scale, zp, |[b]| f32::from(b)),
                        Code::I16 => {
                            lane_loop::<2>(qs, os, scale, zp, |b| f32::from(i16::from_le_bytes(b)))
                        }
                    }
                    k = stop;
                }
            }
        }
        n
    }
}

/// `out[k] = f(bytes of value k)` for little-endian values of `W` bytes.
fn convert<const W: usize>(d: &[u8], out: &mut [f32], f: impl Fn([u8; W]) -> f32) {
    for (o, c) in out.iter_mut().zip(d.chunks_exact(W)) {
        let mut b = [0u8; W];
        b.copy_from_slice(c);
        *o = f(b);
    }
}

/// `out[k] = (code[k] - zp) * scale` over one lane, reading the stored codes in place
/// (no intermediate code vector): one tight loop the compiler vectorizes, bit-identical
/// to `Affine::dequantize` (same operations, same order).
fn lane_loop<const W: usize>(
    qs: &[u8],
    out: &mut [f32],
    scale: f32,
    zp: f32,
    code: impl Fn([u8; W]) -> f32,
) {
    for (o, c) in out.iter_mut().zip(qs.chunks_exact(W)) {
        let mut b = [0u8; W];
        b.copy_from_slice(c);
        *o = (code(b) - zp) * scale;
    }
}

/// The per-channel parameters of `scales` / `zero_points`, checked by
/// `tensorvault-quant` (finite scale > 0, zero point a valid code of `T`).
pub(crate) fn per_axis<T: AffineCode>(
    scales: &[f32],
    zero_points: &[i32],
    inner: u64,
) -> Result<PerAxis<T>, QuantError> {
    let params = scales
        .iter()
        .zip(zero_points)
        .map(|(&s, &z)| Affine::<T>::new(s, z))
        .collect::<Result<Vec<_>, _>>()?;
    let inner = usize::try_from(inner).map_err(|_| QuantError::InvalidParam {
        field: "inner",
        value: inner as f64,
        reason: "does not fit in memory",
    })?;
    PerAxis::new(params, inner)
}

/// The validated `(scale, zero_point)` of every channel and the channel length (the
/// whole tensor for per-tensor parameters); the checks of `tensorvault-quant`'s
/// `Affine` / `PerAxis` (finite scale > 0, zero point a valid code of `T`).
fn affine<T: AffineCode>(
    code: Code,
    q: Option<&Quantization>,
    shape: &[u64],
    n: usize,
) -> Result<Decode, QuantError> {
    let pair = |a: &Affine<T>| (a.scale(), a.zero_point() as f32);
    let (params, inner) = match q {
        Some(Quantization::PerAxis {
            axis,
            scales,
            zero_points,
        }) => {
            let (channels, inner) = axis_split(shape, *axis).ok_or(QuantError::InvalidParam {
                field: "axis",
                value: f64::from(*axis),
                reason: "outside the rank, or an empty axis",
            })?;
            if channels != scales.len() as u64 || channels != zero_points.len() as u64 {
                return Err(QuantError::InvalidParam {
                    field: "channels",
                    value: scales.len() as f64,
                    reason: "scales and zero points must number shape[axis]",
                });
            }
            let pa = per_axis::<T>(scales, zero_points, inner)?;
            (pa.channels().iter().map(pair).collect(), inner as usize)
        }
        Some(Quantization::PerTensor { scale, zero_point }) => {
            let a = Affine::<T>::new(*scale, *zero_point)?;
            (vec![pair(&a)], n.max(1))
        }
        None => {
            return Err(QuantError::InvalidParam {
                field: "quantization",
                value: 0.0,
                reason: "an affine tensor needs quantization parameters",
            })
        }
    };
    Ok(Decode::Affine {
        code,
        params,
        inner,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tensor(dtype: DataType, shape: Vec<u64>, quant: Option<Quantization>) -> ConstantTensor {
        let n = shape.iter().product::<u64>() as usize * dtype.size() as usize;
        ConstantTensor {
            id: 5,
            dtype,
            shape,
            quant,
            gzip: false,
            data: (0..n)
                .map(|i| (i * 151 % 251) as u8)
                .collect::<Vec<_>>()
                .into(),
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    proptest! {
        /// Any split of the range into pieces gives the bits of the whole.
        #[test]
        fn pieces_equal_the_whole(kind in 0usize..6, rows in 1u64..7, cols in 1u64..40, step in 1usize..50) {
            let axis0 = |c: u64| Some(Quantization::PerAxis {
                axis: 0,
                scales: (0..c).map(|i| 0.01 + i as f32 * 0.37).collect(),
                zero_points: (0..c).map(|i| i as i32 % 3 - 1).collect(),
            });
            let t = match kind {
                0 => tensor(DataType::I8, vec![rows, cols], axis0(rows)),
                1 => tensor(DataType::I8, vec![rows, cols], Some(Quantization::PerAxis {
                    axis: 1,
                    scales: (0..cols).map(|i| 0.5 + i as f32).collect(),
                    zero_points: vec![2; cols as usize],
                })),
                2 => tensor(DataType::U8, vec![rows, cols], Some(Quantization::PerTensor { scale: 0.1, zero_point: 128 })),
                3 => tensor(DataType::I16, vec![rows, cols], axis0(rows)),
                4 => tensor(DataType::F16, vec![rows, cols], None),
                _ => tensor(DataType::I32, vec![rows, cols], None),
            };
            let whole = t.to_f32().unwrap();
            let d = t.dequantizer().unwrap();
            prop_assert_eq!(d.len(), whole.len());
            let mut pieces = vec![f32::NAN; whole.len()];
            for s in (0..whole.len()).step_by(step) {
                let e = (s + step).min(whole.len());
                prop_assert_eq!(d.fill(s, &mut pieces[s..e]), e - s);
            }
            prop_assert_eq!(bits(&pieces), bits(&whole));
        }
    }

    #[test]
    fn fill_clips_at_the_end_and_checks_once() {
        let t = tensor(DataType::F32, vec![3], None);
        let d = t.dequantizer().unwrap();
        let mut out = [7f32; 5];
        assert_eq!(d.fill(2, &mut out), 1);
        assert_eq!(out[1..], [7.0; 4]);
        assert_eq!(d.fill(9, &mut out), 0);
        let mut short = tensor(DataType::I8, vec![4], None);
        assert!(matches!(
            short.dequantizer(),
            Err(MobiError::Codec { tensor_id: 5, .. })
        ));
        short.data = vec![0u8; 3].into();
        assert!(matches!(
            short.dequantizer(),
            Err(MobiError::DataSizeMismatch {
                tensor_id: 5,
                expected: 4,
                found: 3,
                ..
            })
        ));
    }
}
