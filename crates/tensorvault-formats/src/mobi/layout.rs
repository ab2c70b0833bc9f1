//! Every byte-level constant of the MOBI format, offsets derived from each other.
//! See `docs/formats/mobi.md` for the prose version. All multi-byte fields are
//! little-endian.

/// Format name used in errors.
pub const FORMAT: &str = "mobi";

/// The four magic bytes at offset 0: "MOBI" (4D 4F 42 49).
pub const MAGIC: [u8; 4] = *b"MOBI";
/// The version this code writes and the highest it reads.
pub const VERSION: u16 = VERSION_2;
/// Format v1: fixed-width fields, per-tensor quantization only.
pub const VERSION_1: u16 = 1;
/// Format v2: varint fields, per-axis quantization, symbolic I/O dimensions, aligned
/// tensor payloads, a value-names table.
pub const VERSION_2: u16 = 2;

/// Offset of the magic.
pub const MAGIC_OFFSET: usize = 0;
/// Offset of the u16 format version.
pub const VERSION_OFFSET: usize = MAGIC_OFFSET + 4;
/// Offset of the u16 reserved field (zero in v1).
pub const RESERVED_OFFSET: usize = VERSION_OFFSET + 2;
/// Offset of the u32 header CRC32 (computed with these four bytes zeroed).
pub const HEADER_CRC_OFFSET: usize = RESERVED_OFFSET + 2;
/// Offset of the u32 flags.
pub const FLAGS_OFFSET: usize = HEADER_CRC_OFFSET + 4;
/// Offset of the u32 total file size.
pub const TOTAL_SIZE_OFFSET: usize = FLAGS_OFFSET + 4;
/// Offset of the u32 metadata section offset.
pub const METADATA_OFFSET_OFFSET: usize = TOTAL_SIZE_OFFSET + 4;
/// Offset of the u32 constant-tensor section offset.
pub const TENSOR_OFFSET_OFFSET: usize = METADATA_OFFSET_OFFSET + 4;
/// Offset of the u32 operator-graph section offset.
pub const GRAPH_OFFSET_OFFSET: usize = TENSOR_OFFSET_OFFSET + 4;
/// Size of the header; the metadata section starts here in v1.
pub const HEADER_SIZE: usize = GRAPH_OFFSET_OFFSET + 4;

const _: () = assert!(HEADER_SIZE == 32);

/// Size of the footer (the file CRC32).
pub const FOOTER_SIZE: usize = 4;
/// Smallest possible v1 file: header, empty metadata (name_len 0 + 4 + 8 + 4 + 4), empty
/// tensor section (count 0), empty graph (count 0), footer.
pub const MIN_FILE_SIZE: usize = HEADER_SIZE + 24 + 4 + 4 + FOOTER_SIZE;

/// Flag bit 0: at least one constant tensor is affine-quantized (int8/uint8/int16).
pub const FLAG_QUANTIZED: u32 = 1 << 0;
/// Flag bit 1: at least one constant tensor is fp16.
pub const FLAG_FP16: u32 = 1 << 1;
/// Flag bit 2: the graph is optimized (operators fused).
pub const FLAG_OPTIMIZED: u32 = 1 << 2;
/// Every flag bit v1 defines; bits 3-31 are reserved and must be zero.
pub const FLAGS_KNOWN: u32 = FLAG_QUANTIZED | FLAG_FP16 | FLAG_OPTIMIZED;

/// DataType bit 15: the tensor payload is gzip-compressed (data_size is the stored size).
pub const DTYPE_GZIP: u16 = 1 << 15;
/// DataType low byte: the element type.
pub const DTYPE_ELEMENT_MASK: u16 = 0x00ff;
/// DataType bits 8-14: reserved, zero in v1.
pub const DTYPE_RESERVED_MASK: u16 = 0x7f00;

/// Size of the fixed part of the metadata (name_len, framework_version, timestamp,
/// input_count, output_count) without the name bytes.
pub const METADATA_FIXED_SIZE: usize = 4 + 4 + 8 + 4 + 4;
/// Smallest I/O spec: name_len u32, rank u16, dtype u16.
pub const IO_SPEC_MIN_SIZE: usize = 4 + 2 + 2;
/// Smallest constant tensor: id u32, dtype u16, rank u16, data_size u64.
pub const TENSOR_MIN_SIZE: usize = 4 + 2 + 2 + 8;
/// Size of the quantization parameters (scale f32 + zero_point i32).
pub const QUANT_PARAMS_SIZE: usize = 4 + 4;
/// Smallest operator descriptor: type, input count, output count, parameter count.
pub const OPERATOR_MIN_SIZE: usize = 2 + 2 + 2 + 2;
/// Smallest operator parameter: key_len u16, type tag u8, an 8-byte scalar... or an
/// empty string/array (u32 length): 2 + 1 + 4.
pub const PARAM_MIN_SIZE: usize = 2 + 1 + 4;

/// Parameter type tag: i64.
pub const TAG_INT: u8 = 1;
/// Parameter type tag: f64.
pub const TAG_FLOAT: u8 = 2;
/// Parameter type tag: string (u32 length + UTF-8).
pub const TAG_STRING: u8 = 3;
/// Parameter type tag: i64 array (u32 count + values).
pub const TAG_INTS: u8 = 4;
/// Parameter type tag: f64 array (u32 count + values).
pub const TAG_FLOATS: u8 = 5;

/// Largest tensor or I/O rank accepted (a documented limit).
pub const MAX_RANK: u16 = 8;
/// Default limit on one tensor's decoded (uncompressed) payload: 1 GiB. A reader knob.
pub const DEFAULT_MAX_TENSOR_BYTES: u64 = 1 << 30;
/// Default cap on the bytes gzip inflation produces for all tensors of one file.
pub const DEFAULT_MAX_INFLATED_BYTES: u64 = 1 << 30;
/// Default gzip output allowed per byte of file (all tensors together), on top of
/// [`INFLATE_SLACK_BYTES`]. A model whose tensors deflate better than this on average
/// (near-constant data) is refused by default readers; raise
/// `ReadOptions::max_inflate_ratio` (or set it to 0) to read it.
pub const INFLATE_RATIO_BUDGET: u64 = 64;
/// Gzip output always allowed per file, whatever its size.
pub const INFLATE_SLACK_BYTES: u64 = 16 << 20;

// ---- v2 ----

/// Smallest v2 metadata section: name_len, framework_version, timestamp, input_count,
/// output_count, one varint byte each.
pub const V2_METADATA_MIN_SIZE: usize = 5;
/// Smallest v2 tensor section: alignment log2 u8 + tensor_count varint.
pub const V2_TENSOR_SECTION_MIN_SIZE: usize = 2;
/// Smallest v2 graph section: operator_count varint + name_count varint.
pub const V2_GRAPH_SECTION_MIN_SIZE: usize = 2;
/// Smallest possible v2 file.
pub const V2_MIN_FILE_SIZE: usize = HEADER_SIZE
    + V2_METADATA_MIN_SIZE
    + V2_TENSOR_SECTION_MIN_SIZE
    + V2_GRAPH_SECTION_MIN_SIZE
    + FOOTER_SIZE;
/// Smallest v2 I/O spec: name_len varint, dtype u8, rank u8.
pub const V2_IO_SPEC_MIN_SIZE: usize = 3;
/// Smallest v2 constant tensor: id varint, dtype u8, tensor flags u8, rank u8.
pub const V2_TENSOR_MIN_SIZE: usize = 4;
/// Smallest v2 operator: type, input count, output count, parameter count (varints).
pub const V2_OPERATOR_MIN_SIZE: usize = 4;
/// Smallest v2 parameter: key_len varint, tag u8, a one-byte varint value.
pub const V2_PARAM_MIN_SIZE: usize = 3;
/// Smallest v2 names-table entry: value id varint + name_len varint.
pub const V2_NAME_ENTRY_MIN_SIZE: usize = 2;
/// Smallest per-axis channel: scale f32 (+ zero point varint unless omitted).
pub const V2_CHANNEL_MIN_SIZE: usize = 4;

/// v2 tensor flags bit 0: the payload is gzip-compressed (a stored-size varint follows).
pub const TFLAG_GZIP: u8 = 1 << 0;
/// v2 tensor flags bits 1-2: the quantization kind ([`QKIND_NONE`], ...).
pub const TFLAG_QKIND_SHIFT: u8 = 1;
/// Mask of the quantization kind bits (after shifting).
pub const TFLAG_QKIND_MASK: u8 = 0b11;
/// v2 tensor flags bit 3: per-axis zero points are all 0 and not stored.
pub const TFLAG_ZERO_POINTS_OMITTED: u8 = 1 << 3;
/// Every tensor flag bit v2 defines; bits 4-7 are reserved and must be zero.
pub const TFLAGS_KNOWN: u8 =
    TFLAG_GZIP | (TFLAG_QKIND_MASK << TFLAG_QKIND_SHIFT) | TFLAG_ZERO_POINTS_OMITTED;
/// Quantization kind 0: none (f32, fp16, i32, i64, bool).
pub const QKIND_NONE: u8 = 0;
/// Quantization kind 1: per tensor (scale f32 + zero point zigzag varint).
pub const QKIND_PER_TENSOR: u8 = 1;
/// Quantization kind 2: per axis (axis u8, scales, zero points).
pub const QKIND_PER_AXIS: u8 = 2;

/// Alignment of uncompressed tensor payloads the v2 writer uses: 64 bytes (a cache
/// line; AVX-512 loads), as log2.
pub const V2_ALIGN_LOG2: u8 = 6;
/// Uncompressed payloads of at least this many bytes start at a multiple of the
/// section's alignment; smaller ones (biases, norms) at a multiple of their element size
/// (capped by the alignment), which keeps zero-copy typed slices valid without paying
/// up to 63 padding bytes for a 24-byte bias.
pub const V2_ALIGN_MIN_PAYLOAD: u64 = 1024;
/// Largest alignment a v2 file may state: 4096 bytes (a page), as log2.
pub const V2_MAX_ALIGN_LOG2: u8 = 12;

/// v2 I/O dimension varint: even values are fixed sizes (`2 * size`), odd values are
/// symbolic (`2 * name_len + 1`, followed by the name; length 0 = unnamed).
pub const DIM_SYMBOLIC_BIT: u64 = 1;

/// Longest name a v2 file may hold (model, I/O, symbolic dimension, parameter key,
/// value name), in bytes.
pub const V2_MAX_NAME_BYTES: u64 = 4096;

/// Longest LEB128 varint (a u64 in 7-bit groups).
pub const VARINT_MAX_BYTES: usize = 10;
