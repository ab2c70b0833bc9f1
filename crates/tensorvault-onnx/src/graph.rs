//! Graph structure checks before any op is mapped: single assignment of names, every
//! input defined, a topological order (cycles refused), and use counts for the folds.

use std::collections::{HashMap, VecDeque};

use crate::error::OnnxError;
use crate::node::Node;
use crate::proto::GraphProto;

/// The graph's nodes in execution order plus who reads what.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    /// Nodes in a topological order (stable: the file's order where it is valid).
    pub order: Vec<Node<'a>>,
    /// The nodes by their index in `GraphProto.node`.
    pub nodes: Vec<Node<'a>>,
    /// For each value name, how many times it is read (node inputs and graph outputs).
    pub uses: HashMap<&'a str, usize>,
    /// For each value name, the indices (in `GraphProto.node`) of the nodes reading it.
    pub readers: HashMap<&'a str, Vec<usize>>,
}

/// Check names and order the nodes.
///
/// `defined` are the names given before any node runs (graph inputs and initializers).
///
/// # Errors
/// [`OnnxError::DuplicateValue`], [`OnnxError::DanglingValue`], [`OnnxError::Cycle`],
/// [`OnnxError::DanglingOutput`].
pub(crate) fn plan<'a>(g: &'a GraphProto, defined: &[&'a str]) -> Result<Plan<'a>, OnnxError> {
    let nodes: Vec<Node<'a>> = g
        .node
        .iter()
        .enumerate()
        .map(|(index, proto)| Node { proto, index })
        .collect();
    // Producer of each name: None for graph inputs and initializers.
    let mut producer: HashMap<&'a str, Option<usize>> = HashMap::new();
    for &d in defined {
        producer.insert(d, None);
    }
    for n in &nodes {
        for o in n.proto.output.iter().filter(|o| !o.is_empty()) {
            if producer.insert(o.as_str(), Some(n.index)).is_some() {
                return Err(OnnxError::DuplicateValue {
                    name: o.clone(),
                    by: format!("{} node {:?}", n.op(), n.name()),
                });
            }
        }
    }
    let mut uses: HashMap<&'a str, usize> = HashMap::new();
    let mut readers: HashMap<&'a str, Vec<usize>> = HashMap::new();
    let mut indegree = vec![0usize; nodes.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for n in &nodes {
        for i in n.proto.input.iter().filter(|i| !i.is_empty()) {
            let Some(p) = producer.get(i.as_str()) else {
                return Err(OnnxError::DanglingValue {
                    op: n.op().into(),
                    node: n.name(),
                    input: i.clone(),
                });
            };
            *uses.entry(i.as_str()).or_default() += 1;
            readers.entry(i.as_str()).or_default().push(n.index);
            if let Some(p) = *p {
                indegree[n.index] += 1;
                dependents[p].push(n.index);
            }
        }
    }
    for o in &g.output {
        let name = o.name.as_deref().unwrap_or("");
        if !producer.contains_key(name) {
            return Err(OnnxError::DanglingOutput { name: name.into() });
        }
        *uses.entry(name).or_default() += 1;
    }
    let mut queue: VecDeque<usize> = (0..nodes.len()).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = queue.pop_front() {
        order.push(nodes[i]);
        for &d in &dependents[i] {
            indegree[d] -= 1;
            if indegree[d] == 0 {
                queue.push_back(d);
            }
        }
    }
    if order.len() != nodes.len() {
        let stuck = nodes.iter().find(|n| indegree[n.index] > 0).map_or_else(
            || ("?".into(), "?".into()),
            |n| (n.op().to_string(), n.name()),
        );
        return Err(OnnxError::Cycle {
            op: stuck.0,
            node: stuck.1,
        });
    }
    Ok(Plan {
        order,
        nodes,
        uses,
        readers,
    })
}
