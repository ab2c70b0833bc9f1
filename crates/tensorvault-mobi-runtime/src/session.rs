//! [`Session`]: a model prepared once (operators checked; f32 constants used in place
//! from the model's payloads, other constants converted to f32 once, or only into the
//! packed copy of the operators that read them), run many times.

use std::collections::{HashMap, HashSet};

use tensorvault_formats::mobi::ops::{check_operators, InputKind};
use tensorvault_formats::mobi::{
    ConstantTensor, DataType, Dequantizer, Dim, Model, Operator, OperatorType,
};

use crate::error::RuntimeError;
use crate::ops::{self, Ctx, OpError};
use crate::sub_batch::{self, Assembled};
use crate::tensor::{numel, Data, SharedF32, Tensor};

/// Bounds on the work a run may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most elements of any one value or scratch buffer (default 2^28: 1 GiB of f32). A
    /// crafted shape that would need more is refused before anything is allocated.
    pub max_elements: u64,
    /// Cache budget of sub-batch execution, in elements (default 2^18: 1 MiB of f32,
    /// half an L2 cache of current x86 cores). A per-image graph (see
    /// [`Session::per_image`]) given a batch runs one image first, then as many images
    /// per slice as keep its largest activation within this budget (at least one).
    /// 0 runs every batch whole.
    pub sub_batch_elements: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_elements: 1 << 28,
            sub_batch_elements: 1 << 18,
        }
    }
}

/// Where the constants of a [`Session`] live (bytes of f32/i64 values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConstantMemory {
    /// f32 weights used in place from the model's payloads (no copy), mapped or not.
    pub in_place_bytes: u64,
    /// The part of `in_place_bytes` that lives in a file's memory map
    /// (`Model::open` of an uncompressed payload).
    pub mapped_bytes: u64,
    /// Values converted into memory of the session's own and kept: dequantized
    /// int8/uint8/int16 and fp16 weights that some reader takes unpacked (depthwise
    /// weights, biases, a weight also read by another operator), f32 payloads that are
    /// not 4-byte aligned (v1 files), integers.
    pub converted_bytes: u64,
    /// Conv2D and FullyConnected weights packed once into the gemm's panel layout (a
    /// copy of those weights, zero-padded to whole panels).
    pub packed_bytes: u64,
    /// Bytes of mapped weights (f32, or the codes of quantized / fp16 ones) whose
    /// resident pages were given back to the kernel once packed
    /// (`Payload::release_pages`): they stay mapped, and are read again from the file
    /// only if touched, so packing does not keep two copies in memory.
    pub released_bytes: u64,
    /// f32 bytes of converted weights (fp16, int8 / uint8 / int16, unaligned f32) that
    /// the session never holds whole: their only readers pack them (Conv2D and
    /// FullyConnected weights), so they are decoded one panel's rows at a time straight
    /// into `packed_bytes`. Not part of `converted_bytes`: `in_place_bytes +
    /// converted_bytes + dropped_bytes` is every constant's f32/i64 size.
    pub dropped_bytes: u64,
}

/// A model ready to run.
#[derive(Debug, Clone)]
pub struct Session {
    inputs: Vec<(String, DataType, Vec<Dim>)>,
    outputs: Vec<(String, u32)>,
    operators: Vec<Operator>,
    constants: HashMap<u32, Tensor>,
    /// Index of the last operator reading each value (values are freed after it).
    last_use: HashMap<u32, usize>,
    /// Per operator, what is fused into it (an activation, a max pool: the operators
    /// after it, then skipped).
    fused: Vec<ops::Fusion>,
    /// Per operator, its weights packed for the gemm (Conv2D, FullyConnected).
    packed: Vec<Option<ops::Prepacked>>,
    /// Buffers of freed values and scratch, reused by the next runs.
    pool: ops::Pool,
    /// Whether the graph is per-image along axis 0 ([`sub_batch::per_image`]).
    per_image: bool,
    limits: Limits,
    memory: ConstantMemory,
}

/// A constant as the session first holds it.
enum Prepared<'m> {
    /// Values ready for any reader.
    Ready(Tensor),
    /// fp16 / int8 / uint8 / int16 weights (or unaligned f32) whose every reader packs
    /// them: decoded row by row into the packed copies, never whole, unless a reader
    /// turns out not to pack them (then converted once).
    Deferred(Vec<usize>, Dequantizer<'m>),
}

/// `t` as the runtime holds it: aligned f32 in place, integers widened to i64, anything
/// else decoded to f32 (at once, or later into packed copies when `deferrable`).
fn prepare(t: &ConstantTensor, deferrable: bool) -> Result<Prepared<'_>, RuntimeError> {
    let shape: Vec<usize> = t.shape.iter().map(|&d| d as usize).collect();
    // Little-endian f32 bytes that are 4-byte aligned in memory are the values: used in
    // place (v2 aligns every f32 payload; a v1 payload may start anywhere).
    let shared = (t.dtype == DataType::F32)
        .then(|| SharedF32::new(t.data.clone()))
        .flatten();
    let data = match (shared, t.dtype) {
        (Some(s), _) => Data::SharedF32(s),
        (None, DataType::I64) => Data::I64(
            t.data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
        ),
        (None, DataType::I32) => Data::I64(
            t.data
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
                .collect(),
        ),
        // The single dequantization path (`Dequantizer`): fp16, per-tensor and
        // per-channel affine, and f32 payloads that are not aligned.
        (None, _) => {
            let values = t.dequantizer()?;
            if numel(&shape) != Some(values.len()) {
                return Err(RuntimeError::DataLength {
                    shape,
                    len: values.len(),
                });
            }
            if deferrable {
                return Ok(Prepared::Deferred(shape, values));
            }
            Data::F32(decode(&values))
        }
    };
    let tensor = Tensor { shape, data };
    if numel(&tensor.shape) != Some(tensor.len()) {
        let len = tensor.len();
        return Err(RuntimeError::DataLength {
            shape: tensor.shape,
            len,
        });
    }
    Ok(Prepared::Ready(tensor))
}

/// All of `values` as f32 (its length is the payload's, checked against the shape).
fn decode(values: &Dequantizer<'_>) -> Vec<f32> {
    let mut v = vec![0f32; values.len()];
    values.fill(0, &mut v);
    v
}

/// The constants whose every use is as the weights (input 1) of a Conv2D or a
/// FullyConnected, the operators that pack them: those need no f32 copy of their own.
/// A constant read in any other way, or that is a graph output, is not one of them.
fn packed_only(model: &Model) -> HashSet<u32> {
    let mut weights = HashSet::new();
    let mut other: HashSet<u32> = (0..model.outputs.len())
        .map(|j| model.output_id(j))
        .collect();
    for op in &model.operators {
        for (pos, &id) in op.inputs.iter().enumerate() {
            if pos == 1 && matches!(op.op, OperatorType::Conv2D | OperatorType::FullyConnected) {
                weights.insert(id);
            } else {
                other.insert(id);
            }
        }
    }
    weights.retain(|id| !other.contains(id));
    weights
}

impl Session {
    /// Prepare `model` with default [`Limits`].
    ///
    /// # Errors
    /// As [`Session::with_limits`].
    pub fn new(model: &Model) -> Result<Self, RuntimeError> {
        Self::with_limits(model, Limits::default())
    }

    /// Prepare `model`: check every operator against the op table (unknown keys
    /// ignored, as for v1 files; the reader already applied its version's policy), check
    /// that every value is defined before use, and make the constants f32: aligned f32
    /// payloads are used in place (sharing the model's memory, e.g. the file's map, for
    /// as long as the session lives), others are converted once (fp16, int8 / uint8 /
    /// int16 dequantized, unaligned f32 copied, i32 widened to i64). Conv2D and
    /// FullyConnected weights are then packed once into the gemm's panel layout
    /// ([`ConstantMemory::packed_bytes`]), one operator at a time, so a run packs only
    /// activations. A converted constant whose only readers pack it (and that is no
    /// graph output) is decoded one panel's rows at a time straight into the packed
    /// copy and never held whole ([`ConstantMemory::dropped_bytes`]): loading an int8
    /// file holds its mapped codes, the packed f32 weights and the values other readers
    /// need (biases, depthwise weights), not a dequantized copy of every weight.
    ///
    /// # Errors
    /// [`RuntimeError::Model`] for an operator the table refuses or a constant that does
    /// not decode, [`RuntimeError::UndefinedValue`], [`RuntimeError::UnproducedOutput`].
    pub fn with_limits(model: &Model, limits: Limits) -> Result<Self, RuntimeError> {
        let mut problems = Vec::new();
        check_operators(model, &[], 1, &mut problems);
        if let Some(e) = problems.into_iter().next() {
            return Err(e.into());
        }
        let mut constants = HashMap::new();
        let mut deferred = HashMap::new();
        let mut memory = ConstantMemory::default();
        let packed_only = packed_only(model);
        for t in &model.tensors {
            let c = match prepare(t, packed_only.contains(&t.id))? {
                Prepared::Ready(c) => c,
                Prepared::Deferred(shape, values) => {
                    deferred.insert(t.id, (shape, values, &t.data));
                    continue;
                }
            };
            let bytes = match &c.data {
                Data::I64(v) => 8 * v.len() as u64,
                _ => 4 * c.len() as u64,
            };
            match &c.data {
                Data::SharedF32(s) => {
                    memory.in_place_bytes += bytes;
                    if s.is_mapped() {
                        memory.mapped_bytes += bytes;
                    }
                }
                _ => memory.converted_bytes += bytes,
            }
            constants.insert(t.id, c);
        }
        let mut defined: HashSet<u32> = (0..model.inputs.len() as u32).collect();
        defined.extend(constants.keys().copied());
        defined.extend(deferred.keys().copied());
        let mut last_use = HashMap::new();
        for (i, op) in model.operators.iter().enumerate() {
            for &id in &op.inputs {
                if !defined.contains(&id) {
                    return Err(RuntimeError::UndefinedValue {
                        index: i as u32,
                        op: op.op.name(),
                        value: id,
                    });
                }
                last_use.insert(id, i);
            }
            defined.extend(op.outputs.iter().copied());
        }
        let outputs: Vec<(String, u32)> = model
            .outputs
            .iter()
            .enumerate()
            .map(|(j, s)| (s.name.clone(), model.output_id(j)))
            .collect();
        for (name, id) in &outputs {
            if !defined.contains(id) {
                return Err(RuntimeError::UnproducedOutput {
                    name: name.clone(),
                    value: *id,
                });
            }
            // Graph outputs live to the end.
            last_use.insert(*id, usize::MAX);
        }
        let fused = ops::fusion_plan(&model.operators, &last_use);
        // One operator at a time, its weights are packed, then the pages of their mapped
        // original given back (the run reads the packed copy): while loading, resident
        // memory holds the file's pages or their packed copy, not both. Deferred
        // (quantized / fp16) weights are decoded one panel's rows at a time straight into
        // the packed copy, so no whole f32 copy of them is ever made.
        let mut packed: Vec<Option<ops::Prepacked>> = Vec::with_capacity(model.operators.len());
        for op in &model.operators {
            let Some(&id) = op.inputs.get(1) else {
                packed.push(None);
                continue;
            };
            let p = if let Some(w) = constants.get(&id) {
                let p = w.as_f32().and_then(|v| {
                    ops::prepack(op, &w.shape, ops::Weights::Values(v), limits.max_elements)
                });
                if let (Some(_), Data::SharedF32(s)) = (&p, &w.data) {
                    memory.released_bytes += s.release_pages() as u64;
                }
                p
            } else if let Some((shape, values, payload)) = deferred.get(&id) {
                let p = ops::prepack(
                    op,
                    shape,
                    ops::Weights::Decoded(values),
                    limits.max_elements,
                );
                if p.is_some() {
                    // The codes were read into the packed copy: their mapped pages go back.
                    memory.released_bytes += payload.release_pages() as u64;
                } else if let Some((shape, values, _)) = deferred.remove(&id) {
                    // This reader runs from the values (a thin or depthwise-shaped
                    // weight): converted once, for it and any later reader.
                    let v = decode(&values);
                    memory.converted_bytes += 4 * v.len() as u64;
                    constants.insert(id, Tensor::f32(shape, v)?);
                }
                p
            } else {
                None
            };
            packed.push(p);
        }
        memory.packed_bytes = packed.iter().flatten().map(|p| p.bytes() as u64).sum();
        // What stayed deferred lives only in packed copies.
        for (id, (shape, values, _)) in deferred {
            memory.dropped_bytes += 4 * values.len() as u64;
            constants.insert(
                id,
                Tensor {
                    shape,
                    data: Data::Packed(values.len()),
                },
            );
        }
        let per_image = sub_batch::per_image(model, &constants);
        Ok(Session {
            inputs: model
                .inputs
                .iter()
                .map(|s| (s.name.clone(), s.dtype, s.shape.clone()))
                .collect(),
            outputs,
            operators: model.operators.clone(),
            constants,
            last_use,
            fused,
            packed,
            pool: ops::Pool::default(),
            per_image,
            limits,
            memory,
        })
    }

    /// Where the constants live: in place (and in a file's memory map) or converted.
    pub fn constant_memory(&self) -> ConstantMemory {
        self.memory
    }

    /// Bytes of f32 weights read in place from a file's memory map (a model from
    /// `Model::open`), not copied: [`ConstantMemory::mapped_bytes`].
    pub fn mapped_bytes(&self) -> u64 {
        self.memory.mapped_bytes
    }

    /// Whether the graph is per-image along axis 0 of its inputs, so that a batch may run
    /// in slices of images ([`Limits::sub_batch_elements`]) with the same results. The rule,
    /// decided from the operators and their parameters: every graph input has rank >= 1
    /// with the batch on axis 0; element-wise operators (constant operands of smaller
    /// rank or size 1 on axis 0), convolutions, pools, normalizations, FullyConnected and
    /// MatMul by a constant keep it; Softmax, Concat, Split, ArgMax/ArgMin, Reduce*,
    /// Transpose, Flatten, Reshape, Squeeze and Unsqueeze keep it when they do not act on
    /// or move axis 0; anything else (Slice, Pad, Gather, Resize, a MatMul of two run-time
    /// values, a reduction over the batch) makes the graph run whole. Every graph output
    /// must carry the batch.
    pub fn per_image(&self) -> bool {
        self.per_image
    }

    /// The graph input names, in order.
    pub fn input_names(&self) -> Vec<&str> {
        self.inputs.iter().map(|(n, _, _)| n.as_str()).collect()
    }

    /// The graph output names, in order.
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(|(n, _)| n.as_str()).collect()
    }

    fn check_input(&self, name: &str, t: &Tensor) -> Result<usize, RuntimeError> {
        let Some(pos) = self.inputs.iter().position(|(n, _, _)| n == name) else {
            return Err(RuntimeError::UnknownInput {
                name: name.to_string(),
                known: self.inputs.iter().map(|(n, _, _)| n.clone()).collect(),
            });
        };
        let (_, dtype, shape) = &self.inputs[pos];
        let expected = match dtype {
            // Integers and booleans (0/1) run as i64.
            DataType::I64 | DataType::I32 | DataType::Bool => "i64",
            _ => "f32",
        };
        if t.dtype_name() != expected {
            return Err(RuntimeError::InputDType {
                name: name.to_string(),
                expected,
                found: t.dtype_name(),
            });
        }
        let same = t.shape.len() == shape.len()
            && t.shape
                .iter()
                .zip(shape)
                .enumerate()
                .all(|(i, (&a, b))| i == 0 || b.fixed().is_none_or(|b| a as u64 == b));
        let fits = t
            .shape
            .iter()
            .all(|&d| d as u64 <= self.limits.max_elements)
            && t.len() as u64 <= self.limits.max_elements;
        if !same || !fits || numel(&t.shape) != Some(t.len()) {
            return Err(RuntimeError::InputShape {
                name: name.to_string(),
                expected: shape
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => n.to_string(),
                        Dim::Symbolic(s) if s.is_empty() => "?".to_string(),
                        Dim::Symbolic(s) => s.clone(),
                    })
                    .collect(),
                found: t.shape.clone(),
            });
        }
        Ok(pos)
    }

    /// Run the graph on named inputs and return every graph output, in order.
    ///
    /// # Errors
    /// [`RuntimeError::MissingInput`], [`RuntimeError::UnknownInput`],
    /// [`RuntimeError::DuplicateInput`], [`RuntimeError::InputDType`],
    /// [`RuntimeError::InputShape`] for bad inputs; [`RuntimeError::Shape`],
    /// [`RuntimeError::DType`], [`RuntimeError::Param`] or [`RuntimeError::TooLarge`]
    /// naming the operator index and value id when a shape inside the graph does not fit.
    pub fn run(&self, inputs: &[(&str, Tensor)]) -> Result<Vec<(String, Tensor)>, RuntimeError> {
        let mut feeds: HashMap<u32, &Tensor> = HashMap::new();
        for (name, t) in inputs {
            let pos = self.check_input(name, t)? as u32;
            if feeds.insert(pos, t).is_some() {
                return Err(RuntimeError::DuplicateInput {
                    name: name.to_string(),
                });
            }
        }
        for (i, (name, _, _)) in self.inputs.iter().enumerate() {
            if !feeds.contains_key(&(i as u32)) {
                return Err(RuntimeError::MissingInput { name: name.clone() });
            }
        }
        if let Some(n) = self.split_batch(&feeds) {
            if let Some(out) = self.run_sliced(&feeds, n)? {
                return Ok(out);
            }
        }
        self.run_once(&feeds).map(|(out, _)| out)
    }

    /// The batch size of a run that may go in slices: the graph is per-image, the
    /// budget is not 0, and every input has the same size `n >= 2` on axis 0.
    fn split_batch(&self, feeds: &HashMap<u32, &Tensor>) -> Option<usize> {
        if !self.per_image || self.limits.sub_batch_elements == 0 {
            return None;
        }
        let mut sizes = feeds.values().map(|t| t.shape.first().copied());
        let n = sizes.next()??;
        (n >= 2 && sizes.all(|m| m == Some(n))).then_some(n)
    }

    /// Run a batch of `n` images in slices: image 0 alone, which measures the largest
    /// activation per image, then as many images per slice as fit
    /// [`Limits::sub_batch_elements`]. `None` when image 0 fails or a slice's outputs do
    /// not carry its images on axis 0 (the caller runs the batch whole).
    fn run_sliced(
        &self,
        feeds: &HashMap<u32, &Tensor>,
        n: usize,
    ) -> Result<Option<Vec<(String, Tensor)>>, RuntimeError> {
        let slice = |start: usize, count: usize| -> HashMap<u32, Tensor> {
            feeds
                .iter()
                .map(|(&id, t)| (id, sub_batch::rows(t, n, start, count)))
                .collect()
        };
        let first = slice(0, 1);
        // A graph that fails on one image fails on the batch: the caller's whole run then
        // reports the error with the batch's shapes, not the slice's.
        let Ok((out, largest)) = self.run_once(&first.iter().map(|(&k, v)| (k, v)).collect())
        else {
            return Ok(None);
        };
        let Some(mut all) = Assembled::new(out, 1, n, self.limits.max_elements) else {
            return Ok(None);
        };
        let per_slice = (self.limits.sub_batch_elements / (largest as u64).max(1)).max(1);
        let per_slice = usize::try_from(per_slice).unwrap_or(usize::MAX);
        let mut start = 1;
        while start < n {
            let count = per_slice.min(n - start);
            let part = slice(start, count);
            let (out, _) = self.run_once(&part.iter().map(|(&k, v)| (k, v)).collect())?;
            if !all.push(out, count) {
                return Ok(None);
            }
            start += count;
        }
        Ok(all.finish())
    }

    /// One run over `feeds` (checked); also returns the element count of the largest
    /// value it computed.
    fn run_once(
        &self,
        feeds: &HashMap<u32, &Tensor>,
    ) -> Result<(Vec<(String, Tensor)>, usize), RuntimeError> {
        let mut largest = 0;
        let mut values: HashMap<u32, Tensor> = HashMap::new();
        let mut skip = 0usize;
        let buffers = self.pool.lend();
        for (index, op) in self.operators.iter().enumerate() {
            if skip > 0 {
                skip -= 1;
                continue; // fused into an earlier operator
            }
            let mut args = Vec::with_capacity(op.inputs.len());
            for &id in &op.inputs {
                let t = values
                    .get(&id)
                    .or_else(|| feeds.get(&id).copied())
                    .or_else(|| self.constants.get(&id))
                    .ok_or(RuntimeError::UndefinedValue {
                        index: index as u32,
                        op: op.op.name(),
                        value: id,
                    })?;
                args.push(t);
            }
            let cx = Ctx {
                op,
                inputs: args,
                limit: self.limits.max_elements,
                buffers: &buffers,
                packed: self.packed[index].as_ref(),
            };
            let fusion = self.fused[index];
            let act = fusion.act;
            // A reshape of a value that no later operator reads moves it (no copy).
            let moved = match (act, self.movable_input(index, op, &values)) {
                (None, Some(id)) => match ops::reshape_target(&cx) {
                    Some(shape) => {
                        Some((id, shape.map_err(|e| self.name_error(index, op, &cx, e))?))
                    }
                    None => None,
                },
                _ => None,
            };
            let mut pooled = false;
            let outs = match moved {
                Some((id, shape)) => {
                    drop(cx);
                    let mut t = values.remove(&id).ok_or(RuntimeError::UndefinedValue {
                        index: index as u32,
                        op: op.op.name(),
                        value: id,
                    })?;
                    t.shape = shape;
                    vec![t]
                }
                None => {
                    let err = |e| self.name_error(index, op, &cx, e);
                    let with_pool = match fusion.pool {
                        true => ops::eval_pooled(&cx, act).map_err(err)?,
                        false => None,
                    };
                    pooled = with_pool.is_some();
                    let outs = match with_pool {
                        Some(t) => vec![t],
                        None => ops::eval(&cx, act).map_err(err)?,
                    };
                    drop(cx);
                    outs
                }
            };
            // A fused run stores the result under the last fused operator's output.
            skip = fusion.skipped(pooled);
            let out_ids = &self.operators[index + skip].outputs;
            for (&id, t) in out_ids.iter().zip(outs) {
                largest = largest.max(t.len());
                values.insert(id, t);
            }
            for &id in &op.inputs {
                if self.last_use.get(&id) == Some(&index) {
                    if let Some(t) = values.remove(&id) {
                        buffers.recycle(t);
                    }
                }
            }
        }
        self.pool.restore(buffers);
        let mut out = Vec::with_capacity(self.outputs.len());
        for (name, id) in &self.outputs {
            let t = values
                .get(id)
                .cloned()
                .ok_or(RuntimeError::UnproducedOutput {
                    name: name.clone(),
                    value: *id,
                })?;
            out.push((name.clone(), t));
        }
        Ok((out, largest))
    }

    /// Input 0 of operator `index` when it is a value computed by this run that no later
    /// operator reads (nor this one again) and the operator has one output: a reshape
    /// may then take it over.
    fn movable_input(
        &self,
        index: usize,
        op: &Operator,
        values: &HashMap<u32, Tensor>,
    ) -> Option<u32> {
        let id = *op.inputs.first()?;
        let only = op.inputs.iter().filter(|&&i| i == id).count() == 1;
        (only
            && op.outputs.len() == 1
            && self.last_use.get(&id) == Some(&index)
            && values.contains_key(&id))
        .then_some(id)
    }

    fn name_error(&self, index: usize, op: &Operator, cx: &Ctx<'_>, e: OpError) -> RuntimeError {
        let index32 = index as u32;
        let name = op.op.name();
        let value = |i: usize| op.inputs.get(i).copied().unwrap_or(u32::MAX);
        match e {
            OpError::Shape { input, rule } => RuntimeError::Shape {
                index: index32,
                op: name,
                value: value(input),
                shape: cx
                    .inputs
                    .get(input)
                    .map(|t| t.shape.clone())
                    .unwrap_or_default(),
                rule,
            },
            OpError::DType { input, expected } => RuntimeError::DType {
                index: index32,
                op: name,
                value: value(input),
                expected,
                found: cx.inputs.get(input).map_or("missing", |t| t.dtype_name()),
            },
            OpError::Param { key, value, rule } => RuntimeError::Param {
                index: index32,
                op: name,
                key,
                value,
                rule,
            },
            OpError::TooLarge { elements } => RuntimeError::TooLarge {
                index: index32,
                op: name,
                value: op.outputs.first().copied().unwrap_or(u32::MAX),
                elements,
                limit: self.limits.max_elements,
            },
            OpError::Unsupported => RuntimeError::Unsupported {
                index: index32,
                op: name,
            },
        }
    }
}

/// Whether input position `i` of `op` takes integers (for callers building inputs).
pub fn takes_integers(op: &Operator, i: usize) -> bool {
    tensorvault_formats::mobi::ops::spec(op.op)
        .input(i)
        .is_some_and(|s| s.kind == InputKind::Integer)
}
