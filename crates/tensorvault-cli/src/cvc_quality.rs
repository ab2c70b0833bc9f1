//! What a lossy `cvc pack` lost: the written file is read back chunk by chunk (memory:
//! one chunk) and compared with the input rows, giving the largest absolute error, the
//! RMSE and the smallest cosine similarity of any row. Also the chunk size chosen by
//! bytes when the user gives none.

use tensorvault_formats::cvc::CvcReader;

use crate::error::CliError;
use crate::npy::NpyInput;

/// f32 bytes of input per chunk when `--chunk-size` is not given: a 30,000 x 768 table
/// gets 23 chunks (each its own int8 range, decoded in parallel, row ranges read only
/// what they need) instead of one chunk of the reference's default 100,000 rows.
pub const CHUNK_TARGET_BYTES: u64 = 4 << 20;

/// Rows per chunk for vectors of `dim` f32 values: [`CHUNK_TARGET_BYTES`] of input, at
/// least 1 row and at most the reference's 100,000.
#[must_use]
pub fn chunk_rows(dim: u64) -> u64 {
    (CHUNK_TARGET_BYTES / dim.max(1).saturating_mul(4)).clamp(1, 100_000)
}

/// Reconstruction error of a packed file against its input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackError {
    /// Largest |decoded - input| over every value.
    pub max_abs: f64,
    /// Root mean square error over every value.
    pub rmse: f64,
    /// Smallest cosine similarity of a decoded row with its input row (1 for two zero
    /// rows, 0 when only one of them is zero).
    pub min_cosine: f64,
}

/// Running sums over rows of `dim` values.
struct Acc {
    max_abs: f64,
    sq: f64,
    n: u64,
    min_cos: f64,
}

impl Acc {
    fn add(&mut self, want: &[f32], got: &[f32], dim: usize) {
        for (a, b) in want.chunks_exact(dim).zip(got.chunks_exact(dim)) {
            let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
            for (&x, &y) in a.iter().zip(b) {
                let (x, y) = (f64::from(x), f64::from(y));
                self.max_abs = self.max_abs.max((x - y).abs());
                self.sq += (x - y) * (x - y);
                dot += x * y;
                na += x * x;
                nb += y * y;
            }
            let cos = match (na > 0.0, nb > 0.0) {
                (false, false) => 1.0,
                (true, true) => dot / (na.sqrt() * nb.sqrt()),
                _ => 0.0,
            };
            self.min_cos = self.min_cos.min(cos);
            self.n += dim as u64;
        }
    }
}

/// Read `output` back chunk by chunk and compare it with `input`; `progress` gets the
/// rows compared so far.
///
/// # Errors
/// [`CliError::Format`] if the written file does not read back.
pub fn measure(
    input: &NpyInput,
    output: &std::path::Path,
    progress: impl Fn(u64),
) -> Result<PackError, CliError> {
    let r = CvcReader::open(output)?;
    let dim = usize::try_from(input.dim).unwrap_or(usize::MAX).max(1);
    let mut acc = Acc {
        max_abs: 0.0,
        sq: 0.0,
        n: 0,
        min_cos: 1.0,
    };
    let mut buf = Vec::new();
    for chunk in r.iter_chunks() {
        let c = chunk?;
        let end = c.row_start + c.rows;
        let want = input.rows_f32(c.row_start, end, &mut buf);
        acc.add(want, &c.values, dim);
        input.release(end);
        progress(end);
    }
    Ok(PackError {
        max_abs: acc.max_abs,
        rmse: (acc.sq / acc.n.max(1) as f64).sqrt(),
        min_cosine: acc.min_cos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_rows_follow_bytes() {
        assert_eq!(chunk_rows(768), 1365);
        assert_eq!(chunk_rows(1), 100_000);
        assert_eq!(chunk_rows(2_000_000), 1);
        assert_eq!(chunk_rows(0), 100_000);
    }

    #[test]
    fn errors_and_cosines() {
        let mut acc = Acc {
            max_abs: 0.0,
            sq: 0.0,
            n: 0,
            min_cos: 1.0,
        };
        // Row 0 exact, row 1 off by (0, 1) -> cos = 1/sqrt(2), row 2 zero vs zero.
        let want = [1.0, 0.0, 1.0, 0.0, 0.0, 0.0];
        let got = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0];
        acc.add(&want, &got, 2);
        assert_eq!(acc.max_abs, 1.0);
        assert_eq!(acc.n, 6);
        assert!(
            (acc.min_cos - 0.5f64.sqrt()).abs() < 1e-12,
            "{}",
            acc.min_cos
        );
        // A zero row decoded as non-zero: cosine 0.
        acc.add(&[0.0, 0.0], &[0.0, 1e-3], 2);
        assert_eq!(acc.min_cos, 0.0);
    }
}
