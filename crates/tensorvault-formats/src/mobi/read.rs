//! The reader: every section parsed and checked against the bytes present, every
//! problem collected into a [`Report`] (the strict loaders return the first).

use std::collections::HashSet;
use std::io::Read;

use flate2::read::GzDecoder;
use tensorvault_core::checksum::crc32;
use tensorvault_quant::affine::Affine;

use super::error::MobiError;
use super::header::{le_u32, Header};
use super::layout::*;
use super::types::*;

/// Reader knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Largest decoded payload of one tensor (bounds gzip inflation as well).
    pub max_tensor_bytes: u64,
    /// Most bytes gzip inflation may produce for all tensors of one file together. Without
    /// it, many small compressed tensors, each under the per-tensor cap, let a 1 MB file
    /// reach 1 GB of memory.
    pub max_inflated_bytes: u64,
    /// Gzip output allowed per byte of file (all tensors together, on top of
    /// [`INFLATE_SLACK_BYTES`]); 0 turns this size-relative bound off.
    pub max_inflate_ratio: u64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_tensor_bytes: DEFAULT_MAX_TENSOR_BYTES,
            max_inflated_bytes: DEFAULT_MAX_INFLATED_BYTES,
            max_inflate_ratio: INFLATE_RATIO_BUDGET,
        }
    }
}

/// The result of [`validate`]: the header (when it could be read) and every problem.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The header, if magic and version were acceptable.
    pub header: Option<Header>,
    /// Every problem found, in file order (header, checksums, sections, references).
    pub problems: Vec<MobiError>,
}

impl Report {
    /// Whether the file is valid.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// A bounds-checked little-endian cursor over one section `[pos, end)` of the file.
struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cur<'a> {
    fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.pos) as u64
    }

    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], MobiError> {
        let avail = self.remaining();
        if n > avail {
            return Err(MobiError::Truncated {
                what,
                offset: self.pos as u64,
                needed: n,
                available: avail,
            });
        }
        let s = &self.b[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], MobiError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N as u64, what)?);
        Ok(a)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, MobiError> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, MobiError> {
        self.array(what).map(u16::from_le_bytes)
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, MobiError> {
        self.array(what).map(u32::from_le_bytes)
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, MobiError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A count checked against how many `min_size`-byte items could fit.
    fn count(
        &mut self,
        count: u64,
        min_size: u64,
        field: &'static str,
    ) -> Result<usize, MobiError> {
        let max = self.remaining() / min_size;
        if count > max {
            return Err(MobiError::CountTooLarge {
                field,
                count,
                offset: self.pos as u64,
                max,
            });
        }
        Ok(count as usize)
    }

    fn string(
        &mut self,
        len: u64,
        field: &'static str,
        p: &mut Vec<MobiError>,
    ) -> Result<String, MobiError> {
        let at = self.pos as u64;
        let bytes = self.take(len, field)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => {
                p.push(MobiError::InvalidUtf8 { field, offset: at });
                Ok(String::from_utf8_lossy(bytes).into_owned())
            }
        }
    }
}

fn data_type(
    raw: u16,
    field: &'static str,
    offset: u64,
    allow_gzip: bool,
    p: &mut Vec<MobiError>,
) -> Result<(DataType, bool), MobiError> {
    if raw & DTYPE_RESERVED_MASK != 0 || (!allow_gzip && raw & DTYPE_GZIP != 0) {
        let mask = if allow_gzip {
            DTYPE_RESERVED_MASK
        } else {
            DTYPE_RESERVED_MASK | DTYPE_GZIP
        };
        p.push(MobiError::ReservedBits {
            field,
            value: u64::from(raw & mask),
            offset,
        });
    }
    let code = (raw & DTYPE_ELEMENT_MASK) as u8;
    let dt = DataType::from_code(code).ok_or(MobiError::UnknownDataType {
        field,
        value: raw,
        offset,
    })?;
    Ok((dt, raw & DTYPE_GZIP != 0))
}

fn read_dims(c: &mut Cur<'_>, rank: u16) -> Result<Vec<u64>, MobiError> {
    let raw = c.take(u64::from(rank) * 8, "shape")?;
    Ok(raw
        .chunks_exact(8)
        .map(|d| u64::from_le_bytes(d.try_into().unwrap_or([0; 8])))
        .collect())
}

fn rank(c: &mut Cur<'_>) -> Result<u16, MobiError> {
    let at = c.pos as u64;
    let rank = c.u16("rank")?;
    if rank > MAX_RANK {
        return Err(MobiError::RankTooLarge {
            rank,
            offset: at,
            max: MAX_RANK,
        });
    }
    Ok(rank)
}

fn io_spec(c: &mut Cur<'_>, p: &mut Vec<MobiError>) -> Result<IoSpec, MobiError> {
    let len = c.u32("I/O spec name length")?;
    let name = c.string(u64::from(len), "I/O spec name", p)?;
    let rank = rank(c)?;
    let at = c.pos as u64;
    let raw = c.u16("I/O spec data type")?;
    let (dtype, _) = data_type(raw, "I/O spec data type", at, false, p)?;
    let shape_at = c.pos as u64;
    let shape = read_dims(c, rank)?;
    if element_count(&shape)
        .and_then(|n| n.checked_mul(dtype.size()))
        .is_none()
    {
        p.push(MobiError::ShapeOverflow { offset: shape_at });
    }
    Ok(IoSpec { name, dtype, shape })
}

fn metadata(
    c: &mut Cur<'_>,
    p: &mut Vec<MobiError>,
) -> Result<(Metadata, Vec<IoSpec>, Vec<IoSpec>), MobiError> {
    let len = c.u32("model name length")?;
    let name = c.string(u64::from(len), "model name", p)?;
    let framework_version = c.u32("framework version")?;
    let created_unix = c.u64("creation timestamp")?;
    let n_in = c.u32("input count")?;
    let n_out = c.u32("output count")?;
    let total = u64::from(n_in) + u64::from(n_out);
    c.count(total, IO_SPEC_MIN_SIZE as u64, "input count + output count")?;
    let mut specs = Vec::with_capacity(total as usize);
    for _ in 0..total {
        specs.push(io_spec(c, p)?);
    }
    let outputs = specs.split_off(n_in as usize);
    Ok((
        Metadata {
            name,
            framework_version,
            created_unix,
        },
        specs,
        outputs,
    ))
}

fn check_quant(t: &ConstantTensor, at: u64) -> Option<MobiError> {
    let q = t.quant?;
    let bad = |reason| MobiError::InvalidQuantization {
        tensor_id: t.id,
        offset: at,
        scale: q.scale,
        zero_point: q.zero_point,
        reason,
    };
    match t.dtype {
        DataType::F16 if q.scale != 1.0 || q.zero_point != 0 => {
            Some(bad("fp16 tensors store scale 1.0 and zero point 0 in v1"))
        }
        DataType::I8 => Affine::<i8>::new(q.scale, q.zero_point)
            .err()
            .map(|_| bad("scale must be finite and > 0, zero point a valid int8 code")),
        DataType::U8 => Affine::<u8>::new(q.scale, q.zero_point)
            .err()
            .map(|_| bad("scale must be finite and > 0, zero point a valid uint8 code")),
        DataType::I16 => Affine::<i16>::new(q.scale, q.zero_point)
            .err()
            .map(|_| bad("scale must be finite and > 0, zero point a valid int16 code")),
        _ => None,
    }
}

/// Inflate a gzip payload, never producing more than `expected + 1` bytes (the zip-bomb
/// cap) and growing the buffer only as bytes arrive.
fn inflate(payload: &[u8], expected: u64, id: u32, at: u64) -> Result<Vec<u8>, MobiError> {
    let mut out = Vec::new();
    let r = GzDecoder::new(payload)
        .take(expected.saturating_add(1))
        .read_to_end(&mut out);
    if let Err(e) = r {
        return Err(MobiError::Gzip {
            tensor_id: id,
            offset: at,
            reason: e.to_string(),
        });
    }
    if out.len() as u64 > expected {
        return Err(MobiError::Gzip {
            tensor_id: id,
            offset: at,
            reason: format!("inflates beyond the declared {expected} bytes (zip-bomb cap)"),
        });
    }
    if (out.len() as u64) < expected {
        return Err(MobiError::DataSizeMismatch {
            tensor_id: id,
            offset: at,
            expected,
            found: out.len() as u64,
        });
    }
    Ok(out)
}

fn tensor(
    c: &mut Cur<'_>,
    opts: &ReadOptions,
    inflated: &mut u64,
    p: &mut Vec<MobiError>,
) -> Result<Option<ConstantTensor>, MobiError> {
    let at = c.pos as u64;
    let id = c.u32("tensor id")?;
    let dt_at = c.pos as u64;
    let raw = c.u16("tensor data type")?;
    let (dtype, gzip) = data_type(raw, "tensor data type", dt_at, true, p)?;
    let rank = rank(c)?;
    let shape_at = c.pos as u64;
    let shape = read_dims(c, rank)?;
    let q_at = c.pos as u64;
    let quant = if dtype.has_quant_params() {
        let scale = f32::from_le_bytes(c.array("scale")?);
        let zero_point = i32::from_le_bytes(c.array("zero point")?);
        Some(Quantization { scale, zero_point })
    } else {
        None
    };
    let size_at = c.pos as u64;
    let data_size = c.u64("tensor data size")?;
    let payload_at = c.pos as u64;
    let payload = c.take(data_size, "tensor data")?;
    let Some(expected) = element_count(&shape).and_then(|n| n.checked_mul(dtype.size())) else {
        p.push(MobiError::ShapeOverflow { offset: shape_at });
        return Ok(None);
    };
    if expected > opts.max_tensor_bytes {
        p.push(MobiError::TensorTooLarge {
            tensor_id: id,
            offset: at,
            size: expected,
            limit: opts.max_tensor_bytes,
        });
        return Ok(None);
    }
    let data = if gzip {
        let total = inflated.saturating_add(expected);
        if total > opts.max_inflated_bytes {
            p.push(MobiError::InflateBudget {
                tensor_id: id,
                offset: at,
                total,
                limit: opts.max_inflated_bytes,
            });
            return Ok(None);
        }
        *inflated = total;
        match inflate(payload, expected, id, payload_at) {
            Ok(d) => d,
            Err(e) => {
                p.push(e);
                return Ok(None);
            }
        }
    } else if data_size != expected {
        p.push(MobiError::DataSizeMismatch {
            tensor_id: id,
            offset: size_at,
            expected,
            found: data_size,
        });
        return Ok(None);
    } else {
        payload.to_vec()
    };
    let t = ConstantTensor {
        id,
        dtype,
        shape,
        quant,
        gzip,
        data,
    };
    if let Some(e) = check_quant(&t, q_at) {
        p.push(e);
        return Ok(None);
    }
    Ok(Some(t))
}

fn param_value(c: &mut Cur<'_>, index: u32) -> Result<ParamValue, MobiError> {
    let at = c.pos as u64;
    let tag = c.u8("parameter type tag")?;
    Ok(match tag {
        TAG_INT => ParamValue::Int(i64::from_le_bytes(c.array("i64 parameter")?)),
        TAG_FLOAT => ParamValue::Float(f64::from_le_bytes(c.array("f64 parameter")?)),
        TAG_STRING => {
            let n = c.u32("string parameter length")?;
            let s_at = c.pos as u64;
            let b = c.take(u64::from(n), "string parameter")?;
            let s = std::str::from_utf8(b).map_err(|_| MobiError::InvalidUtf8 {
                field: "string parameter",
                offset: s_at,
            })?;
            ParamValue::Str(s.to_owned())
        }
        TAG_INTS | TAG_FLOATS => {
            let n = c.u32("array parameter count")?;
            let n = c.count(u64::from(n), 8, "array parameter count")?;
            let b = c.take(n as u64 * 8, "array parameter")?;
            let it = b.chunks_exact(8).map(|d| d.try_into().unwrap_or([0u8; 8]));
            if tag == TAG_INTS {
                ParamValue::Ints(it.map(i64::from_le_bytes).collect())
            } else {
                ParamValue::Floats(it.map(f64::from_le_bytes).collect())
            }
        }
        _ => {
            return Err(MobiError::UnknownParamTag {
                index,
                tag,
                offset: at,
            })
        }
    })
}

fn ids(c: &mut Cur<'_>, n: u16, what: &'static str) -> Result<Vec<u32>, MobiError> {
    let b = c.take(u64::from(n) * 4, what)?;
    Ok(b.chunks_exact(4).map(|d| le_u32(d, 0)).collect())
}

fn operator(
    c: &mut Cur<'_>,
    index: u32,
    p: &mut Vec<MobiError>,
) -> Result<(u64, Option<Operator>), MobiError> {
    let at = c.pos as u64;
    let code = c.u16("operator type")?;
    let n_in = c.u16("operator input count")?;
    let n_out = c.u16("operator output count")?;
    let n_params = c.u16("operator parameter count")?;
    let inputs = ids(c, n_in, "operator input ids")?;
    let outputs = ids(c, n_out, "operator output ids")?;
    let n_params = c.count(
        u64::from(n_params),
        PARAM_MIN_SIZE as u64,
        "operator parameter count",
    )?;
    let mut params: Vec<(String, ParamValue)> = Vec::with_capacity(n_params);
    for _ in 0..n_params {
        let k_at = c.pos as u64;
        let klen = c.u16("parameter key length")?;
        let key = c.string(u64::from(klen), "parameter key", p)?;
        let value = param_value(c, index)?;
        if params.iter().any(|(k, _)| *k == key) {
            p.push(MobiError::DuplicateParam {
                index,
                key,
                offset: k_at,
            });
        } else {
            params.push((key, value));
        }
    }
    let Some(op) = OperatorType::from_code(code) else {
        p.push(MobiError::UnknownOperator {
            index,
            value: code,
            offset: at,
        });
        return Ok((at, None));
    };
    Ok((
        at,
        Some(Operator {
            op,
            inputs,
            outputs,
            params,
        }),
    ))
}

/// Run `f` over section `[start, end)` and check that it ends exactly at `end`.
fn section<'a, T>(
    b: &'a [u8],
    start: u32,
    end: u64,
    name: &'static str,
    p: &mut Vec<MobiError>,
    f: impl FnOnce(&mut Cur<'a>, &mut Vec<MobiError>) -> Result<T, MobiError>,
) -> Option<T> {
    let end_in_file = (end as usize).min(b.len());
    let mut c = Cur {
        b,
        pos: start as usize,
        end: end_in_file,
    };
    match f(&mut c, p) {
        Ok(v) => {
            if c.pos as u64 != end {
                p.push(MobiError::SectionBoundary {
                    section: name,
                    expected: end,
                    found: c.pos as u64,
                });
            }
            Some(v)
        }
        Err(e) => {
            p.push(e);
            None
        }
    }
}

fn check_graph(m: &Model, t_offsets: &[u64], op_offsets: &[u64], p: &mut Vec<MobiError>) {
    let n_in = m.inputs.len() as u64;
    let n_io = n_in + m.outputs.len() as u64;
    let mut defined: HashSet<u32> = (0..m.inputs.len() as u32).collect();
    for (t, &at) in m.tensors.iter().zip(t_offsets) {
        if u64::from(t.id) < n_io || !defined.insert(t.id) {
            p.push(MobiError::DuplicateId {
                id: t.id,
                what: "constant tensor (ids below inputs + outputs belong to the graph I/O)",
                offset: at,
            });
        }
    }
    for (i, (op, &at)) in m.operators.iter().zip(op_offsets).enumerate() {
        for &id in &op.inputs {
            if !defined.contains(&id) {
                p.push(MobiError::MissingTensor {
                    index: i as u32,
                    id,
                    offset: at,
                });
            }
        }
        for &id in &op.outputs {
            if !defined.insert(id) {
                p.push(MobiError::DuplicateId {
                    id,
                    what: "operator output",
                    offset: at,
                });
            }
        }
    }
    for j in 0..m.outputs.len() {
        let id = m.output_id(j);
        if !defined.contains(&id) {
            p.push(MobiError::UnproducedOutput {
                index: j as u32,
                id,
            });
        }
    }
}

/// Decode everything decodable, collecting every problem.
fn decode(b: &[u8], opts: &ReadOptions, p: &mut Vec<MobiError>) -> (Option<Header>, Model) {
    let mut model = Model::default();
    let Some(h) = Header::parse_collect(b, p) else {
        return (None, model);
    };
    let offsets_ok = !p
        .iter()
        .any(|e| matches!(e, MobiError::InvalidHeaderField { .. }));
    if u64::from(h.total_size) != b.len() as u64 {
        p.push(MobiError::InvalidHeaderField {
            field: "total_size",
            value: u64::from(h.total_size),
            offset: TOTAL_SIZE_OFFSET as u64,
            reason: format!("the file has {} bytes", b.len()),
        });
    }
    if b.len() >= MIN_FILE_SIZE {
        let body = b.len() - FOOTER_SIZE;
        let stored = le_u32(b, body);
        let computed = crc32(&b[..body]);
        if stored != computed {
            p.push(MobiError::ChecksumMismatch {
                what: "file",
                offset: body as u64,
                stored,
                computed,
            });
        }
    }
    if !offsets_ok {
        return (Some(h), model);
    }
    let footer = u64::from(h.total_size) - FOOTER_SIZE as u64;
    if let Some((meta, ins, outs)) = section(
        b,
        h.metadata_offset,
        u64::from(h.tensor_offset),
        "metadata",
        p,
        metadata,
    ) {
        model.metadata = meta;
        model.inputs = ins;
        model.outputs = outs;
    }
    let mut t_offsets = Vec::new();
    let tensors_ok = section(
        b,
        h.tensor_offset,
        u64::from(h.graph_offset),
        "constant tensor",
        p,
        |c, p| {
            let n = c.u32("tensor count")?;
            let n = c.count(u64::from(n), TENSOR_MIN_SIZE as u64, "tensor count")?;
            let mut inflated = 0u64;
            // Real weights deflate by a few times at most; only near-constant data reaches
            // gzip's ~1000x. The budget follows the file (by default 64x its size plus
            // 16 MiB), never more than `max_inflated_bytes`.
            let per_file = match opts.max_inflate_ratio {
                0 => u64::MAX,
                r => (b.len() as u64)
                    .saturating_mul(r)
                    .saturating_add(INFLATE_SLACK_BYTES),
            };
            let opts = ReadOptions {
                max_inflated_bytes: opts.max_inflated_bytes.min(per_file),
                ..*opts
            };
            for _ in 0..n {
                let at = c.pos as u64;
                if let Some(t) = tensor(c, &opts, &mut inflated, p)? {
                    model.tensors.push(t);
                    t_offsets.push(at);
                }
            }
            Ok(())
        },
    );
    let mut op_offsets = Vec::new();
    let graph_ok = section(b, h.graph_offset, footer, "operator graph", p, |c, p| {
        let n = c.u32("operator count")?;
        let n = c.count(u64::from(n), OPERATOR_MIN_SIZE as u64, "operator count")?;
        for i in 0..n {
            if let (at, Some(op)) = operator(c, i as u32, p)? {
                model.operators.push(op);
                op_offsets.push(at);
            }
        }
        Ok(())
    });
    if tensors_ok.is_some() && graph_ok.is_some() {
        check_graph(&model, &t_offsets, &op_offsets, p);
        super::ops::check_operators(&model, &op_offsets, h.version, p);
    }
    if tensors_ok.is_some() {
        for (flag, bit, actual) in [
            (
                "quantized",
                FLAG_QUANTIZED,
                model.tensors.iter().any(|t| t.dtype.is_affine()),
            ),
            (
                "fp16",
                FLAG_FP16,
                model.tensors.iter().any(|t| t.dtype == DataType::F16),
            ),
        ] {
            let stored = h.flags & bit != 0;
            if stored != actual {
                p.push(MobiError::FlagMismatch {
                    flag,
                    offset: FLAGS_OFFSET as u64,
                    stored,
                    actual,
                });
            }
        }
    }
    model.optimized = h.flags & FLAG_OPTIMIZED != 0;
    (Some(h), model)
}

/// Check a whole file and report every problem found (not just the first).
pub fn validate(bytes: &[u8]) -> Report {
    validate_with(bytes, &ReadOptions::default())
}

/// [`validate`] with reader knobs.
pub fn validate_with(bytes: &[u8], opts: &ReadOptions) -> Report {
    let mut problems = Vec::new();
    let (header, _) = decode(bytes, opts, &mut problems);
    Report { header, problems }
}

/// Read and fully validate a model from bytes.
///
/// # Errors
/// The first problem [`validate`] would report.
pub fn read_with(bytes: &[u8], opts: &ReadOptions) -> Result<(Header, Model), MobiError> {
    let mut problems = Vec::new();
    let (header, model) = decode(bytes, opts, &mut problems);
    if let Some(e) = problems.into_iter().next() {
        return Err(e);
    }
    // A header is always present when there are no problems.
    header.map(|h| (h, model)).ok_or(MobiError::Truncated {
        what: "header",
        offset: 0,
        needed: HEADER_SIZE as u64,
        available: bytes.len() as u64,
    })
}
