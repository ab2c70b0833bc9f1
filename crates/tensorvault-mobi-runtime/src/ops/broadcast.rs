//! numpy/ONNX multidirectional broadcasting.

/// The broadcast of two shapes, `None` when they do not broadcast.
pub(crate) fn shape2(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for (i, o) in out.iter_mut().enumerate() {
        let da = (i + a.len()).checked_sub(r).map_or(1, |j| a[j]);
        let db = (i + b.len()).checked_sub(r).map_or(1, |j| b[j]);
        *o = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// Strides of `shape` seen from `out` (right-aligned; 0 on broadcast axes).
pub(crate) fn strides_in(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let r = out.len();
    let off = r - shape.len();
    let mut st = vec![0; r];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        st[off + i] = if shape[i] == 1 { 0 } else { acc };
        acc *= shape[i];
    }
    st
}

/// Row-major strides of a shape.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![0; shape.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        st[i] = acc;
        acc *= shape[i];
    }
    st
}

/// Call `f(offset_a, offset_b)` for every element of `out` in row-major order, with the
/// offsets of the two broadcast operands.
pub(crate) fn for_each2(
    out: &[usize],
    ta: &[usize],
    tb: &[usize],
    mut f: impl FnMut(usize, usize),
) {
    let n: usize = out.iter().product();
    if n == 0 {
        return;
    }
    let r = out.len();
    if r == 0 {
        f(0, 0);
        return;
    }
    let inner = out[r - 1];
    let (ia, ib) = (ta[r - 1], tb[r - 1]);
    let mut idx = vec![0usize; r - 1];
    let (mut oa, mut ob) = (0usize, 0usize);
    for _ in 0..n / inner {
        for k in 0..inner {
            f(oa + k * ia, ob + k * ib);
        }
        for d in (0..r - 1).rev() {
            idx[d] += 1;
            oa += ta[d];
            ob += tb[d];
            if idx[d] < out[d] {
                break;
            }
            oa -= ta[d] * out[d];
            ob -= tb[d] * out[d];
            idx[d] = 0;
        }
    }
}

/// `f(a, b)` over the broadcast of two f32 tensors (`out` their broadcast shape).
pub(crate) fn map2(
    a: &[f32],
    sa: &[usize],
    b: &[f32],
    sb: &[usize],
    out: &[usize],
    n: usize,
    f: impl Fn(f32, f32) -> f32,
) -> Vec<f32> {
    if sa == out && sb == out {
        return a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect();
    }
    let mut res = Vec::with_capacity(n);
    if b.len() == 1 && sa == out {
        return a.iter().map(|&x| f(x, b[0])).collect();
    }
    let (ta, tb) = (strides_in(sa, out), strides_in(sb, out));
    for_each2(out, &ta, &tb, |i, j| res.push(f(a[i], b[j])));
    res
}

/// The source offset of every element of `out` in a tensor of `shape` broadcast to it.
pub(crate) fn offsets(shape: &[usize], out: &[usize], n: usize) -> Vec<usize> {
    let mut res = Vec::with_capacity(n);
    let t = strides_in(shape, out);
    for_each2(out, &t, &t, |i, _| res.push(i));
    res
}
