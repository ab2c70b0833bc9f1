//! The writer (format v2 only: varints, per-axis parameters, payloads aligned to 64
//! bytes, the value-names table), quantization and gzip on write, atomic save, and the
//! loaders that wrap the reader for paths and streams.

use std::io::{Read, Write};
use std::path::Path;

use super::error::MobiError;
use super::header::Header;
use super::layout::*;
use super::quantize::{quantize_tensor, WriteOptions};
use super::read::{read_shared, read_with, ReadOptions};
use super::read_v2::payload_alignment;
use super::types::*;
use crate::FormatError;
use flate2::write::GzEncoder;
use flate2::Compression;
use tensorvault_core::atomic::AtomicFile;
use tensorvault_core::checksum::crc32;

fn too_big(what: impl Into<String>, reason: String) -> MobiError {
    MobiError::InvalidModel {
        what: what.into(),
        reason,
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_name(out: &mut Vec<u8>, s: &str, what: &str) -> Result<(), MobiError> {
    if s.len() as u64 > V2_MAX_NAME_BYTES {
        return Err(too_big(
            what,
            format!("{} bytes, at most {V2_MAX_NAME_BYTES}", s.len()),
        ));
    }
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn put_rank(out: &mut Vec<u8>, rank: usize, what: &str) -> Result<(), MobiError> {
    if rank > usize::from(MAX_RANK) {
        return Err(too_big(
            what,
            format!("rank {rank} above the limit {MAX_RANK}"),
        ));
    }
    out.push(rank as u8);
    Ok(())
}

fn put_io_spec(out: &mut Vec<u8>, s: &IoSpec) -> Result<(), MobiError> {
    let what = format!("I/O spec {:?}", s.name);
    put_name(out, &s.name, &what)?;
    out.push(s.dtype.code());
    put_rank(out, s.shape.len(), &what)?;
    for d in &s.shape {
        match d {
            Dim::Fixed(n) if *n < 1 << 63 => put_varint(out, n << 1),
            Dim::Fixed(n) => return Err(too_big(what, format!("dimension {n} >= 2^63"))),
            Dim::Symbolic(name) => {
                if name.len() as u64 > V2_MAX_NAME_BYTES {
                    return Err(too_big(
                        what,
                        format!("symbolic dimension of {} bytes", name.len()),
                    ));
                }
                put_varint(out, (name.len() as u64) << 1 | DIM_SYMBOLIC_BIT);
                out.extend_from_slice(name.as_bytes());
            }
        }
    }
    Ok(())
}

fn write_quant(out: &mut Vec<u8>, t: &ConstantTensor, what: &str) -> Result<u8, MobiError> {
    match (&t.quant, t.dtype.is_affine()) {
        (None, false) => Ok(QKIND_NONE << TFLAG_QKIND_SHIFT),
        (Some(Quantization::PerTensor { scale, zero_point }), true) => {
            out.extend_from_slice(&scale.to_le_bytes());
            put_zigzag(out, i64::from(*zero_point));
            Ok(QKIND_PER_TENSOR << TFLAG_QKIND_SHIFT)
        }
        (
            Some(Quantization::PerAxis {
                axis,
                scales,
                zero_points,
            }),
            true,
        ) => {
            let channels = t.shape.get(usize::from(*axis)).copied();
            if channels != Some(scales.len() as u64) || scales.len() != zero_points.len() {
                return Err(too_big(
                    what,
                    format!(
                        "per-axis along axis {axis} of shape {:?} needs one scale and zero point per slice ({} and {} given)",
                        t.shape,
                        scales.len(),
                        zero_points.len()
                    ),
                ));
            }
            out.push(*axis);
            scales
                .iter()
                .for_each(|s| out.extend_from_slice(&s.to_le_bytes()));
            let omitted = zero_points.iter().all(|&z| z == 0);
            if !omitted {
                zero_points
                    .iter()
                    .for_each(|&z| put_zigzag(out, i64::from(z)));
            }
            Ok(QKIND_PER_AXIS << TFLAG_QKIND_SHIFT
                | if omitted {
                    TFLAG_ZERO_POINTS_OMITTED
                } else {
                    0
                })
        }
        (_, affine) => Err(too_big(
            what,
            format!(
                "{} tensors {} quantization parameters",
                t.dtype.name(),
                if affine { "need" } else { "take no" }
            ),
        )),
    }
}

fn write_tensor(out: &mut Vec<u8>, t: &ConstantTensor) -> Result<(), MobiError> {
    let what = format!("tensor {}", t.id);
    let expected = element_count(&t.shape).and_then(|n| n.checked_mul(t.dtype.size()));
    if expected != Some(t.data.len() as u64) {
        return Err(too_big(
            what,
            format!(
                "{} data bytes, dtype x shape {:?} needs {expected:?}",
                t.data.len(),
                t.shape
            ),
        ));
    }
    put_varint(out, u64::from(t.id));
    out.push(t.dtype.code());
    let flags_at = out.len();
    out.push(0);
    put_rank(out, t.shape.len(), &what)?;
    t.shape.iter().for_each(|&d| put_varint(out, d));
    let mut flags = write_quant(out, t, &what)?;
    if t.gzip {
        flags |= TFLAG_GZIP;
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        let gz = enc
            .write_all(&t.data)
            .and_then(|()| enc.finish())
            .map_err(|e| too_big(what, format!("gzip: {e}")))?;
        put_varint(out, gz.len() as u64);
        out.extend_from_slice(&gz);
    } else {
        let align = payload_alignment(1 << V2_ALIGN_LOG2, t.dtype, t.data.len() as u64);
        out.resize(out.len().next_multiple_of(align), 0);
        out.extend_from_slice(&t.data);
    }
    out[flags_at] = flags;
    Ok(())
}

fn write_param(out: &mut Vec<u8>, key: &str, v: &ParamValue, what: &str) -> Result<(), MobiError> {
    put_name(out, key, what)?;
    match v {
        ParamValue::Int(i) => {
            out.push(TAG_INT);
            put_zigzag(out, *i);
        }
        ParamValue::Float(f) => {
            out.push(TAG_FLOAT);
            out.extend_from_slice(&f.to_le_bytes());
        }
        ParamValue::Str(s) => {
            out.push(TAG_STRING);
            put_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        ParamValue::Ints(a) => {
            out.push(TAG_INTS);
            put_varint(out, a.len() as u64);
            a.iter().for_each(|&i| put_zigzag(out, i));
        }
        ParamValue::Floats(a) => {
            out.push(TAG_FLOATS);
            put_varint(out, a.len() as u64);
            a.iter()
                .for_each(|f| out.extend_from_slice(&f.to_le_bytes()));
        }
    }
    Ok(())
}

fn write_operator(out: &mut Vec<u8>, i: usize, op: &Operator) -> Result<(), MobiError> {
    let what = format!("operator {i}");
    put_varint(out, u64::from(op.op.code()));
    for ids in [&op.inputs, &op.outputs] {
        put_varint(out, ids.len() as u64);
        ids.iter().for_each(|&id| put_varint(out, u64::from(id)));
    }
    put_varint(out, op.params.len() as u64);
    for (k, v) in &op.params {
        write_param(out, k, v, &what)?;
    }
    Ok(())
}

fn offset32(n: usize, what: &str) -> Result<u32, MobiError> {
    u32::try_from(n).map_err(|_| {
        too_big(
            what,
            format!("file would be {n} bytes, the format's limit is 4 GiB"),
        )
    })
}

impl Model {
    /// The model with [`WriteOptions`] applied (quantized and/or gzip-flagged tensors).
    ///
    /// # Errors
    /// As [`quantize_tensor`].
    pub fn with_options(&self, opts: &WriteOptions) -> Result<Model, MobiError> {
        let mut m = self.clone();
        for t in &mut m.tensors {
            if let Some(target) = opts.quantize {
                *t = quantize_tensor(t, target)?;
            }
            t.gzip |= opts.gzip;
        }
        Ok(m)
    }

    /// Encode the model exactly as it is, then validate the bytes (so an inconsistent
    /// graph is refused at write time, not at load time).
    ///
    /// # Errors
    /// [`MobiError::InvalidModel`] for lengths that do not fit or data that does not match
    /// its dtype and shape; any validation problem of the encoded bytes (duplicate ids,
    /// dangling operator inputs, ...).
    pub fn to_bytes(&self) -> Result<Vec<u8>, MobiError> {
        let mut out = vec![0u8; HEADER_SIZE];
        put_name(&mut out, &self.metadata.name, "model name")?;
        put_varint(&mut out, u64::from(self.metadata.framework_version));
        put_varint(&mut out, self.metadata.created_unix);
        put_varint(&mut out, self.inputs.len() as u64);
        put_varint(&mut out, self.outputs.len() as u64);
        for s in self.inputs.iter().chain(&self.outputs) {
            put_io_spec(&mut out, s)?;
        }
        let tensor_offset = offset32(out.len(), "tensor section")?;
        out.push(V2_ALIGN_LOG2);
        put_varint(&mut out, self.tensors.len() as u64);
        for t in &self.tensors {
            write_tensor(&mut out, t)?;
        }
        let graph_offset = offset32(out.len(), "operator graph")?;
        put_varint(&mut out, self.operators.len() as u64);
        for (i, op) in self.operators.iter().enumerate() {
            write_operator(&mut out, i, op)?;
        }
        put_varint(&mut out, self.value_names.len() as u64);
        for (&id, name) in &self.value_names {
            put_varint(&mut out, u64::from(id));
            put_name(&mut out, name, "value name")?;
        }
        let total_size = offset32(out.len() + FOOTER_SIZE, "file")?;
        let mut flags = 0;
        if self.tensors.iter().any(|t| t.dtype.is_affine()) {
            flags |= FLAG_QUANTIZED;
        }
        if self.tensors.iter().any(|t| t.dtype == DataType::F16) {
            flags |= FLAG_FP16;
        }
        if self.optimized {
            flags |= FLAG_OPTIMIZED;
        }
        let header = Header {
            version: VERSION,
            header_crc: 0,
            flags,
            total_size,
            metadata_offset: HEADER_SIZE as u32,
            tensor_offset,
            graph_offset,
        };
        out[..HEADER_SIZE].copy_from_slice(&header.encode());
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        read_with(
            &out,
            &ReadOptions {
                max_tensor_bytes: u64::MAX,
                max_inflated_bytes: u64::MAX,
                max_inflate_ratio: 0,
            },
        )?;
        Ok(out)
    }

    /// Apply `opts` and encode.
    ///
    /// # Errors
    /// As [`Model::with_options`] and [`Model::to_bytes`].
    pub fn to_bytes_with(&self, opts: &WriteOptions) -> Result<Vec<u8>, MobiError> {
        self.with_options(opts)?.to_bytes()
    }

    /// Apply `opts`, encode and write to `path` atomically (temp file, fsync, rename,
    /// fsync of the directory). Returns the file size.
    ///
    /// # Errors
    /// [`FormatError::Mobi`] from encoding, [`FormatError::Core`]/[`FormatError::Io`] from
    /// the write.
    pub fn save(&self, path: impl AsRef<Path>, opts: &WriteOptions) -> Result<u64, FormatError> {
        let path = path.as_ref();
        let bytes = self.to_bytes_with(opts)?;
        let f = AtomicFile::create(path)?;
        f.file()
            .write_all(&bytes)
            .map_err(FormatError::io("write", path.display()))?;
        f.commit()?;
        Ok(bytes.len() as u64)
    }

    /// Read and fully validate a model from bytes (tensors keep their stored types).
    ///
    /// # Errors
    /// The first problem [`super::validate`] reports.
    pub fn from_bytes(bytes: &[u8]) -> Result<Model, MobiError> {
        read_with(bytes, &ReadOptions::default()).map(|(_, m)| m)
    }

    /// Memory-map `path` read-only and read it as [`Model::from_bytes`] does, without
    /// copying the weights: every uncompressed payload is a [`super::Payload`] over the
    /// shared map (`is_mapped()`), which stays mapped while any tensor (or a runtime
    /// session holding one) is alive. Gzip payloads are inflated into owned memory.
    ///
    /// Every payload is bounded by the reader before it is shared (inside its section,
    /// inside the file, the file's length equal to the header's `total_size`, both
    /// CRC32s verified), so a map never exposes bytes outside the file. The usual mmap
    /// caveat applies: another process truncating the file while it is mapped makes
    /// later reads of the lost pages fault (SIGBUS); see docs/formats/mobi.md.
    ///
    /// # Errors
    /// [`FormatError::Io`] opening or mapping, [`FormatError::Mobi`] for the content.
    pub fn open(path: impl AsRef<Path>) -> Result<Model, FormatError> {
        Self::open_with_header(path).map(|(_, m)| m)
    }

    /// [`Model::open`], also returning the header (format version, flags).
    ///
    /// # Errors
    /// As [`Model::open`].
    pub fn open_with_header(path: impl AsRef<Path>) -> Result<(Header, Model), FormatError> {
        let path = path.as_ref();
        let file = FormatError::open_regular(path)?;
        // SAFETY: the map is read-only (private to this process, never written through)
        // and immutable for Rust's purposes as long as no one modifies the file; that
        // another process truncating or rewriting the file while it is mapped is
        // outside our control is the usual mmap caveat, documented in
        // docs/formats/mobi.md ("Reading from a memory map").
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(FormatError::io("mmap", path.display()))?;
        let shared = bytes::Bytes::from_owner(map);
        Ok(read_shared(&shared, true, &ReadOptions::default())?)
    }

    /// Read and fully validate a model from an owned buffer, without copying its
    /// uncompressed payloads: each tensor's [`super::Payload`] shares `bytes` (kept alive
    /// while any tensor is), gzip payloads are inflated into memory of their own.
    ///
    /// # Errors
    /// The first problem [`super::validate`] reports.
    pub fn from_vec(bytes: Vec<u8>) -> Result<Model, MobiError> {
        let shared = bytes::Bytes::from(bytes);
        read_shared(&shared, false, &ReadOptions::default()).map(|(_, m)| m)
    }

    /// Read a whole stream (at most 4 GiB, the format's limit) and parse it; the
    /// payloads share the buffer read ([`Model::from_vec`]).
    ///
    /// # Errors
    /// [`FormatError::Io`] reading, [`FormatError::Mobi`] for the content.
    pub fn from_reader(r: impl Read) -> Result<Model, FormatError> {
        let mut buf = Vec::new();
        r.take(u64::from(u32::MAX) + 1)
            .read_to_end(&mut buf)
            .map_err(FormatError::io("read", "<stream>"))?;
        Ok(Model::from_vec(buf)?)
    }
}
