//! The owned record ([`FusedEmbedding`]) and the zero-copy view ([`FusedEmbeddingRef`]).

use zerocopy::byteorder::{BigEndian, LittleEndian, F32};
use zerocopy::{FromBytes, IntoBytes};

use super::aux::{self, CompressionType};
use super::error::CgebError;
use super::header::EmbeddingHeader;

/// A fused embedding: the vector, the gating network's expert weights, the indices of the
/// selected (top-k) experts, the pipeline latency and optional aux data (e.g. ColBERT
/// token vectors, as bytes).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FusedEmbedding {
    /// The embedding vector (its length is the record's `dimension`).
    pub vector: Vec<f32>,
    /// One weight per expert (its length is `num_experts`, at most 255).
    pub expert_weights: Vec<f32>,
    /// Indices of the selected experts (its length is `top_k`; each `< num_experts`).
    pub selected_experts: Vec<u8>,
    /// Pipeline latency in microseconds.
    pub pipeline_latency_us: u64,
    /// The content hash: set by decoding (the stored hash); ignored by encoding, which
    /// computes it from the bytes it writes.
    pub content_hash: u64,
    /// Optional aux data, uncompressed.
    pub aux_data: Option<Vec<u8>>,
}

impl FusedEmbedding {
    /// The seed's dimension.
    pub const DIMENSION: usize = 1536;
    /// The seed's expert count.
    pub const NUM_EXPERTS: usize = 8;
    /// The seed's top-k.
    pub const TOP_K: usize = 2;

    /// An embedding without aux data.
    #[must_use]
    pub fn new(vector: Vec<f32>, expert_weights: Vec<f32>, selected_experts: Vec<u8>) -> Self {
        FusedEmbedding {
            vector,
            expert_weights,
            selected_experts,
            ..Default::default()
        }
    }

    /// Bit-exact equality of everything but `content_hash` (NaN payloads included).
    #[must_use]
    pub fn same_content(&self, other: &Self) -> bool {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        bits(&self.vector) == bits(&other.vector)
            && bits(&self.expert_weights) == bits(&other.expert_weights)
            && self.selected_experts == other.selected_experts
            && self.pipeline_latency_us == other.pipeline_latency_us
            && self.aux_data == other.aux_data
    }
}

/// A borrowed run of f32 values in either stored byte order; reading a value converts
/// it, nothing is copied until asked.
#[derive(Debug, Clone, Copy)]
pub enum FloatSlice<'a> {
    /// Big-endian values (the v1 default).
    Big(&'a [F32<BigEndian>]),
    /// Little-endian values (records with `LE_PAYLOAD`).
    Little(&'a [F32<LittleEndian>]),
}

impl<'a> FloatSlice<'a> {
    pub(crate) fn new(bytes: &'a [u8], le: bool) -> Self {
        // Unaligned element types: these casts only fail on a length that is not a
        // multiple of 4, which the layout rules out; fall back to empty defensively.
        if le {
            FloatSlice::Little(<[F32<LittleEndian>]>::ref_from_bytes(bytes).unwrap_or(&[]))
        } else {
            FloatSlice::Big(<[F32<BigEndian>]>::ref_from_bytes(bytes).unwrap_or(&[]))
        }
    }

    /// Number of values.
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            FloatSlice::Big(s) => s.len(),
            FloatSlice::Little(s) => s.len(),
        }
    }

    /// Whether there are no values.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`, if in range.
    #[must_use]
    pub fn get(&self, i: usize) -> Option<f32> {
        match self {
            FloatSlice::Big(s) => s.get(i).map(|x| x.get()),
            FloatSlice::Little(s) => s.get(i).map(|x| x.get()),
        }
    }

    /// The values in order.
    pub fn iter(&self) -> impl Iterator<Item = f32> + 'a {
        let (big, little): (&'a [F32<BigEndian>], &'a [F32<LittleEndian>]) = match *self {
            FloatSlice::Big(s) => (s, &[]),
            FloatSlice::Little(s) => (&[], s),
        };
        big.iter()
            .map(|x| x.get())
            .chain(little.iter().map(|x| x.get()))
    }

    /// Copy the values into `out` (which must have [`FloatSlice::len`] elements; extra
    /// elements on either side are ignored).
    pub fn copy_to_slice(&self, out: &mut [f32]) {
        match self {
            FloatSlice::Big(s) => out.iter_mut().zip(*s).for_each(|(o, x)| *o = x.get()),
            FloatSlice::Little(s) => out.iter_mut().zip(*s).for_each(|(o, x)| *o = x.get()),
        }
    }

    /// The values as a new vector (allocates).
    #[must_use]
    pub fn to_vec(&self) -> Vec<f32> {
        let mut v = vec![0f32; self.len()];
        self.copy_to_slice(&mut v);
        v
    }

    /// The stored bytes, as they are on disk (e.g. for a direct-to-GPU copy).
    #[must_use]
    pub fn as_bytes(&self) -> &'a [u8] {
        match *self {
            FloatSlice::Big(s) => s.as_bytes(),
            FloatSlice::Little(s) => s.as_bytes(),
        }
    }

    /// The values as a plain `&[f32]` without any copy: `Some` only for a little-endian
    /// payload on a little-endian host, stored at a 4-byte-aligned address.
    #[must_use]
    pub fn as_native(&self) -> Option<&'a [f32]> {
        match *self {
            FloatSlice::Little(s) if cfg!(target_endian = "little") => {
                bytemuck::try_cast_slice(s.as_bytes()).ok()
            }
            _ => None,
        }
    }
}

/// A zero-copy view of one record inside a buffer (a memory map, a read buffer).
/// Building it allocates nothing; [`FusedEmbeddingRef::to_owned`] and
/// [`FusedEmbeddingRef::aux_data_decompressed`] do.
#[derive(Debug, Clone, Copy)]
pub struct FusedEmbeddingRef<'a> {
    pub(crate) header: &'a EmbeddingHeader,
    pub(crate) vector: FloatSlice<'a>,
    pub(crate) expert_weights: FloatSlice<'a>,
    pub(crate) selected_experts: &'a [u8],
    pub(crate) aux_data: Option<&'a [u8]>,
    pub(crate) compression: CompressionType,
    pub(crate) aux_offset: u64,
    pub(crate) record_len: usize,
}

impl<'a> FusedEmbeddingRef<'a> {
    /// The header, in place.
    #[must_use]
    pub fn header(&self) -> &'a EmbeddingHeader {
        self.header
    }

    /// The vector, without copying.
    #[must_use]
    pub fn vector(&self) -> FloatSlice<'a> {
        self.vector
    }

    /// The expert weights, without copying.
    #[must_use]
    pub fn expert_weights(&self) -> FloatSlice<'a> {
        self.expert_weights
    }

    /// The selected expert indices.
    #[must_use]
    pub fn selected_experts(&self) -> &'a [u8] {
        self.selected_experts
    }

    /// Pipeline latency in microseconds.
    #[must_use]
    pub fn pipeline_latency_us(&self) -> u64 {
        self.header.pipeline_latency_us.get()
    }

    /// The stored content hash.
    #[must_use]
    pub fn content_hash(&self) -> u64 {
        self.header.content_hash.get()
    }

    /// Whether this record has aux data.
    #[must_use]
    pub fn has_aux_data(&self) -> bool {
        self.aux_data.is_some()
    }

    /// The aux data as stored (compressed if [`FusedEmbeddingRef::aux_compression`] says so).
    #[must_use]
    pub fn aux_data_stored(&self) -> Option<&'a [u8]> {
        self.aux_data
    }

    /// How the aux data is stored.
    #[must_use]
    pub fn aux_compression(&self) -> CompressionType {
        self.compression
    }

    /// Bytes of the record, from its header to the end of its aux data.
    #[must_use]
    pub fn record_len(&self) -> usize {
        self.record_len
    }

    /// The aux data, decompressed (allocates at most `limit` bytes).
    ///
    /// # Errors
    /// [`CgebError::AuxCorrupt`] if the stored bytes do not decompress to their declared
    /// length or declare more than `limit`.
    pub fn aux_data_decompressed(&self, limit: u64) -> Result<Option<Vec<u8>>, CgebError> {
        self.aux_data
            .map(|a| aux::decompress(a, self.compression, limit, self.aux_offset))
            .transpose()
    }

    /// Convert to an owned [`FusedEmbedding`] (allocates; aux data decompressed with the
    /// default limit).
    ///
    /// # Errors
    /// As [`FusedEmbeddingRef::aux_data_decompressed`].
    pub fn to_owned(&self) -> Result<FusedEmbedding, CgebError> {
        Ok(FusedEmbedding {
            vector: self.vector.to_vec(),
            expert_weights: self.expert_weights.to_vec(),
            selected_experts: self.selected_experts.to_vec(),
            pipeline_latency_us: self.pipeline_latency_us(),
            content_hash: self.content_hash(),
            aux_data: self.aux_data_decompressed(super::layout::DEFAULT_MAX_AUX_DECOMPRESSED)?,
        })
    }
}
