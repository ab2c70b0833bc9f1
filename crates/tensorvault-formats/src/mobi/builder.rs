//! A builder that makes writing a model by hand pleasant: values are handles, ids are
//! assigned at [`ModelBuilder::build`] (graph inputs first, then outputs, then the rest).

use std::collections::{HashMap, HashSet};

use super::error::MobiError;
use super::types::*;

/// A value in a graph under construction (a graph input, constant or operator output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Value(u32);

/// Builds a [`Model`].
///
/// ```
/// use tensorvault_formats::mobi::{DataType, ModelBuilder, OperatorType, ParamValue};
/// let mut b = ModelBuilder::new("tiny").framework_version(1);
/// let x = b.input("x", DataType::F32, &[1, 4]);
/// let w = b.constant_f32(&[2, 4], &[0.5; 8])?;
/// let bias = b.constant_f32(&[2], &[0.0; 2])?;
/// let y = b.op(OperatorType::FullyConnected, &[x, w, bias], vec![]);
/// let z = b.op(OperatorType::Softmax, &[y], vec![("axis".into(), ParamValue::Int(-1))]);
/// b.output("probs", DataType::F32, &[1, 2], z);
/// let model = b.build()?;
/// let bytes = model.to_bytes()?;
/// assert_eq!(tensorvault_formats::mobi::Model::from_bytes(&bytes)?, model);
/// # Ok::<(), tensorvault_formats::mobi::MobiError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ModelBuilder {
    metadata: Metadata,
    optimized: bool,
    next: u32,
    inputs: Vec<(IoSpec, Value)>,
    outputs: Vec<(IoSpec, Value)>,
    tensors: Vec<(ConstantTensor, Value)>,
    ops: Vec<(Operator, Vec<Value>, Vec<Value>)>,
    names: Vec<(Value, String)>,
}

impl ModelBuilder {
    /// A builder for a model named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        ModelBuilder {
            metadata: Metadata {
                name: name.into(),
                ..Metadata::default()
            },
            ..ModelBuilder::default()
        }
    }

    /// Set the framework version.
    pub fn framework_version(mut self, v: u32) -> Self {
        self.metadata.framework_version = v;
        self
    }

    /// Set the creation time (seconds since the Unix epoch; default 0 for
    /// reproducible files).
    pub fn created_unix(mut self, t: u64) -> Self {
        self.metadata.created_unix = t;
        self
    }

    /// Mark the graph as optimized (header flag bit 2).
    pub fn optimized(mut self, yes: bool) -> Self {
        self.optimized = yes;
        self
    }

    fn fresh(&mut self) -> Value {
        self.next += 1;
        Value(self.next - 1)
    }

    /// Add a graph input with a fixed shape.
    pub fn input(&mut self, name: impl Into<String>, dtype: DataType, shape: &[u64]) -> Value {
        self.input_spec(IoSpec::new(name, dtype, shape))
    }

    /// Add a graph input from a spec (symbolic dimensions allowed, e.g. batch `"N"`).
    pub fn input_spec(&mut self, spec: IoSpec) -> Value {
        let v = self.fresh();
        self.inputs.push((spec, v));
        v
    }

    /// Name a value (kept in the file's value-names table; a later name for the same
    /// value replaces an earlier one).
    pub fn name_value(&mut self, value: Value, name: impl Into<String>) {
        self.names.push((value, name.into()));
    }

    /// Add an f32 constant tensor.
    ///
    /// # Errors
    /// [`MobiError::InvalidModel`] if `values` does not match `shape`.
    pub fn constant_f32(&mut self, shape: &[u64], values: &[f32]) -> Result<Value, MobiError> {
        let t = ConstantTensor::from_f32(0, shape, values)?;
        Ok(self.constant(t))
    }

    /// Add a constant tensor of any type (its `id` is replaced at build time).
    pub fn constant(&mut self, t: ConstantTensor) -> Value {
        let v = self.fresh();
        self.tensors.push((t, v));
        v
    }

    /// Add an operator with one output and return it.
    pub fn op(
        &mut self,
        op: OperatorType,
        inputs: &[Value],
        params: Vec<(String, ParamValue)>,
    ) -> Value {
        self.op_n(op, inputs, 1, params)[0]
    }

    /// Add an operator with `n_outputs` outputs and return them.
    pub fn op_n(
        &mut self,
        op: OperatorType,
        inputs: &[Value],
        n_outputs: usize,
        params: Vec<(String, ParamValue)>,
    ) -> Vec<Value> {
        let outs: Vec<Value> = (0..n_outputs).map(|_| self.fresh()).collect();
        let o = Operator {
            op,
            inputs: Vec::new(),
            outputs: Vec::new(),
            params,
        };
        self.ops.push((o, inputs.to_vec(), outs.clone()));
        outs
    }

    /// Declare `value` as a graph output with a fixed shape.
    pub fn output(
        &mut self,
        name: impl Into<String>,
        dtype: DataType,
        shape: &[u64],
        value: Value,
    ) {
        self.output_spec(IoSpec::new(name, dtype, shape), value);
    }

    /// Declare `value` as a graph output from a spec (symbolic dimensions allowed).
    pub fn output_spec(&mut self, spec: IoSpec, value: Value) {
        self.outputs.push((spec, value));
    }

    /// Assign ids and produce the model.
    ///
    /// # Errors
    /// [`MobiError::InvalidModel`] if a value is declared as a graph output twice, or a
    /// graph input or a constant tensor is declared as an output (the file gives graph
    /// outputs ids of their own, which a constant's cannot share).
    pub fn build(self) -> Result<Model, MobiError> {
        let mut ids: HashMap<Value, u32> = HashMap::new();
        for (i, (_, v)) in self.inputs.iter().enumerate() {
            ids.insert(*v, i as u32);
        }
        let n_in = self.inputs.len() as u32;
        let constants: HashSet<Value> = self.tensors.iter().map(|(_, v)| *v).collect();
        for (j, (s, v)) in self.outputs.iter().enumerate() {
            if constants.contains(v) {
                return Err(MobiError::InvalidModel {
                    what: format!("output {:?}", s.name),
                    reason: "the value is a constant tensor (copy it with an Identity operator)"
                        .into(),
                });
            }
            if ids.insert(*v, n_in + j as u32).is_some() {
                return Err(MobiError::InvalidModel {
                    what: format!("output {:?}", s.name),
                    reason: "the value is already a graph input or output".into(),
                });
            }
        }
        let mut next = n_in + self.outputs.len() as u32;
        let mut id_of = |v: Value, ids: &mut HashMap<Value, u32>| {
            *ids.entry(v).or_insert_with(|| {
                next += 1;
                next - 1
            })
        };
        let mut tensors = Vec::with_capacity(self.tensors.len());
        for (mut t, v) in self.tensors {
            t.id = id_of(v, &mut ids);
            tensors.push(t);
        }
        let mut operators = Vec::with_capacity(self.ops.len());
        for (mut o, ins, outs) in self.ops {
            o.inputs = ins.into_iter().map(|v| id_of(v, &mut ids)).collect();
            o.outputs = outs.into_iter().map(|v| id_of(v, &mut ids)).collect();
            operators.push(o);
        }
        let value_names = self
            .names
            .into_iter()
            .map(|(v, n)| (id_of(v, &mut ids), n))
            .collect();
        Ok(Model {
            value_names,
            metadata: self.metadata,
            inputs: self.inputs.into_iter().map(|(s, _)| s).collect(),
            outputs: self.outputs.into_iter().map(|(s, _)| s).collect(),
            tensors,
            operators,
            optimized: self.optimized,
        })
    }
}
