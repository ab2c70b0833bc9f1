//! Naming of the cache's tensors: one per (layer, head, keys|values).

use crate::types::TensorKind;

/// Which of an attention head's two tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KvKind {
    /// The keys (`.k`).
    Key,
    /// The values (`.v`).
    Value,
}

impl KvKind {
    /// Both kinds, keys first.
    pub const BOTH: [KvKind; 2] = [KvKind::Key, KvKind::Value];

    /// The store's tensor kind of this half (selects the codec layout of quantized tiers).
    #[must_use]
    pub const fn tensor_kind(self) -> TensorKind {
        match self {
            KvKind::Key => TensorKind::KvKey,
            KvKind::Value => TensorKind::KvValue,
        }
    }

    /// The tensor-name suffix: `k` or `v`.
    #[must_use]
    pub const fn suffix(self) -> &'static str {
        match self {
            KvKind::Key => "k",
            KvKind::Value => "v",
        }
    }
}

/// One (layer, head, kind) tensor of the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KvSlot {
    /// Transformer layer.
    pub layer: u32,
    /// Attention head (KV head, under grouped-query attention).
    pub head: u32,
    /// Keys or values.
    pub kind: KvKind,
}

impl KvSlot {
    /// The slot of `layer`, `head`, `kind`.
    #[must_use]
    pub const fn new(layer: u32, head: u32, kind: KvKind) -> Self {
        Self { layer, head, kind }
    }

    /// Its tensor name, `L{layer}.H{head}.{k|v}`.
    #[must_use]
    pub fn name(&self) -> String {
        format!("L{}.H{}.{}", self.layer, self.head, self.kind.suffix())
    }

    /// Parse a tensor name written by [`KvSlot::name`]; `None` for any other name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        let rest = name.strip_prefix('L')?;
        let (layer, rest) = rest.split_once(".H")?;
        let (head, kind) = rest.split_once('.')?;
        let kind = match kind {
            "k" => KvKind::Key,
            "v" => KvKind::Value,
            _ => return None,
        };
        let slot = Self::new(layer.parse().ok()?, head.parse().ok()?, kind);
        // Only the canonical spelling (no leading zeros or '+'): names are identities.
        (slot.name() == name).then_some(slot)
    }
}

impl std::fmt::Display for KvSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "L{}.H{}.{}", self.layer, self.head, self.kind.suffix())
    }
}
