//! Helpers of the demo's steps (demo.rs, demo_store.rs): reconstruction error and step
//! messages.

use rayon::prelude::*;

/// Reconstruction error of `got` against `want` (rows of `dim`).
pub(crate) struct ErrorStats {
    pub(crate) max_abs: f64,
    pub(crate) rmse: f64,
    pub(crate) mean_cos: f64,
}

/// Largest absolute error, RMSE and mean cosine similarity of `got` against `want`.
pub(crate) fn error_stats(want: &[f32], got: &[f32], dim: usize) -> ErrorStats {
    let (max_abs, sq, cos) = want
        .par_chunks(dim)
        .zip(got.par_chunks(dim))
        .map(|(a, b)| {
            let (mut m, mut sq, mut dot, mut na, mut nb) = (0f64, 0f64, 0f64, 0f64, 0f64);
            for (&x, &y) in a.iter().zip(b) {
                let (x, y) = (f64::from(x), f64::from(y));
                m = m.max((x - y).abs());
                sq += (x - y) * (x - y);
                dot += x * y;
                na += x * x;
                nb += y * y;
            }
            (m, sq, dot / (na.sqrt() * nb.sqrt()).max(f64::MIN_POSITIVE))
        })
        .reduce(
            || (0.0, 0.0, 0.0),
            |a, b| (a.0.max(b.0), a.1 + b.1, a.2 + b.2),
        );
    ErrorStats {
        max_abs,
        rmse: (sq / want.len().max(1) as f64).sqrt(),
        mean_cos: cos / (want.len() / dim).max(1) as f64,
    }
}

/// A step message on stderr (unless `quiet`).
pub(crate) fn step(quiet: bool, msg: &str) {
    if !quiet {
        eprintln!("[demo] {msg}");
    }
}
