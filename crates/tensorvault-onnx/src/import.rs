//! The import driver: bounded read, protobuf decode, opset check, graph inputs and
//! initializers, the walk over the nodes in topological order (fold, else lower, else a
//! typed error), and the graph outputs.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;
use std::rc::Rc;

use prost::Message;
use tensorvault_formats::mobi::{DataType, Model, ModelBuilder, OperatorType, WriteOptions};

use crate::ctx::{Ctx, Dyn, Val};
use crate::error::OnnxError;
use crate::graph::plan;
use crate::limits::{dtype as dt, DEFAULT_MAX_MODEL_BYTES, MAX_OPSET, MIN_OPSET, PROGRESS_EVERY};
use crate::mapping::{lowering, takes_integers};
use crate::proto::tensor_shape_proto::dimension::Value as DimValue;
use crate::proto::type_proto::Value as TypeValue;
use crate::proto::{ModelProto, ValueInfoProto};
use crate::stats::ImportStats;
use crate::tensor::{dtype_name, Const};
use crate::weights::WeightsMode;
use crate::{fold, symbolic, tensor};

/// Import options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    /// How weights are stored.
    pub weights: WeightsMode,
    /// Replace every symbolic (or unknown) dimension of the graph inputs with this size
    /// (MOBI v1 has fixed dimensions only). `None`: such inputs are refused.
    pub pin_symbolic_dims: Option<u64>,
    /// Refuse models larger than this many bytes (before reading them).
    pub max_model_bytes: u64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            weights: WeightsMode::F32,
            pin_symbolic_dims: None,
            max_model_bytes: DEFAULT_MAX_MODEL_BYTES,
        }
    }
}

/// Read a model file, refusing it before reading if it is larger than `max_bytes`.
///
/// # Errors
/// [`OnnxError::Io`], [`OnnxError::TooLarge`].
pub fn read_model(path: &Path, max_bytes: u64) -> Result<Vec<u8>, OnnxError> {
    let io = |op| {
        let path = path.display().to_string();
        move |source| OnnxError::Io { op, path, source }
    };
    let f = std::fs::File::open(path).map_err(io("open"))?;
    let size = f.metadata().map_err(io("stat"))?.len();
    if size > max_bytes {
        return Err(OnnxError::TooLarge {
            size,
            limit: max_bytes,
        });
    }
    let mut buf = Vec::new();
    // The file may grow after the stat: never read more than the limit + 1.
    f.take(max_bytes + 1)
        .read_to_end(&mut buf)
        .map_err(io("read"))?;
    if buf.len() as u64 > max_bytes {
        return Err(OnnxError::TooLarge {
            size: buf.len() as u64,
            limit: max_bytes,
        });
    }
    Ok(buf)
}

/// Decode the protobuf (framing, lengths and nesting checked by prost).
///
/// # Errors
/// [`OnnxError::TooLarge`], [`OnnxError::Decode`].
pub fn decode(bytes: &[u8], max_bytes: u64) -> Result<ModelProto, OnnxError> {
    if bytes.len() as u64 > max_bytes {
        return Err(OnnxError::TooLarge {
            size: bytes.len() as u64,
            limit: max_bytes,
        });
    }
    ModelProto::decode(bytes).map_err(|e| OnnxError::Decode {
        detail: e.to_string(),
    })
}

fn default_opset(m: &ModelProto) -> Result<i64, OnnxError> {
    let v = m
        .opset_import
        .iter()
        .find(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
        .and_then(|o| o.version)
        .unwrap_or(0);
    if !(MIN_OPSET..=MAX_OPSET).contains(&v) {
        return Err(OnnxError::UnsupportedOpset {
            version: v,
            min: MIN_OPSET,
            max: MAX_OPSET,
        });
    }
    Ok(v)
}

/// A graph input's or output's element type and dims (`None` for a symbolic or unknown
/// dim).
type IoType = (i32, Vec<Option<u64>>);

fn io_type(v: &ValueInfoProto, what: &'static str) -> Result<IoType, OnnxError> {
    let name = v.name.clone().unwrap_or_default();
    let missing = || OnnxError::MissingType {
        what,
        name: name.clone(),
    };
    let Some(TypeValue::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err(missing());
    };
    let shape = t.shape.as_ref().ok_or_else(missing)?;
    let code = t.elem_type.unwrap_or(0);
    let mut dims = Vec::new();
    for (i, d) in shape.dim.iter().enumerate() {
        dims.push(match d.value {
            Some(DimValue::DimValue(x)) => {
                Some(u64::try_from(x).map_err(|_| OnnxError::BadDims {
                    tensor: name.clone(),
                    field: "shape",
                    index: i,
                    value: x,
                    why: "negative",
                })?)
            }
            _ => None,
        });
    }
    Ok((code, dims))
}

fn mobi_io_dtype(code: i32, what: &'static str, name: &str) -> Result<DataType, OnnxError> {
    match code {
        dt::FLOAT => Ok(DataType::F32),
        dt::INT64 => Ok(DataType::I64),
        // Fed as i64 at run time (booleans as 0/1).
        dt::INT32 => Ok(DataType::I32),
        dt::BOOL => Ok(DataType::Bool),
        dt::INT8 | dt::UINT8 | dt::INT16 | dt::UINT16 | dt::UINT32 | dt::UINT64 => {
            Ok(DataType::I64)
        }
        _ => Err(OnnxError::UnsupportedDtype {
            what,
            name: name.into(),
            dtype: code,
            dtype_name: dtype_name(code),
        }),
    }
}

/// Import an ONNX model (the bytes of a `.onnx` file) as a MOBI model.
///
/// # Errors
/// Any [`OnnxError`]: nothing is partial, the model is returned whole or not at all.
pub fn import(bytes: &[u8], opts: &ImportOptions) -> Result<Model, OnnxError> {
    import_with_report(bytes, opts, &mut |_, _| {}).map(|(m, _)| m)
}

/// [`import`], also returning what was folded, with `progress(done, total)` called as
/// nodes are processed.
///
/// # Errors
/// As [`import`].
pub fn import_with_report(
    bytes: &[u8],
    opts: &ImportOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Model, ImportStats), OnnxError> {
    let model = decode(bytes, opts.max_model_bytes)?;
    let g = model.graph.as_ref().ok_or(OnnxError::NoGraph)?;
    if opts.pin_symbolic_dims.is_some() || !symbolic::has_symbolic_inputs(g) {
        return build(&model, opts, opts.pin_symbolic_dims, progress);
    }
    // Symbolic input dimensions: walk the graph with them pinned to two sizes; what
    // differs between the two models depends on them (see symbolic.rs).
    let (a, stats) = build(&model, opts, Some(symbolic::PIN_A), progress)?;
    let (b, _) = build(&model, opts, Some(symbolic::PIN_B), &mut |_, _| {})?;
    Ok((symbolic::reconcile(g, a, b)?, stats))
}

/// One walk over the graph with symbolic input dimensions pinned to `pin`.
fn build(
    model: &ModelProto,
    opts: &ImportOptions,
    pin: Option<u64>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Model, ImportStats), OnnxError> {
    let opset = default_opset(model)?;
    let g = model.graph.as_ref().ok_or(OnnxError::NoGraph)?;
    if let Some(s) = g.sparse_initializer.first() {
        let name = s
            .values
            .as_ref()
            .and_then(|v| v.name.clone())
            .unwrap_or_default();
        return Err(OnnxError::UnsupportedDtype {
            what: "sparse initializer",
            name,
            dtype: 0,
            dtype_name: "sparse",
        });
    }
    let mut consts = Vec::with_capacity(g.initializer.len().min(1 << 16));
    let mut names: HashSet<&str> = HashSet::new();
    for t in &g.initializer {
        let name = t.name.as_deref().unwrap_or("");
        if !names.insert(name) {
            return Err(OnnxError::DuplicateValue {
                name: name.into(),
                by: "an initializer".into(),
            });
        }
        consts.push((name, Const::from_proto(t, name)?));
    }
    let name = g
        .name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "onnx-model".into());
    let mut b = ModelBuilder::new(name).framework_version(opset as u32);
    let mut defined: Vec<&str> = names.iter().copied().collect();
    let mut inputs = Vec::new();
    for v in &g.input {
        let name = v.name.as_deref().unwrap_or("");
        if names.contains(name) {
            continue; // an initializer listed as input (IR < 4 style): a constant
        }
        if defined.contains(&name) {
            return Err(OnnxError::DuplicateValue {
                name: name.into(),
                by: "a graph input".into(),
            });
        }
        let (code, dims) = io_type(v, "graph input")?;
        let dtype = mobi_io_dtype(code, "graph input", name)?;
        let mut shape = Vec::with_capacity(dims.len());
        for (index, d) in dims.iter().enumerate() {
            shape.push(match (d, pin) {
                (Some(x), _) => *x,
                (None, Some(p)) => p,
                (None, None) => {
                    let symbol = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                        Some(TypeValue::TensorType(t)) => t
                            .shape
                            .as_ref()
                            .and_then(|s| s.dim.get(index))
                            .and_then(|d| match &d.value {
                                Some(DimValue::DimParam(p)) => Some(p.clone()),
                                _ => None,
                            }),
                        _ => None,
                    };
                    return Err(OnnxError::SymbolicDim {
                        input: name.into(),
                        index,
                        symbol: symbol.unwrap_or_default(),
                    });
                }
            });
        }
        let shape = tensor::checked_shape(
            name,
            "shape",
            &shape.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        )?;
        let v = b.input(name, dtype, &shape);
        inputs.push((name, Dyn { v, shape, dtype }));
        defined.push(name);
    }
    let plan = plan(g, &defined)?;
    let mut ctx = Ctx::new(b, opset, opts.weights, &plan);
    let input_values: HashSet<_> = inputs.iter().map(|(_, d)| d.v).collect();
    for (name, d) in inputs {
        ctx.set_unnamed(name, Val::Dyn(d));
    }
    for (name, c) in consts {
        ctx.set(name, Val::Const(Rc::new(c)));
    }
    let total = plan.order.len();
    for (done, n) in plan.order.iter().enumerate() {
        if done % PROGRESS_EVERY == 0 {
            progress(done, total);
        }
        if ctx.skip.contains(&n.index) {
            continue;
        }
        if !n.domain().is_empty() {
            return Err(OnnxError::UnsupportedOp {
                op: n.op().into(),
                node: n.name(),
                domain: n.domain().into(),
                why: "only the default ai.onnx domain is supported",
            });
        }
        if fold::try_fold(&mut ctx, n)? {
            continue;
        }
        let Some(lower) = lowering(n.op()) else {
            return Err(OnnxError::UnsupportedOp {
                op: n.op().into(),
                node: n.name(),
                domain: String::new(),
                why: "no MOBI mapping for this op (docs/onnx-import.md lists the supported ops)",
            });
        };
        if !takes_integers(n.op()) {
            check_float_inputs(&ctx, n)?;
        }
        lower(&mut ctx, n)?;
    }
    progress(total, total);
    let mut declared = HashSet::new();
    for o in &g.output {
        let name = o.name.as_deref().unwrap_or("");
        let Some(d) = ctx.dyn_of(name)? else {
            return Err(OnnxError::DanglingOutput { name: name.into() });
        };
        check_declared(o, name, &d)?;
        // A MOBI output is a value an operator computes, declared once: a constant (an
        // initializer, a Constant node or a folded value), a graph input passed through,
        // or a value another output already declares is copied by an Identity.
        let copy = matches!(ctx.val(name), Some(Val::Const(_)))
            || input_values.contains(&d.v)
            || declared.contains(&d.v);
        let d = if copy {
            let v = ctx.b.op(OperatorType::Identity, &[d.v], vec![]);
            ctx.stats.ops_out += 1;
            Dyn { v, ..d }
        } else {
            d
        };
        declared.insert(d.v);
        ctx.b.output(name, d.dtype, &d.shape, d.v);
    }
    let mut stats = std::mem::take(&mut ctx.stats);
    let mut model = ctx.b.build()?;
    stats.opset = opset;
    stats.nodes_in = g.node.len();
    stats.ops_out = model.operators.len();
    stats.initializers = g.initializer.len();
    model.optimized = stats.folded_batchnorm
        + stats.folded_gemm
        + stats.folded_matmul_add
        + stats.folded_constant
        + stats.removed
        > 0;
    Ok((model, stats))
}

/// The declared output shape (where it has fixed dims) must agree with the inferred one.
/// An op that computes in f32 refuses integer or boolean run-time inputs (they would
/// fail at run time): `UnsupportedDtype` naming the input.
fn check_float_inputs(ctx: &Ctx, n: &crate::node::Node) -> Result<(), OnnxError> {
    for name in n.proto.input.iter().filter(|s| !s.is_empty()) {
        if let Some(Val::Dyn(d)) = ctx.val(name) {
            let code = match d.dtype {
                DataType::F32 => continue,
                DataType::I32 => dt::INT32,
                DataType::Bool => dt::BOOL,
                _ => dt::INT64,
            };
            return Err(OnnxError::UnsupportedDtype {
                what: "run-time input of an operator that computes in f32",
                name: name.clone(),
                dtype: code,
                dtype_name: dtype_name(code),
            });
        }
    }
    Ok(())
}

fn check_declared(o: &ValueInfoProto, name: &str, d: &Dyn) -> Result<(), OnnxError> {
    let Ok((_, dims)) = io_type(o, "graph output") else {
        return Ok(()); // outputs may leave their type out
    };
    let agrees = dims.len() == d.shape.len()
        && dims
            .iter()
            .zip(&d.shape)
            .all(|(a, b)| a.is_none_or(|a| a == *b));
    if !agrees {
        return Err(OnnxError::Shape {
            op: "graph output".into(),
            node: name.into(),
            detail: format!("declared shape {dims:?}, computed {:?}", d.shape),
        });
    }
    Ok(())
}

/// Read `src`, import it and write `dst` atomically (temp file, fsync, rename); nothing is
/// written when the import fails. Returns the model, the stats and the file size.
///
/// # Errors
/// As [`read_model`] and [`import`], [`OnnxError::Save`] writing.
pub fn convert_file(
    src: &Path,
    dst: &Path,
    opts: &ImportOptions,
    gzip: bool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Model, ImportStats, u64), OnnxError> {
    let bytes = read_model(src, opts.max_model_bytes)?;
    let (model, stats) = import_with_report(&bytes, opts, progress)?;
    let w = WriteOptions {
        quantize: None,
        gzip,
    };
    let size = model.save(dst, &w).map_err(|source| OnnxError::Save {
        path: dst.display().to_string(),
        source,
    })?;
    Ok((model, stats, size))
}
