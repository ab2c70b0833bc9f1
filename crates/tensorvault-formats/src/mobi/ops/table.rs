//! The operator table: one [`OpSpec`] per [`OperatorType`] (the match is exhaustive, so a
//! new code cannot be added without its spec).

use super::{Allowed, InputKind, InputSpec, OpSpec, ParamDefault as D, ParamKind as K, ParamSpec};
use crate::mobi::types::OperatorType as Op;

const fn p(
    key: &'static str,
    kind: K,
    default: D,
    allowed: Allowed,
    since: u16,
    doc: &'static str,
) -> ParamSpec {
    ParamSpec {
        key,
        kind,
        default,
        allowed,
        since,
        doc,
    }
}

const fn t(name: &'static str) -> InputSpec {
    InputSpec {
        name,
        kind: InputKind::Tensor,
    }
}
const fn c(name: &'static str) -> InputSpec {
    InputSpec {
        name,
        kind: InputKind::Constant,
    }
}
const fn i(name: &'static str) -> InputSpec {
    InputSpec {
        name,
        kind: InputKind::Integer,
    }
}

const ANY_INT: Allowed = Allowed::IntRange(i64::MIN, i64::MAX);
const BOOL: Allowed = Allowed::IntRange(0, 1);
const POSITIVE: Allowed = Allowed::FloatRange(f64::MIN_POSITIVE, f64::MAX);
const ANY_INTS: Allowed = Allowed::Ints {
    len: None,
    min: i64::MIN,
};
const AXES: Allowed = ANY_INTS;

const STRIDE: ParamSpec = p(
    "stride",
    K::Ints,
    D::Ints(&[1, 1]),
    Allowed::Ints {
        len: Some(2),
        min: 1,
    },
    1,
    "[stride_h, stride_w]",
);
const PADDING: ParamSpec = p(
    "padding",
    K::Ints,
    D::Ints(&[0, 0, 0, 0]),
    Allowed::Ints {
        len: Some(4),
        min: 0,
    },
    1,
    "[top, left, bottom, right] (ONNX `pads` order for 2-D)",
);
const DILATION: ParamSpec = p(
    "dilation",
    K::Ints,
    D::Ints(&[1, 1]),
    Allowed::Ints {
        len: Some(2),
        min: 1,
    },
    1,
    "[dilation_h, dilation_w]",
);
const LAYOUT: ParamSpec = p(
    "layout",
    K::Str,
    D::Str("NCHW"),
    Allowed::Strs(&["NCHW"]),
    1,
    "activation layout; only NCHW is defined",
);
const KERNEL: ParamSpec = p(
    "kernel",
    K::Ints,
    D::Required,
    Allowed::Ints {
        len: Some(2),
        min: 1,
    },
    1,
    "[kernel_h, kernel_w]",
);
const POOL_PADDING: ParamSpec = p(
    "padding",
    K::Ints,
    D::Ints(&[0, 0, 0, 0]),
    Allowed::Ints {
        len: Some(4),
        min: 0,
    },
    2,
    "[top, left, bottom, right]; each < the kernel extent on its axis",
);
const POOL_DILATION: ParamSpec = p(
    "dilation",
    K::Ints,
    D::Ints(&[1, 1]),
    Allowed::Ints {
        len: Some(2),
        min: 1,
    },
    2,
    "[dilation_h, dilation_w]",
);
const CEIL_MODE: ParamSpec = p(
    "ceil_mode",
    K::Int,
    D::Int(0),
    BOOL,
    2,
    "1: output size rounds up (a window must start inside the input or its begin padding)",
);
const REDUCE: &[ParamSpec] = &[
    p(
        "axes",
        K::Ints,
        D::Derived("all axes (none when noop_with_empty_axes = 1)"),
        AXES,
        1,
        "axes to reduce, negative from the end, unique",
    ),
    p(
        "keepdims",
        K::Int,
        D::Int(1),
        BOOL,
        1,
        "1: reduced axes stay with size 1",
    ),
    p(
        "noop_with_empty_axes",
        K::Int,
        D::Int(0),
        BOOL,
        1,
        "1: no `axes` means identity",
    ),
];

const fn n(name: &'static str) -> InputSpec {
    InputSpec {
        name,
        kind: InputKind::Numeric,
    }
}

const ARG: &[ParamSpec] = &[
    p(
        "axis",
        K::Int,
        D::Int(0),
        ANY_INT,
        1,
        "the axis, negative from the end",
    ),
    p(
        "keepdims",
        K::Int,
        D::Int(1),
        BOOL,
        1,
        "1: the reduced axis stays with size 1",
    ),
    p(
        "select_last_index",
        K::Int,
        D::Int(0),
        BOOL,
        1,
        "1: ties give the last index, 0: the first",
    ),
];
/// Resize's parameters (ONNX Resize opset 19, with `roi`, `scales` and `sizes` as
/// constants resolved to every axis of X by the importer).
const RESIZE: &[ParamSpec] = &[
    p(
        "mode",
        K::Str,
        D::Str("nearest"),
        Allowed::Strs(&["nearest", "linear", "cubic"]),
        1,
        "nearest: one input element; linear: 2 taps per axis (bilinear over two axes, N-linear over more); cubic: 4 taps per axis (Keys kernel with `cubic_coeff_a`)",
    ),
    p(
        "coordinate_transformation_mode",
        K::Str,
        D::Str("half_pixel"),
        Allowed::Strs(&[
            "half_pixel",
            "half_pixel_symmetric",
            "pytorch_half_pixel",
            "align_corners",
            "asymmetric",
            "tf_half_pixel_for_nn",
            "tf_crop_and_resize",
        ]),
        1,
        "maps output index x to input coordinate: half_pixel (x+0.5)/s-0.5; half_pixel_symmetric the same shifted by in/2*(1-out/(s*in)); pytorch_half_pixel as half_pixel but 0 when out = 1; align_corners x*(in-1)/(out-1) (0 when out = 1); asymmetric x/s; tf_half_pixel_for_nn (x+0.5)/s; tf_crop_and_resize roi_start*(in-1) + x*(roi_end-roi_start)*(in-1)/(out-1) (out = 1: the middle of the roi)",
    ),
    p(
        "nearest_mode",
        K::Str,
        D::Str("round_prefer_floor"),
        Allowed::Strs(&["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]),
        1,
        "mode nearest: how a non-integer coordinate picks its element (an integer coordinate picks itself); the index is then clamped to [0, in-1]",
    ),
    p(
        "cubic_coeff_a",
        K::Float,
        D::Float(-0.75),
        Allowed::Any,
        1,
        "mode cubic: the kernel's a (-0.75 as PyTorch, -0.5 as TensorFlow)",
    ),
    p(
        "exclude_outside",
        K::Int,
        D::Int(0),
        BOOL,
        1,
        "1: taps outside [0, in-1] get weight 0 and the rest are renormalized to sum 1; 0: such taps read the edge element",
    ),
    p(
        "antialias",
        K::Int,
        D::Int(0),
        BOOL,
        1,
        "modes linear and cubic: 1 widens the kernel by 1/s when s < 1 (downsampling), weights renormalized to sum 1",
    ),
    p(
        "extrapolation_value",
        K::Float,
        D::Float(0.0),
        Allowed::Any,
        1,
        "tf_crop_and_resize: the value of an output whose coordinate on some axis falls outside [0, in-1]",
    ),
    p(
        "roi",
        K::Floats,
        D::Derived("0 then 1 per axis"),
        Allowed::Any,
        1,
        "tf_crop_and_resize: [start_1..start_r, end_1..end_r], normalized coordinates, 2 * rank values; ignored by the other modes",
    ),
    p(
        "scales",
        K::Floats,
        D::Derived("sizes[i] / in[i]"),
        Allowed::PositiveFloats,
        1,
        "scale factor s per axis of X (rank values), used by the coordinate mapping",
    ),
    p(
        "sizes",
        K::Ints,
        D::Derived("trunc(in[i] * scales[i])"),
        Allowed::Ints { len: None, min: 0 },
        1,
        "output size per axis of X (rank values)",
    ),
];

const NUM_AB: &[InputSpec] = &[n("A"), n("B")];
const NUM_X: &[InputSpec] = &[n("X")];

const X: &[InputSpec] = &[t("X")];
const AB: &[InputSpec] = &[t("A"), t("B")];
const VARIADIC: &[InputSpec] = &[t("X")];
const NONE: &[ParamSpec] = &[];

macro_rules! spec {
    ($op:ident, v $version:literal, $inputs:expr, in $min_in:literal..=$max_in:expr, out $min_out:literal..=$max_out:expr, $params:expr, $sem:literal) => {{
        const SPEC: OpSpec = OpSpec {
            op: Op::$op,
            version: $version,
            inputs: $inputs,
            min_inputs: $min_in,
            max_inputs: $max_in,
            min_outputs: $min_out,
            max_outputs: $max_out,
            params: $params,
            semantics: $sem,
        };
        &SPEC
    }};
}

macro_rules! unary {
    ($op:ident, $sem:literal) => {
        spec!($op, v 1, X, in 1..=1, out 1..=1, NONE, $sem)
    };
    ($op:ident, $params:expr, $sem:literal) => {
        spec!($op, v 1, X, in 1..=1, out 1..=1, $params, $sem)
    };
}

macro_rules! binary {
    ($op:ident, $sem:literal) => {
        spec!($op, v 1, AB, in 2..=2, out 1..=1, NONE, $sem)
    };
}

macro_rules! variadic {
    ($op:ident, $sem:literal) => {
        spec!($op, v 1, VARIADIC, in 1..=u16::MAX, out 1..=1, NONE, $sem)
    };
}

macro_rules! compare {
    ($op:ident, $sem:literal) => {
        spec!($op, v 1, NUM_AB, in 2..=2, out 1..=1, NONE, $sem)
    };
}

macro_rules! reduce {
    ($op:ident, $sem:literal) => {
        spec!($op, v 1, X, in 1..=1, out 1..=1, REDUCE, $sem)
    };
}

/// The specification of `op`.
#[rustfmt::skip]
pub fn spec(op: Op) -> &'static OpSpec {
    match op {
        Op::Conv2D => spec!(Conv2D, v 2, &[t("X"), c("W"), c("B")], in 2..=3, out 1..=1,
            &[STRIDE, PADDING, DILATION, LAYOUT,
              p("group", K::Int, D::Int(1), Allowed::IntRange(1, i64::MAX), 2, "groups; C and M divisible by it")],
            "ONNX Conv (opset 11+), 2-D. X [N, C, H, W]; W [M, C/group, kh, kw] (OIHW); B [M] optional. Y [N, M, Ho, Wo], Ho = floor((H + top + bottom - dilation_h*(kh-1) - 1) / stride_h) + 1."),
        Op::DepthwiseConv2D => spec!(DepthwiseConv2D, v 1, &[t("X"), c("W"), c("B")], in 2..=3, out 1..=1,
            &[STRIDE, PADDING, DILATION, LAYOUT],
            "Conv2D with group = C: X [N, C, H, W]; W [C*m, 1, kh, kw] with depth multiplier m = W.shape[0] / C (output channel k reads input channel k / m); B [C*m] optional."),
        Op::FullyConnected => spec!(FullyConnected, v 1, &[t("X"), c("W"), c("B")], in 2..=3, out 1..=1, NONE,
            "Y[..., M] = X[..., K] * W^T + B: X of rank >= 1 with last axis K, W [M, K] (ONNX Gemm with transB = 1), B [M] optional."),
        Op::MaxPool2D => spec!(MaxPool2D, v 2, X, in 1..=1, out 1..=1,
            &[KERNEL, p("stride", K::Ints, D::Ints(&[1, 1]), Allowed::Ints { len: Some(2), min: 1 }, 1, "[stride_h, stride_w]"),
              POOL_PADDING, POOL_DILATION, CEIL_MODE],
            "ONNX MaxPool (opset 12), 2-D, NCHW; padded positions never win (-inf)."),
        Op::AvgPool2D => spec!(AvgPool2D, v 2, X, in 1..=1, out 1..=1,
            &[KERNEL, p("stride", K::Ints, D::Ints(&[1, 1]), Allowed::Ints { len: Some(2), min: 1 }, 1, "[stride_h, stride_w]"),
              POOL_PADDING, POOL_DILATION, CEIL_MODE,
              p("count_include_pad", K::Int, D::Int(0), BOOL, 2, "1: the divisor counts explicit padding (never the ceil_mode overhang)")],
            "ONNX AveragePool (opset 19), 2-D, NCHW."),
        Op::BatchNorm => spec!(BatchNorm, v 1, &[t("X"), c("scale"), c("B"), c("mean"), c("var")], in 5..=5, out 1..=1,
            &[p("epsilon", K::Float, D::Float(1e-5), POSITIVE, 1, "added to the variance")],
            "ONNX BatchNormalization, inference: Y = (X - mean) / sqrt(var + epsilon) * scale + B per channel (axis 1); X rank >= 2; the four constants [C]."),
        Op::Relu => unary!(Relu, "max(x, 0); NaN stays NaN."),
        Op::Sigmoid => unary!(Sigmoid, "1 / (1 + exp(-x))."),
        Op::Tanh => unary!(Tanh, "tanh(x)."),
        Op::Softmax => spec!(Softmax, v 1, X, in 1..=1, out 1..=1,
            &[p("axis", K::Int, D::Int(-1), ANY_INT, 1, "the axis, negative from the end"),
              p("beta", K::Float, D::Float(1.0), Allowed::Any, 1, "softmax(beta * x) (TFLite)")],
            "ONNX Softmax opset 13 (one axis). Importers express opset < 13's coerce-to-2-D with Flatten/Reshape around it."),
        Op::Add => binary!(Add, "A + B, multidirectional (numpy) broadcasting."),
        Op::Subtract => binary!(Subtract, "A - B, broadcasting."),
        Op::Multiply => binary!(Multiply, "A * B, broadcasting."),
        Op::Divide => binary!(Divide, "A / B, broadcasting, IEEE (x/0 = inf or NaN)."),
        Op::Concat => spec!(Concat, v 1, VARIADIC, in 1..=u16::MAX, out 1..=1,
            &[p("axis", K::Int, D::Required, ANY_INT, 1, "the axis, negative from the end")],
            "ONNX Concat: inputs equal in every other dimension."),
        Op::Reshape => spec!(Reshape, v 2, &[t("data"), i("shape")], in 1..=2, out 1..=1,
            &[p("shape", K::Ints, D::Derived("the `shape` input"), Allowed::Ints { len: None, min: -1 }, 1, "target shape; 0 copies the input dimension, one -1 is inferred"),
              p("allowzero", K::Int, D::Int(0), BOOL, 2, "1: 0 means an empty dimension")],
            "ONNX Reshape (opset 14). The target shape is the `shape` parameter or the second input (i64, rank 1), exactly one of them."),
        Op::Flatten => spec!(Flatten, v 1, X, in 1..=1, out 1..=1,
            &[p("axis", K::Int, D::Int(1), ANY_INT, 1, "in -r..=r")],
            "ONNX Flatten: [prod(dims < axis), prod(dims >= axis)]."),
        Op::Transpose => spec!(Transpose, v 1, X, in 1..=1, out 1..=1,
            &[p("perm", K::Ints, D::Derived("the axes reversed"), Allowed::Ints { len: None, min: 0 }, 1, "a permutation of 0..rank")],
            "ONNX Transpose: output axis i is input axis perm[i]."),
        Op::MatMul => binary!(MatMul, "numpy matmul (ONNX MatMul): rank-1 operands promoted and the added axis removed, batch axes broadcast."),
        Op::Clip => unary!(Clip,
            &[p("min", K::Float, D::Float(f64::NEG_INFINITY), Allowed::Any, 1, "lower bound"),
              p("max", K::Float, D::Float(f64::INFINITY), Allowed::Any, 1, "upper bound")],
            "ONNX Clip (opset 13) with constant bounds as parameters: min(max(x, min), max); ReLU6 is min 0, max 6."),
        Op::Pad => spec!(Pad, v 1, X, in 1..=1, out 1..=1,
            &[p("pads", K::Ints, D::Required, ANY_INTS, 1, "[x1_begin, x2_begin, ..., x1_end, x2_end, ...] (ONNX order), negative crops"),
              p("mode", K::Str, D::Str("constant"), Allowed::Strs(&["constant", "reflect", "edge", "wrap"]), 1, "padding mode"),
              p("value", K::Float, D::Float(0.0), Allowed::Any, 1, "fill for constant mode"),
              p("axes", K::Ints, D::Derived("all axes"), AXES, 1, "the axes `pads` refers to")],
            "ONNX Pad (opset 19) with constant pads."),
        Op::Slice => spec!(Slice, v 1, X, in 1..=1, out 1..=1,
            &[p("starts", K::Ints, D::Required, ANY_INTS, 1, "start per sliced axis"),
              p("ends", K::Ints, D::Required, ANY_INTS, 1, "end (exclusive) per sliced axis"),
              p("axes", K::Ints, D::Derived("0..len(starts)"), AXES, 1, "sliced axes, unique"),
              p("steps", K::Ints, D::Derived("1 per axis"), ANY_INTS, 1, "non-zero; negative walks backwards")],
            "ONNX Slice (opset 13): negative starts/ends count from the end; clamped to [0, dim] (step > 0) or [-1, dim-1] (step < 0)."),
        Op::Split => spec!(Split, v 1, X, in 1..=1, out 1..=u16::MAX,
            &[p("axis", K::Int, D::Int(0), ANY_INT, 1, "the axis"),
              p("split", K::Ints, D::Derived("equal parts, one per output, the last smaller if not divisible"), Allowed::Ints { len: None, min: 0 }, 1, "sizes, one per output, summing to the axis")],
            "ONNX Split (opset 18)."),
        Op::Gather => spec!(Gather, v 1, &[t("data"), i("indices")], in 2..=2, out 1..=1,
            &[p("axis", K::Int, D::Int(0), ANY_INT, 1, "the axis of data")],
            "ONNX Gather: indices (i64/i32, any rank incl. scalar, negative from the end) replace `axis`."),
        Op::Squeeze => unary!(Squeeze,
            &[p("axes", K::Ints, D::Derived("every axis of size 1"), AXES, 1, "axes of size 1 to remove")],
            "ONNX Squeeze (opset 13) with constant axes."),
        Op::Unsqueeze => unary!(Unsqueeze,
            &[p("axes", K::Ints, D::Required, AXES, 1, "positions in the output, negative from its end")],
            "ONNX Unsqueeze (opset 13) with constant axes."),
        Op::GlobalAveragePool => unary!(GlobalAveragePool, "mean over every axis after the first two; those become 1."),
        Op::GlobalMaxPool => unary!(GlobalMaxPool, "max over every axis after the first two; those become 1."),
        Op::LeakyRelu => unary!(LeakyRelu, &[p("alpha", K::Float, D::Float(0.01), Allowed::Any, 1, "slope for x < 0")], "x < 0 ? alpha*x : x."),
        Op::HardSigmoid => unary!(HardSigmoid,
            &[p("alpha", K::Float, D::Float(0.2), Allowed::Any, 1, "slope"), p("beta", K::Float, D::Float(0.5), Allowed::Any, 1, "offset")],
            "max(0, min(1, alpha*x + beta))."),
        Op::HardSwish => unary!(HardSwish, "x * max(0, min(1, x/6 + 1/2))."),
        Op::Sum => variadic!(Sum, "elementwise sum of all inputs, broadcasting."),
        Op::Mean => variadic!(Mean, "elementwise mean of all inputs, broadcasting."),
        Op::Max => variadic!(Max, "elementwise max, broadcasting; NaN propagates."),
        Op::Min => variadic!(Min, "elementwise min, broadcasting; NaN propagates."),
        Op::Elu => unary!(Elu, &[p("alpha", K::Float, D::Float(1.0), Allowed::Any, 1, "scale for x < 0")], "x < 0 ? alpha*(exp(x)-1) : x."),
        Op::Selu => unary!(Selu,
            &[p("alpha", K::Float, D::Float(1.673_263_192_176_818_8), Allowed::Any, 1, "ONNX default"),
              p("gamma", K::Float, D::Float(1.050_701_022_148_132_3), Allowed::Any, 1, "ONNX default")],
            "gamma * (x > 0 ? x : alpha*(exp(x)-1))."),
        Op::Gelu => unary!(Gelu, &[p("approximate", K::Str, D::Str("none"), Allowed::Strs(&["none", "tanh"]), 1, "erf form or tanh approximation")],
            "ONNX Gelu (opset 20): x/2 * (1 + erf(x/sqrt 2)), or the tanh form."),
        Op::Erf => unary!(Erf, "the error function."),
        Op::Exp => unary!(Exp, "exp(x)."),
        Op::Log => unary!(Log, "natural log (x < 0: NaN, 0: -inf)."),
        Op::Sqrt => unary!(Sqrt, "sqrt(x) (x < 0: NaN)."),
        Op::Reciprocal => unary!(Reciprocal, "1/x."),
        Op::Neg => unary!(Neg, "-x."),
        Op::Abs => unary!(Abs, "|x|."),
        Op::Floor => unary!(Floor, "floor(x)."),
        Op::Ceil => unary!(Ceil, "ceil(x)."),
        Op::Pow => binary!(Pow, "A ^ B, broadcasting (powf)."),
        Op::Sin => unary!(Sin, "sin(x)."),
        Op::Cos => unary!(Cos, "cos(x)."),
        Op::PRelu => spec!(PRelu, v 1, &[t("X"), t("slope")], in 2..=2, out 1..=1, NONE,
            "x < 0 ? slope*x : x, slope broadcast to X (unidirectional)."),
        Op::Softplus => unary!(Softplus, "ln(exp(x) + 1)."),
        Op::ReduceMean => reduce!(ReduceMean, "ONNX ReduceMean (opset 18) with constant axes."),
        Op::ReduceSum => reduce!(ReduceSum, "ONNX ReduceSum (opset 13) with constant axes."),
        Op::ReduceMax => reduce!(ReduceMax, "ONNX ReduceMax (opset 18); empty reductions give -inf."),
        Op::LayerNorm => spec!(LayerNorm, v 1, &[t("X"), t("scale"), t("B")], in 2..=3, out 1..=1,
            &[p("axis", K::Int, D::Int(-1), ANY_INT, 1, "first normalized axis; axes axis..rank are normalized"),
              p("epsilon", K::Float, D::Float(1e-5), POSITIVE, 1, "added to the variance")],
            "ONNX LayerNormalization (opset 17), output Y only; scale and B broadcast to the normalized shape."),
        Op::Identity => unary!(Identity, "a copy."),
        Op::Expand => spec!(Expand, v 1, &[t("X"), i("shape")], in 1..=2, out 1..=1,
            &[p("shape", K::Ints, D::Derived("the `shape` input"), Allowed::Ints { len: None, min: 0 }, 1, "broadcast target")],
            "ONNX Expand: bidirectional broadcast of X with `shape` (parameter or i64 input, exactly one)."),
        Op::Tile => spec!(Tile, v 1, &[t("X"), i("repeats")], in 1..=2, out 1..=1,
            &[p("repeats", K::Ints, D::Derived("the `repeats` input"), Allowed::Ints { len: None, min: 0 }, 1, "one per axis")],
            "ONNX Tile (`repeats` parameter or i64 input, exactly one)."),
        Op::ReduceMin => reduce!(ReduceMin, "ONNX ReduceMin (opset 18); empty reductions give +inf."),
        Op::ReduceProd => reduce!(ReduceProd, "ONNX ReduceProd (opset 18)."),
        Op::ReduceL1 => reduce!(ReduceL1, "ONNX ReduceL1: sum |x|."),
        Op::ReduceL2 => reduce!(ReduceL2, "ONNX ReduceL2: sqrt(sum x^2)."),
        Op::ReduceSumSquare => reduce!(ReduceSumSquare, "ONNX ReduceSumSquare: sum x^2."),
        Op::ReduceLogSum => reduce!(ReduceLogSum, "ONNX ReduceLogSum: ln(sum x)."),
        Op::ReduceLogSumExp => reduce!(ReduceLogSumExp, "ONNX ReduceLogSumExp: ln(sum exp x), computed stably."),
        Op::LogSoftmax => spec!(LogSoftmax, v 1, X, in 1..=1, out 1..=1,
            &[p("axis", K::Int, D::Int(-1), ANY_INT, 1, "the axis, negative from the end")],
            "ONNX LogSoftmax opset 13 (one axis)."),
        Op::Tan => unary!(Tan, "tan(x)."),
        Op::Asin => unary!(Asin, "asin(x)."),
        Op::Acos => unary!(Acos, "acos(x)."),
        Op::Atan => unary!(Atan, "atan(x)."),
        Op::Sinh => unary!(Sinh, "sinh(x)."),
        Op::Cosh => unary!(Cosh, "cosh(x)."),
        Op::Asinh => unary!(Asinh, "asinh(x)."),
        Op::Acosh => unary!(Acosh, "acosh(x)."),
        Op::Atanh => unary!(Atanh, "atanh(x)."),
        Op::Sign => unary!(Sign, "-1, 0 or 1 (NaN stays NaN)."),
        Op::Round => unary!(Round, "round half to even."),
        Op::Softsign => unary!(Softsign, "x / (1 + |x|)."),
        Op::Celu => unary!(Celu, &[p("alpha", K::Float, D::Float(1.0), POSITIVE, 1, "> 0")], "max(0, x) + min(0, alpha*(exp(x/alpha)-1))."),
        Op::ThresholdedRelu => unary!(ThresholdedRelu, &[p("alpha", K::Float, D::Float(1.0), Allowed::Any, 1, "threshold")], "x > alpha ? x : 0."),
        Op::Mish => unary!(Mish, "x * tanh(softplus(x))."),
        Op::Shrink => unary!(Shrink,
            &[p("bias", K::Float, D::Float(0.0), Allowed::Any, 1, "shift"), p("lambd", K::Float, D::Float(0.5), Allowed::Any, 1, "threshold")],
            "x < -lambd ? x + bias : x > lambd ? x - bias : 0."),
        Op::ArgMax => spec!(ArgMax, v 1, X, in 1..=1, out 1..=1, ARG,
            "ONNX ArgMax (opset 13): i64 indices of the largest value along `axis` (the first NaN counts as largest, as numpy)."),
        Op::ArgMin => spec!(ArgMin, v 1, X, in 1..=1, out 1..=1, ARG,
            "ONNX ArgMin (opset 13): i64 indices of the smallest value along `axis` (the first NaN counts as smallest, as numpy)."),
        Op::Equal => compare!(Equal, "A == B, broadcasting; A and B both f32 or both integers; i64 output 1 (true) or 0."),
        Op::Less => compare!(Less, "A < B, broadcasting; i64 output 1 or 0 (NaN compares false)."),
        Op::Greater => compare!(Greater, "A > B, broadcasting; i64 output 1 or 0."),
        Op::LessOrEqual => compare!(LessOrEqual, "A <= B, broadcasting; i64 output 1 or 0."),
        Op::GreaterOrEqual => compare!(GreaterOrEqual, "A >= B, broadcasting; i64 output 1 or 0."),
        Op::Not => spec!(Not, v 1, NUM_X, in 1..=1, out 1..=1, NONE, "logical not: 1 where X is 0, else 0 (i64)."),
        Op::And => compare!(And, "logical and of A != 0 and B != 0, broadcasting; i64 output 1 or 0."),
        Op::Or => compare!(Or, "logical or, broadcasting; i64 output 1 or 0."),
        Op::Xor => compare!(Xor, "logical exclusive or, broadcasting; i64 output 1 or 0."),
        Op::Cast => spec!(Cast, v 1, NUM_X, in 1..=1, out 1..=1,
            &[p("to", K::Str, D::Required, Allowed::Strs(&["f32", "f16", "i64", "i32", "u32", "i16", "u16", "i8", "u8", "bool"]), 1,
                "target element type; f32 and f16 values run as f32 (f16: rounded to the nearest f16, ties to even), the others as i64")],
            "ONNX Cast between the numeric types MOBI runs: float to integer truncates toward zero (NaN gives 0, values beyond i64 saturate) and then wraps to the target width as two's complement (numpy's astype for values in range); integer to narrower integer wraps; bool is x != 0; integer to float rounds to nearest."),
        Op::Where => spec!(Where, v 1, &[n("condition"), n("X"), n("Y")], in 3..=3, out 1..=1, NONE,
            "ONNX Where: condition != 0 ? X : Y, the three broadcast together; X and Y both f32 or both integers (the output's type)."),
        Op::ConvTranspose2D => spec!(ConvTranspose2D, v 1, &[t("X"), c("W"), c("B")], in 2..=3, out 1..=1,
            &[STRIDE,
              p("padding", K::Ints, D::Ints(&[0, 0, 0, 0]), Allowed::Ints { len: Some(4), min: 0 }, 1, "[top, left, bottom, right]: rows/columns removed from the full output's borders"),
              DILATION,
              p("output_padding", K::Ints, D::Ints(&[0, 0]), Allowed::Ints { len: Some(2), min: 0 }, 1, "[h, w]: rows/columns added at the bottom/right (they get contributions only where the full output reaches them, else the bias)"),
              p("group", K::Int, D::Int(1), Allowed::IntRange(1, i64::MAX), 1, "groups; C and M divisible by it"),
              LAYOUT],
            "ONNX ConvTranspose (opset 11+), 2-D, NCHW. X [N, C, H, W]; W [C, M/group, kh, kw] (input channels first, as ONNX); B [M] optional. Input element (c, iy, ix) adds X * W[c, m, ky, kx] to output (m + group_of(c) * M/group, iy*stride_h + ky*dilation_h - top, ix*stride_w + kx*dilation_w - left) when inside the output. Y [N, M, Ho, Wo], Ho = stride_h*(H-1) + output_padding_h + dilation_h*(kh-1) + 1 - top - bottom (>= 0). Importers resolve `output_shape` and `auto_pad` (the ONNX reference's SAME_UPPER/SAME_LOWER split of the total padding) to `padding` and `output_padding`."),
        Op::Resize => spec!(Resize, v 1, X, in 1..=1, out 1..=1, RESIZE,
            "ONNX Resize (opset 19) of an f32 X of any rank, separable: the axes are resized one after another (axis 0 first), each output element a weighted sum of the taps along one axis (indices clamped to [0, in-1] unless `exclude_outside`), weights computed in f64. `scales`, `sizes` or both (one value per axis of X); the output has `sizes`, else trunc(in * scales) per axis. An axis with s = 1, out = in and (tf_crop_and_resize) roi [0, 1] is left as it is. Importers resolve ONNX's `axes` (other axes: s = 1) and `keep_aspect_ratio_policy` (both `scales` and `sizes` written); opset 10 and Upsample are asymmetric with nearest_mode floor (ceil when downsampling). Run-time limits: an antialiased kernel wider than 2^20 taps (scale below about 2e-6) is refused; a NaN coordinate (an infinite roi) reads as 0."),
    }
}
