//! Operator kernels. Each kernel reads its inputs through [`Ctx`] and reports problems as
//! an [`OpError`] naming the input position or parameter; the session adds the operator
//! index and value ids.

mod act;
mod arg;
mod broadcast;
mod buffers;
mod cast;
mod conv;
mod conv_transpose;
mod depthwise;
mod elementwise;
mod fusion;
pub mod gemm;
mod im2col;
mod linalg;
mod logic;
mod movement;
mod normalize;
mod pool;
mod prepack;
mod reduce;
mod resize;
mod window;

use tensorvault_formats::mobi::ops::Params;
use tensorvault_formats::mobi::{Operator, OperatorType as Op};

use crate::tensor::{numel, Data, Tensor};

pub(crate) use act::Act;
pub(crate) use buffers::{Buffers, Pool};
pub(crate) use fusion::{fusion_plan, Fusion};
pub(crate) use prepack::{prepack, Prepacked, Weights};

/// A kernel's failure, before the session names the operator and values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OpError {
    /// Input `input` has a shape the operator cannot take.
    Shape { input: usize, rule: &'static str },
    /// Input `input` has the wrong element type.
    DType {
        input: usize,
        expected: &'static str,
    },
    /// A parameter or integer input value that does not fit the shapes.
    Param {
        key: &'static str,
        value: i64,
        rule: &'static str,
    },
    /// An output or scratch buffer over the element limit.
    TooLarge { elements: u64 },
    /// An operator code the table defines but this runtime does not implement (only
    /// for codes newer than this crate; a test checks every current code runs).
    Unsupported,
}

pub(crate) type OpResult<T> = Result<T, OpError>;

/// One operator's inputs and limits.
pub(crate) struct Ctx<'a> {
    pub op: &'a Operator,
    pub inputs: Vec<&'a Tensor>,
    pub limit: u64,
    /// Recycled buffers for outputs and scratch.
    pub buffers: &'a Buffers,
    /// The operator's weights packed at session creation, if they were.
    pub packed: Option<&'a Prepacked>,
}

impl<'a> Ctx<'a> {
    pub fn params(&self) -> Params<'a> {
        Params::new(self.op)
    }

    pub fn input(&self, i: usize) -> OpResult<&'a Tensor> {
        self.inputs.get(i).copied().ok_or(OpError::Shape {
            input: i,
            rule: "input missing",
        })
    }

    pub fn shape(&self, i: usize) -> OpResult<&'a [usize]> {
        Ok(&self.input(i)?.shape)
    }

    /// Input `i` as f32.
    pub fn f32(&self, i: usize) -> OpResult<&'a [f32]> {
        self.input(i)?.as_f32().ok_or(OpError::DType {
            input: i,
            expected: "f32",
        })
    }

    /// Input `i` as integers (an i64 tensor).
    pub fn ints(&self, i: usize) -> OpResult<&'a [i64]> {
        self.input(i)?.as_i64().ok_or(OpError::DType {
            input: i,
            expected: "i64",
        })
    }

    /// Check that a buffer of `shape` fits the element limit; returns its element count.
    pub fn alloc(&self, shape: &[usize]) -> OpResult<usize> {
        match numel(shape) {
            Some(n) if n as u64 <= self.limit => Ok(n),
            Some(n) => Err(OpError::TooLarge { elements: n as u64 }),
            None => Err(OpError::TooLarge { elements: u64::MAX }),
        }
    }

    /// A checked element count for scratch space of `n` elements.
    pub fn scratch(&self, n: Option<usize>) -> OpResult<usize> {
        match n {
            Some(n) if n as u64 <= self.limit => Ok(n),
            Some(n) => Err(OpError::TooLarge { elements: n as u64 }),
            None => Err(OpError::TooLarge { elements: u64::MAX }),
        }
    }

    /// A buffer of `n` elements (already checked against the limit by [`Ctx::alloc`] or
    /// [`Ctx::scratch`]) with unspecified contents: the kernel writes every element.
    pub fn buffer(&self, n: usize) -> Vec<f32> {
        self.buffers.take(n)
    }

    /// Return a scratch buffer for reuse.
    pub fn give(&self, v: Vec<f32>) {
        self.buffers.give(v);
    }

    /// An int parameter (with its table default).
    pub fn int(&self, key: &'static str) -> i64 {
        self.params().int(key).unwrap_or(0)
    }

    /// A float parameter (with its table default) as f32.
    pub fn float(&self, key: &'static str) -> f32 {
        self.params().float(key).unwrap_or(0.0) as f32
    }
}

/// Normalize axis `value` of parameter `key` against `rank` (`-rank..rank`).
pub(crate) fn axis(key: &'static str, value: i64, rank: usize) -> OpResult<usize> {
    let r = rank as i64;
    if value < -r || value >= r {
        return Err(OpError::Param {
            key,
            value,
            rule: "axis out of range for the input's rank",
        });
    }
    Ok(if value < 0 { value + r } else { value } as usize)
}

/// A non-negative i64 parameter value as usize.
pub(crate) fn to_usize(key: &'static str, v: i64) -> OpResult<usize> {
    usize::try_from(v).map_err(|_| OpError::Param {
        key,
        value: v,
        rule: "must be >= 0 and fit in memory",
    })
}

pub(crate) fn f32_tensor(shape: Vec<usize>, data: Vec<f32>) -> Tensor {
    Tensor {
        shape,
        data: Data::F32(data),
    }
}

/// The output shape of `cx`'s operator when it only reshapes its input 0 (Reshape,
/// Flatten, Squeeze, Unsqueeze, Identity), `None` for any other operator.
pub(crate) fn reshape_target(cx: &Ctx<'_>) -> Option<OpResult<Vec<usize>>> {
    match cx.op.op {
        Op::Reshape | Op::Flatten | Op::Squeeze | Op::Unsqueeze | Op::Identity => {
            Some(movement::reshape_shape(cx))
        }
        _ => None,
    }
}

/// Run a Conv2D with the 2x2 / stride 2 max pool that [`fusion_plan`] fused into it (and
/// the activation `act`): the pooled tensor, or `None` when the convolution does not take
/// the pool for these shapes (before any work: the session then runs it unfused).
pub(crate) fn eval_pooled(cx: &Ctx<'_>, act: Option<Act>) -> OpResult<Option<Tensor>> {
    conv::conv2d_pooled(cx, act)
}

/// Run one operator, with the activation `act` fused into its output loop (`act` is
/// `Some` only for the operators [`fusion_plan`] picks: Conv2D, DepthwiseConv2D,
/// FullyConnected).
pub(crate) fn eval(cx: &Ctx<'_>, act: Option<Act>) -> OpResult<Vec<Tensor>> {
    let one = |t: Tensor| Ok(vec![t]);
    match cx.op.op {
        Op::Conv2D => one(conv::conv2d(cx, false, act)?),
        Op::DepthwiseConv2D => one(conv::conv2d(cx, true, act)?),
        Op::MaxPool2D => one(pool::pool2d(cx, true)?),
        Op::AvgPool2D => one(pool::pool2d(cx, false)?),
        Op::GlobalAveragePool => one(pool::global_pool(cx, false)?),
        Op::GlobalMaxPool => one(pool::global_pool(cx, true)?),
        Op::FullyConnected => one(linalg::fully_connected(cx, act)?),
        Op::MatMul => one(linalg::matmul(cx)?),
        Op::BatchNorm => one(normalize::batch_norm(cx)?),
        Op::LayerNorm => one(normalize::layer_norm(cx)?),
        Op::Softmax => one(normalize::softmax(cx, false)?),
        Op::LogSoftmax => one(normalize::softmax(cx, true)?),
        Op::Add | Op::Subtract | Op::Multiply | Op::Divide | Op::Pow | Op::PRelu => {
            one(elementwise::binary(cx)?)
        }
        Op::Sum | Op::Mean | Op::Max | Op::Min => one(elementwise::variadic(cx)?),
        Op::Concat => one(movement::concat(cx)?),
        Op::Split => movement::split(cx),
        Op::Reshape | Op::Flatten | Op::Squeeze | Op::Unsqueeze | Op::Identity => {
            one(movement::reshape_like(cx)?)
        }
        Op::Transpose | Op::Slice | Op::Pad | Op::Expand | Op::Tile => {
            one(movement::index_map(cx)?)
        }
        Op::Gather => one(movement::gather(cx)?),
        Op::ReduceMean
        | Op::ReduceSum
        | Op::ReduceMax
        | Op::ReduceMin
        | Op::ReduceProd
        | Op::ReduceL1
        | Op::ReduceL2
        | Op::ReduceSumSquare
        | Op::ReduceLogSum
        | Op::ReduceLogSumExp => one(reduce::reduce(cx)?),
        Op::ArgMax | Op::ArgMin => one(arg::arg_extreme(cx)?),
        Op::Equal | Op::Less | Op::Greater | Op::LessOrEqual | Op::GreaterOrEqual => {
            one(logic::binary(cx)?)
        }
        Op::And | Op::Or | Op::Xor => one(logic::binary(cx)?),
        Op::Not => one(logic::not(cx)?),
        Op::Where => one(logic::where_(cx)?),
        Op::Cast => one(cast::cast(cx)?),
        Op::Resize => one(resize::resize(cx)?),
        Op::ConvTranspose2D => one(conv_transpose::conv_transpose2d(cx)?),
        _ => one(elementwise::unary(cx)?),
    }
}
