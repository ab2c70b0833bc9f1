//! The KV arrays a prefix cache takes and gives back: per layer, `[kv_heads, T, head_dim]`
//! row-major, f16 or f32 in, f16 (or f32 on request) out; checking shapes and values, and
//! cutting one chunk's block out of a layer.

use half::f16;

use crate::error::{Result, StoreErr};

/// One layer's keys or values, `[kv_heads, T, head_dim]` row-major.
#[derive(Clone, Copy, Debug)]
pub enum KvData<'a> {
    /// Half precision: stored bit-exact at Tier0.
    F16(&'a [f16]),
    /// Single precision: rounded to f16 (nearest even) when stored.
    F32(&'a [f32]),
}

impl KvData<'_> {
    fn len(&self) -> usize {
        match self {
            KvData::F16(v) => v.len(),
            KvData::F32(v) => v.len(),
        }
    }

    /// Index of the first value that is not a finite f16 once stored (the store's KV
    /// policy, `crate::finite`): NaN, infinity, or an f32 beyond f16's ±65504.
    fn first_non_finite(&self) -> Option<usize> {
        match self {
            KvData::F16(v) => v.iter().position(|x| !x.is_finite()),
            KvData::F32(v) => crate::finite::first_not_f16(v),
        }
    }

    /// Append values `range` as f16 little-endian bytes.
    fn push_le(&self, range: std::ops::Range<usize>, out: &mut Vec<u8>) {
        match self {
            KvData::F16(v) => out.extend(v[range].iter().flat_map(|x| x.to_le_bytes())),
            KvData::F32(v) => out.extend(
                v[range]
                    .iter()
                    .flat_map(|x| f16::from_f32(*x).to_le_bytes()),
            ),
        }
    }
}

/// The geometry every array is checked against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KvShape {
    pub layers: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
}

impl KvShape {
    /// Check `keys` and `values` hold `layers` arrays of `[kv_heads, tokens, head_dim]`
    /// finite values each.
    pub(crate) fn check(&self, tokens: usize, keys: &[KvData], values: &[KvData]) -> Result<()> {
        let (h, d) = (self.kv_heads as usize, self.head_dim as usize);
        let want = h.checked_mul(tokens).and_then(|n| n.checked_mul(d));
        for (field, arrays) in [("keys", keys), ("values", values)] {
            if arrays.len() != self.layers as usize {
                return Err(StoreErr::InvalidArgument {
                    field,
                    reason: format!(
                        "{} layers given, the model has {}",
                        arrays.len(),
                        self.layers
                    ),
                });
            }
            for (layer, a) in arrays.iter().enumerate() {
                if Some(a.len()) != want {
                    return Err(StoreErr::InvalidArgument {
                        field,
                        reason: format!(
                            "layer {layer}: {} values, expected [{h}, {tokens}, {d}]",
                            a.len()
                        ),
                    });
                }
                if let Some(i) = a.first_non_finite() {
                    return Err(StoreErr::NonFiniteKv {
                        field,
                        layer: layer as u32,
                        head: (i / d / tokens.max(1)) as u32,
                        token: ((i / d) % tokens.max(1)) as u64,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Append the f16 bytes of head `head`, tokens `first..first + n` of an array of `tokens`
/// positions.
pub(crate) fn block_bytes(
    a: &KvData,
    head_dim: usize,
    tokens: usize,
    head: usize,
    first: usize,
    n: usize,
    out: &mut Vec<u8>,
) {
    let start = (head * tokens + first) * head_dim;
    a.push_le(start..start + n * head_dim, out);
}

/// KV read back from a prefix cache: per layer `[kv_heads, tokens, head_dim]` f16.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedKv {
    /// Token positions loaded (a prefix of the tokens asked for).
    pub tokens: usize,
    /// KV heads per layer.
    pub kv_heads: u32,
    /// Values per head and token.
    pub head_dim: u32,
    /// Keys per layer.
    pub keys: Vec<Vec<f16>>,
    /// Values per layer.
    pub values: Vec<Vec<f16>>,
}

impl LoadedKv {
    /// An all-zero result for `tokens` positions (filled chunk by chunk).
    pub(crate) fn zeroed(shape: KvShape, tokens: usize) -> Self {
        let n = shape.kv_heads as usize * tokens * shape.head_dim as usize;
        Self {
            tokens,
            kv_heads: shape.kv_heads,
            head_dim: shape.head_dim,
            keys: vec![vec![f16::ZERO; n]; shape.layers as usize],
            values: vec![vec![f16::ZERO; n]; shape.layers as usize],
        }
    }

    /// Copy a chunk block's rows (`[rows, head_dim]` f16 LE in `bytes`) to head `head`,
    /// positions `first..first + rows` of `dest`.
    pub(crate) fn put_rows(
        dest: &mut [f16],
        tokens: usize,
        head_dim: usize,
        head: usize,
        first: usize,
        bytes: &[u8],
    ) {
        let start = (head * tokens + first) * head_dim;
        for (d, b) in dest[start..start + bytes.len() / 2]
            .iter_mut()
            .zip(bytes.chunks_exact(2))
        {
            *d = f16::from_le_bytes([b[0], b[1]]);
        }
    }

    /// Keep only the first `tokens` positions (after a damaged chunk cut the load short).
    pub(crate) fn truncate(&mut self, tokens: usize) {
        if tokens >= self.tokens {
            return;
        }
        let (h, d, old) = (self.kv_heads as usize, self.head_dim as usize, self.tokens);
        for a in self.keys.iter_mut().chain(self.values.iter_mut()) {
            let mut out = Vec::with_capacity(h * tokens * d);
            for head in 0..h {
                out.extend_from_slice(&a[head * old * d..(head * old + tokens) * d]);
            }
            *a = out;
        }
        self.tokens = tokens;
    }

    /// Layer `layer`'s keys as f32 (`None` past the last layer).
    #[must_use]
    pub fn keys_f32(&self, layer: usize) -> Option<Vec<f32>> {
        self.keys
            .get(layer)
            .map(|v| v.iter().map(|x| x.to_f32()).collect())
    }

    /// Layer `layer`'s values as f32 (`None` past the last layer).
    #[must_use]
    pub fn values_f32(&self, layer: usize) -> Option<Vec<f32>> {
        self.values
            .get(layer)
            .map(|v| v.iter().map(|x| x.to_f32()).collect())
    }
}
