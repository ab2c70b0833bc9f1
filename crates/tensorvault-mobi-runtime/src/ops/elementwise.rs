//! Elementwise kernels: unary functions, broadcasting binary and variadic operators.

use tensorvault_formats::mobi::OperatorType as Op;

use super::act::Act;
use super::{broadcast, f32_tensor, Ctx, OpError, OpResult};
use crate::tensor::Tensor;

/// erf(x) in f64 (Numerical Recipes' erfc Chebyshev fit, relative error < 1.2e-7).
pub(crate) fn erf(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - erfc
    } else {
        erfc - 1.0
    }
}

fn softplus(x: f32) -> f32 {
    // ln(1 + e^x) without overflow for large x.
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// Unary operators.
pub(crate) fn unary(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let x = cx.f32(0)?;
    let shape = cx.shape(0)?.to_vec();
    if let Some(a) = Act::of(cx.op) {
        // Relu and Clip in one vectorizable pass (the same functions fused ones use).
        let mut y = cx.buffer(x.len());
        y.copy_from_slice(x);
        a.apply(&mut y);
        return Ok(f32_tensor(shape, y));
    }
    let p = cx.params();
    let f: Box<dyn Fn(f32) -> f32> = match cx.op.op {
        Op::Relu => Box::new(|x: f32| if x < 0.0 { 0.0 } else { x }),
        Op::Sigmoid => Box::new(|x: f32| 1.0 / (1.0 + (-x).exp())),
        Op::Tanh => Box::new(f32::tanh),
        Op::Clip => {
            let (lo, hi) = (cx.float("min"), cx.float("max"));
            Box::new(move |x: f32| super::act::clip(x, lo, hi))
        }
        Op::LeakyRelu => {
            let a = cx.float("alpha");
            Box::new(move |x: f32| if x < 0.0 { a * x } else { x })
        }
        Op::HardSigmoid => {
            let (a, b) = (cx.float("alpha"), cx.float("beta"));
            Box::new(move |x: f32| (a * x + b).clamp(0.0, 1.0))
        }
        Op::HardSwish => Box::new(|x: f32| x * (x / 6.0 + 0.5).clamp(0.0, 1.0)),
        Op::Elu => {
            let a = cx.float("alpha");
            Box::new(move |x: f32| if x < 0.0 { a * x.exp_m1() } else { x })
        }
        Op::Selu => {
            let (a, g) = (cx.float("alpha"), cx.float("gamma"));
            Box::new(move |x: f32| g * if x > 0.0 { x } else { a * x.exp_m1() })
        }
        Op::Celu => {
            let a = cx.float("alpha");
            Box::new(move |x: f32| x.max(0.0) + (a * (x / a).exp_m1()).min(0.0))
        }
        Op::ThresholdedRelu => {
            let a = cx.float("alpha");
            Box::new(move |x: f32| if x > a { x } else { 0.0 })
        }
        Op::Shrink => {
            let (b, l) = (cx.float("bias"), cx.float("lambd"));
            Box::new(move |x: f32| {
                if x < -l {
                    x + b
                } else if x > l {
                    x - b
                } else {
                    0.0
                }
            })
        }
        Op::Gelu => {
            if p.str("approximate") == Some("tanh") {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                Box::new(move |x: f32| {
                    let x = f64::from(x);
                    (0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh())) as f32
                })
            } else {
                Box::new(|x: f32| {
                    let x = f64::from(x);
                    (0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))) as f32
                })
            }
        }
        Op::Erf => Box::new(|x: f32| erf(f64::from(x)) as f32),
        Op::Exp => Box::new(f32::exp),
        Op::Log => Box::new(f32::ln),
        Op::Sqrt => Box::new(f32::sqrt),
        Op::Reciprocal => Box::new(|x: f32| 1.0 / x),
        Op::Neg => Box::new(|x: f32| -x),
        Op::Abs => Box::new(f32::abs),
        Op::Floor => Box::new(f32::floor),
        Op::Ceil => Box::new(f32::ceil),
        Op::Sin => Box::new(f32::sin),
        Op::Cos => Box::new(f32::cos),
        Op::Tan => Box::new(f32::tan),
        Op::Asin => Box::new(f32::asin),
        Op::Acos => Box::new(f32::acos),
        Op::Atan => Box::new(f32::atan),
        Op::Sinh => Box::new(f32::sinh),
        Op::Cosh => Box::new(f32::cosh),
        Op::Asinh => Box::new(f32::asinh),
        Op::Acosh => Box::new(f32::acosh),
        Op::Atanh => Box::new(f32::atanh),
        Op::Softplus => Box::new(softplus),
        Op::Softsign => Box::new(|x: f32| x / (1.0 + x.abs())),
        Op::Mish => Box::new(|x: f32| x * softplus(x).tanh()),
        Op::Sign => Box::new(|x: f32| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x // 0, -0 or NaN
            }
        }),
        Op::Round => Box::new(f32::round_ties_even),
        _ => return Err(OpError::Unsupported),
    };
    Ok(f32_tensor(shape, x.iter().map(|&v| f(v)).collect()))
}

fn binary_fn(op: Op) -> fn(f32, f32) -> f32 {
    match op {
        Op::Subtract => |a, b| a - b,
        Op::Multiply => |a, b| a * b,
        Op::Divide => |a, b| a / b,
        Op::Pow => f32::powf,
        Op::PRelu => |x, s| if x < 0.0 { s * x } else { x },
        Op::Max => |a, b| {
            if a.is_nan() || b.is_nan() {
                f32::NAN
            } else {
                a.max(b)
            }
        },
        Op::Min => |a, b| {
            if a.is_nan() || b.is_nan() {
                f32::NAN
            } else {
                a.min(b)
            }
        },
        _ => |a, b| a + b,
    }
}

fn apply2(
    cx: &Ctx<'_>,
    a: (&[f32], &[usize]),
    i_b: usize,
    f: fn(f32, f32) -> f32,
) -> OpResult<(Vec<usize>, Vec<f32>)> {
    let (b, sb) = (cx.f32(i_b)?, cx.shape(i_b)?);
    let out = broadcast::shape2(a.1, sb).ok_or(OpError::Shape {
        input: i_b,
        rule: "does not broadcast with the other operand",
    })?;
    let n = cx.alloc(&out)?;
    let v = broadcast::map2(a.0, a.1, b, sb, &out, n, f);
    Ok((out, v))
}

/// Binary broadcasting operators (PRelu: the slope broadcasts to X only).
pub(crate) fn binary(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let (a, sa) = (cx.f32(0)?, cx.shape(0)?);
    if let (Ok(b), Ok(sb)) = (cx.f32(1), cx.shape(1)) {
        if sa == sb {
            // Same shapes (residual connections): one vectorizable pass into a recycled
            // buffer, without a call per element.
            let f: Option<fn(f32, f32) -> f32> = match cx.op.op {
                Op::Add => Some(|x, y| x + y),
                Op::Subtract => Some(|x, y| x - y),
                Op::Multiply => Some(|x, y| x * y),
                _ => None,
            };
            if let Some(f) = f {
                let mut v = cx.buffer(a.len());
                for ((o, &x), &y) in v.iter_mut().zip(a).zip(b) {
                    *o = f(x, y);
                }
                return Ok(f32_tensor(sa.to_vec(), v));
            }
        }
    }
    let (shape, v) = apply2(cx, (a, sa), 1, binary_fn(cx.op.op))?;
    if cx.op.op == Op::PRelu && shape != sa {
        return Err(OpError::Shape {
            input: 1,
            rule: "the slope must broadcast to X's shape (unidirectional)",
        });
    }
    Ok(f32_tensor(shape, v))
}

/// Variadic Sum, Mean, Max, Min (broadcasting, folded left to right).
pub(crate) fn variadic(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let f = binary_fn(cx.op.op);
    let mut shape = cx.shape(0)?.to_vec();
    cx.alloc(&shape)?;
    let mut acc = cx.f32(0)?.to_vec();
    for i in 1..cx.inputs.len() {
        let (s, v) = apply2(cx, (&acc, &shape), i, f)?;
        shape = s;
        acc = v;
    }
    if cx.op.op == Op::Mean {
        let k = cx.inputs.len() as f32;
        acc.iter_mut().for_each(|v| *v /= k);
    }
    Ok(f32_tensor(shape, acc))
}
