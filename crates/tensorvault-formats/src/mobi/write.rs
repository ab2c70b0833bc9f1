//! The writer: exact layout, quantization and gzip on write, atomic save, and the
//! loaders that wrap the reader for paths and streams.

use std::io::{Read, Write};
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;
use tensorvault_core::atomic::AtomicFile;
use tensorvault_core::checksum::crc32;
use tensorvault_quant::affine::{to_f16_checked, Affine, AffineCode};

use super::error::MobiError;
use super::header::Header;
use super::layout::*;
use super::read::{read_with, ReadOptions};
use super::types::*;
use crate::FormatError;

/// Target of quantization on write (applied to every f32 constant tensor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantTarget {
    /// IEEE f16 (values beyond ±65504 are rejected).
    Fp16,
    /// Per-tensor affine int8.
    Int8,
    /// Per-tensor affine uint8.
    UInt8,
    /// Per-tensor affine int16.
    Int16,
}

impl QuantTarget {
    /// The stored data type.
    pub fn dtype(self) -> DataType {
        match self {
            QuantTarget::Fp16 => DataType::F16,
            QuantTarget::Int8 => DataType::I8,
            QuantTarget::UInt8 => DataType::U8,
            QuantTarget::Int16 => DataType::I16,
        }
    }
}

/// Writer options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteOptions {
    /// Quantize f32 constant tensors to this type.
    pub quantize: Option<QuantTarget>,
    /// Store every constant tensor payload gzip-compressed.
    pub gzip: bool,
}

fn affine<T: AffineCode>(
    id: u32,
    x: &[f32],
    enc: impl Fn(T) -> Vec<u8>,
) -> Result<(Quantization, Vec<u8>), MobiError> {
    let codec = |source| MobiError::Codec {
        tensor_id: id,
        source,
    };
    let a = Affine::<T>::fit(x).map_err(codec)?;
    let mut q = vec![T::default(); x.len()];
    a.quantize(x, &mut q).map_err(codec)?;
    let data = q.into_iter().flat_map(enc).collect();
    Ok((
        Quantization {
            scale: a.scale(),
            zero_point: a.zero_point(),
        },
        data,
    ))
}

/// Quantize one f32 tensor (other types are returned unchanged).
///
/// # Errors
/// [`MobiError::Codec`] for NaN/Inf weights (or fp16 overflow), and the errors of
/// [`ConstantTensor::to_f32`].
pub fn quantize_tensor(
    t: &ConstantTensor,
    target: QuantTarget,
) -> Result<ConstantTensor, MobiError> {
    if t.dtype != DataType::F32 {
        return Ok(t.clone());
    }
    let x = t.to_f32()?;
    let (quant, data) = match target {
        QuantTarget::Fp16 => {
            let mut h = vec![0u16; x.len()];
            to_f16_checked(&x, &mut h).map_err(|source| MobiError::Codec {
                tensor_id: t.id,
                source,
            })?;
            (
                Quantization {
                    scale: 1.0,
                    zero_point: 0,
                },
                h.iter().flat_map(|v| v.to_le_bytes()).collect(),
            )
        }
        QuantTarget::Int8 => affine::<i8>(t.id, &x, |v| v.to_le_bytes().to_vec())?,
        QuantTarget::UInt8 => affine::<u8>(t.id, &x, |v| vec![v])?,
        QuantTarget::Int16 => affine::<i16>(t.id, &x, |v| v.to_le_bytes().to_vec())?,
    };
    Ok(ConstantTensor {
        dtype: target.dtype(),
        quant: Some(quant),
        data,
        ..t.clone()
    })
}

fn too_big(what: impl Into<String>, reason: String) -> MobiError {
    MobiError::InvalidModel {
        what: what.into(),
        reason,
    }
}

fn put_str32(out: &mut Vec<u8>, s: &str, what: &str) -> Result<(), MobiError> {
    let n = u32::try_from(s.len())
        .map_err(|_| too_big(what, format!("{} bytes, at most u32::MAX", s.len())))?;
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn put_shape(out: &mut Vec<u8>, shape: &[u64], what: &str) -> Result<(), MobiError> {
    if shape.len() > usize::from(MAX_RANK) {
        return Err(too_big(
            what,
            format!("rank {} above the limit {MAX_RANK}", shape.len()),
        ));
    }
    out.extend_from_slice(&(shape.len() as u16).to_le_bytes());
    Ok(())
}

fn put_dims(out: &mut Vec<u8>, shape: &[u64]) {
    shape
        .iter()
        .for_each(|d| out.extend_from_slice(&d.to_le_bytes()));
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
    if t.quant.is_some() != t.dtype.has_quant_params() {
        return Err(too_big(
            what,
            format!(
                "{} tensors {} quantization parameters",
                t.dtype.name(),
                if t.dtype.has_quant_params() {
                    "need"
                } else {
                    "take no"
                }
            ),
        ));
    }
    out.extend_from_slice(&t.id.to_le_bytes());
    let raw = u16::from(t.dtype.code()) | if t.gzip { DTYPE_GZIP } else { 0 };
    out.extend_from_slice(&raw.to_le_bytes());
    put_shape(out, &t.shape, &what)?;
    put_dims(out, &t.shape);
    if let Some(q) = t.quant {
        out.extend_from_slice(&q.scale.to_le_bytes());
        out.extend_from_slice(&q.zero_point.to_le_bytes());
    }
    if t.gzip {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        let gz = enc
            .write_all(&t.data)
            .and_then(|()| enc.finish())
            .map_err(|e| too_big(what, format!("gzip: {e}")))?;
        out.extend_from_slice(&(gz.len() as u64).to_le_bytes());
        out.extend_from_slice(&gz);
    } else {
        out.extend_from_slice(&(t.data.len() as u64).to_le_bytes());
        out.extend_from_slice(&t.data);
    }
    Ok(())
}

fn write_param(out: &mut Vec<u8>, key: &str, v: &ParamValue, what: &str) -> Result<(), MobiError> {
    let k = u16::try_from(key.len())
        .map_err(|_| too_big(what, format!("parameter key of {} bytes", key.len())))?;
    out.extend_from_slice(&k.to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    let count = |n: usize| {
        u32::try_from(n).map_err(|_| too_big(what, format!("parameter {key:?} has {n} elements")))
    };
    match v {
        ParamValue::Int(i) => {
            out.push(TAG_INT);
            out.extend_from_slice(&i.to_le_bytes());
        }
        ParamValue::Float(f) => {
            out.push(TAG_FLOAT);
            out.extend_from_slice(&f.to_le_bytes());
        }
        ParamValue::Str(s) => {
            out.push(TAG_STRING);
            put_str32(out, s, what)?;
        }
        ParamValue::Ints(a) => {
            out.push(TAG_INTS);
            out.extend_from_slice(&count(a.len())?.to_le_bytes());
            a.iter()
                .for_each(|i| out.extend_from_slice(&i.to_le_bytes()));
        }
        ParamValue::Floats(a) => {
            out.push(TAG_FLOATS);
            out.extend_from_slice(&count(a.len())?.to_le_bytes());
            a.iter()
                .for_each(|f| out.extend_from_slice(&f.to_le_bytes()));
        }
    }
    Ok(())
}

fn write_operator(out: &mut Vec<u8>, i: usize, op: &Operator) -> Result<(), MobiError> {
    let what = format!("operator {i}");
    let n16 = |n: usize, f: &str| {
        u16::try_from(n).map_err(|_| too_big(what.clone(), format!("{n} {f}, at most 65535")))
    };
    out.extend_from_slice(&op.op.code().to_le_bytes());
    out.extend_from_slice(&n16(op.inputs.len(), "inputs")?.to_le_bytes());
    out.extend_from_slice(&n16(op.outputs.len(), "outputs")?.to_le_bytes());
    out.extend_from_slice(&n16(op.params.len(), "parameters")?.to_le_bytes());
    op.inputs
        .iter()
        .chain(&op.outputs)
        .for_each(|id| out.extend_from_slice(&id.to_le_bytes()));
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
        put_str32(&mut out, &self.metadata.name, "model name")?;
        out.extend_from_slice(&self.metadata.framework_version.to_le_bytes());
        out.extend_from_slice(&self.metadata.created_unix.to_le_bytes());
        let n32 = |n: usize, what: &str| {
            u32::try_from(n).map_err(|_| too_big(what, format!("{n} entries")))
        };
        out.extend_from_slice(&n32(self.inputs.len(), "inputs")?.to_le_bytes());
        out.extend_from_slice(&n32(self.outputs.len(), "outputs")?.to_le_bytes());
        for s in self.inputs.iter().chain(&self.outputs) {
            put_str32(&mut out, &s.name, "I/O spec name")?;
            put_shape(&mut out, &s.shape, &s.name)?;
            out.extend_from_slice(&u16::from(s.dtype.code()).to_le_bytes());
            put_dims(&mut out, &s.shape);
        }
        let tensor_offset = offset32(out.len(), "tensor section")?;
        out.extend_from_slice(&n32(self.tensors.len(), "tensors")?.to_le_bytes());
        for t in &self.tensors {
            write_tensor(&mut out, t)?;
        }
        let graph_offset = offset32(out.len(), "operator graph")?;
        out.extend_from_slice(&n32(self.operators.len(), "operators")?.to_le_bytes());
        for (i, op) in self.operators.iter().enumerate() {
            write_operator(&mut out, i, op)?;
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

    /// Memory-map `path` and read it with [`Model::from_bytes`].
    ///
    /// # Errors
    /// [`FormatError::Io`] opening or mapping, [`FormatError::Mobi`] for the content.
    pub fn open(path: impl AsRef<Path>) -> Result<Model, FormatError> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(FormatError::io("open", path.display()))?;
        // SAFETY: the map is read-only and private to this call; the model is copied out
        // before it is dropped. Concurrent truncation by another process is the usual
        // mmap caveat and is documented in docs/formats/mobi.md.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(FormatError::io("mmap", path.display()))?;
        Ok(Model::from_bytes(&map)?)
    }

    /// Read a whole stream (at most 4 GiB, the format's limit) and parse it.
    ///
    /// # Errors
    /// [`FormatError::Io`] reading, [`FormatError::Mobi`] for the content.
    pub fn from_reader(r: impl Read) -> Result<Model, FormatError> {
        let mut buf = Vec::new();
        r.take(u64::from(u32::MAX) + 1)
            .read_to_end(&mut buf)
            .map_err(FormatError::io("read", "<stream>"))?;
        Ok(Model::from_bytes(&buf)?)
    }
}
