//! Human-readable views of the operator graph: a text listing and Graphviz DOT.

use std::fmt::Write;

use super::types::{shape_text, Model};

/// `s` with every control character (newlines, escape sequences, bidi-free C0/C1 codes)
/// shown as a Rust-style escape, so a name read from a file cannot move the cursor, clear
/// the screen or forge output lines when it is printed to a terminal.
#[must_use]
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn value_name(m: &Model, id: u32) -> String {
    let n_in = m.inputs.len();
    if let Some(s) = m.inputs.get(id as usize) {
        return format!("%{}", printable(&s.name));
    }
    if let Some(s) = (id as usize)
        .checked_sub(n_in)
        .and_then(|j| m.outputs.get(j))
    {
        return format!("%{}", printable(&s.name));
    }
    match (m.tensor(id), m.value_names.get(&id)) {
        (Some(t), Some(n)) => format!("#{id}({}):{}{:?}", printable(n), t.dtype.name(), t.shape),
        (Some(t), None) => format!("#{id}:{}{:?}", t.dtype.name(), t.shape),
        (None, Some(n)) => format!("%{}", printable(n)),
        (None, None) => format!("%v{id}"),
    }
}

/// One line per operator: `outputs = Op(inputs) {params}`.
pub fn listing(m: &Model) -> String {
    let mut s = String::new();
    for (i, op) in m.operators.iter().enumerate() {
        let outs: Vec<String> = op.outputs.iter().map(|&id| value_name(m, id)).collect();
        let ins: Vec<String> = op.inputs.iter().map(|&id| value_name(m, id)).collect();
        let params: Vec<String> = op
            .params
            .iter()
            .map(|(k, v)| printable(&format!("{k}={v}")))
            .collect();
        let _ = write!(
            s,
            "{i:>3}: {} = {}({})",
            outs.join(", "),
            op.op.name(),
            ins.join(", ")
        );
        if !params.is_empty() {
            let _ = write!(s, " {{{}}}", params.join(", "));
        }
        s.push('\n');
    }
    s
}

fn esc(s: &str) -> String {
    printable(s).replace('\\', "\\\\").replace('"', "\\\"")
}

/// Graphviz DOT of the graph: operators as boxes, graph inputs/outputs as ellipses,
/// constant tensors as notes, edges labelled by value.
pub fn to_dot(m: &Model) -> String {
    let mut s = String::from("digraph mobi {\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n");
    let _ = writeln!(s, "  label=\"{}\";", esc(&m.metadata.name));
    let mut producer = std::collections::HashMap::new();
    for (i, spec) in m.inputs.iter().enumerate() {
        let _ = writeln!(
            s,
            "  in{i} [shape=ellipse, label=\"{}\\n{}\"];",
            esc(&spec.name),
            esc(&shape_text(&spec.shape))
        );
        producer.insert(i as u32, format!("in{i}"));
    }
    for t in &m.tensors {
        let _ = writeln!(
            s,
            "  t{} [shape=note, label=\"#{} {}\\n{:?}\"];",
            t.id,
            t.id,
            t.dtype.name(),
            t.shape
        );
        producer.insert(t.id, format!("t{}", t.id));
    }
    for (i, op) in m.operators.iter().enumerate() {
        let params: Vec<String> = op
            .params
            .iter()
            .map(|(k, v)| esc(&format!("{k}={v}")))
            .collect();
        let extra = if params.is_empty() {
            String::new()
        } else {
            format!("\\n{}", params.join("\\n"))
        };
        let _ = writeln!(
            s,
            "  op{i} [shape=box, style=rounded, label=\"{}{extra}\"];",
            op.op.name()
        );
        for &id in &op.inputs {
            if let Some(p) = producer.get(&id) {
                match m.value_names.get(&id) {
                    Some(n) => {
                        let _ = writeln!(s, "  {p} -> op{i} [label=\"{}\"];", esc(n));
                    }
                    None => {
                        let _ = writeln!(s, "  {p} -> op{i};");
                    }
                }
            }
        }
        for &id in &op.outputs {
            producer.insert(id, format!("op{i}"));
        }
    }
    for (j, spec) in m.outputs.iter().enumerate() {
        let _ = writeln!(
            s,
            "  out{j} [shape=ellipse, label=\"{}\\n{}\"];",
            esc(&spec.name),
            esc(&shape_text(&spec.shape))
        );
        if let Some(p) = producer.get(&m.output_id(j)) {
            let _ = writeln!(s, "  {p} -> out{j};");
        }
    }
    s.push_str("}\n");
    s
}
