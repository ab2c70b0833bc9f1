//! Cast between the element types MOBI runs (f32 and i64 carriers): `to` names the
//! target (`f32`, `f16`, `i64`, `i32`, `u32`, `i16`, `u16`, `i8`, `u8`, `bool`).

use super::{Ctx, OpError, OpResult};
use crate::tensor::{Data, Tensor};

/// An i64 wrapped to `bits` wide integers (two's complement), signed or not.
fn wrap(v: i64, bits: u32, signed: bool) -> i64 {
    if bits >= 64 {
        return v;
    }
    let m = v & ((1i64 << bits) - 1);
    if signed && m >> (bits - 1) & 1 == 1 {
        m - (1i64 << bits)
    } else {
        m
    }
}

/// Float to integer: truncation toward zero, NaN 0, beyond i64 saturated (Rust's `as`).
fn trunc(x: f32) -> i64 {
    x as i64
}

/// Cast input 0 to the `to` type.
pub(crate) fn cast(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let x = cx.input(0)?;
    let shape = x.shape.clone();
    let to = cx.params().str("to").unwrap_or("f32");
    let int = |bits: u32, signed: bool| -> OpResult<Data> {
        Ok(Data::I64(match (x.as_f32(), x.as_i64()) {
            (Some(f), _) => f.iter().map(|&v| wrap(trunc(v), bits, signed)).collect(),
            (None, Some(i)) => i.iter().map(|&v| wrap(v, bits, signed)).collect(),
            _ => return Err(dtype()),
        }))
    };
    let data = match to {
        "f32" | "f16" => {
            let round = to == "f16";
            let f = |v: f32| {
                if round {
                    half::f16::from_f32(v).to_f32()
                } else {
                    v
                }
            };
            Data::F32(match (x.as_f32(), x.as_i64()) {
                (Some(v), _) => v.iter().map(|&v| f(v)).collect(),
                (None, Some(i)) => i.iter().map(|&v| f(v as f32)).collect(),
                _ => return Err(dtype()),
            })
        }
        "bool" => Data::I64(match (x.as_f32(), x.as_i64()) {
            (Some(v), _) => v.iter().map(|&v| i64::from(v != 0.0)).collect(),
            (None, Some(i)) => i.iter().map(|&v| i64::from(v != 0)).collect(),
            _ => return Err(dtype()),
        }),
        "i64" => int(64, true)?,
        "i32" => int(32, true)?,
        "u32" => int(32, false)?,
        "i16" => int(16, true)?,
        "u16" => int(16, false)?,
        "i8" => int(8, true)?,
        "u8" => int(8, false)?,
        _ => {
            return Err(OpError::Param {
                key: "to",
                value: 0,
                rule: "not a type the runtime casts to",
            })
        }
    };
    Ok(Tensor { shape, data })
}

fn dtype() -> OpError {
    OpError::DType {
        input: 0,
        expected: "f32 or i64",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_matches_twos_complement() {
        assert_eq!(wrap(300, 8, false), 44);
        assert_eq!(wrap(200, 8, true), -56);
        assert_eq!(wrap(-1, 8, false), 255);
        assert_eq!(wrap(-1, 32, false), 4_294_967_295);
        assert_eq!(wrap(1 << 31, 32, true), -(1 << 31));
        assert_eq!(wrap(i64::MIN, 64, true), i64::MIN);
        assert_eq!(trunc(-2.9), -2);
        assert_eq!(trunc(f32::NAN), 0);
        assert_eq!(trunc(1e30), i64::MAX);
    }
}
