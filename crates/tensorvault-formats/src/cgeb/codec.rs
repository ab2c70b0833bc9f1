//! [`EmbeddingBinaryCodec`]: encode and decode single records.

use std::fs::File;
use std::io::Write;

use tensorvault_core::checksum::{xxh3_64, Xxh3Hasher};

/// The content hash of a whole record (`record` = header + body) as its `version`
/// defines it: v1, XXH3-64 of the bytes after the header; v2, XXH3-64 of the header with
/// the `content_hash` field zeroed followed by the bytes after it (so the flags, the
/// latency and the aux fields are covered too).
pub(crate) fn content_hash(version: u16, record: &[u8]) -> u64 {
    let (head, body) = record.split_at(l::HEADER_SIZE.min(record.len()));
    if version <= l::VERSION_V1 {
        return xxh3_64(body);
    }
    let mut zeroed = [0u8; l::HEADER_SIZE];
    zeroed[..head.len()].copy_from_slice(head);
    zeroed[l::CONTENT_HASH_OFFSET..l::CONTENT_HASH_OFFSET + 8].fill(0);
    let mut h = Xxh3Hasher::new();
    h.update(&zeroed[..head.len()]);
    h.update(body);
    h.digest()
}
use zerocopy::byteorder::{BigEndian, U16, U32, U64};
use zerocopy::IntoBytes;

use super::aux::{self, CompressionType};
use super::embedding::{FloatSlice, FusedEmbedding, FusedEmbeddingRef};
use super::error::CgebError;
use super::header::{check_header, check_record, EmbeddingHeader, RecordLayout};
use super::layout as l;
use crate::FormatError;

/// Encoder/decoder for CGEB records.
///
/// ```
/// use tensorvault_formats::cgeb::{EmbeddingBinaryCodec, FusedEmbedding};
///
/// let e = FusedEmbedding::new(vec![0.5; 1536], vec![0.125; 8], vec![3, 5]);
/// let codec = EmbeddingBinaryCodec::new();
/// let bytes = codec.encode(&e)?;
/// assert_eq!(bytes.len(), EmbeddingBinaryCodec::MIN_BUFFER_SIZE);
/// let view = codec.decode_zero_copy(&bytes)?; // no allocation
/// assert_eq!(view.vector().get(7), Some(0.5));
/// assert!(codec.decode(&bytes)?.same_content(&e));
/// # Ok::<(), tensorvault_formats::FormatError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddingBinaryCodec {
    include_aux_data: bool,
    aux_compression: Option<CompressionType>,
    verify_hash: bool,
    le_payload: bool,
    max_aux_decompressed: u64,
}

impl Default for EmbeddingBinaryCodec {
    fn default() -> Self {
        Self::new()
    }
}

impl EmbeddingBinaryCodec {
    /// Size of the seed's record without aux data (1536 / 8 / 2): 64 + 6144 + 32 + 2.
    pub const MIN_BUFFER_SIZE: usize = l::fixed_len(1536, 8, 2) as usize;

    /// Default settings: aux data dropped on encode, big-endian payload, hashes verified.
    #[must_use]
    pub const fn new() -> Self {
        EmbeddingBinaryCodec {
            include_aux_data: false,
            aux_compression: None,
            verify_hash: true,
            le_payload: false,
            max_aux_decompressed: l::DEFAULT_MAX_AUX_DECOMPRESSED,
        }
    }

    /// A codec that stores aux data, compressed as given (`None`: stored as is).
    #[must_use]
    pub const fn with_aux_data(compression: Option<CompressionType>) -> Self {
        let mut c = Self::new();
        c.include_aux_data = true;
        c.aux_compression = compression;
        c
    }

    /// Turn content-hash verification on decode on (default) or off.
    #[must_use]
    pub const fn with_verify_hash(mut self, verify: bool) -> Self {
        self.verify_hash = verify;
        self
    }

    /// Write the float payload little-endian (flag `LE_PAYLOAD`) instead of big-endian.
    #[must_use]
    pub const fn with_le_payload(mut self, le: bool) -> Self {
        self.le_payload = le;
        self
    }

    /// Largest decompressed aux data accepted on decode (default 64 MiB).
    #[must_use]
    pub const fn with_max_aux_decompressed(mut self, limit: u64) -> Self {
        self.max_aux_decompressed = limit;
        self
    }

    /// Whether decode verifies content hashes.
    #[must_use]
    pub const fn verifies_hash(&self) -> bool {
        self.verify_hash
    }

    fn stored_aux(&self, e: &FusedEmbedding) -> Option<(Vec<u8>, CompressionType)> {
        if !self.include_aux_data {
            return None;
        }
        let raw = e.aux_data.as_ref()?;
        if raw.is_empty() {
            return None;
        }
        let c = self.aux_compression.unwrap_or_default();
        Some((aux::compress(raw, c), c))
    }

    /// Exact size of the encoded record (compresses the aux data to find out, if any).
    #[must_use]
    pub fn serialized_size(&self, e: &FusedEmbedding) -> usize {
        let fixed = 64 + 4 * e.vector.len() + 4 * e.expert_weights.len() + e.selected_experts.len();
        fixed + self.stored_aux(e).map_or(0, |(a, _)| a.len())
    }

    /// Encode to a new buffer.
    ///
    /// # Errors
    /// [`CgebError::InvalidDimension`] or [`CgebError::InvalidField`] (more than 255
    /// experts, top-k above the expert count, a selected index out of range).
    pub fn encode(&self, e: &FusedEmbedding) -> Result<Vec<u8>, FormatError> {
        let mut out = Vec::new();
        self.encode_append(e, &mut out)?;
        Ok(out)
    }

    /// Encode into the start of `buffer`; returns the bytes written. Allocates nothing
    /// unless the record has aux data to compress.
    ///
    /// # Errors
    /// [`CgebError::BufferTooSmall`], or as [`EmbeddingBinaryCodec::encode`].
    pub fn encode_to_buffer(
        &self,
        e: &FusedEmbedding,
        buffer: &mut [u8],
    ) -> Result<usize, FormatError> {
        let (experts, top_k) = check_embedding(e)?;
        let aux = self.stored_aux(e);
        let fixed = l::fixed_len(e.vector.len() as u32, experts, top_k) as usize;
        let total = fixed + aux.as_ref().map_or(0, |(a, _)| a.len());
        let Some(out) = buffer.get_mut(..total) else {
            return Err(CgebError::BufferTooSmall {
                needed: total as u64,
                available: buffer.len() as u64,
            }
            .into());
        };
        self.write_record(
            e,
            experts,
            top_k,
            aux.as_ref().map(|(a, c)| (&a[..], *c)),
            out,
        );
        Ok(total)
    }

    /// Encode and append to `out` (used by the batch encoder).
    pub(crate) fn encode_append(
        &self,
        e: &FusedEmbedding,
        out: &mut Vec<u8>,
    ) -> Result<usize, FormatError> {
        let (experts, top_k) = check_embedding(e)?;
        let aux = self.stored_aux(e);
        let fixed = l::fixed_len(e.vector.len() as u32, experts, top_k) as usize;
        let total = fixed + aux.as_ref().map_or(0, |(a, _)| a.len());
        let start = out.len();
        out.resize(start + total, 0);
        self.write_record(
            e,
            experts,
            top_k,
            aux.as_ref().map(|(a, c)| (&a[..], *c)),
            &mut out[start..],
        );
        Ok(total)
    }

    /// Encode and write at the file's current position; returns the bytes written.
    ///
    /// # Errors
    /// As [`EmbeddingBinaryCodec::encode`], and [`FormatError::Io`].
    pub fn encode_to_file(&self, e: &FusedEmbedding, file: &mut File) -> Result<u64, FormatError> {
        let bytes = self.encode(e)?;
        file.write_all(&bytes)
            .map_err(FormatError::io("write", "cgeb record"))?;
        Ok(bytes.len() as u64)
    }

    /// `out` is exactly the record's length.
    fn write_record(
        &self,
        e: &FusedEmbedding,
        experts: u8,
        top_k: u8,
        aux: Option<(&[u8], CompressionType)>,
        out: &mut [u8],
    ) {
        let dim = e.vector.len() as u32;
        let fixed = l::fixed_len(dim, experts, top_k) as usize;
        let (aux_off, aux_len, code) = match aux {
            Some((a, c)) => (fixed as u64, a.len() as u64, c.code()),
            None => (0, 0, 0),
        };
        let mut flags = u16::from(code) << l::FLAG_AUX_COMPRESSION_SHIFT;
        if self.le_payload {
            flags |= l::FLAG_LE_PAYLOAD;
        }
        let w_off = l::weights_offset(dim) as usize;
        let s_off = l::selected_offset(dim, experts) as usize;
        write_floats(
            &mut out[l::VECTOR_OFFSET..w_off],
            &e.vector,
            self.le_payload,
        );
        write_floats(&mut out[w_off..s_off], &e.expert_weights, self.le_payload);
        out[s_off..fixed].copy_from_slice(&e.selected_experts);
        if let Some((a, _)) = aux {
            out[fixed..].copy_from_slice(a);
        }
        let mut header = EmbeddingHeader {
            magic: l::MAGIC,
            version: U16::<BigEndian>::new(l::VERSION),
            flags: U16::new(flags),
            dimension: U32::new(dim),
            num_experts: experts,
            top_k,
            reserved: [0; 2],
            content_hash: U64::new(0),
            pipeline_latency_us: U64::new(e.pipeline_latency_us),
            aux_data_offset: U64::new(aux_off),
            aux_data_length: U64::new(aux_len),
            padding: [0; 16],
        };
        out[..l::HEADER_SIZE].copy_from_slice(header.as_bytes());
        header.content_hash = U64::new(content_hash(l::VERSION, out));
        out[..l::HEADER_SIZE].copy_from_slice(header.as_bytes());
    }

    /// Decode into an owned [`FusedEmbedding`] (aux data decompressed).
    ///
    /// # Errors
    /// Every rejection of [`EmbeddingBinaryCodec::decode_zero_copy`], and
    /// [`CgebError::AuxCorrupt`].
    pub fn decode(&self, bytes: &[u8]) -> Result<FusedEmbedding, FormatError> {
        let r = self.decode_zero_copy(bytes)?;
        Ok(FusedEmbedding {
            vector: r.vector.to_vec(),
            expert_weights: r.expert_weights.to_vec(),
            selected_experts: r.selected_experts.to_vec(),
            pipeline_latency_us: r.pipeline_latency_us(),
            content_hash: r.content_hash(),
            aux_data: r.aux_data_decompressed(self.max_aux_decompressed)?,
        })
    }

    /// Validate and copy out the header alone (needs only the first 64 bytes).
    ///
    /// # Errors
    /// [`CgebError::BufferTooShort`], [`CgebError::InvalidMagic`],
    /// [`CgebError::UnsupportedVersion`], [`CgebError::UnknownFlags`],
    /// [`CgebError::UnsupportedCompression`], [`CgebError::InvalidDimension`],
    /// [`CgebError::InvalidField`], [`CgebError::AuxOutOfBounds`].
    pub fn decode_header(&self, bytes: &[u8]) -> Result<EmbeddingHeader, FormatError> {
        Ok(*check_header(bytes, 0)?)
    }

    /// A zero-copy view of the record at the start of `bytes` (trailing bytes after the
    /// record are ignored). Allocates nothing on success.
    ///
    /// # Errors
    /// Every rejection of [`EmbeddingBinaryCodec::decode_header`], plus
    /// [`CgebError::BufferTooShort`] / [`CgebError::AuxOutOfBounds`] for a buffer shorter
    /// than the header implies, [`CgebError::InvalidField`] for a selected expert index
    /// out of range and [`CgebError::HashMismatch`] (when verification is on).
    pub fn decode_zero_copy<'a>(
        &self,
        bytes: &'a [u8],
    ) -> Result<FusedEmbeddingRef<'a>, FormatError> {
        Ok(decode_ref(bytes, 0, self.verify_hash)?)
    }
}

/// Decode the record at the start of `bytes`, which sits at file offset `base`.
pub(crate) fn decode_ref(
    bytes: &[u8],
    base: u64,
    verify: bool,
) -> Result<FusedEmbeddingRef<'_>, CgebError> {
    let (h, lay) = check_record(bytes, base)?;
    let RecordLayout {
        dimension,
        num_experts,
        top_k,
        le_payload,
        fixed_len,
        ..
    } = lay;
    let w_off = l::VECTOR_OFFSET + 4 * dimension;
    let s_off = w_off + 4 * num_experts;
    // check_record proved fixed_len <= bytes.len() and the aux range fits.
    let vector = FloatSlice::new(&bytes[l::VECTOR_OFFSET..w_off], le_payload);
    let expert_weights = FloatSlice::new(&bytes[w_off..s_off], le_payload);
    let selected_experts = &bytes[s_off..s_off + top_k];
    if let Some(pos) = selected_experts
        .iter()
        .position(|&s| usize::from(s) >= num_experts)
    {
        return Err(CgebError::InvalidField {
            format: l::FORMAT,
            field: "selected_experts",
            offset: base + (s_off + pos) as u64,
            reason: format!(
                "index {} is not below num_experts {num_experts}",
                selected_experts[pos]
            ),
        });
    }
    if verify {
        let computed = content_hash(h.version.get(), &bytes[..lay.record_len]);
        if computed != h.content_hash.get() {
            return Err(CgebError::HashMismatch {
                offset: base,
                stored: h.content_hash.get(),
                computed,
            });
        }
    }
    let (aux_data, aux_offset) = match lay.aux {
        Some((o, n)) => (Some(&bytes[o..o + n]), base + o as u64),
        None => (None, base + fixed_len as u64),
    };
    Ok(FusedEmbeddingRef {
        header: h,
        vector,
        expert_weights,
        selected_experts,
        aux_data,
        compression: lay.compression,
        aux_offset,
        record_len: lay.record_len,
    })
}

fn write_floats(out: &mut [u8], values: &[f32], le: bool) {
    if le {
        for (o, v) in out.chunks_exact_mut(4).zip(values) {
            o.copy_from_slice(&v.to_le_bytes());
        }
    } else {
        for (o, v) in out.chunks_exact_mut(4).zip(values) {
            o.copy_from_slice(&v.to_be_bytes());
        }
    }
}

/// Check an embedding can be encoded; returns (num_experts, top_k).
fn check_embedding(e: &FusedEmbedding) -> Result<(u8, u8), CgebError> {
    let dim = e.vector.len();
    if dim == 0 || dim > l::MAX_DIMENSION as usize {
        return Err(CgebError::InvalidDimension {
            dimension: dim as u64,
            offset: l::DIMENSION_OFFSET as u64,
            reason: if dim == 0 {
                "must be at least 1"
            } else {
                "above the limit of 1048576"
            },
        });
    }
    let invalid = |field, offset: usize, reason: String| CgebError::InvalidField {
        format: l::FORMAT,
        field,
        offset: offset as u64,
        reason,
    };
    let Ok(experts) = u8::try_from(e.expert_weights.len()) else {
        return Err(invalid(
            "num_experts",
            l::NUM_EXPERTS_OFFSET,
            format!("{} expert weights, at most 255", e.expert_weights.len()),
        ));
    };
    let top_k = match u8::try_from(e.selected_experts.len()) {
        Ok(k) if k <= experts => k,
        _ => {
            return Err(invalid(
                "top_k",
                l::TOP_K_OFFSET,
                format!(
                    "{} selected experts for {experts} experts",
                    e.selected_experts.len()
                ),
            ));
        }
    };
    if let Some(s) = e.selected_experts.iter().find(|&&s| s >= experts) {
        return Err(invalid(
            "selected_experts",
            l::selected_offset(dim as u32, experts) as usize,
            format!("index {s} is not below num_experts {experts}"),
        ));
    }
    Ok((experts, top_k))
}
