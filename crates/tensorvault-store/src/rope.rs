//! Rotary position embedding (RoPE) of KV-cache keys, applied at read: a cache created
//! with a [`RopeSpec`] stores keys *before* RoPE (where per-channel quantization groups
//! see each channel's own distribution instead of one smeared by the position-dependent
//! rotation: KVQuant's largest single gain), and [`crate::KvCache::read`] returns them
//! after RoPE, rotated for their token positions, exactly as a cache of post-RoPE keys
//! would hold them.
//!
//! The spec is persisted in the collection's MetaLog header (`docs/formats/store.md`,
//! "RoPE spec"), so a reopen applies the same rotation; opening with a different spec is
//! [`crate::StoreErr::RopeMismatch`]. The checked constructor and the rotation itself
//! (`RopeSpec::new`, `apply`, `unapply`) are in `kv/rope.rs`; this module holds the
//! spec and its arithmetic and depends on nothing else in the crate (the error type and
//! the collection config name it).
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
    /// What is wrong with the spec for heads of `head_dim` values (if given), as the
    /// field and the reason; `None` if it is valid.
    pub(crate) fn problem(&self, head_dim: Option<u32>) -> Option<(&'static str, String)> {
        if !self.theta.is_finite() || self.theta <= 1.0 {
            return Some((
                "rope.theta",
                format!("{} must be a finite number > 1", self.theta),
            ));
        }
        let too_wide = head_dim.is_some_and(|h| u32::from(self.rotary_dims) > h);
        if self.rotary_dims == 0 || !self.rotary_dims.is_multiple_of(2) || too_wide {
            return Some((
                "rope.rotary_dims",
                format!(
                    "{} must be even, >= 2{}",
                    self.rotary_dims,
                    head_dim
                        .map(|h| format!(" and <= head_dim {h}"))
                        .unwrap_or_default()
                ),
            ));
        }
        None
    }

    /// Inverse frequencies of the `rotary_dims / 2` pairs.
    pub(crate) fn inv_freq(&self) -> Vec<f64> {
        let d = f64::from(self.rotary_dims);
        (0..self.rotary_dims / 2)
            .map(|i| self.theta.powf(-2.0 * f64::from(i) / d))
            .collect()
    }

    /// The two channels of pair `i`.
    pub(crate) fn pair(&self, i: usize) -> (usize, usize) {
        let half = usize::from(self.rotary_dims / 2);
        match self.pairing {
            RopePairing::Neox => (i, i + half),
            RopePairing::Interleaved => (2 * i, 2 * i + 1),
        }
    }

    /// Rotate whole `rows` (`head_dim` values per token, row-major) of the tokens at
    /// positions `first_pos..` by RoPE (`inverse`: undo it). The caller has checked the
    /// spec against `head_dim` ([`RopeSpec::problem`]) and that `rows` is whole tokens;
    /// a trailing partial row is left as it is.
    pub(crate) fn rotate_rows(
        &self,
        rows: &mut [f32],
        head_dim: usize,
        first_pos: u64,
        inverse: bool,
    ) {
        let inv = self.inv_freq();
        let sign = if inverse { -1.0f32 } else { 1.0 };
        let rotary = usize::from(self.rotary_dims);
        if head_dim < rotary || head_dim == 0 {
            return;
        }
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
    }
}
