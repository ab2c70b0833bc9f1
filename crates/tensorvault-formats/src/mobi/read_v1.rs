//! Format v1 sections: fixed-width little-endian fields (`docs/formats/mobi.md`, "v1").

use super::cursor::Cur;
use super::error::MobiError;
use super::header::le_u32;
use super::layout::*;
use super::read::{add_param, check_affine, operator_of, Budget, Stored};
use super::types::*;

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
    Ok(IoSpec {
        name,
        dtype,
        shape: shape.into_iter().map(Dim::Fixed).collect(),
    })
}

pub(crate) fn metadata(
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

fn check_quant(
    id: u32,
    dtype: DataType,
    scale: f32,
    zero_point: i32,
    at: u64,
) -> Option<MobiError> {
    if dtype == DataType::F16 {
        return (scale != 1.0 || zero_point != 0).then_some(MobiError::InvalidQuantization {
            tensor_id: id,
            offset: at,
            scale,
            zero_point,
            reason: "fp16 tensors store scale 1.0 and zero point 0 in v1",
        });
    }
    check_affine(id, dtype, scale, zero_point, at)
}

pub(crate) fn tensor(
    c: &mut Cur<'_>,
    budget: &mut Budget<'_>,
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
        Some((scale, zero_point))
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
    let stored = Stored {
        id,
        at,
        expected,
        gzip,
        payload,
        payload_at,
    };
    if !gzip && data_size != expected {
        p.push(MobiError::DataSizeMismatch {
            tensor_id: id,
            offset: size_at,
            expected,
            found: data_size,
        });
        return Ok(None);
    }
    let Some(data) = budget.decode(&stored, p) else {
        return Ok(None);
    };
    if let Some(e) = quant.and_then(|(s, z)| check_quant(id, dtype, s, z, q_at)) {
        p.push(e);
        return Ok(None);
    }
    // v1 fp16 tensors carry a fixed (1.0, 0) that v2 does not store.
    let quant = quant
        .filter(|_| dtype.is_affine())
        .map(|(scale, zero_point)| Quantization::PerTensor { scale, zero_point });
    Ok(Some(ConstantTensor {
        id,
        dtype,
        shape,
        quant,
        gzip,
        data,
    }))
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

pub(crate) fn operator(
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
        add_param(&mut params, key, value, (index, k_at), p);
    }
    Ok((
        at,
        operator_of(code, inputs, outputs, params, (index, at), p),
    ))
}
