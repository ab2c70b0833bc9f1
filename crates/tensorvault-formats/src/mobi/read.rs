//! The reader: every section parsed and checked against the bytes present, every
//! problem collected into a [`Report`] (the strict loaders return the first).

use std::collections::HashSet;
use std::io::Read;

use bytes::Bytes;
use flate2::read::GzDecoder;
use tensorvault_core::checksum::crc32;
use tensorvault_quant::affine::Affine;

use super::cursor::Cur;
use super::error::MobiError;
use super::header::{le_u32, Header};
use super::layout::*;
use super::payload::Payload;
use super::types::*;
use super::{read_v1, read_v2};

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

/// Adds one parsed operator parameter; a key the operator already has is a
/// `DuplicateParam` (pushed, the first value kept). `at` = (operator index, key offset).
pub(crate) fn add_param(
    params: &mut Vec<(String, ParamValue)>,
    key: String,
    value: ParamValue,
    (index, offset): (u32, u64),
    p: &mut Vec<MobiError>,
) {
    if params.iter().any(|(k, _)| *k == key) {
        p.push(MobiError::DuplicateParam { index, key, offset });
    } else {
        params.push((key, value));
    }
}

/// The operator of type `code` with its parsed parts, or `None` for a code this build
/// does not know (an `UnknownOperator` pushed). `at` = (operator index, record offset).
pub(crate) fn operator_of(
    code: u16,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    params: Vec<(String, ParamValue)>,
    (index, offset): (u32, u64),
    p: &mut Vec<MobiError>,
) -> Option<Operator> {
    let Some(op) = OperatorType::from_code(code) else {
        p.push(MobiError::UnknownOperator {
            index,
            value: code,
            offset,
        });
        return None;
    };
    Some(Operator {
        op,
        inputs,
        outputs,
        params,
    })
}

/// Check per-tensor affine parameters for an affine `dtype` (`None` if usable).
pub(crate) fn check_affine(
    id: u32,
    dtype: DataType,
    scale: f32,
    zero_point: i32,
    at: u64,
) -> Option<MobiError> {
    let bad = |reason| MobiError::InvalidQuantization {
        tensor_id: id,
        offset: at,
        scale,
        zero_point,
        reason,
    };
    match dtype {
        DataType::I8 => Affine::<i8>::new(scale, zero_point)
            .err()
            .map(|_| bad("scale must be finite and > 0, zero point a valid int8 code")),
        DataType::U8 => Affine::<u8>::new(scale, zero_point)
            .err()
            .map(|_| bad("scale must be finite and > 0, zero point a valid uint8 code")),
        DataType::I16 => Affine::<i16>::new(scale, zero_point)
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

/// One stored payload, located but not yet decoded.
pub(crate) struct Stored<'a> {
    /// Tensor id.
    pub(crate) id: u32,
    /// Offset of the tensor record.
    pub(crate) at: u64,
    /// Decoded bytes dtype x shape require.
    pub(crate) expected: u64,
    /// Whether `payload` is a gzip member.
    pub(crate) gzip: bool,
    /// The stored bytes (exactly `expected` of them when not gzipped).
    pub(crate) payload: &'a [u8],
    /// Offset of the payload.
    pub(crate) payload_at: u64,
}

/// The buffer a file is read from, when uncompressed payloads may share it instead of
/// being copied: the whole file (`Bytes` over a memory map or owned bytes) and whether it
/// is a memory map.
#[derive(Clone, Copy)]
pub(crate) struct Backing<'a> {
    pub(crate) file: &'a Bytes,
    pub(crate) mapped: bool,
}

/// The per-tensor and per-file bounds on decoded payloads (gzip output above all), and
/// where uncompressed payloads come from.
pub(crate) struct Budget<'a> {
    max_tensor_bytes: u64,
    max_inflated_bytes: u64,
    inflated: u64,
    backing: Option<Backing<'a>>,
}

impl<'a> Budget<'a> {
    /// The budget for a file of `file_len` bytes; uncompressed payloads share `backing`
    /// (when given) instead of being copied.
    pub(crate) fn new(opts: &ReadOptions, file_len: usize, backing: Option<Backing<'a>>) -> Self {
        // Real weights deflate by a few times at most; only near-constant data reaches
        // gzip's ~1000x. The budget follows the file (by default 64x its size plus
        // 16 MiB), never more than `max_inflated_bytes`.
        let per_file = match opts.max_inflate_ratio {
            0 => u64::MAX,
            r => (file_len as u64)
                .saturating_mul(r)
                .saturating_add(INFLATE_SLACK_BYTES),
        };
        Budget {
            max_tensor_bytes: opts.max_tensor_bytes,
            max_inflated_bytes: opts.max_inflated_bytes.min(per_file),
            inflated: 0,
            backing,
        }
    }

    /// The decoded payload, or `None` with the problem pushed (too large, over the
    /// inflate budget, bad gzip).
    pub(crate) fn decode(&mut self, s: &Stored<'_>, p: &mut Vec<MobiError>) -> Option<Payload> {
        if s.expected > self.max_tensor_bytes {
            p.push(MobiError::TensorTooLarge {
                tensor_id: s.id,
                offset: s.at,
                size: s.expected,
                limit: self.max_tensor_bytes,
            });
            return None;
        }
        if !s.gzip {
            // The payload was already bounded by the cursor (`Cur::take` checked
            // `payload_at + len` against the section's end, inside the file), so sharing
            // `[payload_at, payload_at + len)` of the same file reads nothing out of
            // bounds; `Payload::share` checks the range again, the pointer check makes
            // sure the backing is the buffer being parsed, and a miss copies.
            let shared = self.backing.and_then(|b| {
                let start = usize::try_from(s.payload_at).ok()?;
                Payload::share(b.file, start, s.payload.len(), b.mapped)
                    .filter(|shared| std::ptr::eq(shared.as_ptr(), s.payload.as_ptr()))
            });
            return Some(shared.unwrap_or_else(|| Payload::from(s.payload)));
        }
        let total = self.inflated.saturating_add(s.expected);
        if total > self.max_inflated_bytes {
            p.push(MobiError::InflateBudget {
                tensor_id: s.id,
                offset: s.at,
                total,
                limit: self.max_inflated_bytes,
            });
            return None;
        }
        self.inflated = total;
        inflate(s.payload, s.expected, s.id, s.payload_at)
            .map(Payload::from_vec)
            .map_err(|e| p.push(e))
            .ok()
    }
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

fn check_graph(
    m: &Model,
    t_offsets: &[u64],
    op_offsets: &[u64],
    name_offsets: &[(u32, u64)],
    p: &mut Vec<MobiError>,
) {
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
    for &(id, at) in name_offsets {
        if !defined.contains(&id) {
            p.push(MobiError::InvalidValueName {
                id,
                offset: at,
                reason: "no graph input, constant or operator output has this id",
            });
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
fn decode(
    b: &[u8],
    backing: Option<Backing<'_>>,
    opts: &ReadOptions,
    p: &mut Vec<MobiError>,
) -> (Option<Header>, Model) {
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
    if b.len() >= HEADER_SIZE + FOOTER_SIZE {
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
    let v2 = h.version >= VERSION_2;
    let meta_fn = if v2 {
        read_v2::metadata
    } else {
        read_v1::metadata
    };
    if let Some((meta, ins, outs)) = section(
        b,
        h.metadata_offset,
        u64::from(h.tensor_offset),
        "metadata",
        p,
        meta_fn,
    ) {
        model.metadata = meta;
        model.inputs = ins;
        model.outputs = outs;
    }
    let mut t_offsets = Vec::new();
    let mut budget = Budget::new(opts, b.len(), backing);
    let tensors_ok = section(
        b,
        h.tensor_offset,
        u64::from(h.graph_offset),
        "constant tensor",
        p,
        |c, p| {
            let align = if v2 { read_v2::alignment(c)? } else { 1 };
            let n = if v2 {
                c.varint_count(V2_TENSOR_MIN_SIZE as u64, "tensor count")?
            } else {
                let n = c.u32("tensor count")?;
                c.count(u64::from(n), TENSOR_MIN_SIZE as u64, "tensor count")?
            };
            for _ in 0..n {
                let at = c.pos as u64;
                let t = if v2 {
                    read_v2::tensor(c, align, &mut budget, p)?
                } else {
                    read_v1::tensor(c, &mut budget, p)?
                };
                if let Some(t) = t {
                    model.tensors.push(t);
                    t_offsets.push(at);
                }
            }
            Ok(())
        },
    );
    let mut op_offsets = Vec::new();
    let mut name_offsets = Vec::new();
    let graph_ok = section(b, h.graph_offset, footer, "operator graph", p, |c, p| {
        let n = if v2 {
            c.varint_count(V2_OPERATOR_MIN_SIZE as u64, "operator count")?
        } else {
            let n = c.u32("operator count")?;
            c.count(u64::from(n), OPERATOR_MIN_SIZE as u64, "operator count")?
        };
        for i in 0..n {
            let (at, op) = if v2 {
                read_v2::operator(c, i as u32, p)?
            } else {
                read_v1::operator(c, i as u32, p)?
            };
            if let Some(op) = op {
                model.operators.push(op);
                op_offsets.push(at);
            }
        }
        if v2 {
            let (names, at) = read_v2::names(c, p)?;
            model.value_names = names;
            name_offsets = at;
        }
        Ok(())
    });
    if tensors_ok.is_some() && graph_ok.is_some() {
        check_graph(&model, &t_offsets, &op_offsets, &name_offsets, p);
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
    let (header, _) = decode(bytes, None, opts, &mut problems);
    Report { header, problems }
}

/// Read and fully validate a model from bytes.
///
/// # Errors
/// The first problem [`validate`] would report.
pub fn read_with(bytes: &[u8], opts: &ReadOptions) -> Result<(Header, Model), MobiError> {
    read_backed(bytes, None, opts)
}

/// [`read_with`] over a shared buffer: uncompressed payloads point into `file` instead of
/// being copied (`mapped` says whether `file` is a memory map, see
/// [`Payload::is_mapped`]).
///
/// # Errors
/// The first problem [`validate`] would report.
pub(crate) fn read_shared(
    file: &Bytes,
    mapped: bool,
    opts: &ReadOptions,
) -> Result<(Header, Model), MobiError> {
    read_backed(file, Some(Backing { file, mapped }), opts)
}

fn read_backed(
    bytes: &[u8],
    backing: Option<Backing<'_>>,
    opts: &ReadOptions,
) -> Result<(Header, Model), MobiError> {
    let mut problems = Vec::new();
    let (header, model) = decode(bytes, backing, opts, &mut problems);
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
