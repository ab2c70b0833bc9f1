//! Entry payloads: deltas (8-bit groupwise TQTC segment, or sparse index/value pairs when
//! that is smaller) and low-rank factors (truncated SVD). Decoders validate every length
//! and index before using it and never panic.

use tensorvault_quant::groupwise::QuantParams;

use super::format::EntryKind;
use crate::codec;
use crate::error::{Result, StoreErr};

/// Bit width of quantized deltas.
pub const DELTA_BITS: u8 = 8;
/// Bytes of the sparse delta header (`n u32, count u32`).
const SPARSE_HEADER: usize = 8;
/// Bytes of the factor header (`m u32, n u32, r u32, residual f32`).
const FACTOR_HEADER: usize = 16;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn f32_at(b: &[u8], off: usize) -> Option<f32> {
    u32_at(b, off).map(f32::from_bits)
}

/// Encode `delta` as whichever of the two encodings is smaller: sparse pairs (exact) or
/// an 8-bit groupwise segment (within half a quantization step per element). A delta
/// with non-finite entries is always sparse (the codec refuses them).
#[must_use]
pub fn encode_delta(delta: &[f32]) -> (EntryKind, Vec<u8>) {
    let nnz = delta.iter().filter(|d| **d != 0.0).count();
    let sparse_len = SPARSE_HEADER + 8 * nnz;
    let quant = QuantParams::for_bits(DELTA_BITS)
        .ok()
        .and_then(|p| codec::encode_quantized(&p, delta).ok())
        .map(|e| e.bytes);
    match quant {
        Some(q) if q.len() < sparse_len => (EntryKind::DeltaQuant, q),
        _ => {
            let mut out = Vec::with_capacity(sparse_len);
            out.extend_from_slice(&(delta.len() as u32).to_le_bytes());
            out.extend_from_slice(&(nnz as u32).to_le_bytes());
            for (i, d) in delta.iter().enumerate() {
                if *d != 0.0 {
                    out.extend_from_slice(&(i as u32).to_le_bytes());
                    out.extend_from_slice(&d.to_le_bytes());
                }
            }
            (EntryKind::DeltaSparse, out)
        }
    }
}

/// Decode a delta of exactly `n` elements.
///
/// # Errors
/// A reason naming the bad field.
pub fn decode_delta(kind: EntryKind, payload: &[u8], n: usize) -> Result<Vec<f32>, String> {
    match kind {
        EntryKind::DeltaQuant => {
            let mut out = Vec::new();
            codec::decode_quantized(payload, n, &mut out).map_err(|e| e.to_string())?;
            if out.len() != n {
                return Err(format!("delta holds {} values, block {n}", out.len()));
            }
            Ok(out)
        }
        EntryKind::DeltaSparse => {
            let (Some(len), Some(count)) = (u32_at(payload, 0), u32_at(payload, 4)) else {
                return Err("sparse delta shorter than its header".into());
            };
            if len as usize != n {
                return Err(format!("sparse delta of {len} values, block {n}"));
            }
            let want = (count as usize)
                .checked_mul(8)
                .and_then(|b| b.checked_add(SPARSE_HEADER));
            if count as usize > n || want != Some(payload.len()) {
                return Err(format!(
                    "sparse delta count {count} does not match its {} bytes",
                    payload.len()
                ));
            }
            let mut out = vec![0.0f32; n];
            let mut next = 0usize;
            for pair in payload[SPARSE_HEADER..].chunks_exact(8) {
                let i = u32::from_le_bytes([pair[0], pair[1], pair[2], pair[3]]) as usize;
                if i < next || i >= n {
                    return Err(format!("sparse delta index {i} out of order or range"));
                }
                out[i] = f32::from_le_bytes([pair[4], pair[5], pair[6], pair[7]]);
                next = i + 1;
            }
            Ok(out)
        }
        EntryKind::Factor => Err("a factor entry is not a delta".into()),
    }
}

/// The matrix a block of `len` elements is viewed as: `n` = the tensor's last dimension
/// when it divides `len`, else the largest divisor of `len` not above `sqrt(len)` rows.
#[must_use]
pub fn factor_dims(len: usize, last_dim: Option<u32>) -> (usize, usize) {
    if let Some(d) = last_dim.map(|d| d as usize) {
        if d > 0 && len.is_multiple_of(d) {
            return (len / d, d);
        }
    }
    let mut m = 1;
    let mut d = 1;
    while d * d <= len {
        if len.is_multiple_of(d) {
            m = d;
        }
        d += 1;
    }
    (m, len / m.max(1))
}

/// Rank-`rank` factors `U (m x r)`, `V (r x n)` of `values` viewed as an `m x n`
/// row-major matrix, with the singular values folded into `U`, by a truncated SVD
/// (nalgebra, in f64). Returns the payload and the Frobenius norm of what was dropped
/// (`sqrt(sum of the discarded squared singular values)`), which bounds the error of
/// `U * V`.
///
/// # Errors
/// [`StoreErr::InvalidArgument`] for non-finite values or `m * n != values.len()`.
pub fn factorize(values: &[f32], m: usize, n: usize, rank: usize) -> Result<(Vec<u8>, f32)> {
    if m.checked_mul(n) != Some(values.len()) || values.is_empty() {
        return Err(StoreErr::InvalidArgument {
            field: "factor",
            reason: format!("{m} x {n} does not match {} values", values.len()),
        });
    }
    if values.iter().any(|v| !v.is_finite()) {
        return Err(StoreErr::InvalidArgument {
            field: "data",
            reason: "a Factor block must hold finite values".into(),
        });
    }
    let a = nalgebra::DMatrix::<f64>::from_fn(m, n, |i, j| f64::from(values[i * n + j]));
    let svd = a.svd(true, true);
    let (Some(u), Some(vt)) = (svd.u, svd.v_t) else {
        return Err(StoreErr::InvalidArgument {
            field: "factor",
            reason: "SVD did not produce U and V".into(),
        });
    };
    let s = &svd.singular_values;
    let r = rank.clamp(1, s.len());
    let residual = s.iter().skip(r).map(|x| x * x).sum::<f64>().sqrt() as f32;
    let mut out = Vec::with_capacity(FACTOR_HEADER + 4 * r * (m + n));
    for x in [m as u32, n as u32, r as u32] {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.extend_from_slice(&residual.to_le_bytes());
    for i in 0..m {
        for k in 0..r {
            out.extend_from_slice(&((u[(i, k)] * s[k]) as f32).to_le_bytes());
        }
    }
    for k in 0..r {
        for j in 0..n {
            out.extend_from_slice(&(vt[(k, j)] as f32).to_le_bytes());
        }
    }
    Ok((out, residual))
}

/// `U * V` of a factor payload, which must describe exactly `len` elements; also returns
/// the stored residual norm.
///
/// # Errors
/// A reason naming the bad field.
pub fn expand_factors(payload: &[u8], len: usize) -> Result<(Vec<f32>, f32), String> {
    let (Some(m), Some(n), Some(r), Some(residual)) = (
        u32_at(payload, 0),
        u32_at(payload, 4),
        u32_at(payload, 8),
        f32_at(payload, 12),
    ) else {
        return Err("factor payload shorter than its header".into());
    };
    let (m, n, r) = (m as usize, n as usize, r as usize);
    if m.checked_mul(n) != Some(len) || r == 0 || r > m.min(n) {
        return Err(format!(
            "factors {m} x {r} x {n} do not describe {len} values"
        ));
    }
    // r <= min(m, n) and m * n = len, so these products cannot overflow.
    let want = FACTOR_HEADER + 4 * r * (m + n);
    if payload.len() != want {
        return Err(format!(
            "factor payload of {} bytes, expected {want}",
            payload.len()
        ));
    }
    let floats: Vec<f32> = payload[FACTOR_HEADER..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let (u, v) = floats.split_at(m * r);
    let mut out = vec![0.0f32; len];
    for i in 0..m {
        let row = &mut out[i * n..(i + 1) * n];
        for k in 0..r {
            let a = u[i * r + k];
            for (o, b) in row.iter_mut().zip(&v[k * n..(k + 1) * n]) {
                *o += a * b;
            }
        }
    }
    Ok((out, residual))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mostly_zero_deltas_go_sparse_and_round_trip_exactly() {
        let mut d = vec![0.0f32; 1000];
        d[3] = 1.5;
        d[999] = -2.0;
        let (k, p) = encode_delta(&d);
        assert_eq!((k, p.len()), (EntryKind::DeltaSparse, 24));
        assert_eq!(decode_delta(k, &p, 1000).unwrap(), d);
        assert!(decode_delta(k, &p, 999).is_err());
        assert!(decode_delta(k, &p[..20], 1000).is_err());
        let mut bad = p.clone();
        bad[11] = 0xFF; // first index out of range
        assert!(decode_delta(k, &bad, 1000).is_err());
    }

    #[test]
    fn dense_deltas_are_quantized_within_half_a_step() {
        let d: Vec<f32> = (0..1000).map(|i| ((i as f32) * 0.1).sin() * 0.01).collect();
        let (k, p) = encode_delta(&d);
        assert_eq!(k, EntryKind::DeltaQuant);
        assert!(p.len() < 1100);
        let back = decode_delta(k, &p, 1000).unwrap();
        for (a, b) in d.iter().zip(&back) {
            assert!((a - b).abs() <= 0.01 / 127.0 / 2.0 * 1.01 + 1e-7, "{a} {b}");
        }
    }

    #[test]
    fn low_rank_blocks_factor_exactly_and_payloads_are_checked() {
        assert_eq!(factor_dims(4096, Some(64)), (64, 64));
        assert_eq!(factor_dims(4096, Some(100)), (64, 64));
        assert_eq!(factor_dims(13, None), (1, 13));
        // A rank-2 32 x 16 matrix.
        let (m, n) = (32, 16);
        let v: Vec<f32> = (0..m * n)
            .map(|x| {
                let (i, j) = ((x / n) as f32, (x % n) as f32);
                (i * 0.1).sin() * (j * 0.2).cos() + 0.5 * (i * 0.03) * (j * 0.05 + 1.0)
            })
            .collect();
        let (p, residual) = factorize(&v, m, n, 4).unwrap();
        assert!(residual < 1e-4, "{residual}");
        let (back, r2) = expand_factors(&p, m * n).unwrap();
        assert_eq!(residual, r2);
        let err = v
            .iter()
            .zip(&back)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(err < 1e-4, "{err}");
        assert!(expand_factors(&p, m * n - 1).is_err());
        assert!(expand_factors(&p[..p.len() - 1], m * n).is_err());
        assert!(factorize(&[f32::NAN; 4], 2, 2, 1).is_err());
        // Rank 1 of a full-rank matrix: the residual bounds the error.
        let (p1, res1) = factorize(&v, m, n, 1).unwrap();
        let (b1, _) = expand_factors(&p1, m * n).unwrap();
        let fro = v
            .iter()
            .zip(&b1)
            .map(|(a, b)| f64::from(a - b).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!((fro - f64::from(res1)).abs() < 1e-3, "{fro} {res1}");
    }
}
