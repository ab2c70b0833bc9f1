//! The importer's state while it walks the graph: what each ONNX value name is (a
//! constant known now, or a MOBI value computed at run time with its static shape), the
//! MOBI builder, and the counters of what was folded.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use tensorvault_formats::mobi::{DataType, ModelBuilder, OperatorType, ParamValue, Value};

use crate::error::OnnxError;
use crate::graph::Plan;
use crate::node::Node;
use crate::stats::ImportStats;
use crate::tensor::Const;
use crate::weights::{to_mobi, Role, WeightsMode};

/// A run-time value: the MOBI value, its static shape and element type.
#[derive(Debug, Clone)]
pub(crate) struct Dyn {
    /// The builder's handle.
    pub v: Value,
    /// Static shape.
    pub shape: Vec<u64>,
    /// Element type.
    pub dtype: DataType,
}

/// What an ONNX value name stands for.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    /// Known at import time.
    Const(Rc<Const>),
    /// Computed at run time.
    Dyn(Dyn),
}

/// Import state.
pub(crate) struct Ctx<'a> {
    /// The MOBI model under construction.
    pub b: ModelBuilder,
    vals: HashMap<String, Val>,
    materialized: HashMap<String, Value>,
    /// Default-domain opset.
    pub opset: i64,
    /// Weights mode.
    pub mode: WeightsMode,
    /// Counters.
    pub stats: ImportStats,
    /// Use counts and readers of each value.
    pub plan: &'a Plan<'a>,
    /// Nodes already handled by a fold of an earlier node.
    pub skip: HashSet<usize>,
}

impl<'a> Ctx<'a> {
    /// A fresh context.
    pub fn new(b: ModelBuilder, opset: i64, mode: WeightsMode, plan: &'a Plan<'a>) -> Self {
        Ctx {
            b,
            vals: HashMap::new(),
            materialized: HashMap::new(),
            opset,
            mode,
            stats: ImportStats::default(),
            plan,
            skip: HashSet::new(),
        }
    }

    /// Define a name; a run-time value also gets it in the file's value-names table
    /// (the last ONNX name of a value wins), so a per-layer diff can find it.
    pub fn set(&mut self, name: &str, v: Val) {
        if let Val::Dyn(d) = &v {
            self.b.name_value(d.v, name);
        }
        self.vals.insert(name.to_string(), v);
    }

    /// Define a name without naming the value in the file (graph inputs, which their
    /// specs name).
    pub fn set_unnamed(&mut self, name: &str, v: Val) {
        self.vals.insert(name.to_string(), v);
    }

    /// The value of a name (defined: the plan checked every input).
    pub fn val(&self, name: &str) -> Option<&Val> {
        self.vals.get(name)
    }

    /// Input `i` of `n` if it is present and constant.
    pub fn const_in(&self, n: &Node, i: usize) -> Option<Rc<Const>> {
        match n.input(i).and_then(|name| self.vals.get(name)) {
            Some(Val::Const(c)) => Some(c.clone()),
            _ => None,
        }
    }

    /// Input `i` of `n`, which must be a constant.
    ///
    /// # Errors
    /// [`OnnxError::NotConstant`] if it is computed at run time, [`OnnxError::Arity`] if
    /// it is absent.
    pub fn need_const(&self, n: &Node, i: usize) -> Result<Rc<Const>, OnnxError> {
        let name = self.require(n, i)?;
        self.const_in(n, i).ok_or_else(|| OnnxError::NotConstant {
            op: n.op().into(),
            node: n.name(),
            index: i,
            input: name.into(),
        })
    }

    fn require<'n>(&self, n: &Node<'n>, i: usize) -> Result<&'n str, OnnxError> {
        n.input(i).ok_or_else(|| OnnxError::Arity {
            op: n.op().into(),
            node: n.name(),
            what: "inputs",
            expected: "this input present",
            found: n.proto.input.len(),
        })
    }

    /// Whether input `i` of `n` is present.
    pub fn has_input(&self, n: &Node, i: usize) -> bool {
        n.input(i).is_some()
    }

    /// Input `i` of `n` as a run-time value; a constant is added to the model (once per
    /// name) stored as [`Role::Other`].
    ///
    /// # Errors
    /// [`OnnxError::Arity`] if absent, [`OnnxError::Mobi`] if the constant cannot be
    /// stored.
    pub fn dyn_in(&mut self, n: &Node, i: usize) -> Result<Dyn, OnnxError> {
        let name = self.require(n, i)?;
        self.dyn_of(name)?.ok_or_else(|| OnnxError::DanglingValue {
            op: n.op().into(),
            node: n.name(),
            input: name.into(),
        })
    }

    /// The value of `name` as a run-time value (`None` if undefined); a constant is added
    /// to the model (once per name) stored as [`Role::Other`].
    ///
    /// # Errors
    /// [`OnnxError::Mobi`] if the constant cannot be stored.
    pub fn dyn_of(&mut self, name: &str) -> Result<Option<Dyn>, OnnxError> {
        match self.vals.get(name).cloned() {
            Some(Val::Dyn(d)) => Ok(Some(d)),
            Some(Val::Const(c)) => {
                let v = match self.materialized.get(name) {
                    Some(v) => *v,
                    None => {
                        let v = self.constant(&c, Role::Other)?;
                        self.materialized.insert(name.to_string(), v);
                        v
                    }
                };
                Ok(Some(Dyn {
                    v,
                    shape: c.shape.clone(),
                    dtype: mobi_dtype(&c),
                }))
            }
            None => Ok(None),
        }
    }

    /// Add a constant to the model, stored as `role` decides under the weights mode.
    ///
    /// # Errors
    /// [`OnnxError::Mobi`] if quantization fails.
    pub fn constant(&mut self, c: &Const, role: Role) -> Result<Value, OnnxError> {
        let t = to_mobi(c, role, self.mode)?;
        if t.dtype != DataType::F32 && t.dtype != DataType::I64 {
            self.stats.tensors_quantized += 1;
        }
        Ok(self.b.constant(t))
    }

    /// Add an operator with one output, define `out` as it, and count it.
    pub fn emit(
        &mut self,
        op: OperatorType,
        inputs: &[Value],
        params: Vec<(String, ParamValue)>,
        out: &str,
        shape: Vec<u64>,
    ) -> Dyn {
        let v = self.emit_tmp(op, inputs, params, shape);
        self.set(out, Val::Dyn(v.clone()));
        v
    }

    /// Add an operator with one output per shape (names set by the caller).
    pub fn emit_n(
        &mut self,
        op: OperatorType,
        inputs: &[Value],
        params: Vec<(String, ParamValue)>,
        shapes: Vec<Vec<u64>>,
    ) -> Vec<Dyn> {
        let vs = self.b.op_n(op, inputs, shapes.len(), params);
        self.stats.ops_out += 1;
        vs.into_iter()
            .zip(shapes)
            .map(|(v, shape)| Dyn {
                v,
                shape,
                dtype: DataType::F32,
            })
            .collect()
    }

    /// Add an operator whose output has no ONNX name (an intermediate of a lowering).
    pub fn emit_tmp(
        &mut self,
        op: OperatorType,
        inputs: &[Value],
        params: Vec<(String, ParamValue)>,
        shape: Vec<u64>,
    ) -> Dyn {
        let v = self.b.op(op, inputs, params);
        self.stats.ops_out += 1;
        Dyn {
            v,
            shape,
            dtype: DataType::F32,
        }
    }

    /// How many times `name` is read (node inputs and graph outputs).
    pub fn uses(&self, name: &str) -> usize {
        self.plan.uses.get(name).copied().unwrap_or(0)
    }

    /// The single node reading `name`, if exactly one node reads it once and it is not a
    /// graph output.
    pub fn sole_reader(&self, name: &str) -> Option<usize> {
        match self.plan.readers.get(name).map(Vec::as_slice) {
            Some([r]) if self.uses(name) == 1 => Some(*r),
            _ => None,
        }
    }
}

/// The MOBI element type a constant has when stored.
pub(crate) fn mobi_dtype(c: &Const) -> DataType {
    match c.data {
        crate::tensor::Data::F32(_) => DataType::F32,
        crate::tensor::Data::I64(_) => DataType::I64,
    }
}
