//! One ONNX node as the importer sees it (op type, name, inputs, outputs) and typed
//! access to its attributes: a wrong type or a missing required attribute is a typed
//! error naming the op, the node and the attribute.

use crate::error::OnnxError;
use crate::proto::attribute_proto::AttributeType as AT;
use crate::proto::{AttributeProto, NodeProto, TensorProto};

/// A node of the graph with its resolved name (`#<index>` when the node has none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node<'a> {
    /// The protobuf message.
    pub proto: &'a NodeProto,
    /// Index in `GraphProto.node`.
    pub index: usize,
}

impl<'a> Node<'a> {
    /// The op type.
    pub fn op(&self) -> &'a str {
        self.proto.op_type.as_deref().unwrap_or("")
    }

    /// The node's name, or `#<index>` when it has none.
    pub fn name(&self) -> String {
        match self.proto.name.as_deref() {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => format!("#{}", self.index),
        }
    }

    /// The domain (`""` for ai.onnx).
    pub fn domain(&self) -> &'a str {
        match self.proto.domain.as_deref() {
            Some("ai.onnx") | None => "",
            Some(d) => d,
        }
    }

    /// Input `i`'s name, `None` when absent or the empty name (an omitted optional input).
    pub fn input(&self, i: usize) -> Option<&'a str> {
        self.proto
            .input
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Output `i`'s name, `None` when absent or empty.
    pub fn output(&self, i: usize) -> Option<&'a str> {
        self.proto
            .output
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Refuse a node whose input count is outside `min..=max` (expected printed as
    /// `expected`).
    ///
    /// # Errors
    /// [`OnnxError::Arity`].
    pub fn arity(&self, min: usize, max: usize, expected: &'static str) -> Result<(), OnnxError> {
        let n = self.proto.input.len();
        if n < min || n > max || self.input(0).is_none() && min > 0 {
            return Err(OnnxError::Arity {
                op: self.op().into(),
                node: self.name(),
                what: "inputs",
                expected,
                found: n,
            });
        }
        if self.output(0).is_none() {
            return Err(OnnxError::Arity {
                op: self.op().into(),
                node: self.name(),
                what: "outputs",
                expected: "at least 1",
                found: self.proto.output.len(),
            });
        }
        Ok(())
    }

    fn find(&self, name: &str) -> Option<&'a AttributeProto> {
        self.proto
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
    }

    fn bad(&self, attribute: &str, why: &'static str) -> OnnxError {
        OnnxError::BadAttribute {
            op: self.op().into(),
            node: self.name(),
            attribute: attribute.into(),
            why,
        }
    }

    /// An unsupported-attribute error for this node.
    pub fn unsupported(
        &self,
        attribute: &'static str,
        value: impl std::fmt::Display,
        why: &'static str,
    ) -> OnnxError {
        OnnxError::UnsupportedAttribute {
            op: self.op().into(),
            node: self.name(),
            attribute,
            value: value.to_string(),
            why,
        }
    }

    /// A shape error for this node.
    pub fn shape_err(&self, detail: String) -> OnnxError {
        OnnxError::Shape {
            op: self.op().into(),
            node: self.name(),
            detail,
        }
    }

    fn typed(
        &self,
        name: &str,
        want: AT,
        present: impl Fn(&AttributeProto) -> bool,
        why: &'static str,
    ) -> Result<Option<&'a AttributeProto>, OnnxError> {
        let Some(a) = self.find(name) else {
            return Ok(None);
        };
        match a.r#type {
            Some(t) if t == want as i32 => Ok(Some(a)),
            // Very old exporters leave `type` unset: accept the attribute by its field.
            None | Some(0) if present(a) => Ok(Some(a)),
            _ => Err(self.bad(name, why)),
        }
    }

    /// An INT attribute.
    ///
    /// # Errors
    /// [`OnnxError::BadAttribute`] if it has another type.
    pub fn int(&self, name: &str) -> Result<Option<i64>, OnnxError> {
        Ok(self
            .typed(name, AT::Int, |a| a.i.is_some(), "must be INT")?
            .map(|a| a.i.unwrap_or(0)))
    }

    /// An INT attribute with a default.
    ///
    /// # Errors
    /// As [`Node::int`].
    pub fn int_or(&self, name: &str, default: i64) -> Result<i64, OnnxError> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    /// A FLOAT attribute.
    ///
    /// # Errors
    /// [`OnnxError::BadAttribute`] if it has another type.
    pub fn float(&self, name: &str) -> Result<Option<f32>, OnnxError> {
        Ok(self
            .typed(name, AT::Float, |a| a.f.is_some(), "must be FLOAT")?
            .map(|a| a.f.unwrap_or(0.0)))
    }

    /// A FLOAT attribute with a default.
    ///
    /// # Errors
    /// As [`Node::float`].
    pub fn float_or(&self, name: &str, default: f32) -> Result<f32, OnnxError> {
        Ok(self.float(name)?.unwrap_or(default))
    }

    /// An INTS attribute.
    ///
    /// # Errors
    /// [`OnnxError::BadAttribute`] if it has another type.
    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, OnnxError> {
        Ok(self
            .typed(name, AT::Ints, |a| !a.ints.is_empty(), "must be INTS")?
            .map(|a| a.ints.clone()))
    }

    /// A FLOATS attribute.
    ///
    /// # Errors
    /// [`OnnxError::BadAttribute`] if it has another type.
    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, OnnxError> {
        Ok(self
            .typed(name, AT::Floats, |a| !a.floats.is_empty(), "must be FLOATS")?
            .map(|a| a.floats.clone()))
    }

    /// A STRING attribute (UTF-8).
    ///
    /// # Errors
    /// [`OnnxError::BadAttribute`] if it has another type or is not UTF-8.
    pub fn string(&self, name: &str) -> Result<Option<String>, OnnxError> {
        match self.typed(name, AT::String, |a| a.s.is_some(), "must be STRING")? {
            None => Ok(None),
            Some(a) => String::from_utf8(a.s.clone().unwrap_or_default())
                .map(Some)
                .map_err(|_| self.bad(name, "is not UTF-8")),
        }
    }

    /// A TENSOR attribute.
    ///
    /// # Errors
    /// [`OnnxError::BadAttribute`] if it has another type.
    pub fn tensor(&self, name: &str) -> Result<Option<&'a TensorProto>, OnnxError> {
        Ok(self
            .typed(name, AT::Tensor, |a| a.t.is_some(), "must be TENSOR")?
            .and_then(|a| a.t.as_ref()))
    }

    /// Whether the node has an attribute of this name (of any type).
    pub fn has(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// A required attribute is missing.
    pub fn missing(&self, name: &str) -> OnnxError {
        self.bad(name, "is missing")
    }
}
