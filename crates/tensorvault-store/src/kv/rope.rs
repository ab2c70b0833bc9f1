//! Rotary position embedding (RoPE) of KV-cache keys, applied at read: a cache created
//! with a [`RopeSpec`] stores keys *before* RoPE (where per-channel quantization groups
//! see each channel's own distribution instead of one smeared by the position-dependent
//! rotation: KVQuant's largest single gain), and [`crate::KvCache::read`] returns them
//! after RoPE, rotated for their token positions, exactly as a cache of post-RoPE keys
//! would hold them.
//!
//! The spec is persisted in the collection's MetaLog header (`docs/formats/store.md`,
//! "RoPE spec"), so a reopen applies the same rotation; opening with a different spec is
//! [`crate::StoreErr::RopeMismatch`].
//!
//! For pair `i` of `rotary_dims / 2` pairs, the angle at token position `p` is
//! `p * theta^(-2i / rotary_dims)` (computed in f64, cos/sin rounded to f32, the rotation
//! in f32). Channels at and beyond `rotary_dims` (partial rotary) are not rotated.
//!
//! ```
//! use tensorvault_store::kv::{RopePairing, RopeSpec};
//! // SmolLM2 as GGUF stores it (llama.cpp's permuted Q/K weights): base 1e5, all 64
//! // channels, adjacent pairs; Hugging Face's checkpoint of the same model pairs halves.
//! let spec = RopeSpec::new(100_000.0, 64, RopePairing::Interleaved)?;
//! let mut keys = vec![1.0f32; 2 * 64]; // two tokens
//! spec.apply(&mut keys, 64, 0)?; // tokens 0 and 1
//! assert_eq!(keys[..64], [1.0; 64]); // position 0 is not rotated
//! assert!((keys[64] - (1f32.cos() - 1f32.sin())).abs() < 1e-6);
//! # Ok::<(), tensorvault_store::StoreErr>(())
//! ```

use crate::error::{Result, StoreErr};

/// Which channels form the rotated pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RopePairing {
    /// GPT-NeoX / Hugging Face Llama: channel `i` pairs with `i + rotary_dims / 2`.
    Neox = 1,
    /// GPT-J / Meta's original Llama / llama.cpp on GGUF's permuted weights: channels
    /// `2i` and `2i + 1`.
    Interleaved = 2,
}

impl RopePairing {
    /// From the header byte; `None` for 0 (no RoPE) and unknown values.
    #[must_use]
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(RopePairing::Neox),
            2 => Some(RopePairing::Interleaved),
            _ => None,
        }
    }

    /// The name used by Python and the CLI: `neox` or `interleaved`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            RopePairing::Neox => "neox",
            RopePairing::Interleaved => "interleaved",
        }
    }

    /// The pairing named `name` (`neox`, `interleaved`); `None` otherwise.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        [RopePairing::Neox, RopePairing::Interleaved]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// A RoPE spec: base, rotated channels and pairing (the head dimension is the cache's).
#[derive(Clone, Copy, Debug)]
pub struct RopeSpec {
    /// The base `theta` (10000 for Llama 2, 500000 for Llama 3, 100000 for SmolLM2).
    pub theta: f64,
    /// Channels rotated, from channel 0: even, >= 2 (the head dimension for full RoPE).
    pub rotary_dims: u16,
    /// Pair layout.
    pub pairing: RopePairing,
}

impl PartialEq for RopeSpec {
    fn eq(&self, other: &Self) -> bool {
        // Bitwise on theta: the persisted spec must match the requested one exactly.
        self.theta.to_bits() == other.theta.to_bits()
            && self.rotary_dims == other.rotary_dims
            && self.pairing == other.pairing
    }
}

impl Eq for RopeSpec {}

impl std::fmt::Display for RopeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "theta {}, {} rotary dims, {}",
            self.theta,
            self.rotary_dims,
            self.pairing.name()
        )
    }
}

impl RopeSpec {
    /// A checked spec.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] naming `rope.theta` (not finite or not > 1) or
    /// `rope.rotary_dims` (odd or 0).
    pub fn new(theta: f64, rotary_dims: u16, pairing: RopePairing) -> Result<Self> {
        let s = Self {
            theta,
            rotary_dims,
            pairing,
        };
        s.validate(None)?;
        Ok(s)
    }

    /// Check the fields, and that `rotary_dims <= head_dim` when a head dimension is given.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] naming the field.
    pub fn validate(&self, head_dim: Option<u32>) -> Result<()> {
        if !self.theta.is_finite() || self.theta <= 1.0 {
            return Err(StoreErr::InvalidArgument {
                field: "rope.theta",
                reason: format!("{} must be a finite number > 1", self.theta),
            });
        }
        let too_wide = head_dim.is_some_and(|h| u32::from(self.rotary_dims) > h);
        if self.rotary_dims == 0 || self.rotary_dims % 2 != 0 || too_wide {
            return Err(StoreErr::InvalidArgument {
                field: "rope.rotary_dims",
                reason: format!(
                    "{} must be even, >= 2{}",
                    self.rotary_dims,
                    head_dim
                        .map(|h| format!(" and <= head_dim {h}"))
                        .unwrap_or_default()
                ),
            });
        }
        Ok(())
    }

    /// Inverse frequencies of the `rotary_dims / 2` pairs.
    fn inv_freq(&self) -> Vec<f64> {
        let d = f64::from(self.rotary_dims);
        (0..self.rotary_dims / 2)
            .map(|i| self.theta.powf(-2.0 * f64::from(i) / d))
            .collect()
    }

    /// The two channels of pair `i`.
    fn pair(&self, i: usize) -> (usize, usize) {
        let half = usize::from(self.rotary_dims / 2);
        match self.pairing {
            RopePairing::Neox => (i, i + half),
            RopePairing::Interleaved => (2 * i, 2 * i + 1),
        }
    }

    /// Rotate `rows` (row-major, `head_dim` values per token) of the tokens at positions
    /// `first_pos`, `first_pos + 1`, ... by RoPE (`inverse`: undo it).
    fn rotate(
        &self,
        rows: &mut [f32],
        head_dim: usize,
        first_pos: u64,
        inverse: bool,
    ) -> Result<()> {
        self.validate(u32::try_from(head_dim).ok())?;
        if head_dim == 0 || rows.len() % head_dim != 0 {
            return Err(StoreErr::InvalidArgument {
                field: "values",
                reason: format!(
                    "{} values is not a whole number of {head_dim}-value token positions",
                    rows.len()
                ),
            });
        }
        let inv = self.inv_freq();
        let sign = if inverse { -1.0f32 } else { 1.0 };
        for (t, row) in rows.chunks_exact_mut(head_dim).enumerate() {
            // Positions beyond 2^53 lose integer precision in f64: the cache's token count
            // is a u32, far below.
            let pos = (first_pos + t as u64) as f64;
            for (i, f) in inv.iter().enumerate() {
                let ang = pos * f;
                let (c, s) = (ang.cos() as f32, sign * ang.sin() as f32);
                let (a, b) = self.pair(i);
                let (x, y) = (row[a], row[b]);
                row[a] = x * c - y * s;
                row[b] = x * s + y * c;
            }
        }
        Ok(())
    }

    /// Apply RoPE to `rows` of the tokens at positions `first_pos..`.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if `rows` is not whole tokens of `head_dim` or the
    /// spec does not fit `head_dim`.
    pub fn apply(&self, rows: &mut [f32], head_dim: usize, first_pos: u64) -> Result<()> {
        self.rotate(rows, head_dim, first_pos, false)
    }

    /// Undo RoPE on `rows` of the tokens at positions `first_pos..` (post-RoPE keys back
    /// to pre-RoPE, up to rounding).
    ///
    /// # Errors
    /// As [`RopeSpec::apply`].
    pub fn unapply(&self, rows: &mut [f32], head_dim: usize, first_pos: u64) -> Result<()> {
        self.rotate(rows, head_dim, first_pos, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_bad_specs() {
        for (theta, dims, field) in [
            (f64::NAN, 64, "rope.theta"),
            (1.0, 64, "rope.theta"),
            (1e4, 0, "rope.rotary_dims"),
            (1e4, 63, "rope.rotary_dims"),
        ] {
            let e = RopeSpec::new(theta, dims, RopePairing::Neox).unwrap_err();
            assert!(
                matches!(e, StoreErr::InvalidArgument { field: f, .. } if f == field),
                "{e}"
            );
        }
        let s = RopeSpec::new(1e4, 128, RopePairing::Neox).unwrap();
        let e = s.apply(&mut [0.0; 64], 64, 0).unwrap_err();
        assert!(e.to_string().contains("head_dim 64"), "{e}");
        let e = RopeSpec::new(1e4, 8, RopePairing::Neox)
            .unwrap()
            .apply(&mut [0.0; 13], 8, 0)
            .unwrap_err();
        assert!(
            matches!(
                e,
                StoreErr::InvalidArgument {
                    field: "values",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn pairings_rotate_the_right_channels() {
        // Token at position 1, head_dim 4, theta 1e4: pair 0 rotates by 1 rad, pair 1 by
        // 1e4^(-1/2) = 0.01 rad.
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let (c0, s0, c1, s1) = (1f32.cos(), 1f32.sin(), 0.01f32.cos(), 0.01f32.sin());
        let mut neox = x;
        RopeSpec::new(1e4, 4, RopePairing::Neox)
            .unwrap()
            .apply(&mut neox, 4, 1)
            .unwrap();
        // Neox pairs (0, 2) and (1, 3).
        let want = [
            1.0 * c0 - 3.0 * s0,
            2.0 * c1 - 4.0 * s1,
            1.0 * s0 + 3.0 * c0,
            2.0 * s1 + 4.0 * c1,
        ];
        for (a, b) in neox.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{neox:?} {want:?}");
        }
        let mut inter = x;
        RopeSpec::new(1e4, 4, RopePairing::Interleaved)
            .unwrap()
            .apply(&mut inter, 4, 1)
            .unwrap();
        let want = [
            1.0 * c0 - 2.0 * s0,
            1.0 * s0 + 2.0 * c0,
            3.0 * c1 - 4.0 * s1,
            3.0 * s1 + 4.0 * c1,
        ];
        for (a, b) in inter.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{inter:?} {want:?}");
        }
        // Partial rotary: channels beyond rotary_dims are untouched.
        let mut part = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        RopeSpec::new(1e4, 4, RopePairing::Neox)
            .unwrap()
            .apply(&mut part, 6, 7)
            .unwrap();
        assert_eq!(part[4..], [5.0, 6.0]);
    }

    proptest! {
        #[test]
        fn unapply_undoes_apply(
            vals in proptest::collection::vec(-8.0f32..8.0, 1..8usize).prop_map(|v| v.repeat(8)),
            pos in 0u64..100_000,
            neox in any::<bool>(),
        ) {
            let pairing = if neox { RopePairing::Neox } else { RopePairing::Interleaved };
            let s = RopeSpec::new(1e5, 8, pairing).unwrap();
            let mut y = vals.clone();
            s.apply(&mut y, 8, pos).unwrap();
            // A rotation keeps each pair's norm.
            let n0: f32 = vals.iter().map(|v| v * v).sum();
            let n1: f32 = y.iter().map(|v| v * v).sum();
            prop_assert!((n0 - n1).abs() <= 1e-3 * n0.max(1.0));
            s.unapply(&mut y, 8, pos).unwrap();
            for (a, b) in vals.iter().zip(&y) {
                prop_assert!((a - b).abs() < 1e-4, "{} {}", a, b);
            }
        }
    }
}
