//! Format v2 sections: varint fields, per-axis quantization, symbolic I/O dimensions,
//! aligned payloads and the value-names table (`docs/formats/mobi.md`, "v2").
//!
//! Framing errors (truncation, an impossible count, an unknown type, an axis outside the
//! rank) end the section; content errors (bad parameters, non-zero padding, UTF-8) are
//! collected and parsing goes on.

use std::collections::BTreeMap;

use tensorvault_quant::affine::AffineCode;

use super::cursor::Cur;
use super::error::MobiError;
use super::layout::*;
use super::read::{add_param, check_affine, operator_of, Budget, Stored};
use super::types::*;

fn dtype(c: &mut Cur<'_>, field: &'static str) -> Result<DataType, MobiError> {
    let at = c.pos as u64;
    let code = c.u8(field)?;
    DataType::from_code(code).ok_or(MobiError::UnknownDataType {
        field,
        value: u16::from(code),
        offset: at,
    })
}

fn rank(c: &mut Cur<'_>) -> Result<u8, MobiError> {
    let at = c.pos as u64;
    let rank = c.u8("rank")?;
    if u16::from(rank) > MAX_RANK {
        return Err(MobiError::RankTooLarge {
            rank: u16::from(rank),
            offset: at,
            max: MAX_RANK,
        });
    }
    Ok(rank)
}

fn io_spec(c: &mut Cur<'_>, p: &mut Vec<MobiError>) -> Result<IoSpec, MobiError> {
    let name = c.name("I/O spec name length", "I/O spec name", p)?;
    let dtype = dtype(c, "I/O spec data type")?;
    let rank = rank(c)?;
    let shape_at = c.pos as u64;
    let mut shape = Vec::with_capacity(usize::from(rank));
    for _ in 0..rank {
        let at = c.pos as u64;
        let v = c.varint("I/O dimension")?;
        shape.push(if v & DIM_SYMBOLIC_BIT == 0 {
            Dim::Fixed(v >> 1)
        } else {
            Dim::Symbolic(c.name_of_len(v >> 1, at, "symbolic dimension name", p)?)
        });
    }
    let mut fixed = shape.iter().filter_map(Dim::fixed);
    if fixed
        .try_fold(dtype.size(), |acc, d| acc.checked_mul(d))
        .is_none()
    {
        p.push(MobiError::ShapeOverflow { offset: shape_at });
    }
    Ok(IoSpec { name, dtype, shape })
}

/// The metadata section: model name, framework version, timestamp, I/O specs.
pub(crate) fn metadata(
    c: &mut Cur<'_>,
    p: &mut Vec<MobiError>,
) -> Result<(Metadata, Vec<IoSpec>, Vec<IoSpec>), MobiError> {
    let name = c.name("model name length", "model name", p)?;
    let framework_version = c.varint32("framework version")?;
    let created_unix = c.varint("creation timestamp")?;
    let n_in = c.varint32("input count")?;
    let n_out = c.varint32("output count")?;
    let total = u64::from(n_in) + u64::from(n_out);
    c.count(
        total,
        V2_IO_SPEC_MIN_SIZE as u64,
        "input count + output count",
    )?;
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

fn zero_point_in_range(dtype: DataType, z: i64) -> bool {
    let (lo, hi) = match dtype {
        DataType::I8 => (i8::QMIN, i8::QMAX),
        DataType::U8 => (u8::QMIN, u8::QMAX),
        _ => (i16::QMIN, i16::QMAX),
    };
    (i64::from(lo)..=i64::from(hi)).contains(&z)
}

/// Per-axis parameters: axis u8, `shape[axis]` scales f32, zero points (zigzag varints)
/// unless the flags omit them. The channel count comes from the shape and is checked
/// against the bytes left before anything is allocated.
fn per_axis(
    c: &mut Cur<'_>,
    id: u32,
    dtype: DataType,
    shape: &[u64],
    omitted: bool,
    p: &mut Vec<MobiError>,
) -> Result<Option<Quantization>, MobiError> {
    let at = c.pos as u64;
    let axis = c.u8("per-axis axis")?;
    let bad = |offset, field, channel, reason| MobiError::InvalidPerAxis {
        tensor_id: id,
        offset,
        field,
        channel,
        reason,
    };
    let Some((channels, _)) = super::tensor::axis_split(shape, axis) else {
        return Err(bad(at, "axis", 0, "axis >= rank, or an empty tensor"));
    };
    let per = if omitted { 4 } else { 5 };
    let n = c.count(channels, per, "per-axis channel count")?;
    let s_at = c.pos as u64;
    let raw = c.take(n as u64 * 4, "per-axis scales")?;
    let scales: Vec<f32> = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let mut ok = true;
    for (i, s) in scales.iter().enumerate() {
        if !(s.is_finite() && *s > 0.0) {
            p.push(bad(
                s_at + 4 * i as u64,
                "scale",
                i as u64,
                "must be finite and > 0",
            ));
            ok = false;
        }
    }
    let mut zero_points = Vec::with_capacity(n);
    for i in 0..n {
        if omitted {
            zero_points.push(0);
            continue;
        }
        let z_at = c.pos as u64;
        let z = c.zigzag("per-axis zero point")?;
        if !zero_point_in_range(dtype, z) {
            p.push(bad(
                z_at,
                "zero_point",
                i as u64,
                "outside the data type's code range",
            ));
            ok = false;
        }
        zero_points.push(z as i32);
    }
    Ok(ok.then_some(Quantization::PerAxis {
        axis,
        scales,
        zero_points,
    }))
}

fn kind_name(kind: u8) -> &'static str {
    match kind {
        QKIND_NONE => "none",
        QKIND_PER_TENSOR => "per-tensor",
        QKIND_PER_AXIS => "per-axis",
        _ => "reserved",
    }
}

/// One constant tensor record. `Ok(None)` when a content problem was pushed.
pub(crate) fn tensor(
    c: &mut Cur<'_>,
    align: usize,
    budget: &mut Budget<'_>,
    p: &mut Vec<MobiError>,
) -> Result<Option<ConstantTensor>, MobiError> {
    let at = c.pos as u64;
    let id = c.varint32("tensor id")?;
    let dtype = dtype(c, "tensor data type")?;
    let fl_at = c.pos as u64;
    let flags = c.u8("tensor flags")?;
    let mut ok = true;
    if flags & !TFLAGS_KNOWN != 0 {
        p.push(MobiError::ReservedBits {
            field: "tensor flags",
            value: u64::from(flags & !TFLAGS_KNOWN),
            offset: fl_at,
        });
        ok = false;
    }
    let gzip = flags & TFLAG_GZIP != 0;
    let kind = (flags >> TFLAG_QKIND_SHIFT) & TFLAG_QKIND_MASK;
    let omitted = flags & TFLAG_ZERO_POINTS_OMITTED != 0;
    let mismatch = MobiError::QuantKindMismatch {
        tensor_id: id,
        offset: fl_at,
        dtype: dtype.name(),
        kind: kind_name(kind),
    };
    if kind > QKIND_PER_AXIS {
        return Err(mismatch);
    }
    if (kind == QKIND_NONE) == dtype.is_affine() {
        p.push(mismatch);
        ok = false;
    }
    if omitted && kind != QKIND_PER_AXIS {
        p.push(MobiError::ReservedBits {
            field: "tensor flags (zero points omitted without per-axis)",
            value: u64::from(TFLAG_ZERO_POINTS_OMITTED),
            offset: fl_at,
        });
        ok = false;
    }
    let rank = rank(c)?;
    let shape_at = c.pos as u64;
    let mut shape = Vec::with_capacity(usize::from(rank));
    for _ in 0..rank {
        shape.push(c.varint("tensor dimension")?);
    }
    let q_at = c.pos as u64;
    let quant = match kind {
        QKIND_PER_TENSOR => {
            let scale = f32::from_le_bytes(c.array("scale")?);
            let z_at = c.pos as u64;
            let z = c.zigzag("zero point")?;
            let Ok(zero_point) = i32::try_from(z) else {
                return Err(MobiError::ValueOutOfRange {
                    field: "zero point",
                    value: z.unsigned_abs(),
                    offset: z_at,
                    max: i32::MAX as u64,
                });
            };
            if let Some(e) = check_affine(id, dtype, scale, zero_point, q_at) {
                p.push(e);
                ok = false;
            }
            Some(Quantization::PerTensor { scale, zero_point })
        }
        QKIND_PER_AXIS => {
            let q = per_axis(c, id, dtype, &shape, omitted, p)?;
            ok &= q.is_some();
            q
        }
        _ => None,
    };
    // Without a size there is no way past an uncompressed payload: a framing error.
    let expected = element_count(&shape)
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or(MobiError::ShapeOverflow { offset: shape_at })?;
    let (payload, payload_at) = if gzip {
        let stored = c.varint("tensor stored size")?;
        let payload_at = c.pos as u64;
        (c.take(stored, "tensor data (gzip)")?, payload_at)
    } else {
        let pad_at = c.pos as u64;
        let align = payload_alignment(align, dtype, expected);
        let pad = (align - c.pos % align) % align;
        let padding = c.take(pad as u64, "alignment padding")?;
        if padding.iter().any(|&b| b != 0) {
            p.push(MobiError::NonZeroPadding {
                tensor_id: id,
                offset: pad_at,
            });
            ok = false;
        }
        let payload_at = c.pos as u64;
        (c.take(expected, "tensor data")?, payload_at)
    };
    let stored = Stored {
        id,
        at,
        expected,
        gzip,
        payload,
        payload_at,
    };
    if !ok {
        return Ok(None);
    }
    let Some(data) = budget.decode(&stored, p) else {
        return Ok(None);
    };
    Ok(Some(ConstantTensor {
        id,
        dtype,
        shape,
        quant,
        gzip,
        data,
    }))
}

/// Where an uncompressed payload of `bytes` bytes must start: a multiple of the section's
/// alignment for payloads of at least [`V2_ALIGN_MIN_PAYLOAD`] bytes, else of the element
/// size (never more than the section's alignment). The writer uses the same function.
pub(crate) fn payload_alignment(section: usize, dtype: DataType, bytes: u64) -> usize {
    if bytes >= V2_ALIGN_MIN_PAYLOAD {
        section
    } else {
        section.min(dtype.size() as usize)
    }
}

/// The alignment byte at the start of the tensor section, as a byte count.
pub(crate) fn alignment(c: &mut Cur<'_>) -> Result<usize, MobiError> {
    let at = c.pos as u64;
    let log2 = c.u8("alignment log2")?;
    if log2 > V2_MAX_ALIGN_LOG2 {
        return Err(MobiError::ValueOutOfRange {
            field: "alignment log2",
            value: u64::from(log2),
            offset: at,
            max: u64::from(V2_MAX_ALIGN_LOG2),
        });
    }
    Ok(1usize << log2)
}

fn param_value(c: &mut Cur<'_>, index: u32) -> Result<ParamValue, MobiError> {
    let at = c.pos as u64;
    let tag = c.u8("parameter type tag")?;
    Ok(match tag {
        TAG_INT => ParamValue::Int(c.zigzag("i64 parameter")?),
        TAG_FLOAT => ParamValue::Float(f64::from_le_bytes(c.array("f64 parameter")?)),
        TAG_STRING => {
            let n = c.varint("string parameter length")?;
            let s_at = c.pos as u64;
            let b = c.take(n, "string parameter")?;
            let s = std::str::from_utf8(b).map_err(|_| MobiError::InvalidUtf8 {
                field: "string parameter",
                offset: s_at,
            })?;
            ParamValue::Str(s.to_owned())
        }
        TAG_INTS => {
            let n = c.varint_count(1, "array parameter count")?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(c.zigzag("i64 array parameter")?);
            }
            ParamValue::Ints(v)
        }
        TAG_FLOATS => {
            let n = c.varint_count(8, "array parameter count")?;
            let b = c.take(n as u64 * 8, "f64 array parameter")?;
            ParamValue::Floats(
                b.chunks_exact(8)
                    .map(|d| f64::from_le_bytes(d.try_into().unwrap_or([0u8; 8])))
                    .collect(),
            )
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

fn ids(c: &mut Cur<'_>, field: &'static str) -> Result<Vec<u32>, MobiError> {
    let n = c.varint_count(1, field)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(c.varint32("value id")?);
    }
    Ok(v)
}

/// One operator: `(offset, operator)`, `None` for an unknown type (pushed).
pub(crate) fn operator(
    c: &mut Cur<'_>,
    index: u32,
    p: &mut Vec<MobiError>,
) -> Result<(u64, Option<Operator>), MobiError> {
    let at = c.pos as u64;
    let code = c.varint_max("operator type", u64::from(u16::MAX))? as u16;
    let inputs = ids(c, "operator input count")?;
    let outputs = ids(c, "operator output count")?;
    let n_params = c.varint_count(V2_PARAM_MIN_SIZE as u64, "operator parameter count")?;
    let mut params: Vec<(String, ParamValue)> = Vec::with_capacity(n_params);
    for _ in 0..n_params {
        let k_at = c.pos as u64;
        let key = c.name("parameter key length", "parameter key", p)?;
        let value = param_value(c, index)?;
        add_param(&mut params, key, value, (index, k_at), p);
    }
    Ok((
        at,
        operator_of(code, inputs, outputs, params, (index, at), p),
    ))
}

/// `(value id, offset)` of each names-table entry.
pub(crate) type NameOffsets = Vec<(u32, u64)>;

/// The value-names table after the operators: entries by strictly increasing id. Returns
/// the names and each entry's offset (for the reference checks).
pub(crate) fn names(
    c: &mut Cur<'_>,
    p: &mut Vec<MobiError>,
) -> Result<(BTreeMap<u32, String>, NameOffsets), MobiError> {
    let n = c.varint_count(V2_NAME_ENTRY_MIN_SIZE as u64, "value name count")?;
    let mut names = BTreeMap::new();
    let mut at_of = Vec::with_capacity(n);
    let mut prev: Option<u32> = None;
    for _ in 0..n {
        let at = c.pos as u64;
        let id = c.varint32("named value id")?;
        let name = c.name("value name length", "value name", p)?;
        if prev.is_some_and(|q| id <= q) {
            p.push(MobiError::InvalidValueName {
                id,
                offset: at,
                reason: "ids must strictly increase",
            });
            continue;
        }
        prev = Some(id);
        names.insert(id, name);
        at_of.push((id, at));
    }
    Ok((names, at_of))
}
