//! Configuration: the collection geometry (persisted in the MetaLog header, fixed for a
//! collection's life) and the runtime options (chosen at every open).

use tensorvault_quant::kind;
use tensorvault_quant::layout as q;

use crate::error::{Result, StoreErr};
use crate::types::Tier;

/// Default raw block size: 16 KiB of f32 values (ADR-018 section 3.3).
pub const DEFAULT_BLOCK_ELEMS: u32 = 4096;
/// Raw block size of the KV-cache layout in bytes (ADR-018 section 3.3).
pub const KV_BLOCK_RAW_BYTES: u32 = 32 * 1024;
/// Default slot alignment in tier files (ARCHITECTURE.md section 7).
pub const DEFAULT_SLOT_ALIGN: u32 = 64;
/// With [`CollectionConfig::extents`], a quantized block may be up to this many worst-case
/// slot lengths long ([`CollectionConfig::max_block_len`]).
pub const EXTENT_CAP_SLOTS: u64 = 2;
/// Largest accepted block (elements); bounds every slot and every decode buffer.
pub const MAX_BLOCK_ELEMS: u32 = 1 << 22;
/// Default [`StoreConfig::lock_wait`]: readers hold a collection for the length of a
/// listing or a verify.
pub const DEFAULT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// Codec v1: symmetric groups with f16 scales (TQTC segment version 1); collections
/// created before codec v2 (MetaLog header version 1) use it.
pub const CODEC_V1: u8 = 1;
/// Codec v2: asymmetric groups laid out by tensor kind (TQTC segment version 2); the
/// default of new collections.
pub const CODEC_V2: u8 = 2;
/// Codec v3: codec v2's layouts, except that embeddings are rotated in power-of-two
/// sub-blocks of each row (TQTC segment version 3: randomized Hadamard, Lloyd-Max
/// levels); `tensorvault_quant::kind::v3_layout` decides. Same geometry rules as v2.
pub const CODEC_V3: u8 = 3;
/// Codec v4: codec v3's layouts, except that `weight` and `embedding` tensors are TQTC
/// version 4 segments (groups inside super-blocks, k-quant style side data) sized to the
/// tier's slot (`crate::codec_weights`), and that KV caches may give keys their own bit
/// widths and group sizes per tier ([`CollectionConfig::key_bits`],
/// [`CollectionConfig::key_group_size`]; e.g. 4-bit keys next to 3-bit values at tier 3,
/// each tier's slot fitting the larger of the two kinds' segments) and store 3-bit KV
/// values rotated per token (`crate::codec`). Same geometry rules as v2.
pub const CODEC_V4: u8 = 4;
/// Codec v4 defaults of the KV-cache layout ([`CollectionConfig::with_codec_v4`]): key
/// bit widths of tiers 1, 2, 3.
pub const V4_KV_KEY_BITS: [u8; 3] = [8, 5, 4];
/// Codec v4 defaults of the KV-cache layout: key group sizes (tokens per channel group)
/// of tiers 1, 2, 3.
pub const V4_KV_KEY_GROUP: [u32; 3] = [128, 128, 128];
/// Spacing of the entropy-coded levels of KV values ([`CollectionConfig::kv_ecsq`]), in
/// sixteenths of each token's RMS after rotation, times the uniform table's step: 26/16
/// (chosen in numpy on SmolLM2-135M's cache, bench/RESULTS.md "Session 11: kv-side":
/// 3.11 entropy-coded bits/value at 15.5% relative RMSE, against 2.98 at 18.3% for
/// 3-bit Lloyd-Max codes).
pub const KV_ECSQ_STEP_SIXTEENTHS: u8 = 26;
/// Code widths of weight and embedding tensors at tiers 2 and 3 with
/// [`CollectionConfig::ecsq`] (the rANS alphabet: `2^bits` uniform levels; the rate
/// control decides how many are used). Chosen on all-MiniLM-L6-v2's weights and
/// SmolLM2's token table (bench/RESULTS.md, "Session 12: quant-ecsq").
pub const ECSQ_BITS: [u8; 2] = [6, 5];
/// Code widths of weight and embedding tensors at tiers 1, 2 and 3 with
/// [`CollectionConfig::ecsq_model`] (TQTC version 7: no stored frequency table, so the
/// alphabet can be wide enough that the rate control, not the alphabet, sets the step;
/// bench/RESULTS.md, "Session 14: ecsq-model").
pub const ECSQ_MODEL_BITS: [u8; 3] = [10, 7, 6];
/// log2 of the rotation block of [`CollectionConfig::ecsq`] segments (blocks of 1024;
/// a store block whose length is not a multiple uses the largest power of two >= 16
/// dividing it).
pub const ECSQ_BLOCK_LOG2: u8 = 10;
/// Whether [`CollectionConfig::ecsq`] segments rotate their blocks.
pub const ECSQ_ROTATE: bool = true;
/// log2 of the rANS lanes of [`CollectionConfig::ecsq`] envelopes: one lane (4 bytes of
/// state instead of 16 per block: 0.023 bits per value, which took all-MiniLM-L6-v2's
/// tier 2 error from 3.711% to 3.668%, under GGUF Q5_K's 3.673%; decoding is serial).
pub const ECSQ_LANES_LOG2: u8 = 0;
/// Spacings of the entropy-coded levels of tier 2 KV values
/// ([`CollectionConfig::kv_ecsq_tier2`]), finest first, in sixteenths of the 6-bit uniform
/// table's MSE-optimal step times each token's RMS after rotation: a block takes the
/// first whose envelope fits the tier's [`CollectionConfig::max_block_len`] (with extents
/// 16/16, about 5.45 entropy-coded bits per value; in a slot 20/16, about 5.15), else the
/// per-channel groups. Chosen in numpy on SmolLM2-135M's cache (bench/RESULTS.md "Session
/// 12: kv-tier2": value error 4.61% with the 5-bit groups, 3.10% at 16/16, 3.75% at 20/16).
pub const KV_ECSQ_TIER2_STEPS_SIXTEENTHS: [u8; 2] = [16, 20];
/// Bit width of the entropy-coded tier 2 KV value codes ([`CollectionConfig::kv_ecsq_tier2`]):
/// one more than the tier's 5 bits.
pub const KV_ECSQ_TIER2_BITS: u8 = 6;
/// Code width of tier 2 KV key blocks stored as TQTC version 8 segments
/// ([`CollectionConfig::kv_keys_ecsq`]): the widest alphabet before the model tables'
/// floor of one count per symbol costs more than clamping saves (SmolLM2's pre-RoPE keys,
/// apache2, at today's byte length: attention-logit error 1.27% at 12 bits, 1.15% at 10,
/// 1.13% at 9, 1.12% at 8, 1.19% at 7; bench/RESULTS.md "Session 15: kv-chan").
pub const KV_KEYS_ECSQ_BITS: u8 = 8;
/// Payload budget of a tier 2 KV key block stored as TQTC version 8
/// ([`CollectionConfig::kv_keys_ecsq`]), in hundredths of a bit per value: the segment is
/// fitted into the larger of this and the length of the block's encoding without the
/// flag (at most the tier's `max_block_len`). 4.95 b/v for keys keeps tier 2 at or below
/// its 5.25 b/v with `kv_ecsq_tier2` values (about 5.50 b/v with extents): the keys' 5-bit
/// groups took about 4.87 and left 0.07 b/v of the tier unused (bench/RESULTS.md "Session
/// 15: kv-chan").
pub const KV_KEYS_ECSQ_CENTIBITS: u64 = 495;
/// log2 of the rANS lanes of [`CollectionConfig::kv_keys_ecsq`] segments: four lanes (16
/// bytes of state per block, 0.008 bits per value of a 16,384-value block).
pub const KV_KEYS_ECSQ_LANES_LOG2: u8 = 2;
/// Codec v2 group sizes of tiers 1, 2, 3: with 16 bits of side data per group and a
/// 32-byte segment header, a 4096-value block fits 8.25 / 5.25 / 3.375 bits per value
/// after 64-byte slot rounding (issue 14's bit budgets).
pub const V2_GROUP_SIZE: [u32; 3] = [
    kind::v2_default_group_size(8),
    kind::v2_default_group_size(5),
    kind::v2_default_group_size(3),
];

/// The geometry of one collection: how many elements a block holds and how each tier
/// encodes it. Written into the MetaLog header when the collection is created and read
/// back on every open, so slot sizes never change under existing data.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CollectionConfig {
    /// Elements per block (the last block of a tensor may hold fewer).
    pub block_elems: u32,
    /// Bytes per element reserved in a Tier0 slot: 4 (f32, default) or 2 (f16/bf16 only).
    pub tier0_elem_bytes: u8,
    /// Bit width of tiers 1, 2, 3 (defaults 8, 5, 3; tier 2 may be 7).
    pub tier_bits: [u8; 3],
    /// Group size of tiers 1, 2, 3 (defaults from `tensorvault_quant::layout::default_group_size`).
    pub group_size: [u32; 3],
    /// Slot alignment in bytes (power of two, >= 8).
    pub slot_align: u32,
    /// Codec of the quantized tiers: [`CODEC_V1`], [`CODEC_V2`] or [`CODEC_V3`].
    pub codec: u8,
    /// Codec v2: values per block that may be kept as f16 beyond the quantized payload
    /// (the first token of a KV tensor, an attention sink); 0 keeps none. Sizes the
    /// quantized slots.
    pub sink_values: u16,
    /// Codecs v2 and later: store each tier 2 and tier 3 payload entropy-coded (a TQTC
    /// version 5 envelope, `docs/formats/quant.md` section 12) when that makes it shorter.
    /// Lossless; the slot size is unchanged. MetaLog header flags bit 0
    /// (`docs/formats/store.md`).
    pub entropy: bool,
    /// Blocks take payload-sized extents in their tier files (`roundup(data_len,
    /// slot_align)` bytes at any `slot_align` multiple) instead of worst-case slots, and
    /// may be up to [`CollectionConfig::max_block_len`] long. New collections only (codecs
    /// v2 and later); MetaLog header flags bit 1 (`docs/formats/store.md`).
    pub extents: bool,
    /// Codec v4 with [`CollectionConfig::entropy`]: KV values at 3 bits and fewer are
    /// stored with entropy-coded levels: rotated per token like codec v4's values, but
    /// with one more bit of uniform levels spaced [`KV_ECSQ_STEP_SIXTEENTHS`]/16 of the
    /// token's RMS apart (wider than the MSE-optimal spacing), which the version 5
    /// envelope's rANS packs to about the size of the Lloyd-Max codes at a lower error
    /// (`crate::codec`). The tier's slot is unchanged where the keys' segment is as
    /// large (4-bit keys at tier 3). MetaLog header flags bit 2. Opt-in for new KV
    /// caches: older collections keep their layout.
    pub kv_ecsq: bool,
    /// Codec v4 with [`CollectionConfig::entropy`]: `weight` and `embedding` tensors at
    /// tiers 2 and 3 are stored as entropy-coded uniform levels under rate control
    /// (`tensorvault_quant::ecsq`: rotated blocks, one shared step searched so the
    /// version 5 envelope fits the tier's slot; [`ECSQ_BITS`] wide codes), instead of
    /// version 4 super-blocks (which tier 1 keeps). Same slots. MetaLog header flags
    /// bit 3. Opt-in for new collections: older ones keep their layout.
    pub ecsq: bool,
    /// With [`CollectionConfig::kv_ecsq`]: KV values at tier 2 (5 bits) are stored with
    /// entropy-coded levels as well: rotated per token, [`KV_ECSQ_TIER2_BITS`]-bit uniform
    /// codes spaced one of [`KV_ECSQ_TIER2_STEPS_SIXTEENTHS`]/16 of the table's step times
    /// the token's RMS, in the version 5 envelope; a block whose envelope does not fit the
    /// tier's [`CollectionConfig::max_block_len`] at any of them keeps the per-channel
    /// groups (`crate::codec`). Slot sizes are unchanged. MetaLog header flags bit 4. Opt-in for
    /// new KV caches: older collections keep their layout.
    pub kv_ecsq_tier2: bool,
    /// Codec v4: every quantized block of an `embedding` tensor whose rows are at most
    /// 65535 values wide is wrapped in a TQTC version 6 row-gain envelope
    /// (`tensorvault_quant::segment_v6`): one gain code per row (or piece of a row) in
    /// the block makes each row's decoding an unbiased inner-product estimate
    /// (`<x, g x̂> = |x|^2`), which is what nearest-neighbour ranking needs. The inner
    /// segment is what the collection writes otherwise (v4, or ECSQ with
    /// [`CollectionConfig::ecsq`]) fitted to the slot less the envelope's bytes. Same
    /// slots. MetaLog header flags bit 6. Opt-in for new collections: older ones keep
    /// their layout.
    pub row_gains: bool,
    /// With [`CollectionConfig::ecsq`]: `weight` and `embedding` tensors at tiers 1, 2 and
    /// 3 are stored as model-coded ECSQ (TQTC version 7, `tensorvault_quant::segment_v7`:
    /// one step per block under rate control, rANS frequencies from a Gaussian model with
    /// one side byte per rotation block instead of a stored table; [`ECSQ_MODEL_BITS`]
    /// wide codes) in place of the version 5/3 ECSQ (and of tier 1's version 4), inside
    /// the row-gain envelope with [`CollectionConfig::row_gains`]. Same slots. MetaLog
    /// header flags bit 7. Opt-in for new collections: older ones keep their layout.
    pub ecsq_model: bool,
    /// Codec v4 with [`CollectionConfig::row_gains`]: a 2-D `embedding` tensor (f32,
    /// f16 or bf16, rows of at most `block_elems` values, no reconstruction policy) is
    /// stored centred: the store keeps its column mean as the tensor's side record (block
    /// [`crate::centre::CENTRE_BLOCK_INDEX`], raw f32 at Tier0), codes each quantized
    /// block's values less the mean with row gains computed against the original rows,
    /// and adds the mean back on every read (`docs/formats/store.md`, "Centred embedding
    /// tensors"). MetaLog header flags bit 5. Opt-in for new collections.
    pub centre: bool,
    /// Codec v4 with [`CollectionConfig::entropy`]: a tier 2 `kv_key` block that starts on
    /// a row and holds whole rows of a power-of-two head (16..=1024 channels) is stored
    /// as a TQTC version 8 segment (`tensorvault_quant::segment_v8`: each channel's mean
    /// removed, one step, each channel's codes priced by a Gaussian of its spread,
    /// [`KV_KEYS_ECSQ_BITS`]-bit codes, the sink row f16) fitted into the larger of
    /// [`KV_KEYS_ECSQ_CENTIBITS`]/100 bits per value and the byte length the block's key
    /// segment has without the flag (at most the tier's `max_block_len`); a block that
    /// does not qualify or fit keeps that segment. Same slots and extents. MetaLog
    /// header flags2 bit 0 (byte 78). Opt-in for new KV caches: older collections keep
    /// their layout.
    pub kv_keys_ecsq: bool,
    /// With [`CollectionConfig::entropy`]: the version 5 envelopes of KV and generic
    /// tensors are written with 64 interleaved rANS lanes
    /// (`tensorvault_quant::layout::V5_WIDE_LANES_LOG2`) instead of 4, which the reader
    /// decodes with AVX-512 or AVX2 ~3x faster (a whole 16384-value KV block read
    /// 1.7-2.2x; the same values; ~180 more bytes per block). Weights and embeddings keep their lane counts (their envelopes
    /// are fitted to the slot), and so does a `kv_ecsq_tier2` block whose 64-lane
    /// envelope does not fit at the step its 4-lane one fits (never a coarser step). Every build since session 15 reads envelopes of any lane
    /// count with or without the flag; the flag (MetaLog header flags2 bit 1) makes an
    /// older build refuse the collection at open rather than fail on its first wide
    /// block. Opt-in for new collections.
    pub wide_lanes: bool,
    /// With [`CollectionConfig::kv_keys_ecsq`]: the tier 2 key blocks that flag stores as
    /// TQTC version 8 are stored as TQTC version 9 instead (`tensorvault_quant::segment_v9`:
    /// v8 plus one step per channel, each channel's step shaped by the block's own key
    /// energy of its RoPE pair, `step_c ∝ (w_c / geomean(w))^(-1/2)`, never finer than
    /// its largest value needs unclamped), in the same byte budget, with the same
    /// qualification and the same fallback; and tier 3 key blocks that qualify the same
    /// way are v9 within the bytes of their 4-bit key envelope (never more). The logit
    /// error `q . dk` attention sees falls about 25% at the same bytes (bench/RESULTS.md
    /// "Session 16: kv-wstep"). Reading dispatches on the segment version, so v8 blocks
    /// read either way. MetaLog header flags2 bit 2 (byte 78). Opt-in.
    pub kv_keys_wstep: bool,
    /// Codec v4: bit widths of KV keys (`TensorKind::KvKey`) in tiers 1, 2, 3; every
    /// other kind uses [`CollectionConfig::tier_bits`]. Zero in codecs 1..=3, and in a
    /// codec v4 collection whose keys use the tier widths (with `key_group_size` zero too).
    pub key_bits: [u8; 3],
    /// Codec v4: group sizes of KV keys in tiers 1, 2, 3 (zero in codecs 1..=3).
    pub key_group_size: [u32; 3],
    /// The RoPE of a KV cache that stores keys before RoPE ([`crate::kv::RopeSpec`]); `None`
    /// for caches of post-RoPE keys and for every other collection.
    pub rope: Option<crate::rope::RopeSpec>,
}

impl Default for CollectionConfig {
    fn default() -> Self {
        Self::with_block_elems(DEFAULT_BLOCK_ELEMS)
    }
}

impl CollectionConfig {
    /// Defaults (codec v2) with `block_elems` elements per block.
    #[must_use]
    pub fn with_block_elems(block_elems: u32) -> Self {
        Self {
            block_elems,
            tier0_elem_bytes: 4,
            tier_bits: [8, 5, 3],
            group_size: V2_GROUP_SIZE,
            slot_align: DEFAULT_SLOT_ALIGN,
            codec: CODEC_V2,
            sink_values: 0,
            entropy: false,
            extents: false,
            kv_ecsq: false,
            ecsq: false,
            kv_ecsq_tier2: false,
            row_gains: false,
            ecsq_model: false,
            centre: false,
            kv_keys_ecsq: false,
            wide_lanes: false,
            kv_keys_wstep: false,
            key_bits: [0; 3],
            key_group_size: [0; 3],
            rope: None,
        }
    }

    /// The geometry collections had before codec v2 (symmetric v1 groups of 128 / 256 /
    /// 512 values), with `block_elems` elements per block: what a MetaLog header of
    /// version 1 describes.
    #[must_use]
    pub fn codec_v1(block_elems: u32) -> Self {
        let bits = [8, 5, 3];
        Self {
            group_size: bits.map(|b| q::default_group_size(b) as u32),
            codec: CODEC_V1,
            ..Self::with_block_elems(block_elems)
        }
    }

    /// The KV-cache layout of ADR-018 section 3.3: 32 KiB blocks of f16 whose element
    /// count is rounded down to a multiple of `head_dim`, so a block boundary is always a
    /// token-position boundary (head_dim 128 -> 16384 elements = 128 positions).
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if `head_dim` is 0 or larger than a block.
    pub fn kv_cache(head_dim: u32) -> Result<Self> {
        let elems = KV_BLOCK_RAW_BYTES / 2;
        if head_dim == 0 || head_dim > elems {
            return Err(StoreErr::InvalidArgument {
                field: "head_dim",
                reason: format!("{head_dim} must be in 1..={elems}"),
            });
        }
        let mut c = Self::with_block_elems(elems / head_dim * head_dim);
        c.tier0_elem_bytes = 2;
        // One token of f16 per block for the attention sink (block 0 of each tensor).
        c.sink_values = u16::try_from(head_dim).unwrap_or(0);
        Ok(c)
    }

    /// The KV-cache layout with `tokens` token positions per block instead of 32 KiB
    /// (smaller blocks let a KV cache keep a shorter recent window raw; per-channel key
    /// groups need `tokens >=` the tier's group size, 128 at 8 and 5 bits).
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if `head_dim` or `tokens` is 0 or a block would
    /// exceed [`MAX_BLOCK_ELEMS`] elements.
    pub fn kv_cache_tokens(head_dim: u32, tokens: u32) -> Result<Self> {
        let mut c = Self::kv_cache(head_dim)?;
        match head_dim.checked_mul(tokens) {
            Some(n) if tokens > 0 && n <= MAX_BLOCK_ELEMS => c.block_elems = n,
            _ => {
                return Err(StoreErr::InvalidArgument {
                    field: "tokens",
                    reason: format!(
                    "{tokens} tokens of {head_dim} values must be 1..={MAX_BLOCK_ELEMS} elements"
                ),
                })
            }
        }
        Ok(c)
    }

    /// This layout turned into codec v4 with the default key widths ([`V4_KV_KEY_BITS`],
    /// [`V4_KV_KEY_GROUP`]): tier 3 keeps keys at 4 bits next to 3-bit values.
    #[must_use]
    pub fn with_codec_v4(mut self) -> Self {
        self.codec = CODEC_V4;
        self.key_bits = V4_KV_KEY_BITS;
        self.key_group_size = V4_KV_KEY_GROUP;
        self
    }

    /// Bit width of a quantized tier (`None` for Tier0).
    #[must_use]
    pub fn bits(&self, tier: Tier) -> Option<u8> {
        tier.index().checked_sub(1).map(|i| self.tier_bits[i])
    }

    /// Group size of a quantized tier (`None` for Tier0).
    #[must_use]
    pub fn group_size(&self, tier: Tier) -> Option<u32> {
        tier.index().checked_sub(1).map(|i| self.group_size[i])
    }

    /// Bit width of values of `kind` in a quantized tier (`None` for Tier0): the key
    /// widths for KV keys in codec v4, [`CollectionConfig::bits`] otherwise.
    #[must_use]
    pub fn bits_for(&self, tier: Tier, kind: crate::types::TensorKind) -> Option<u8> {
        let i = tier.index().checked_sub(1)?;
        Some(
            if self.per_kind_keys() && kind == crate::types::TensorKind::KvKey {
                self.key_bits[i]
            } else {
                self.tier_bits[i]
            },
        )
    }

    /// Group size of values of `kind` in a quantized tier (`None` for Tier0), as
    /// [`CollectionConfig::bits_for`].
    #[must_use]
    pub fn group_size_for(&self, tier: Tier, kind: crate::types::TensorKind) -> Option<u32> {
        let i = tier.index().checked_sub(1)?;
        Some(
            if self.per_kind_keys() && kind == crate::types::TensorKind::KvKey {
                self.key_group_size[i]
            } else {
                self.group_size[i]
            },
        )
    }

    /// Whether KV keys have their own widths: codec v4 with key fields set (all zero
    /// means keys use the tier's widths, as in a codec v4 collection of weights).
    #[must_use]
    pub fn per_kind_keys(&self) -> bool {
        self.codec == CODEC_V4 && (self.key_bits != [0; 3] || self.key_group_size != [0; 3])
    }

    /// Codec v1 quantization parameters of a quantized tier (`None` for Tier0).
    ///
    /// # Errors
    /// [`StoreErr::Quant`] if the stored bits / group size are invalid (checked by
    /// [`CollectionConfig::validate`]).
    pub fn params(&self, tier: Tier) -> Result<Option<tensorvault_quant::groupwise::QuantParams>> {
        match tier.index().checked_sub(1) {
            None => Ok(None),
            Some(i) => Ok(Some(tensorvault_quant::groupwise::QuantParams::new(
                self.tier_bits[i],
                self.group_size[i] as usize,
            )?)),
        }
    }

    /// Payload bytes a full block needs in `tier`: raw bytes for Tier0, the length of a
    /// one-frame TQTC segment of `block_elems` values for quantized tiers (codec v2: a
    /// flat segment of `block_elems` values plus `sink_values` raw values; every layout
    /// the store writes fits it, see `codec::v2_layout`).
    #[must_use]
    pub fn max_payload_len(&self, tier: Tier) -> u64 {
        let n = u64::from(self.block_elems);
        match tier.index().checked_sub(1) {
            None => n * u64::from(self.tier0_elem_bytes),
            Some(i) => {
                let len = |k: u8, g: u32| {
                    let k = u64::from(k);
                    let g = u64::from(g.max(1));
                    let groups = n.div_ceil(g);
                    let codes = (n * k).div_ceil(8);
                    if self.codec == CODEC_V1 {
                        q::HEADER_LEN as u64 + 1 + groups * q::SCALE_BYTES as u64 + codes
                    } else {
                        q::V2_HEADER_LEN as u64
                            + u64::from(self.sink_values) * q::V2_RAW_BYTES as u64
                            + groups * q::V2_GROUP_BYTES as u64
                            + codes
                    }
                };
                let all = len(self.tier_bits[i], self.group_size[i]);
                if self.per_kind_keys() {
                    // One slot per tier holds either kind: the larger segment.
                    all.max(len(self.key_bits[i], self.key_group_size[i]))
                } else {
                    all
                }
            }
        }
    }

    /// Slot length of `tier`: the largest payload rounded up to `slot_align`.
    #[must_use]
    pub fn slot_len(&self, tier: Tier) -> u32 {
        let a = u64::from(self.slot_align.max(1));
        let len = self.max_payload_len(tier).div_ceil(a) * a;
        u32::try_from(len).unwrap_or(u32::MAX)
    }

    /// The unit blocks of `tier` are allocated in: `slot_align` with
    /// [`CollectionConfig::extents`], else the slot length (every block takes one slot).
    #[must_use]
    pub fn alloc_unit(&self, tier: Tier) -> u32 {
        if self.extents {
            self.slot_align.max(1)
        } else {
            self.slot_len(tier)
        }
    }

    /// Longest payload a block of `tier` may have. Slots: the slot length. Extents:
    /// [`EXTENT_CAP_SLOTS`] slot lengths for the quantized tiers (a codec may use a finer
    /// layout that sometimes needs more than the worst-case slot), one slot length for
    /// Tier0 (raw values never exceed it); at most `u32::MAX` rounded down to the unit.
    #[must_use]
    pub fn max_block_len(&self, tier: Tier) -> u32 {
        let slot = u64::from(self.slot_len(tier));
        if !self.extents || tier == Tier::Tier0 {
            return self.slot_len(tier);
        }
        let a = u64::from(self.slot_align.max(1));
        let cap = (slot * EXTENT_CAP_SLOTS).min(u64::from(u32::MAX) / a * a);
        u32::try_from(cap).unwrap_or(u32::MAX)
    }

    /// Check every field.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        let bad =
            |field: &'static str, reason: String| Err(StoreErr::InvalidArgument { field, reason });
        if self.block_elems == 0 || self.block_elems > MAX_BLOCK_ELEMS {
            return bad(
                "block_elems",
                format!("{} not in 1..={MAX_BLOCK_ELEMS}", self.block_elems),
            );
        }
        if !matches!(self.tier0_elem_bytes, 1 | 2 | 4) {
            return bad(
                "tier0_elem_bytes",
                format!("{} not 1, 2 or 4", self.tier0_elem_bytes),
            );
        }
        if !self.slot_align.is_power_of_two() || self.slot_align < 8 || self.slot_align > 1 << 20 {
            return bad(
                "slot_align",
                format!("{} is not a power of two in 8..=2^20", self.slot_align),
            );
        }
        match self.codec {
            CODEC_V1 => {
                for i in 0..3 {
                    tensorvault_quant::groupwise::QuantParams::new(
                        self.tier_bits[i],
                        self.group_size[i] as usize,
                    )
                    .map_err(|e| StoreErr::InvalidArgument {
                        field: "tier_bits/group_size",
                        reason: format!("tier{}: {e}", i + 1),
                    })?;
                }
            }
            CODEC_V2 | CODEC_V3 | CODEC_V4 => {
                let keys = self.per_kind_keys();
                let pairs = (0..3)
                    .map(|i| {
                        (
                            i,
                            self.tier_bits[i],
                            self.group_size[i],
                            "tier_bits/group_size",
                        )
                    })
                    .chain((0..3).filter(|_| keys).map(|i| {
                        (
                            i,
                            self.key_bits[i],
                            self.key_group_size[i],
                            "key_bits/key_group_size",
                        )
                    }));
                for (i, k, g, field) in pairs {
                    let groups = (1u32 << q::V2_MIN_GROUP_LOG2)..=(1u32 << q::V2_MAX_GROUP_LOG2);
                    if !(q::MIN_BITS..=q::MAX_BITS).contains(&k)
                        || !g.is_power_of_two()
                        || !groups.contains(&g)
                    {
                        return bad(
                            field,
                            format!(
                                "tier{}: {k} bits / group {g} (codec v2 takes 2..=8 bits, \
                                 groups a power of two in 4..=1024)",
                                i + 1
                            ),
                        );
                    }
                }
            }
            other => return bad("codec", format!("{other} is not 1, 2, 3 or 4")),
        }
        if self.codec == CODEC_V1 && self.entropy {
            return bad("entropy", "codec v1 collections cannot entropy-code".into());
        }
        if self.codec == CODEC_V1 && self.extents {
            return bad(
                "extents",
                "codec v1 collections keep slots (their header has no flags)".into(),
            );
        }
        if self.kv_ecsq && !(self.codec == CODEC_V4 && self.entropy) {
            return bad(
                "kv_ecsq",
                format!(
                    "entropy-coded KV levels need codec v4 with the entropy flag (codec {}, entropy {})",
                    self.codec, self.entropy
                ),
            );
        }
        if self.ecsq && !(self.codec == CODEC_V4 && self.entropy) {
            return bad(
                "ecsq",
                format!(
                    "entropy-coded weight/embedding levels need codec v4 with the entropy flag (codec {}, entropy {})",
                    self.codec, self.entropy
                ),
            );
        }
        if self.row_gains && self.codec != CODEC_V4 {
            return bad(
                "row_gains",
                format!(
                    "row-gain envelopes are written by codec v4 collections (codec {})",
                    self.codec
                ),
            );
        }
        if self.ecsq_model && !self.ecsq {
            return bad(
                "ecsq_model",
                "model-coded ECSQ needs ecsq (codec v4 with the entropy flag)".into(),
            );
        }
        if self.centre && !(self.codec == CODEC_V4 && self.row_gains) {
            return bad(
                "centre",
                format!(
                    "centred embeddings need codec v4 with row_gains (codec {}, row_gains {})",
                    self.codec, self.row_gains
                ),
            );
        }
        if self.kv_keys_ecsq && !(self.codec == CODEC_V4 && self.entropy) {
            return bad(
                "kv_keys_ecsq",
                format!(
                    "channel-centred KV keys need codec v4 with the entropy flag (codec {}, entropy {})",
                    self.codec, self.entropy
                ),
            );
        }
        if self.kv_keys_wstep && !self.kv_keys_ecsq {
            return bad(
                "kv_keys_wstep",
                "per-channel key steps need kv_keys_ecsq (kv_keys_ecsq false)".to_string(),
            );
        }
        if self.wide_lanes && !self.entropy {
            return bad(
                "wide_lanes",
                format!(
                    "wide rANS lanes apply to entropy-coded blocks: they need the entropy flag (codec {}, entropy false)",
                    self.codec
                ),
            );
        }
        if self.kv_ecsq_tier2 && !self.kv_ecsq {
            return bad(
                "kv_ecsq_tier2",
                "entropy-coded tier 2 KV levels need kv_ecsq (codec v4 with the entropy flag)"
                    .into(),
            );
        }
        if !self.per_kind_keys() && (self.key_bits != [0; 3] || self.key_group_size != [0; 3]) {
            return bad(
                "key_bits/key_group_size",
                format!(
                    "{:?} / {:?}: only codec v4 has per-kind key widths (codec {} takes zeros)",
                    self.key_bits, self.key_group_size, self.codec
                ),
            );
        }
        if let Some(r) = self.rope {
            if self.codec == CODEC_V1 {
                return bad("rope", "codec v1 collections carry no RoPE spec".into());
            }
            if let Some((field, reason)) = r.problem(None) {
                return bad(field, reason);
            }
        }
        if self.codec == CODEC_V1 && self.sink_values != 0
            || u32::from(self.sink_values) > self.block_elems
        {
            return bad(
                "sink_values",
                format!(
                    "{} (codec v1 takes 0; codecs v2 and v3 at most block_elems)",
                    self.sink_values
                ),
            );
        }
        Ok(())
    }
}

/// Thresholds and limits of the migration scheduler (`crate::tiering`). Kept here, with
/// the rest of the configuration, so that configuration depends on nothing that depends
/// on the store.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TierPolicy {
    /// Promote one tier up when the score is above this (ADR default 512).
    pub promote_threshold: f32,
    /// Demote one tier down when the score is below this (ADR default 32).
    pub demote_threshold: f32,
    /// Ticks a block must spend in a tier before the scheduler moves it again
    /// (capacity evictions ignore it).
    pub min_tier_age: u64,
    /// The hottest tier automatic promotion may reach (default Tier1: promotion never
    /// rewrites a block as raw f32).
    pub hottest_tier: Tier,
    /// The coldest tier automatic demotion may reach (default Tier3).
    pub coldest_tier: Tier,
    /// Whether cold Tier0 blocks may be demoted (re-quantized to 8 bits) by the
    /// scheduler. Default `false`: data put as exact (Tier0) stays exact; only an
    /// explicit policy moves it: this flag, a Tier0 capacity limit
    /// (`max_blocks_per_tier[0]`), or the KV cache's age policy.
    pub demote_tier0: bool,
}

impl Default for TierPolicy {
    fn default() -> Self {
        Self {
            promote_threshold: 512.0,
            demote_threshold: 32.0,
            min_tier_age: 8,
            hottest_tier: Tier::Tier1,
            coldest_tier: Tier::Tier3,
            demote_tier0: false,
        }
    }
}

/// When writes reach stable storage.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Durability {
    /// fsync data and log before every write returns: an acknowledged write survives
    /// kill -9 and power loss.
    #[default]
    EveryWrite,
    /// fsync after every N writes (and on flush / close): a crash loses at most the
    /// last N-1 acknowledged writes, never corrupts older ones.
    EveryN(u32),
    /// Never fsync explicitly; the OS decides (kill -9 still loses nothing already
    /// written to the page cache; power loss may).
    Os,
}

/// How replay treats corrupt MetaLog records. Named after RocksDB's `WALRecoveryMode`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum RecoveryMode {
    /// ADR-018's default (RocksDB `kSkipAnyCorruptedRecords`): a record with a bad CRC
    /// is skipped with a warning and replay goes on; a torn tail is truncated.
    #[default]
    SkipAnyCorruptedRecords,
    /// Strict (RocksDB `kPointInTimeRecovery`): replay stops at the first corrupt
    /// record; the store opens at that consistent point and the log is truncated there
    /// before the next append.
    PointInTime,
}

/// Runtime options, chosen at every open.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Geometry used when the collection is created (ignored when it exists: the
    /// persisted geometry wins).
    pub collection: CollectionConfig,
    /// Write durability.
    pub durability: Durability,
    /// Replay behaviour on corrupt records.
    pub recovery: RecoveryMode,
    /// Append the accumulated Access records every N reads (0: only on flush/close).
    pub access_flush_every: u32,
    /// Blocks allowed per tier (`usize::MAX`: unlimited).
    pub max_blocks_per_tier: [usize; 4],
    /// Compact the log on open when it holds more than this many records per live block
    /// (0: never automatically).
    pub compact_ratio: u32,
    /// Thresholds of the automatic migration scheduler ([`crate::TensorStore::maintain`]).
    pub tiering: TierPolicy,
    /// How long opening a directory store for writing waits for shared readers (`store
    /// ls`, `verify`, ... in other processes) to release the collection before failing
    /// with [`crate::StoreErr::Locked`]. Another writer is never waited for.
    pub lock_wait: std::time::Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            collection: CollectionConfig::default(),
            durability: Durability::EveryWrite,
            recovery: RecoveryMode::SkipAnyCorruptedRecords,
            access_flush_every: 1024,
            max_blocks_per_tier: [usize::MAX; 4],
            compact_ratio: 0,
            tiering: TierPolicy::default(),
            lock_wait: DEFAULT_LOCK_WAIT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_slots_meet_the_bit_budgets() {
        let c = CollectionConfig::default();
        c.validate().unwrap();
        assert_eq!(c.codec, CODEC_V2);
        let bits = |t| f64::from(c.slot_len(t)) * 8.0 / 4096.0;
        // 32 + 32 x 2 + 4096 = 4192 -> 4224; 32 + 64 + 2560 -> 2688; 32 + 128 + 1536 -> 1728.
        assert_eq!(bits(Tier::Tier1), 8.25);
        assert_eq!(bits(Tier::Tier2), 5.25);
        assert_eq!(bits(Tier::Tier3), 3.375);
        // The KV layout keeps one token of f16 per block for the sink.
        let kv = CollectionConfig::kv_cache(64).unwrap();
        assert_eq!(kv.sink_values, 64);
        assert_eq!(kv.max_payload_len(Tier::Tier3), 32 + 128 + 512 + 6144);
        assert!(f64::from(kv.slot_len(Tier::Tier3)) * 8.0 / 16384.0 < 3.5);
    }

    #[test]
    fn slots_are_sized_per_tier() {
        let c = CollectionConfig::codec_v1(DEFAULT_BLOCK_ELEMS);
        c.validate().unwrap();
        assert_eq!(c.slot_len(Tier::Tier0), 16384);
        // 3-bit g512: 24 + 1 + 16 + 1536 = 1577 -> 1600 at 64-byte alignment.
        assert_eq!(c.max_payload_len(Tier::Tier3), 1577);
        assert_eq!(c.slot_len(Tier::Tier3), 1600);
        assert!(f64::from(c.slot_len(Tier::Tier0)) / f64::from(c.slot_len(Tier::Tier3)) > 10.0);
        // 8-bit g128: 24 + 1 + 64 + 4096 = 4185 -> 4224.
        assert_eq!(c.slot_len(Tier::Tier1), 4224);
    }

    #[test]
    fn kv_layout_aligns_to_head_dim() {
        let c = CollectionConfig::kv_cache(128).unwrap();
        assert_eq!(c.block_elems, 16384);
        assert_eq!(c.slot_len(Tier::Tier0), 32768);
        let c = CollectionConfig::kv_cache(96).unwrap();
        assert_eq!(c.block_elems % 96, 0);
        assert!(c.block_elems <= 16384 && c.block_elems > 16384 - 96);
        assert!(CollectionConfig::kv_cache(0).is_err());
    }

    #[test]
    fn validate_names_the_field() {
        let c = CollectionConfig {
            slot_align: 48,
            ..CollectionConfig::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("slot_align"), "{e}");
    }
}
