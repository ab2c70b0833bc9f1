//! Byte layout of `meta.log`: a 128-byte header followed by 128-byte records
//! (ADR-018 Appendix A, with the shape bytes of ARCHITECTURE.md section 7 and the
//! additions documented in `docs/formats/store.md`). Little-endian throughout; every
//! offset is derived from the one before it.

use std::mem::size_of;

/// Size of the header and of every record.
pub const RECORD_LEN: usize = 128;
/// Bytes covered by a record's CRC32C: `0..CRC_OFFSET`.
pub const CRC_OFFSET: usize = 120;
/// Zero padding after the CRC.
pub const PAD_OFFSET: usize = CRC_OFFSET + size_of::<u32>();

// ---- header (first 128 bytes of the file) ----

/// File magic: "TVMETLOG".
pub const MAGIC: [u8; 8] = *b"TVMETLOG";
/// Current format version: 2 (the header names the codec and the sink allowance).
pub const VERSION: u32 = 2;
/// The version written before codec v2: bytes 48..120 are reserved (zero) and the
/// collection uses codec v1.
pub const VERSION_V1: u32 = 1;
/// Magic offset.
pub const H_MAGIC: usize = 0;
/// u32 format version.
pub const H_VERSION: usize = H_MAGIC + MAGIC.len();
/// u32 record length (must be 128).
pub const H_RECORD_LEN: usize = H_VERSION + size_of::<u32>();
/// u32 block_elems.
pub const H_BLOCK_ELEMS: usize = H_RECORD_LEN + size_of::<u32>();
/// u8 tier0_elem_bytes.
pub const H_TIER0_ELEM_BYTES: usize = H_BLOCK_ELEMS + size_of::<u32>();
/// 3 x u8 bits of tiers 1..=3.
pub const H_TIER_BITS: usize = H_TIER0_ELEM_BYTES + size_of::<u8>();
/// 3 x u32 group sizes of tiers 1..=3.
pub const H_GROUP_SIZE: usize = H_TIER_BITS + 3;
/// u32 slot alignment.
pub const H_SLOT_ALIGN: usize = H_GROUP_SIZE + 3 * size_of::<u32>();
/// u64 generation: incremented by every compaction (snapshot + truncate).
pub const H_GENERATION: usize = H_SLOT_ALIGN + size_of::<u32>();
/// u8 codec of the quantized tiers (version 2 headers; 1 or 2).
pub const H_CODEC: usize = H_GENERATION + size_of::<u64>();
/// u8 collection flags (version 2 headers): [`HEADER_FLAG_ENTROPY`],
/// [`HEADER_FLAG_EXTENTS`], [`HEADER_FLAG_KV_ECSQ`], [`HEADER_FLAG_ECSQ`],
/// [`HEADER_FLAG_KV_ECSQ_TIER2`], [`HEADER_FLAG_CENTRE`], [`HEADER_FLAG_ROW_GAINS`],
/// [`HEADER_FLAG_ECSQ_MODEL`];
/// other bits zero.
pub const H_FLAGS: usize = H_CODEC + size_of::<u8>();
/// u16 sink values per block (version 2 headers).
pub const H_SINK_VALUES: usize = H_FLAGS + size_of::<u8>();
/// Header flag: quantized payloads are entropy-coded where shorter (TQTC version 5).
pub const HEADER_FLAG_ENTROPY: u8 = 1 << 0;
/// Header flag: blocks take payload-sized extents in their tier files instead of
/// worst-case slots (`docs/formats/store.md`, "Extent allocation").
pub const HEADER_FLAG_EXTENTS: u8 = 1 << 1;
/// Header flag: KV values at 3 bits and fewer are stored with entropy-coded levels
/// (`CollectionConfig::kv_ecsq`); codec v4 with [`HEADER_FLAG_ENTROPY`] only.
pub const HEADER_FLAG_KV_ECSQ: u8 = 1 << 2;
/// Header flag: weight and embedding tensors at tiers 2 and 3 are stored as
/// rate-controlled entropy-coded uniform levels (`CollectionConfig::ecsq`); codec v4 with
/// [`HEADER_FLAG_ENTROPY`] only.
pub const HEADER_FLAG_ECSQ: u8 = 1 << 3;
/// Header flag: KV values at tier 2 are stored with entropy-coded levels too
/// (`CollectionConfig::kv_ecsq_tier2`); only with [`HEADER_FLAG_KV_ECSQ`].
pub const HEADER_FLAG_KV_ECSQ_TIER2: u8 = 1 << 4;
/// Header flag: 2-D embedding tensors are stored centred on their mean row, kept as a
/// side record (`CollectionConfig::centre`); codec v4 with [`HEADER_FLAG_ROW_GAINS`] only.
pub const HEADER_FLAG_CENTRE: u8 = 1 << 5;
/// Header flag: quantized blocks of embedding tensors carry per-row gains (TQTC version
/// 6 envelopes, `CollectionConfig::row_gains`); codec v4 only.
pub const HEADER_FLAG_ROW_GAINS: u8 = 1 << 6;
/// Header flag: weight and embedding tensors at tiers 1 to 3 are stored as model-coded
/// ECSQ (TQTC version 7, `CollectionConfig::ecsq_model`); only with [`HEADER_FLAG_ECSQ`].
pub const HEADER_FLAG_ECSQ_MODEL: u8 = 1 << 7;
/// Every header flag bit this build knows.
pub const HEADER_KNOWN_FLAGS: u8 = HEADER_FLAG_ENTROPY
    | HEADER_FLAG_EXTENTS
    | HEADER_FLAG_KV_ECSQ
    | HEADER_FLAG_ECSQ
    | HEADER_FLAG_KV_ECSQ_TIER2
    | HEADER_FLAG_CENTRE
    | HEADER_FLAG_ROW_GAINS
    | HEADER_FLAG_ECSQ_MODEL;
/// 3 x u8 bit widths of KV keys in tiers 1..=3 (codec v4; zero otherwise).
pub const H_KEY_BITS: usize = H_SINK_VALUES + size_of::<u16>();
/// u8 RoPE pairing of a KV cache storing pre-RoPE keys: 0 none, 1 neox, 2 interleaved.
pub const H_ROPE_PAIRING: usize = H_KEY_BITS + 3;
/// u16 RoPE rotary dimensions (zero without RoPE).
pub const H_ROPE_DIMS: usize = H_ROPE_PAIRING + size_of::<u8>();
/// 3 x u32 group sizes of KV keys in tiers 1..=3 (codec v4; zero otherwise).
pub const H_KEY_GROUP_SIZE: usize = H_ROPE_DIMS + size_of::<u16>();
/// f64 RoPE base theta (zero without RoPE).
pub const H_ROPE_THETA: usize = H_KEY_GROUP_SIZE + 3 * size_of::<u32>();
/// u8 second collection flags byte (version 2 headers; the first of the bytes that were
/// reserved before session 15, so every older collection holds zero here and every older
/// build refuses a set bit as a nonzero reserved byte): the bits of
/// [`HEADER_KNOWN_FLAGS2`]; other bits zero.
pub const H_FLAGS2: usize = H_ROPE_THETA + size_of::<f64>();
/// Second header flags byte, bit 0: tier 2 KV key blocks are stored as TQTC version 8
/// segments where they fit (`CollectionConfig::kv_keys_ecsq`); codec v4 with
/// [`HEADER_FLAG_ENTROPY`] only.
pub const HEADER_FLAG2_KV_KEYS_ECSQ: u8 = 1 << 0;
/// Names of the second flags byte's bits, bit `i` at index `i` (the `field` a refusal of a
/// bit whose prerequisites are missing names, at [`H_FLAGS2`]): bit 0 `kv_keys_ecsq`,
/// bit 1 `wide_lanes` (`CollectionConfig::wide_lanes`: 64-lane rANS envelopes for KV and
/// generic tensors), bit 2 `kv_keys_wstep` (`CollectionConfig::kv_keys_wstep`: those
/// tier 2 key blocks as TQTC version 9, one step per channel; needs bit 0).
pub const HEADER_FLAGS2_NAMES: [&str; 3] = ["kv_keys_ecsq", "wide_lanes", "kv_keys_wstep"];
/// flags2 bit 1: `CollectionConfig::wide_lanes` (needs the entropy flag).
pub const HEADER_FLAG2_WIDE_LANES: u8 = 1 << 1;
/// flags2 bit 2: `CollectionConfig::kv_keys_wstep` (needs bit 0).
pub const HEADER_FLAG2_KV_KEYS_WSTEP: u8 = 1 << 2;
/// Every bit of the second flags byte this build knows: the first
/// `HEADER_FLAGS2_NAMES.len()` bits.
pub const HEADER_KNOWN_FLAGS2: u8 = ((1u16 << HEADER_FLAGS2_NAMES.len()) - 1) as u8;
/// First reserved (zero) header byte of a version 1 header; reserved up to [`CRC_OFFSET`].
pub const H_RESERVED_V1: usize = H_CODEC;
/// First reserved (zero) header byte of a version 2 header; reserved up to
/// [`CRC_OFFSET`].
pub const H_RESERVED: usize = H_FLAGS2 + size_of::<u8>();

// ---- common record prefix ----

/// u8 record type ([`RecordType`]).
pub const R_TYPE: usize = 0;
/// u128 tensor id.
pub const R_TENSOR_ID: usize = R_TYPE + size_of::<u8>();
/// u32 block index.
pub const R_BLOCK_INDEX: usize = R_TENSOR_ID + size_of::<u128>();
/// First type-specific byte (21).
pub const R_BODY: usize = R_BLOCK_INDEX + size_of::<u32>();

/// Record type tags.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum RecordType {
    /// A block was created (or replaced).
    Create = 0,
    /// A block's access statistics.
    Access = 1,
    /// A block moved to another tier.
    Migrate = 2,
    /// A block was deleted.
    Delete = 3,
}

// ---- Create (type 0) ----

/// u8 dtype.
pub const C_DTYPE: usize = R_BODY;
/// u8 tier.
pub const C_TIER: usize = C_DTYPE + 1;
/// u8 bits.
pub const C_BITS: usize = C_TIER + 1;
/// f32 scale.
pub const C_SCALE: usize = C_BITS + 1;
/// i16 zero point.
pub const C_ZERO_POINT: usize = C_SCALE + size_of::<f32>();
/// u64 created_at.
pub const C_CREATED_AT: usize = C_ZERO_POINT + size_of::<i16>();
/// u64 data offset.
pub const C_DATA_OFFSET: usize = C_CREATED_AT + size_of::<u64>();
/// u32 data length.
pub const C_DATA_LEN: usize = C_DATA_OFFSET + size_of::<u64>();
/// u32 payload CRC32C.
pub const C_CHECKSUM: usize = C_DATA_LEN + size_of::<u32>();
/// u128 lineage parent.
pub const C_LINEAGE: usize = C_CHECKSUM + size_of::<u32>();
/// u8 reconstruct policy.
pub const C_RECONSTRUCT: usize = C_LINEAGE + size_of::<u128>();
/// u8 ndim (ARCHITECTURE.md: byte 71).
pub const C_NDIM: usize = C_RECONSTRUCT + 1;
/// 8 x u32 shape (ARCHITECTURE.md: bytes 72..104).
pub const C_SHAPE: usize = C_NDIM + 1;
/// u64 tier_since (ours, in ARCHITECTURE.md's reserved 104..120).
pub const C_TIER_SINCE: usize = C_SHAPE + size_of::<[u32; 8]>();
/// u8 tensor kind (ours; 0 = generic, which every record before it holds).
pub const C_KIND: usize = C_TIER_SINCE + size_of::<u64>();
/// u8 centred block (ours; 0 = not centred, which every record before it holds; 1 = the
/// block belongs to a centred embedding tensor, `docs/formats/store.md`, "Centred
/// embedding tensors").
pub const C_CENTRE: usize = C_KIND + size_of::<u8>();
/// u32 fingerprint of the mean row the block was coded with (CRC32C of the side record's
/// payload); zero when [`C_CENTRE`] is 0.
pub const C_CENTRE_FP: usize = C_CENTRE + size_of::<u8>();
/// First reserved (zero) byte of a Create record.
pub const C_RESERVED: usize = C_CENTRE_FP + size_of::<u32>();

// ---- Access (type 1) ----

/// u64 last_access_at.
pub const A_LAST_ACCESS: usize = R_BODY;
/// u32 access_count.
pub const A_COUNT: usize = A_LAST_ACCESS + size_of::<u64>();
/// f32 EMA access rate.
pub const A_EMA: usize = A_COUNT + size_of::<u32>();
/// u64 access window.
pub const A_WINDOW: usize = A_EMA + size_of::<f32>();
/// First reserved (zero) byte of an Access record.
pub const A_RESERVED: usize = A_WINDOW + size_of::<u64>();

// ---- Migrate (type 2) ----

/// u8 old tier.
pub const M_OLD_TIER: usize = R_BODY;
/// u8 new tier.
pub const M_NEW_TIER: usize = M_OLD_TIER + 1;
/// u8 new bits.
pub const M_NEW_BITS: usize = M_NEW_TIER + 1;
/// f32 new scale.
pub const M_NEW_SCALE: usize = M_NEW_BITS + 1;
/// u32 new checksum.
pub const M_NEW_CHECKSUM: usize = M_NEW_SCALE + size_of::<f32>();
/// u64 new data offset.
pub const M_NEW_OFFSET: usize = M_NEW_CHECKSUM + size_of::<u32>();
/// u32 new data length.
pub const M_NEW_LEN: usize = M_NEW_OFFSET + size_of::<u64>();
/// u64 tick of the migration (ours; becomes `tier_since`).
pub const M_AT: usize = M_NEW_LEN + size_of::<u32>();
/// First reserved (zero) byte of a Migrate record.
pub const M_RESERVED: usize = M_AT + size_of::<u64>();

// ---- Delete (type 3): nothing after the prefix ----

/// First reserved (zero) byte of a Delete record.
pub const D_RESERVED: usize = R_BODY;

const _: () = {
    assert!(R_BODY == 21);
    assert!(C_NDIM == 71 && C_SHAPE == 72 && C_TIER_SINCE == 104);
    assert!(C_CENTRE == 113 && C_RESERVED == 118 && C_RESERVED <= CRC_OFFSET);
    assert!(A_RESERVED == 45);
    assert!(M_NEW_LEN == 40 && M_RESERVED <= CRC_OFFSET);
    assert!(H_FLAGS == 49 && H_FLAGS2 == 78 && H_RESERVED == 79 && H_RESERVED <= CRC_OFFSET);
    assert!(HEADER_FLAGS2_NAMES.len() <= 8);
    assert!(HEADER_FLAG2_WIDE_LANES == 1 << 1);
    assert!(PAD_OFFSET + size_of::<u32>() == RECORD_LEN);
};
