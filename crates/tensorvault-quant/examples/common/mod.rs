//! Pieces the codec-against-codec examples share (`v7_vs_v5`, `v8_keys`): reading the
//! `.npy` files their Python scripts write, and tallying error, bytes and time per codec.
//! (A directory without `main.rs`, so Cargo does not build it as an example.)

use std::time::Duration;

/// The header text and f32 values of a `.npy` file (format 1.0-3.0, `<f4`, C order).
pub fn read_npy(path: &str) -> Result<(String, Vec<f32>), Box<dyn std::error::Error>> {
    let b = std::fs::read(path)?;
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(format!("{path}: not a .npy file").into());
    }
    let (hlen, start) = if b[6] == 1 {
        (usize::from(u16::from_le_bytes([b[8], b[9]])), 10)
    } else {
        let l = b.get(8..12).ok_or("short .npy header")?;
        (u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize, 12)
    };
    let header = std::str::from_utf8(b.get(start..start + hlen).ok_or("short .npy header")?)?;
    if !header.contains("'<f4'") || header.contains("'fortran_order': True") {
        return Err(format!("{path}: want little-endian f32 in C order, got {header}").into());
    }
    let values = b[start + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((header.to_owned(), values))
}

/// Squared error, signal, stored bytes, values and encode / decode time of one codec.
#[derive(Default)]
pub struct Tally {
    pub err2: f64,
    pub sig2: f64,
    pub bytes: usize,
    pub values: usize,
    pub enc: Duration,
    pub dec: Duration,
}

impl Tally {
    /// Count one block: `x` coded in `bytes` bytes and decoded to `y`.
    pub fn add(&mut self, x: &[f32], y: &[f32], bytes: usize) {
        for (a, b) in x.iter().zip(y) {
            self.err2 += f64::from(a - b).powi(2);
            self.sig2 += f64::from(*a).powi(2);
        }
        self.bytes += bytes;
        self.values += x.len();
    }

    /// Relative RMSE in percent.
    pub fn rel_rmse_pct(&self) -> f64 {
        100.0 * (self.err2 / self.sig2).sqrt()
    }

    /// Stored bits per value.
    pub fn bits_per_value(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.values as f64
    }
}
