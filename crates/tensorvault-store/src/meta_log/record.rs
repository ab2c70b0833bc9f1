//! Encoding and decoding of the `meta.log` header and records (offsets in
//! [`super::layout`], spec in `docs/formats/store.md`); the replay state machine is in
//! `replayer.rs`.
//!
//! Decoding is strict and never panics: the CRC is checked first, then the padding, the
//! record type, every enumerated byte, every float and every reserved byte. A record
//! that decodes is exactly one that [`encode_record`] can produce.

use super::layout::{
    RecordType, A_COUNT, A_EMA, A_LAST_ACCESS, A_RESERVED, A_WINDOW, CRC_OFFSET, C_BITS, C_CENTRE,
    C_CENTRE_FP, C_CHECKSUM, C_CREATED_AT, C_DATA_LEN, C_DATA_OFFSET, C_DTYPE, C_KIND, C_LINEAGE,
    C_NDIM, C_RECONSTRUCT, C_RESERVED, C_SCALE, C_SHAPE, C_TIER, C_TIER_SINCE, C_ZERO_POINT,
    D_RESERVED, HEADER_FLAG2_KV_KEYS_ECSQ, HEADER_FLAG2_KV_KEYS_WSTEP, HEADER_FLAG2_WIDE_LANES,
    HEADER_FLAGS2_NAMES, HEADER_FLAG_CENTRE, HEADER_FLAG_ECSQ, HEADER_FLAG_ECSQ_MODEL,
    HEADER_FLAG_ENTROPY, HEADER_FLAG_EXTENTS, HEADER_FLAG_KV_ECSQ, HEADER_FLAG_KV_ECSQ_TIER2,
    HEADER_FLAG_ROW_GAINS, HEADER_KNOWN_FLAGS, HEADER_KNOWN_FLAGS2, H_BLOCK_ELEMS, H_CODEC,
    H_FLAGS, H_FLAGS2, H_GENERATION, H_GROUP_SIZE, H_KEY_BITS, H_KEY_GROUP_SIZE, H_MAGIC,
    H_RECORD_LEN, H_RESERVED, H_RESERVED_V1, H_ROPE_DIMS, H_ROPE_PAIRING, H_ROPE_THETA,
    H_SINK_VALUES, H_SLOT_ALIGN, H_TIER0_ELEM_BYTES, H_TIER_BITS, H_VERSION, MAGIC, M_AT,
    M_NEW_BITS, M_NEW_CHECKSUM, M_NEW_LEN, M_NEW_OFFSET, M_NEW_SCALE, M_NEW_TIER, M_OLD_TIER,
    M_RESERVED, PAD_OFFSET, RECORD_LEN, R_BLOCK_INDEX, R_TENSOR_ID, R_TYPE, VERSION, VERSION_V1,
};
use super::MetaRecord;
use crate::config::{CollectionConfig, CODEC_V1};
use crate::error::{Result, StoreErr};
use crate::types::{
    store_dtype, BlockKey, BlockMeta, ReconstructPolicy, TensorKind, Tier, MAX_NDIM,
};

use tensorvault_core::checksum::crc32c;

/// File name used in header errors.
const FILE: &str = "meta.log";

type Rec = [u8; RECORD_LEN];

fn get<const N: usize>(b: &Rec, at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}
fn u16_at(b: &Rec, at: usize) -> u16 {
    u16::from_le_bytes(get(b, at))
}
fn u32_at(b: &Rec, at: usize) -> u32 {
    u32::from_le_bytes(get(b, at))
}
fn u64_at(b: &Rec, at: usize) -> u64 {
    u64::from_le_bytes(get(b, at))
}
fn u128_at(b: &Rec, at: usize) -> u128 {
    u128::from_le_bytes(get(b, at))
}
fn f32_at(b: &Rec, at: usize) -> f32 {
    f32::from_bits(u32_at(b, at))
}
fn put(b: &mut Rec, at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

/// Seal a record or header: CRC32C of bytes `0..120` at `120..124`, zero padding after.
fn seal(b: &mut Rec) {
    let crc = crc32c(&b[..CRC_OFFSET]);
    put(b, CRC_OFFSET, &crc.to_le_bytes());
    put(b, PAD_OFFSET, &[0; 4]);
}

/// Index of the first nonzero byte in `b[from..to]`.
fn first_nonzero(b: &Rec, from: usize, to: usize) -> Option<usize> {
    // Eight bytes at a time (replay checks up to 75 reserved bytes per record), then the
    // byte itself within the first nonzero word or the tail.
    let s = &b[from..to];
    let words = s.chunks_exact(8);
    let skip = words
        .take_while(|w| w.iter().fold(0u8, |acc, &x| acc | x) == 0)
        .count()
        * 8;
    s[skip..]
        .iter()
        .position(|&x| x != 0)
        .map(|i| from + skip + i)
}

/// Encode the 128-byte header for `c` at `generation`.
#[must_use]
pub fn encode_header(c: &CollectionConfig, generation: u64) -> [u8; RECORD_LEN] {
    let mut b = [0u8; RECORD_LEN];
    put(&mut b, H_MAGIC, &MAGIC);
    put(&mut b, H_VERSION, &VERSION.to_le_bytes());
    put(&mut b, H_RECORD_LEN, &(RECORD_LEN as u32).to_le_bytes());
    put(&mut b, H_BLOCK_ELEMS, &c.block_elems.to_le_bytes());
    b[H_TIER0_ELEM_BYTES] = c.tier0_elem_bytes;
    put(&mut b, H_TIER_BITS, &c.tier_bits);
    for (i, g) in c.group_size.iter().enumerate() {
        put(&mut b, H_GROUP_SIZE + 4 * i, &g.to_le_bytes());
    }
    put(&mut b, H_SLOT_ALIGN, &c.slot_align.to_le_bytes());
    put(&mut b, H_GENERATION, &generation.to_le_bytes());
    if c.codec == CODEC_V1 {
        // A codec v1 collection keeps the header older builds read.
        put(&mut b, H_VERSION, &VERSION_V1.to_le_bytes());
    } else {
        b[H_CODEC] = c.codec;
        b[H_FLAGS] = if c.entropy { HEADER_FLAG_ENTROPY } else { 0 }
            | if c.extents { HEADER_FLAG_EXTENTS } else { 0 }
            | if c.kv_ecsq { HEADER_FLAG_KV_ECSQ } else { 0 }
            | if c.ecsq { HEADER_FLAG_ECSQ } else { 0 }
            | if c.kv_ecsq_tier2 {
                HEADER_FLAG_KV_ECSQ_TIER2
            } else {
                0
            }
            | if c.row_gains {
                HEADER_FLAG_ROW_GAINS
            } else {
                0
            }
            | if c.ecsq_model {
                HEADER_FLAG_ECSQ_MODEL
            } else {
                0
            }
            | if c.centre { HEADER_FLAG_CENTRE } else { 0 };
        b[H_FLAGS2] =
            flags2_bits(c)
                .iter()
                .enumerate()
                .fold(0, |acc, (i, &on)| if on { acc | 1 << i } else { acc });
        put(&mut b, H_SINK_VALUES, &c.sink_values.to_le_bytes());
        put(&mut b, H_KEY_BITS, &c.key_bits);
        for (i, g) in c.key_group_size.iter().enumerate() {
            put(&mut b, H_KEY_GROUP_SIZE + 4 * i, &g.to_le_bytes());
        }
        if let Some(r) = c.rope {
            b[H_ROPE_PAIRING] = r.pairing as u8;
            put(&mut b, H_ROPE_DIMS, &r.rotary_dims.to_le_bytes());
            put(&mut b, H_ROPE_THETA, &r.theta.to_le_bytes());
        }
    }
    seal(&mut b);
    b
}

fn bad_header(field: &'static str, offset: usize, reason: String) -> StoreErr {
    StoreErr::BadHeader {
        file: FILE.to_owned(),
        field,
        offset: offset as u64,
        reason,
    }
}

/// Decode and validate a header: returns the geometry and generation. Only the first
/// 128 bytes of `b` are read.
///
/// Checks, in order: length, magic, version, record length, CRC32C, padding, reserved
/// bytes, then the geometry ([`CollectionConfig::validate`]). Magic and version come
/// before the CRC so that a foreign file or a newer format is reported as such.
///
/// # Errors
/// [`crate::StoreErr::BadHeader`] naming the field and offset.
pub fn decode_header(b: &[u8]) -> Result<(CollectionConfig, u64)> {
    let Some(h) = b.get(..RECORD_LEN) else {
        return Err(bad_header(
            "length",
            0,
            format!(
                "file is {} bytes, shorter than the {RECORD_LEN}-byte header",
                b.len()
            ),
        ));
    };
    let mut r = [0u8; RECORD_LEN];
    r.copy_from_slice(h);
    if r[H_MAGIC..H_MAGIC + MAGIC.len()] != MAGIC {
        return Err(bad_header(
            "magic",
            H_MAGIC,
            "not a tensorvault MetaLog (magic is not \"TVMETLOG\")".into(),
        ));
    }
    let version = u32_at(&r, H_VERSION);
    if version != VERSION && version != VERSION_V1 {
        return Err(bad_header(
            "version",
            H_VERSION,
            format!("unsupported version {version} (this build reads {VERSION_V1} and {VERSION})"),
        ));
    }
    let record_len = u32_at(&r, H_RECORD_LEN);
    if record_len != RECORD_LEN as u32 {
        return Err(bad_header(
            "record_len",
            H_RECORD_LEN,
            format!("{record_len}, expected {RECORD_LEN}"),
        ));
    }
    let stored = u32_at(&r, CRC_OFFSET);
    let computed = crc32c(&r[..CRC_OFFSET]);
    if stored != computed {
        return Err(bad_header(
            crate::error::HEADER_CRC_FIELD,
            CRC_OFFSET,
            format!("stored {stored:#010x}, computed {computed:#010x}"),
        ));
    }
    if let Some(i) = first_nonzero(&r, PAD_OFFSET, RECORD_LEN) {
        return Err(bad_header("padding", i, "padding byte is not zero".into()));
    }
    let v1 = version == VERSION_V1;
    let reserved = if v1 { H_RESERVED_V1 } else { H_RESERVED };
    if let Some(i) = first_nonzero(&r, reserved, CRC_OFFSET) {
        return Err(bad_header(
            "reserved",
            i,
            "reserved byte is not zero".into(),
        ));
    }
    let flags = if v1 { 0 } else { r[H_FLAGS] };
    check_flags(flags)?;
    let flags2 = if v1 { 0 } else { r[H_FLAGS2] };
    check_flags2(flags2)?;
    let (codec, sink_values) = if v1 {
        (CODEC_V1, 0)
    } else {
        (
            r[H_CODEC],
            u16::from_le_bytes([r[H_SINK_VALUES], r[H_SINK_VALUES + 1]]),
        )
    };
    let (key_bits, key_group_size, rope) = if v1 {
        ([0; 3], [0; 3], None)
    } else {
        (
            get(&r, H_KEY_BITS),
            [0, 1, 2].map(|i| u32_at(&r, H_KEY_GROUP_SIZE + 4 * i)),
            decode_rope(&r)?,
        )
    };
    let c = CollectionConfig {
        key_bits,
        key_group_size,
        rope,
        block_elems: u32_at(&r, H_BLOCK_ELEMS),
        tier0_elem_bytes: r[H_TIER0_ELEM_BYTES],
        tier_bits: get(&r, H_TIER_BITS),
        group_size: [0, 1, 2].map(|i| u32_at(&r, H_GROUP_SIZE + 4 * i)),
        slot_align: u32_at(&r, H_SLOT_ALIGN),
        codec,
        sink_values,
        entropy: flags & HEADER_FLAG_ENTROPY != 0,
        extents: flags & HEADER_FLAG_EXTENTS != 0,
        kv_ecsq: flags & HEADER_FLAG_KV_ECSQ != 0,
        ecsq: flags & HEADER_FLAG_ECSQ != 0,
        kv_ecsq_tier2: flags & HEADER_FLAG_KV_ECSQ_TIER2 != 0,
        row_gains: flags & HEADER_FLAG_ROW_GAINS != 0,
        ecsq_model: flags & HEADER_FLAG_ECSQ_MODEL != 0,
        centre: flags & HEADER_FLAG_CENTRE != 0,
        kv_keys_ecsq: flags2 & HEADER_FLAG2_KV_KEYS_ECSQ != 0,
        wide_lanes: flags2 & HEADER_FLAG2_WIDE_LANES != 0,
        kv_keys_wstep: flags2 & HEADER_FLAG2_KV_KEYS_WSTEP != 0,
    };
    c.validate().map_err(|e| match e {
        StoreErr::InvalidArgument { field, reason } => {
            let offset = match field {
                "block_elems" => H_BLOCK_ELEMS,
                "tier0_elem_bytes" => H_TIER0_ELEM_BYTES,
                "slot_align" => H_SLOT_ALIGN,
                "codec" => H_CODEC,
                "sink_values" => H_SINK_VALUES,
                "entropy" | "extents" | "kv_ecsq" | "ecsq" | "kv_ecsq_tier2" | "row_gains"
                | "ecsq_model" | "centre" => H_FLAGS,
                f if HEADER_FLAGS2_NAMES.contains(&f) => H_FLAGS2,
                "key_bits/key_group_size" => H_KEY_BITS,
                "rope" | "rope.theta" => H_ROPE_THETA,
                "rope.rotary_dims" => H_ROPE_DIMS,
                _ => H_TIER_BITS,
            };
            bad_header(field, offset, reason)
        }
        other => bad_header("geometry", H_BLOCK_ELEMS, other.to_string()),
    })?;
    Ok((c, u64_at(&r, H_GENERATION)))
}

/// Refuse flag bits this build does not know (`flags`, byte 49). Every bit is assigned
/// today (bit 5 centre and bit 7 ecsq_model were the last), so nothing fails here; the
/// check stays so that a build keeps refusing what it cannot read if a bit is ever
/// freed.
#[allow(
    clippy::bad_bit_mask,
    reason = "HEADER_KNOWN_FLAGS is 0xff: the mask is zero while every bit is assigned"
)]
fn check_flags(flags: u8) -> Result<()> {
    if flags & !HEADER_KNOWN_FLAGS != 0 {
        return Err(bad_header(
            "flags",
            H_FLAGS,
            format!("unknown flag bits {flags:#04x} (this build knows bit 0, entropy, bit 1, extents, bit 2, kv_ecsq, bit 3, ecsq, bit 4, kv_ecsq_tier2, bit 5, centre, bit 6, row_gains, and bit 7, ecsq_model)"),
        ));
    }
    Ok(())
}

/// The options of `c` that the second flags byte (byte 78) records, bit `i` at index `i`
/// (named by `HEADER_FLAGS2_NAMES[i]`); the header writer packs them, the reader checks
/// the byte with [`check_flags2`].
fn flags2_bits(c: &CollectionConfig) -> [bool; HEADER_FLAGS2_NAMES.len()] {
    [c.kv_keys_ecsq, c.wide_lanes, c.kv_keys_wstep]
}

/// Refuse bits of the second flags byte (`flags2`, byte 78) this build does not know. A
/// build from before the byte refuses any set bit as a nonzero `reserved` byte at the same
/// offset, so either way a collection is never misread.
fn check_flags2(flags2: u8) -> Result<()> {
    if flags2 & !HEADER_KNOWN_FLAGS2 != 0 {
        let known = if HEADER_FLAGS2_NAMES.is_empty() {
            "none".to_owned()
        } else {
            HEADER_FLAGS2_NAMES
                .iter()
                .enumerate()
                .map(|(i, n)| format!("bit {i}, {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(bad_header(
            "flags2",
            H_FLAGS2,
            format!("unknown flags2 bits {flags2:#04x} (this build knows {known})"),
        ));
    }
    Ok(())
}

/// The RoPE spec of a version 2 header: pairing 0 means none (dims and theta must be
/// zero), 1 and 2 a spec whose fields [`CollectionConfig::validate`] checks.
fn decode_rope(r: &Rec) -> Result<Option<crate::rope::RopeSpec>> {
    let dims = u16::from_le_bytes([r[H_ROPE_DIMS], r[H_ROPE_DIMS + 1]]);
    let theta = f64::from_le_bytes(get(r, H_ROPE_THETA));
    match r[H_ROPE_PAIRING] {
        0 => {
            if dims != 0 || theta.to_bits() != 0 {
                let at = if dims != 0 { H_ROPE_DIMS } else { H_ROPE_THETA };
                return Err(bad_header(
                    "rope",
                    at,
                    "RoPE dims / theta set without a pairing (byte 0: no RoPE)".into(),
                ));
            }
            Ok(None)
        }
        p => match crate::rope::RopePairing::from_u8(p) {
            Some(pairing) => Ok(Some(crate::rope::RopeSpec {
                theta,
                rotary_dims: dims,
                pairing,
            })),
            None => Err(bad_header(
                "rope_pairing",
                H_ROPE_PAIRING,
                format!("{p} is not 0 (none), 1 (neox) or 2 (interleaved)"),
            )),
        },
    }
}

fn put_prefix(b: &mut Rec, t: RecordType, key: BlockKey) {
    b[R_TYPE] = t as u8;
    put(b, R_TENSOR_ID, &key.tensor_id.to_le_bytes());
    put(b, R_BLOCK_INDEX, &key.block_index.to_le_bytes());
}

/// Encode one record. A Create record carries every field of its [`BlockMeta`] except
/// the access statistics (`last_access_at`, `access_count`, `ema_access_rate`,
/// `access_window`), which are not stored.
///
/// Encoding never fails; a record with a field that [`decode_record`] refuses (a
/// non-finite float, `bits` outside 1..=32, `shape_ndim > 8` or a nonzero shape entry
/// beyond it) encodes to bytes that do not decode. The logs check this before writing.
#[must_use]
pub fn encode_record(r: &MetaRecord) -> [u8; RECORD_LEN] {
    let mut b = [0u8; RECORD_LEN];
    match r {
        MetaRecord::Create { meta: m } => {
            put_prefix(&mut b, RecordType::Create, m.key);
            b[C_DTYPE] = m.dtype.tag();
            b[C_TIER] = m.tier as u8;
            b[C_BITS] = m.bits;
            put(&mut b, C_SCALE, &m.scale.to_bits().to_le_bytes());
            put(&mut b, C_ZERO_POINT, &m.zero_point.to_le_bytes());
            put(&mut b, C_CREATED_AT, &m.created_at.to_le_bytes());
            put(&mut b, C_DATA_OFFSET, &m.data_offset.to_le_bytes());
            put(&mut b, C_DATA_LEN, &m.data_len.to_le_bytes());
            put(&mut b, C_CHECKSUM, &m.checksum.to_le_bytes());
            put(&mut b, C_LINEAGE, &m.lineage_parent.to_le_bytes());
            b[C_RECONSTRUCT] = m.reconstruct as u8;
            b[C_NDIM] = m.shape_ndim;
            for (i, d) in m.shape.iter().enumerate() {
                put(&mut b, C_SHAPE + 4 * i, &d.to_le_bytes());
            }
            put(&mut b, C_TIER_SINCE, &m.tier_since.to_le_bytes());
            b[C_KIND] = m.kind as u8;
            if let Some(fp) = m.centre {
                b[C_CENTRE] = 1;
                put(&mut b, C_CENTRE_FP, &fp.to_le_bytes());
            }
        }
        MetaRecord::Access {
            key,
            last_access_at,
            access_count,
            ema_access_rate,
            access_window,
        } => {
            put_prefix(&mut b, RecordType::Access, *key);
            put(&mut b, A_LAST_ACCESS, &last_access_at.to_le_bytes());
            put(&mut b, A_COUNT, &access_count.to_le_bytes());
            put(&mut b, A_EMA, &ema_access_rate.to_bits().to_le_bytes());
            put(&mut b, A_WINDOW, &access_window.to_le_bytes());
        }
        MetaRecord::Migrate {
            key,
            old_tier,
            new_tier,
            new_bits,
            new_scale,
            new_checksum,
            new_data_offset,
            new_data_len,
            at,
        } => {
            put_prefix(&mut b, RecordType::Migrate, *key);
            b[M_OLD_TIER] = *old_tier as u8;
            b[M_NEW_TIER] = *new_tier as u8;
            b[M_NEW_BITS] = *new_bits;
            put(&mut b, M_NEW_SCALE, &new_scale.to_bits().to_le_bytes());
            put(&mut b, M_NEW_CHECKSUM, &new_checksum.to_le_bytes());
            put(&mut b, M_NEW_OFFSET, &new_data_offset.to_le_bytes());
            put(&mut b, M_NEW_LEN, &new_data_len.to_le_bytes());
            put(&mut b, M_AT, &at.to_le_bytes());
        }
        MetaRecord::Delete { key } => put_prefix(&mut b, RecordType::Delete, *key),
    }
    seal(&mut b);
    b
}

/// Decode one record found at byte `offset` of the log.
///
/// # Errors
/// [`crate::StoreErr::InvalidRecord`] with the offset and a reason naming the field:
/// CRC mismatch, nonzero padding, unknown record type, unknown tier / dtype /
/// reconstruct byte, `bits` outside 1..=32, `ndim > 8`, a nonzero shape entry beyond
/// `ndim`, a non-finite scale or EMA, or a nonzero reserved byte.
pub fn decode_record(b: &[u8; RECORD_LEN], offset: u64) -> Result<MetaRecord> {
    let bad = |reason: String| StoreErr::InvalidRecord { offset, reason };
    let stored = u32_at(b, CRC_OFFSET);
    let computed = crc32c(&b[..CRC_OFFSET]);
    if stored != computed {
        return Err(bad(format!(
            "crc32c mismatch: stored {stored:#010x}, computed {computed:#010x}"
        )));
    }
    if let Some(i) = first_nonzero(b, PAD_OFFSET, RECORD_LEN) {
        return Err(bad(format!("padding byte {i} is not zero")));
    }
    let key = BlockKey::new(u128_at(b, R_TENSOR_ID), u32_at(b, R_BLOCK_INDEX));
    let tier = |at: usize, name: &str| {
        Tier::from_u8(b[at]).ok_or_else(|| {
            bad(format!(
                "{name} {} at byte {at} is not a tier (0..=3)",
                b[at]
            ))
        })
    };
    let bits = |at: usize, name: &str| match b[at] {
        v @ 1..=32 => Ok(v),
        v => Err(bad(format!("{name} {v} at byte {at} is not in 1..=32"))),
    };
    let finite = |at: usize, name: &str| {
        let v = f32_at(b, at);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(bad(format!("{name} at byte {at} is not finite ({v})")))
        }
    };
    let reserved = |from: usize, kind: &str| match first_nonzero(b, from, CRC_OFFSET) {
        Some(i) => Err(bad(format!("{kind} reserved byte {i} is not zero"))),
        None => Ok(()),
    };
    match b[R_TYPE] {
        t if t == RecordType::Create as u8 => {
            let dtype = store_dtype(b[C_DTYPE]).ok_or_else(|| {
                bad(format!(
                    "create.dtype {} at byte {C_DTYPE} is unknown",
                    b[C_DTYPE]
                ))
            })?;
            let tier = tier(C_TIER, "create.tier")?;
            let bits = bits(C_BITS, "create.bits")?;
            let scale = finite(C_SCALE, "create.scale")?;
            let reconstruct = ReconstructPolicy::from_u8(b[C_RECONSTRUCT]).ok_or_else(|| {
                bad(format!(
                    "create.reconstruct {} at byte {C_RECONSTRUCT} is unknown",
                    b[C_RECONSTRUCT]
                ))
            })?;
            let kind = TensorKind::from_u8(b[C_KIND]).ok_or_else(|| {
                bad(format!(
                    "create.kind {} at byte {C_KIND} is unknown",
                    b[C_KIND]
                ))
            })?;
            let ndim = b[C_NDIM];
            if usize::from(ndim) > MAX_NDIM {
                return Err(bad(format!(
                    "create.ndim {ndim} at byte {C_NDIM} exceeds {MAX_NDIM}"
                )));
            }
            let shape: [u32; MAX_NDIM] = std::array::from_fn(|i| u32_at(b, C_SHAPE + 4 * i));
            if let Some(i) = (usize::from(ndim)..MAX_NDIM).find(|&i| shape[i] != 0) {
                return Err(bad(format!(
                    "create.shape[{i}] = {} at byte {} is nonzero beyond ndim {ndim}",
                    shape[i],
                    C_SHAPE + 4 * i
                )));
            }
            let centre = match b[C_CENTRE] {
                0 if u32_at(b, C_CENTRE_FP) == 0 => None,
                0 => {
                    return Err(bad(format!(
                        "create.centre_fp at byte {C_CENTRE_FP} is nonzero for a block that is not centred"
                    )))
                }
                1 => Some(u32_at(b, C_CENTRE_FP)),
                v => {
                    return Err(bad(format!(
                        "create.centre {v} at byte {C_CENTRE} is not 0 or 1"
                    )))
                }
            };
            reserved(C_RESERVED, "create")?;
            let created_at = u64_at(b, C_CREATED_AT);
            Ok(MetaRecord::Create {
                meta: BlockMeta {
                    key,
                    shape,
                    shape_ndim: ndim,
                    dtype,
                    tier,
                    bits,
                    scale,
                    zero_point: u16_at(b, C_ZERO_POINT) as i16,
                    created_at,
                    last_access_at: created_at,
                    access_count: 0,
                    ema_access_rate: 0.0,
                    access_window: 1,
                    checksum: u32_at(b, C_CHECKSUM),
                    lineage_parent: u128_at(b, C_LINEAGE),
                    reconstruct,
                    kind,
                    tier_since: u64_at(b, C_TIER_SINCE),
                    data_offset: u64_at(b, C_DATA_OFFSET),
                    data_len: u32_at(b, C_DATA_LEN),
                    centre,
                },
            })
        }
        t if t == RecordType::Access as u8 => {
            let ema_access_rate = finite(A_EMA, "access.ema_access_rate")?;
            reserved(A_RESERVED, "access")?;
            Ok(MetaRecord::Access {
                key,
                last_access_at: u64_at(b, A_LAST_ACCESS),
                access_count: u32_at(b, A_COUNT),
                ema_access_rate,
                access_window: u64_at(b, A_WINDOW),
            })
        }
        t if t == RecordType::Migrate as u8 => {
            let old_tier = tier(M_OLD_TIER, "migrate.old_tier")?;
            let new_tier = tier(M_NEW_TIER, "migrate.new_tier")?;
            let new_bits = bits(M_NEW_BITS, "migrate.new_bits")?;
            let new_scale = finite(M_NEW_SCALE, "migrate.new_scale")?;
            reserved(M_RESERVED, "migrate")?;
            Ok(MetaRecord::Migrate {
                key,
                old_tier,
                new_tier,
                new_bits,
                new_scale,
                new_checksum: u32_at(b, M_NEW_CHECKSUM),
                new_data_offset: u64_at(b, M_NEW_OFFSET),
                new_data_len: u32_at(b, M_NEW_LEN),
                at: u64_at(b, M_AT),
            })
        }
        t if t == RecordType::Delete as u8 => {
            reserved(D_RESERVED, "delete")?;
            Ok(MetaRecord::Delete { key })
        }
        t => Err(bad(format!("record_type {t} at byte {R_TYPE} is unknown"))),
    }
}

/// Encode `recs` for appending at byte `offset`, appending the bytes to `out`; every
/// record is decoded back first so that nothing replay would refuse reaches the log
/// ([`StoreErr::InvalidArgument`] with field `record` otherwise).
pub(crate) fn encode_checked(recs: &[MetaRecord], offset: u64, out: &mut Vec<u8>) -> Result<()> {
    out.reserve(recs.len().saturating_mul(RECORD_LEN));
    let mut at = offset;
    for r in recs {
        let b = encode_record(r);
        decode_record(&b, at).map_err(|e| match e {
            StoreErr::InvalidRecord { reason, .. } => StoreErr::InvalidArgument {
                field: "record",
                reason: format!("block {} would not replay: {reason}", r.key()),
            },
            other => other,
        })?;
        out.extend_from_slice(&b);
        at += RECORD_LEN as u64;
    }
    Ok(())
}
