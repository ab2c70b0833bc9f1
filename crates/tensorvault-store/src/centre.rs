//! Centred embedding tensors (`CollectionConfig::centre`, MetaLog header flags bit 5):
//! the mean row a 2-D `embedding` tensor is coded against, kept as the tensor's side
//! record, and the arithmetic that takes it off before coding and adds it back after
//! decoding. Byte layout and rules: `docs/formats/store.md`, "Centred embedding tensors".
//!
//! Why: a table whose rows share a large common component (a mean row) spends the
//! quantizer's range on it in every row; coding `x - m` instead and adding `m` back halves
//! the relative error at the same bits on SmolLM2's token table, and with row gains
//! computed against the original row (`<x, m + g c_hat> = |x|^2`) lifts recall@10
//! (bench/RESULTS.md, "Session 14: emb-centre").

use tensorvault_core::checksum::crc32c;

use crate::config::{CollectionConfig, CODEC_V4};
use crate::error::{Result, StoreErr};
use crate::types::{BlockMeta, DType, ReconstructPolicy, TensorKind, Tier};

/// Block index of a centred tensor's side record (its mean row). `put_tensor` never
/// writes a data block there (a tensor has at most `2^32 - 1` blocks), and `put_block`
/// refuses the index in a centred collection.
pub const CENTRE_BLOCK_INDEX: u32 = u32::MAX;

/// Bytes per mean value in the side record's payload (f32 LE).
pub const MEAN_ELEM_BYTES: usize = 4;

/// Largest magnitude of a value (and so of a mean value) of a tensor the writer centres:
/// `2^125`. Then `|x - m| <= 2^126` and a decoding plus the mean stays inside the f32
/// range; a table with a larger value is stored uncentred. (Readers accept any finite
/// mean, since the first build of the flag wrote larger ones, and refuse a sum that
/// leaves the f32 range instead.)
pub const CENTRE_MAX_ABS: f32 = f32::from_bits(0x7E00_0000);

/// The mean row of a centred tensor and its fingerprint (CRC32C of its payload bytes).
#[derive(Clone, Debug, PartialEq)]
pub struct Centre {
    /// CRC32C of the side record's payload (the mean as f32 LE).
    pub fp: u32,
    /// The column mean, one value per column of the tensor's rows.
    pub mean: Vec<f32>,
}

impl Centre {
    /// The payload of the side record: the mean as f32 LE.
    #[must_use]
    pub fn payload(&self) -> Vec<u8> {
        self.mean.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// A centre of `mean`, with its fingerprint.
    #[must_use]
    pub fn of(mean: Vec<f32>) -> Self {
        let mut c = Self { fp: 0, mean };
        c.fp = crc32c(&c.payload());
        c
    }

    /// Subtract the mean from `vals`, the values of a block whose first value is element
    /// `start` of the row-major tensor.
    pub fn subtract(&self, vals: &mut [f32], start: u64) {
        self.walk(vals, start, |v, m| *v -= m);
    }

    /// Add the mean back to decoded values (inverse of [`Centre::subtract`] up to f32
    /// rounding).
    ///
    /// # Errors
    /// The position in `vals` of the first sum that is not finite (a decoding or a mean
    /// beyond what a writer produces: `vals` is then partly updated and must be dropped).
    pub fn add(&self, vals: &mut [f32], start: u64) -> std::result::Result<(), usize> {
        self.walk(vals, start, |v, m| *v += m);
        match vals.iter().position(|v| !v.is_finite()) {
            Some(i) => Err(i),
            None => Ok(()),
        }
    }

    /// The column of element `i` of a block whose first value is element `start`.
    #[must_use]
    pub fn column(&self, start: u64, i: usize) -> usize {
        let d = self.mean.len().max(1) as u64;
        // `< d`, a usize.
        ((start % d + i as u64 % d) % d) as usize
    }

    fn walk(&self, vals: &mut [f32], start: u64, f: impl Fn(&mut f32, f32)) {
        let d = self.mean.len();
        if d == 0 {
            return;
        }
        // `start % d < d`, so the cast cannot truncate.
        let mut col = (start % d as u64) as usize;
        for v in vals {
            f(v, self.mean[col]);
            col += 1;
            if col == d {
                col = 0;
            }
        }
    }
}

/// The row width `d` of a tensor the collection stores centred, or `None` when it is
/// stored as without the flag: the collection must have the flag (codec v4 with row
/// gains), the tensor must be a 2-D `embedding` of f32, f16 or bf16 without a
/// reconstruction policy, with `1 <= d <= min(block_elems, 65535)` and a mean row that
/// fits one Tier0 block (`4 d <= max_block_len(Tier0)`).
#[must_use]
pub fn centred_width(
    geo: &CollectionConfig,
    dtype: DType,
    shape: &[u32],
    kind: TensorKind,
    reconstruct: ReconstructPolicy,
) -> Option<usize> {
    if !(geo.centre && geo.row_gains && geo.codec == CODEC_V4)
        || kind != TensorKind::Embedding
        || reconstruct != ReconstructPolicy::None
        || !matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
    {
        return None;
    }
    let [rows, d] = shape else {
        return None;
    };
    let fits = *rows > 0
        && *d > 0
        && *d <= geo.block_elems
        && *d <= u32::from(u16::MAX)
        && u64::from(*d) * MEAN_ELEM_BYTES as u64 <= u64::from(geo.max_block_len(Tier::Tier0));
    fits.then_some(*d as usize)
}

/// Column sums of a row-major tensor, accumulated a chunk at a time.
#[derive(Debug)]
pub struct MeanAcc {
    sums: Vec<f64>,
    seen: u64,
    /// Whether every value seen is within [`CENTRE_MAX_ABS`] (NaN is not).
    bounded: bool,
}

impl MeanAcc {
    /// An accumulator for rows of `d` values.
    #[must_use]
    pub fn new(d: usize) -> Self {
        Self {
            sums: vec![0.0; d],
            seen: 0,
            bounded: true,
        }
    }

    /// Add the next values of the tensor (in order; a chunk may end mid-row).
    pub fn push(&mut self, vals: &[f32]) {
        let d = self.sums.len() as u64;
        // `seen % d < d`.
        let mut col = (self.seen % d) as usize;
        for &v in vals {
            self.bounded &= v.abs() <= CENTRE_MAX_ABS;
            self.sums[col] += f64::from(v);
            col += 1;
            if col == self.sums.len() {
                col = 0;
            }
        }
        self.seen += vals.len() as u64;
    }

    /// The column mean, or `None` when a value is not finite or beyond
    /// [`CENTRE_MAX_ABS`] (its centred value could leave the f32 range: such a tensor is
    /// stored uncentred) or no whole row was seen.
    #[must_use]
    pub fn finish(self) -> Option<Centre> {
        let rows = self.seen / self.sums.len() as u64;
        if rows == 0 || !self.bounded {
            return None;
        }
        // Rows up to 2^53 convert exactly enough for a mean.
        #[allow(clippy::cast_precision_loss)]
        let n = rows as f64;
        let mean: Vec<f32> = self.sums.iter().map(|s| (s / n) as f32).collect();
        mean.iter().all(|m| m.is_finite()).then(|| Centre::of(mean))
    }
}

/// The mean row of the side record `side` (its payload `payload`, checksum verified) for a
/// data block `block` of a tensor with rows of `d` values: checks the record's fields and
/// that the block was coded against it.
///
/// # Errors
/// [`StoreErr::BadCentre`] naming the field (`side.tier`, `side.dtype`,
/// `side.data_len`, `side.centre_fp`, `mean`: a value not finite);
/// [`StoreErr::CentreMismatch`] when the
/// block's fingerprint is not the side record's.
pub fn parse_side(
    tensor: &str,
    side: &BlockMeta,
    payload: &[u8],
    block: &BlockMeta,
    d: usize,
) -> Result<Centre> {
    use crate::meta_log::layout::{C_CENTRE_FP, C_DATA_LEN, C_DTYPE, C_TIER};
    let bad = |field: &'static str, offset: usize, reason: String| StoreErr::BadCentre {
        tensor: tensor.to_owned(),
        field,
        offset: offset as u64,
        reason,
    };
    if side.tier != Tier::Tier0 {
        return Err(bad(
            "side.tier",
            C_TIER,
            format!("{} (a side record stays raw at tier 0)", side.tier),
        ));
    }
    if side.dtype != DType::F32 {
        return Err(bad(
            "side.dtype",
            C_DTYPE,
            format!("{} (a mean row is f32)", side.dtype),
        ));
    }
    let want = d * MEAN_ELEM_BYTES;
    if payload.len() != want || side.data_len as usize != want {
        return Err(bad(
            "side.data_len",
            C_DATA_LEN,
            format!(
                "{} bytes for rows of {d} values (needs {want})",
                payload.len()
            ),
        ));
    }
    if side.centre != Some(side.checksum) {
        return Err(bad(
            "side.centre_fp",
            C_CENTRE_FP,
            format!(
                "{:?} is not the payload's crc32c {:#010x}",
                side.centre, side.checksum
            ),
        ));
    }
    let expected = block.centre.unwrap_or(0);
    if expected != side.checksum {
        return Err(StoreErr::CentreMismatch {
            tensor: tensor.to_owned(),
            block: block.key.block_index,
            expected,
            found: Some(side.checksum),
        });
    }
    let mut mean = Vec::with_capacity(d);
    for (i, b) in payload.chunks_exact(MEAN_ELEM_BYTES).enumerate() {
        let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if !v.is_finite() {
            return Err(bad(
                "mean",
                i * MEAN_ELEM_BYTES,
                format!("value {i} is {v} (not finite)"),
            ));
        }
        mean.push(v);
    }
    Ok(Centre {
        fp: side.checksum,
        mean,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtract_then_add_follows_the_columns_across_rows() {
        let c = Centre::of(vec![1.0, 10.0, 100.0]);
        let mut v = vec![2.0, 20.0, 200.0, 3.0, 30.0];
        // The block starts at element 4: column 1.
        c.subtract(&mut v, 4);
        assert_eq!(v, vec![-8.0, -80.0, 199.0, -7.0, -70.0]);
        c.add(&mut v, 4).unwrap();
        assert_eq!(v, vec![2.0, 20.0, 200.0, 3.0, 30.0]);
    }

    #[test]
    fn an_add_that_leaves_the_f32_range_is_refused_with_its_position() {
        // review14: a crafted mean plus a decoding near f32::MAX gave infinity.
        let c = Centre::of(vec![0.0, 3.0e38]);
        let mut v = vec![1.0, 1.0, 1.0, 3.0e38];
        assert_eq!(c.add(&mut v, 0), Err(3));
        assert_eq!(c.column(0, 3), 1);
        assert_eq!(c.column(5, 2), 1);
    }

    #[test]
    fn values_beyond_2_125_are_not_centred() {
        // review14: |x - m| of a finite table could overflow (3e38 - -1e38).
        let mut acc = MeanAcc::new(1);
        acc.push(&[3.0e38, -3.0e38, 3.0e38]);
        assert!(acc.finish().is_none());
        let mut ok = MeanAcc::new(1);
        ok.push(&[CENTRE_MAX_ABS, -CENTRE_MAX_ABS]);
        assert_eq!(ok.finish().unwrap().mean, vec![0.0]);
        assert_eq!(CENTRE_MAX_ABS, 2f32.powi(125));
    }

    #[test]
    fn the_mean_is_per_column_over_chunks_that_split_rows() {
        let mut acc = MeanAcc::new(2);
        acc.push(&[1.0, 2.0, 3.0]);
        acc.push(&[4.0]);
        let c = acc.finish().unwrap();
        assert_eq!(c.mean, vec![2.0, 3.0]);
        assert_eq!(c.fp, crc32c(&c.payload()));
        let mut nan = MeanAcc::new(2);
        nan.push(&[f32::NAN, 1.0]);
        assert!(nan.finish().is_none());
    }

    #[test]
    fn only_2d_float_embeddings_of_a_centred_collection_are_centred() {
        let geo = CollectionConfig {
            codec: CODEC_V4,
            row_gains: true,
            centre: true,
            ..CollectionConfig::default()
        };
        let e = TensorKind::Embedding;
        let none = ReconstructPolicy::None;
        assert_eq!(
            centred_width(&geo, DType::F32, &[10, 64], e, none),
            Some(64)
        );
        assert_eq!(
            centred_width(&geo, DType::F16, &[10, 64], e, none),
            Some(64)
        );
        assert_eq!(centred_width(&geo, DType::F32, &[640], e, none), None);
        assert_eq!(centred_width(&geo, DType::F32, &[2, 8192], e, none), None);
        assert_eq!(centred_width(&geo, DType::I8, &[10, 64], e, none), None);
        assert_eq!(
            centred_width(&geo, DType::F32, &[10, 64], TensorKind::Weight, none),
            None
        );
        assert_eq!(
            centred_width(&geo, DType::F32, &[10, 64], e, ReconstructPolicy::Delta),
            None
        );
        let off = CollectionConfig {
            centre: false,
            ..geo
        };
        assert_eq!(centred_width(&off, DType::F32, &[10, 64], e, none), None);
    }
}
