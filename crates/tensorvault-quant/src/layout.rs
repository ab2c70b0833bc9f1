//! Every constant of the quantized segment format (`docs/formats/quant.md`) in one place.
//!
//! Each header offset is derived from the previous field's offset and size, so a field
//! cannot be moved without moving everything after it. All multi-byte fields are
//! little-endian.

/// Segment magic: `TQTC` (ADR-018's name for the codec's segment) then a PNG-style tail
/// (`\r\n`, `^Z`, `\n`) that catches text-mode line-ending damage and `type` on DOS.
pub const MAGIC: [u8; 8] = [b'T', b'Q', b'T', b'C', 0x0D, 0x0A, 0x1A, 0x0A];
/// The only segment version this crate reads and writes.
pub const VERSION: u8 = 1;

/// Offset of [`MAGIC`].
pub const MAGIC_OFFSET: usize = 0;
/// Offset of the `u8` version.
pub const VERSION_OFFSET: usize = MAGIC_OFFSET + MAGIC.len();
/// Offset of the `u8` bit width (2..=8).
pub const BITS_OFFSET: usize = VERSION_OFFSET + size_of::<u8>();
/// Offset of the `u8` flags (see [`FLAG_FULL_RANGE`]).
pub const FLAGS_OFFSET: usize = BITS_OFFSET + size_of::<u8>();
/// Offset of the `u8` base-2 logarithm of the group size (4..=10).
pub const GROUP_LOG2_OFFSET: usize = FLAGS_OFFSET + size_of::<u8>();
/// Offset of the `u32` number of values in one frame (>= 1).
pub const VALUES_PER_FRAME_OFFSET: usize = GROUP_LOG2_OFFSET + size_of::<u8>();
/// Offset of the `u32` number of frames (>= 1).
pub const FRAME_COUNT_OFFSET: usize = VALUES_PER_FRAME_OFFSET + size_of::<u32>();
/// Offset of the `u32` number of scale sets (1..=frame count).
pub const SCALE_SET_COUNT_OFFSET: usize = FRAME_COUNT_OFFSET + size_of::<u32>();
/// Size of the fixed header; the frame bitmap starts here.
pub const HEADER_LEN: usize = SCALE_SET_COUNT_OFFSET + size_of::<u32>();
/// Offset of the frame bitmap (bit `i` set: frame `i` starts a new scale set).
pub const BITMAP_OFFSET: usize = HEADER_LEN;

/// Bytes per stored scale (IEEE binary16, little-endian).
pub const SCALE_BYTES: usize = size_of::<u16>();

/// Flag bit 0: codes use every level `-2^(b-1) ..= 2^(b-1)-1` with a signed scale
/// (the gguf Q4_0 convention). Clear: symmetric levels `±(2^(b-1)-1)`, scale >= 0.
pub const FLAG_FULL_RANGE: u8 = 1 << 0;
/// Every flag bit this version defines; any other set bit is rejected.
pub const KNOWN_FLAGS: u8 = FLAG_FULL_RANGE;

/// Smallest supported bit width.
pub const MIN_BITS: u8 = 2;
/// Largest supported bit width.
pub const MAX_BITS: u8 = 8;
/// Smallest group size exponent (16 values).
pub const MIN_GROUP_LOG2: u8 = 4;
/// Largest group size exponent (1024 values).
pub const MAX_GROUP_LOG2: u8 = 10;
/// Smallest group size.
pub const MIN_GROUP_SIZE: usize = 1 << MIN_GROUP_LOG2;
/// Largest group size (also the size of the encoder's on-stack code buffer).
pub const MAX_GROUP_SIZE: usize = 1 << MAX_GROUP_LOG2;

/// Default temporal drift tolerance: a frame keeps the current scale set while every
/// group's max |x| is within 10% of the max the set was fitted to.
pub const DEFAULT_DRIFT_TOLERANCE: f32 = 0.10;

/// Default group size for a bit width: the smallest power of two whose f16 scale
/// overhead (16 / group bits per value) keeps a single 4096-value frame, header included,
/// above ADR-018's compression floors (8-bit 3.9x, 7-bit 4.4x, 5-bit 6.2x, 3-bit 10.3x).
/// See `docs/formats/quant.md` for the table and the error cost of each choice.
pub const fn default_group_size(bits: u8) -> usize {
    match bits {
        0..=3 => 512,
        4 | 5 => 256,
        _ => 128,
    }
}

// ---- version 2: asymmetric groups with coded scales and mins (docs/formats/quant.md §5) ----

/// Version byte of an asymmetric (v2) segment.
pub const V2_VERSION: u8 = 2;
/// u8 grouping axis: [`V2_AXIS_FLAT`] or [`V2_AXIS_COLUMNS`].
pub const V2_AXIS_OFFSET: usize = BITS_OFFSET + size_of::<u8>();
/// u8 log2 of the group size.
pub const V2_GROUP_LOG2_OFFSET: usize = V2_AXIS_OFFSET + size_of::<u8>();
/// u32 number of values `n`.
pub const V2_VALUES_OFFSET: usize = V2_GROUP_LOG2_OFFSET + size_of::<u8>();
/// u16 row width (values per row).
pub const V2_WIDTH_OFFSET: usize = V2_VALUES_OFFSET + size_of::<u32>();
/// u16 leading rows kept raw (f16).
pub const V2_RAW_ROWS_OFFSET: usize = V2_WIDTH_OFFSET + size_of::<u16>();
/// f32 scale unit: group scale = unit x scale code.
pub const V2_SCALE_UNIT_OFFSET: usize = V2_RAW_ROWS_OFFSET + size_of::<u16>();
/// f32 min base: group min = base + min unit x min code.
pub const V2_MIN_BASE_OFFSET: usize = V2_SCALE_UNIT_OFFSET + size_of::<f32>();
/// f32 min unit.
pub const V2_MIN_UNIT_OFFSET: usize = V2_MIN_BASE_OFFSET + size_of::<f32>();
/// Header length of a v2 segment; the raw rows follow it.
pub const V2_HEADER_LEN: usize = V2_MIN_UNIT_OFFSET + size_of::<f32>();
/// Bytes of one raw value (f16).
pub const V2_RAW_BYTES: usize = size_of::<u16>();
/// Bytes of one group's parameters: a u8 scale code and a u8 min code.
pub const V2_GROUP_BYTES: usize = 2 * size_of::<u8>();
/// Largest scale / min code.
pub const V2_MAX_CODE: u8 = u8::MAX;
/// Groups are runs of `g` consecutive values (in row-major order).
pub const V2_AXIS_FLAT: u8 = 0;
/// The values are a `[rows, width]` matrix; a group is one column over `g` rows.
pub const V2_AXIS_COLUMNS: u8 = 1;
/// Smallest group size exponent of a v2 segment (groups of 4).
pub const V2_MIN_GROUP_LOG2: u8 = 2;
/// Largest group size exponent of a v2 segment (groups of 1024).
pub const V2_MAX_GROUP_LOG2: u8 = 10;

// ---- version 3: rotated blocks with fixed Gaussian levels (docs/formats/quant.md §6) ----

/// Version byte of a rotated (v3) segment.
pub const V3_VERSION: u8 = 3;
/// u8 level set: [`V3_LEVELS_LLOYD_MAX`] or [`V3_LEVELS_UNIFORM`].
pub const V3_LEVELS_OFFSET: usize = BITS_OFFSET + size_of::<u8>();
/// u8 log2 of the block size (the rotation and scale block).
pub const V3_BLOCK_LOG2_OFFSET: usize = V3_LEVELS_OFFSET + size_of::<u8>();
/// u32 number of values `n`.
pub const V3_VALUES_OFFSET: usize = V3_BLOCK_LOG2_OFFSET + size_of::<u8>();
/// u16 row width (values per row; the raw rows are whole rows).
pub const V3_WIDTH_OFFSET: usize = V3_VALUES_OFFSET + size_of::<u32>();
/// u16 leading rows kept raw (f16).
pub const V3_RAW_ROWS_OFFSET: usize = V3_WIDTH_OFFSET + size_of::<u16>();
/// u32 seed of the rotation's sign pattern.
pub const V3_SEED_OFFSET: usize = V3_RAW_ROWS_OFFSET + size_of::<u16>();
/// f32 scale base: a block's scale = base x step(scale code).
pub const V3_SCALE_BASE_OFFSET: usize = V3_SEED_OFFSET + size_of::<u32>();
/// u8 flags ([`V3_FLAG_ROTATED`]).
pub const V3_FLAGS_OFFSET: usize = V3_SCALE_BASE_OFFSET + size_of::<f32>();
/// Three reserved bytes, zero.
pub const V3_RESERVED_OFFSET: usize = V3_FLAGS_OFFSET + size_of::<u8>();
/// Header length of a v3 segment; the raw rows follow it.
pub const V3_HEADER_LEN: usize = V3_RESERVED_OFFSET + 3;
/// Bytes of one block's scale code.
pub const V3_SCALE_CODE_BYTES: usize = size_of::<u8>();
/// Level set: Lloyd-Max levels of N(0, 1).
pub const V3_LEVELS_LLOYD_MAX: u8 = 0;
/// Level set: uniform levels with the MSE-optimal step for N(0, 1).
pub const V3_LEVELS_UNIFORM: u8 = 1;
/// Flag bit 0: blocks are rotated (randomized Hadamard); clear: levels only.
pub const V3_FLAG_ROTATED: u8 = 1 << 0;
/// Flag bit 1: wide scales, one f16 per block (scale = base x f16); clear: one log-coded
/// byte per block.
pub const V3_FLAG_WIDE_SCALES: u8 = 1 << 1;
/// Every flag bit version 3 defines.
pub const V3_KNOWN_FLAGS: u8 = V3_FLAG_ROTATED | V3_FLAG_WIDE_SCALES;
/// Bytes of one block's wide scale (f16).
pub const V3_WIDE_SCALE_BYTES: usize = size_of::<u16>();
/// Smallest block size exponent of a v3 segment (blocks of 4).
pub const V3_MIN_BLOCK_LOG2: u8 = 2;
/// Largest block size exponent of a v3 segment (blocks of 1024).
pub const V3_MAX_BLOCK_LOG2: u8 = 10;
/// The seed the store's codec v3 writes (any seed decodes: it is in the header).
pub const V3_DEFAULT_SEED: u32 = 0x5456_5133; // "TVQ3"

// ---- version 5: entropy-coded envelope over a v2/v3 segment (docs/formats/quant.md §12) ----

/// Version byte of an entropy-coded (v5) envelope.
pub const V5_VERSION: u8 = 5;
/// u8 version of the wrapped (inner) segment: 2, 3 or 4.
pub const V5_INNER_VERSION_OFFSET: usize = BITS_OFFSET + size_of::<u8>();
/// u8 log2 of the number of interleaved rANS lanes (0..=[`V5_MAX_LANES_LOG2`]).
pub const V5_LANES_LOG2_OFFSET: usize = V5_INNER_VERSION_OFFSET + size_of::<u8>();
/// u8 precision of the frequency table: the frequencies sum to `2^prob_bits`.
pub const V5_PROB_BITS_OFFSET: usize = V5_LANES_LOG2_OFFSET + size_of::<u8>();
/// u32 number of coded symbols `m` (the inner segment's quantized values).
pub const V5_CODES_OFFSET: usize = V5_PROB_BITS_OFFSET + size_of::<u8>();
/// u32 length `P` of the inner segment's side bytes kept verbatim.
pub const V5_SIDE_LEN_OFFSET: usize = V5_CODES_OFFSET + size_of::<u32>();
/// Header length of a v5 envelope; the inner side bytes follow it.
pub const V5_HEADER_LEN: usize = V5_SIDE_LEN_OFFSET + size_of::<u32>();
/// The inner segment's bytes the envelope does not store (magic, version, bits: the
/// envelope's own magic and bits, and its inner version byte, give them back). Its side
/// bytes are the inner segment's bytes from here up to its packed codes.
pub const V5_INNER_SKIP: usize = BITS_OFFSET + size_of::<u8>();
/// Inner segment versions an envelope may wrap (codes at the end of the segment).
pub const V5_INNER_VERSIONS: [u8; 3] = [V2_VERSION, V3_VERSION, V4_VERSION];
/// Largest lane count exponent of a v5 stream (64 interleaved rANS states; 16 to 64
/// lanes, `lanes_log2` 4..=6, since session 15: builds before it refuse them as
/// `CorruptField lanes_log2`).
pub const V5_MAX_LANES_LOG2: u8 = 6;
/// Lane count exponent of the wide-lane writer (the store's `wide_lanes` collections,
/// [`crate::segment_v5::encode_smallest_with`]): 64 lanes, the count whose vector decode
/// measured fastest (bench/RESULTS.md, "Session 15: rans-wide").
pub const V5_WIDE_LANES_LOG2: u8 = 6;
/// Largest lane count exponent of a v7 stream (8 lanes; v7 keeps its session-14 range).
pub const V7_MAX_LANES_LOG2: u8 = 3;
/// Lane count exponent the encoder writes by default (4 lanes).
pub const V5_DEFAULT_LANES_LOG2: u8 = 2;
/// Largest frequency table precision (frequencies sum to 4096).
pub const V5_MAX_PROB_BITS: u8 = 12;
/// Lower bound of a normalized rANS state; states live in `[RANS_L, 2^32)`.
pub const RANS_L: u32 = 1 << 16;
/// Bits moved per renormalization (one little-endian u16 word).
pub const RANS_WORD_BITS: u32 = 16;
/// Bytes of one stream word.
pub const RANS_WORD_BYTES: usize = size_of::<u16>();
/// Bytes of one lane's flushed state (a u32 as two words, low word first).
pub const RANS_STATE_BYTES: usize = size_of::<u32>();
/// Largest encoding of one frequency in the table (LEB128: 7 bits per byte).
pub const V5_MAX_FREQ_BYTES: usize = 2;

// ---- version 4: groups inside super-blocks, k-quant style side data (docs/formats/quant.md §11) ----

/// Version byte of a super-block (v4) segment.
pub const V4_VERSION: u8 = 4;
/// u8 log2 of the group size (one scale code and one min code per group).
pub const V4_GROUP_LOG2_OFFSET: usize = BITS_OFFSET + size_of::<u8>();
/// u8 log2 of the super-block size (one f16 scale unit and one f16 min unit per
/// super-block; also the rotation block).
pub const V4_SUPER_LOG2_OFFSET: usize = V4_GROUP_LOG2_OFFSET + size_of::<u8>();
/// u32 number of values `n`.
pub const V4_VALUES_OFFSET: usize = V4_SUPER_LOG2_OFFSET + size_of::<u8>();
/// u8 bits of each group's scale code.
pub const V4_SCALE_BITS_OFFSET: usize = V4_VALUES_OFFSET + size_of::<u32>();
/// u8 bits of each group's min code.
pub const V4_MIN_BITS_OFFSET: usize = V4_SCALE_BITS_OFFSET + size_of::<u8>();
/// u8 flags ([`V4_FLAG_ROTATED`]).
pub const V4_FLAGS_OFFSET: usize = V4_MIN_BITS_OFFSET + size_of::<u8>();
/// One reserved byte, zero.
pub const V4_RESERVED_OFFSET: usize = V4_FLAGS_OFFSET + size_of::<u8>();
/// u32 seed of the rotation's sign pattern (any value when not rotated).
pub const V4_SEED_OFFSET: usize = V4_RESERVED_OFFSET + size_of::<u8>();
/// Header length of a v4 segment; the super-block parameters follow it.
pub const V4_HEADER_LEN: usize = V4_SEED_OFFSET + size_of::<u32>();
/// Bytes of one super-block's parameters: f16 scale unit `d`, f16 min unit `m`.
pub const V4_SUPER_BYTES: usize = 2 * size_of::<u16>();
/// Flag bit 0: every whole super-block is rotated (randomized Hadamard of the super-block
/// size, [`crate::rotation`]); a trailing partial super-block never is.
pub const V4_FLAG_ROTATED: u8 = 1 << 0;
/// Every flag bit version 4 defines.
pub const V4_KNOWN_FLAGS: u8 = V4_FLAG_ROTATED;
/// Smallest group size exponent of a v4 segment (groups of 4).
pub const V4_MIN_GROUP_LOG2: u8 = 2;
/// Largest group size exponent of a v4 segment (groups of 256).
pub const V4_MAX_GROUP_LOG2: u8 = 8;
/// Largest super-block size exponent (super-blocks of 1024; the smallest is the group).
pub const V4_MAX_SUPER_LOG2: u8 = 10;
/// Smallest width of a group's scale or min code.
pub const V4_MIN_SIDE_BITS: u8 = 2;
/// Largest width of a group's scale or min code.
pub const V4_MAX_SIDE_BITS: u8 = 8;
/// The seed the store writes into rotated v4 segments (any seed decodes).
pub const V4_DEFAULT_SEED: u32 = 0x5456_5134; // "TVQ4"

// ---- version 6: per-row gain envelope over a v2..v5 segment (docs/formats/quant.md §13) ----

/// Version byte of a row-gain (v6) envelope.
pub const V6_VERSION: u8 = 6;
/// u8 version of the wrapped (inner) segment: 2, 3, 4 or 5.
pub const V6_INNER_VERSION_OFFSET: usize = BITS_OFFSET + size_of::<u8>();
/// One reserved byte, zero.
pub const V6_RESERVED_OFFSET: usize = V6_INNER_VERSION_OFFSET + size_of::<u8>();
/// u32 number of values `n` (the inner segment's value count).
pub const V6_VALUES_OFFSET: usize = V6_RESERVED_OFFSET + size_of::<u8>();
/// u16 row width `w` (>= 1): values per row of the tensor the run comes from.
pub const V6_WIDTH_OFFSET: usize = V6_VALUES_OFFSET + size_of::<u32>();
/// u16 position of the run's first value inside its row (`< w`).
pub const V6_FIRST_OFFSET: usize = V6_WIDTH_OFFSET + size_of::<u16>();
/// Header length of a v6 envelope; the gain codes (one byte per row part) follow it.
pub const V6_HEADER_LEN: usize = V6_FIRST_OFFSET + size_of::<u16>();
/// Bytes of one gain code `c`: the gain is `1 + (c - V6_GAIN_ZERO) / V6_GAIN_DIV`.
pub const V6_GAIN_BYTES: usize = size_of::<u8>();
/// The gain code of a gain of exactly 1.
pub const V6_GAIN_ZERO: u8 = 128;
/// Gain codes per unit of gain (a step of 2^-11, gains 0.9375..=1.0620).
pub const V6_GAIN_DIV: f32 = 2048.0;
/// Bytes of the inner segment the envelope does not store (its magic, version and bits:
/// the envelope's magic, inner_version and bits give them back), as in version 5.
pub const V6_INNER_SKIP: usize = BITS_OFFSET + size_of::<u8>();
/// Inner segment versions a v6 envelope may wrap.
pub const V6_INNER_VERSIONS: [u8; 5] = [V2_VERSION, V3_VERSION, V4_VERSION, V5_VERSION, V7_VERSION];

// ---- version 7: model-coded ECSQ (docs/formats/quant.md §14) ----

/// Version byte of a model-coded ECSQ (v7) segment.
pub const V7_VERSION: u8 = 7;
/// u8 code width `k` (2..=12) at the common bits offset.
pub const V7_BITS_OFFSET: usize = BITS_OFFSET;
/// u8 log2 of the rotation block `b` (2..=10).
pub const V7_BLOCK_LOG2_OFFSET: usize = V7_BITS_OFFSET + size_of::<u8>();
/// u8 log2 of the rANS lanes (0..=3).
pub const V7_LANES_LOG2_OFFSET: usize = V7_BLOCK_LOG2_OFFSET + size_of::<u8>();
/// u32 seed of the rotation's signs.
pub const V7_SEED_OFFSET: usize = V7_LANES_LOG2_OFFSET + size_of::<u8>();
/// u32 number of values `n` (1..=[`V7_MAX_VALUES`]).
pub const V7_VALUES_OFFSET: usize = V7_SEED_OFFSET + size_of::<u32>();
/// f32 quantizer step (finite, > 0).
pub const V7_STEP_OFFSET: usize = V7_VALUES_OFFSET + size_of::<u32>();
/// Header length of a v7 segment; one side byte per rotation block follows it, then the
/// rANS stream (lane states first) to the end of the segment.
pub const V7_HEADER_LEN: usize = V7_STEP_OFFSET + size_of::<f32>();
/// Smallest code width.
pub const V7_MIN_BITS: u8 = 2;
/// Largest code width (alphabets of up to 4096 symbols).
pub const V7_MAX_BITS: u8 = 12;
/// Smallest rotation block exponent (4 values).
pub const V7_MIN_BLOCK_LOG2: u8 = 2;
/// Largest rotation block exponent (1024 values).
pub const V7_MAX_BLOCK_LOG2: u8 = 10;
/// Largest value count of one segment.
pub const V7_MAX_VALUES: usize = 1 << 20;
/// Precision of the model's frequency tables: every table sums to `2^15`.
pub const V7_PROB_BITS: u8 = 15;
/// Side byte `j` of a block gives the model's standard deviation in steps,
/// `sigma_j = 2^((j - V7_SIGMA_ZERO) / V7_SIGMA_PER_OCTAVE)`: `j = 64` is one step.
pub const V7_SIGMA_ZERO: i32 = 64;
/// Side-byte ladder rungs per octave of standard deviation.
pub const V7_SIGMA_PER_OCTAVE: i32 = 16;
/// Rate-control ladder (encoder policy): step rungs per octave.
pub const V7_RATE_PER_OCTAVE: i32 = 32;
/// Rate-control ladder: the finest rung, 3 octaves below the clamp-free step.
pub const V7_RATE_MIN: i32 = -3 * V7_RATE_PER_OCTAVE;
/// Rate-control ladder: the coarsest rung, 24 octaves above the clamp-free step.
pub const V7_RATE_RUNGS: i32 = 24 * V7_RATE_PER_OCTAVE;
/// Largest `log2` of the decoded magnitude bound `step * 2^(k-1) * 2^ceil(b/2)` (keeps every
/// decoded value, and the inverse rotation's partial sums, inside the f32 range).
pub const V7_MAX_MAGNITUDE_LOG2: i32 = 126;

// ---- version 8: channel-centred model-coded ECSQ (docs/formats/quant.md §15) ----

/// Version byte of a channel-centred model-coded ECSQ (v8) segment.
pub const V8_VERSION: u8 = 8;
/// u8 code width `k` (2..=12) at the common bits offset.
pub const V8_BITS_OFFSET: usize = BITS_OFFSET;
/// u8 log2 of the row width (channels) `w` ([`V8_MIN_WIDTH_LOG2`]..=[`V8_MAX_WIDTH_LOG2`]).
pub const V8_WIDTH_LOG2_OFFSET: usize = V8_BITS_OFFSET + size_of::<u8>();
/// u8 log2 of the rANS lanes (0..=[`V8_MAX_LANES_LOG2`]).
pub const V8_LANES_LOG2_OFFSET: usize = V8_WIDTH_LOG2_OFFSET + size_of::<u8>();
/// u32 number of values `n` (1..=[`V8_MAX_VALUES`], a multiple of `w`).
pub const V8_VALUES_OFFSET: usize = V8_LANES_LOG2_OFFSET + size_of::<u8>();
/// f32 quantizer step (finite, > 0, `step * 2^(k-1) < 2^`[`V8_MAX_MAGNITUDE_LOG2`]).
pub const V8_STEP_OFFSET: usize = V8_VALUES_OFFSET + size_of::<u32>();
/// u16 leading rows kept as f16 (fewer than the `n / w` rows).
pub const V8_RAW_ROWS_OFFSET: usize = V8_STEP_OFFSET + size_of::<f32>();
/// Header length of a v8 segment; then the raw rows (f16, row-major), the channel means
/// (f16, one per channel), the side bytes (one per channel) and the rANS stream (lane
/// states first) to the end of the segment.
pub const V8_HEADER_LEN: usize = V8_RAW_ROWS_OFFSET + size_of::<u16>();
/// Bytes of one raw value and of one channel mean (f16).
pub const V8_F16_BYTES: usize = size_of::<u16>();
/// Smallest code width.
pub const V8_MIN_BITS: u8 = 2;
/// Largest code width (v7's model tables go up to 2^12 symbols).
pub const V8_MAX_BITS: u8 = 12;
/// Smallest row width exponent (16 channels).
pub const V8_MIN_WIDTH_LOG2: u8 = 4;
/// Largest row width exponent (1024 channels).
pub const V8_MAX_WIDTH_LOG2: u8 = 10;
/// Largest rANS lane exponent (8 lanes).
pub const V8_MAX_LANES_LOG2: u8 = 3;
/// Largest value count of one segment.
pub const V8_MAX_VALUES: usize = 1 << 20;
/// Largest `log2` of `step * 2^(k-1)`: with a channel mean of at most 65504 (f16), every
/// decoded value stays inside the f32 range.
pub const V8_MAX_MAGNITUDE_LOG2: i32 = 126;

// ---- version 9: v8 with one step per channel (docs/formats/quant.md §16) ----

/// Version byte of a channel-centred model-coded ECSQ segment with per-channel steps (v9).
/// Its header is v8's ([`V8_HEADER_LEN`] bytes, the same fields at the same offsets, the
/// step field holding the coarsest step `Δ`); its regions are v8's followed by one step
/// code per channel ([`V9_STEP_CODE_BYTES`]) before the rANS stream.
pub const V9_VERSION: u8 = 9;
/// Bytes of one channel's step code `e_c`: channel `c` quantizes with
/// `step_c = f32(Δ * V9_STEP_FRACTION_BITS[e_c % 16]) * 2^-(e_c / 16)`.
pub const V9_STEP_CODE_BYTES: usize = size_of::<u8>();
/// Step codes per octave: code `e` is `e / 16` octaves finer than `Δ`.
pub const V9_STEP_CODES_PER_OCTAVE: u8 = 16;
/// The f32 bit patterns of `2^(-i/16)`, `i = 0..16`, each the nearest f32 (ties to even:
/// none occur). Pinned so every decoder computes the same per-channel steps.
pub const V9_STEP_FRACTION_BITS: [u32; 16] = [
    0x3F80_0000,
    0x3F75_257D,
    0x3F6A_C0C7,
    0x3F60_CCDF,
    0x3F57_44FD,
    0x3F4E_248C,
    0x3F45_672A,
    0x3F3D_08A4,
    0x3F35_04F3,
    0x3F2D_583F,
    0x3F25_FED7,
    0x3F1E_F532,
    0x3F18_37F0,
    0x3F11_C3D3,
    0x3F0B_95C2,
    0x3F05_AAC3,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_24_bytes_and_fields_are_contiguous() {
        assert_eq!(VERSION_OFFSET, 8);
        assert_eq!(BITS_OFFSET, 9);
        assert_eq!(FLAGS_OFFSET, 10);
        assert_eq!(GROUP_LOG2_OFFSET, 11);
        assert_eq!(VALUES_PER_FRAME_OFFSET, 12);
        assert_eq!(FRAME_COUNT_OFFSET, 16);
        assert_eq!(SCALE_SET_COUNT_OFFSET, 20);
        assert_eq!(HEADER_LEN, 24);
    }

    #[test]
    fn v2_header_is_32_bytes_and_fields_are_contiguous() {
        assert_eq!(V2_AXIS_OFFSET, 10);
        assert_eq!(V2_GROUP_LOG2_OFFSET, 11);
        assert_eq!(V2_VALUES_OFFSET, 12);
        assert_eq!(V2_WIDTH_OFFSET, 16);
        assert_eq!(V2_RAW_ROWS_OFFSET, 18);
        assert_eq!(V2_SCALE_UNIT_OFFSET, 20);
        assert_eq!(V2_MIN_BASE_OFFSET, 24);
        assert_eq!(V2_MIN_UNIT_OFFSET, 28);
        assert_eq!(V2_HEADER_LEN, 32);
    }

    #[test]
    fn v3_header_is_32_bytes_and_fields_are_contiguous() {
        assert_eq!(V3_LEVELS_OFFSET, 10);
        assert_eq!(V3_BLOCK_LOG2_OFFSET, 11);
        assert_eq!(V3_VALUES_OFFSET, 12);
        assert_eq!(V3_WIDTH_OFFSET, 16);
        assert_eq!(V3_RAW_ROWS_OFFSET, 18);
        assert_eq!(V3_SEED_OFFSET, 20);
        assert_eq!(V3_SCALE_BASE_OFFSET, 24);
        assert_eq!(V3_FLAGS_OFFSET, 28);
        assert_eq!(V3_HEADER_LEN, 32);
    }

    #[test]
    fn v5_header_is_21_bytes_and_fields_are_contiguous() {
        assert_eq!(V5_INNER_VERSION_OFFSET, 10);
        assert_eq!(V5_LANES_LOG2_OFFSET, 11);
        assert_eq!(V5_PROB_BITS_OFFSET, 12);
        assert_eq!(V5_CODES_OFFSET, 13);
        assert_eq!(V5_SIDE_LEN_OFFSET, 17);
        assert_eq!(V5_HEADER_LEN, 21);
        assert_eq!(V5_INNER_SKIP, 10);
    }

    #[test]
    fn v4_header_is_24_bytes_and_fields_are_contiguous() {
        assert_eq!(V4_GROUP_LOG2_OFFSET, 10);
        assert_eq!(V4_SUPER_LOG2_OFFSET, 11);
        assert_eq!(V4_VALUES_OFFSET, 12);
        assert_eq!(V4_SCALE_BITS_OFFSET, 16);
        assert_eq!(V4_MIN_BITS_OFFSET, 17);
        assert_eq!(V4_FLAGS_OFFSET, 18);
        assert_eq!(V4_RESERVED_OFFSET, 19);
        assert_eq!(V4_SEED_OFFSET, 20);
        assert_eq!(V4_HEADER_LEN, 24);
    }

    #[test]
    fn v6_header_is_20_bytes_and_fields_are_contiguous() {
        assert_eq!(V6_INNER_VERSION_OFFSET, 10);
        assert_eq!(V6_RESERVED_OFFSET, 11);
        assert_eq!(V6_VALUES_OFFSET, 12);
        assert_eq!(V6_WIDTH_OFFSET, 16);
        assert_eq!(V6_FIRST_OFFSET, 18);
        assert_eq!(V6_HEADER_LEN, 20);
        assert_eq!(V6_INNER_SKIP, 10);
    }

    #[test]
    fn v7_header_is_24_bytes_and_fields_are_contiguous() {
        assert_eq!(V7_BITS_OFFSET, 9);
        assert_eq!(V7_BLOCK_LOG2_OFFSET, 10);
        assert_eq!(V7_LANES_LOG2_OFFSET, 11);
        assert_eq!(V7_SEED_OFFSET, 12);
        assert_eq!(V7_VALUES_OFFSET, 16);
        assert_eq!(V7_STEP_OFFSET, 20);
        assert_eq!(V7_HEADER_LEN, 24);
    }

    #[test]
    fn v8_header_is_22_bytes_and_fields_are_contiguous() {
        assert_eq!(V8_BITS_OFFSET, 9);
        assert_eq!(V8_WIDTH_LOG2_OFFSET, 10);
        assert_eq!(V8_LANES_LOG2_OFFSET, 11);
        assert_eq!(V8_VALUES_OFFSET, 12);
        assert_eq!(V8_STEP_OFFSET, 16);
        assert_eq!(V8_RAW_ROWS_OFFSET, 20);
        assert_eq!(V8_HEADER_LEN, 22);
    }
}
