//! Human tables and progress bars.

use indicatif::{ProgressBar, ProgressStyle};

/// A plain-text table with a header row and right-aligned numeric columns.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| (*s).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row (as many cells as columns).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Render with two-space gaps; the first column left-aligned, the rest right-aligned.
    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let mut s = String::new();
            for (i, c) in r.iter().enumerate().take(n) {
                if i == 0 {
                    s.push_str(&format!("{c:<width$}", width = w[i]));
                } else {
                    s.push_str(&format!("  {c:>width$}", width = w[i]));
                }
            }
            s.trim_end().to_owned()
        };
        let mut out = line(&self.header);
        out.push('\n');
        out.push_str(&"-".repeat(w.iter().sum::<usize>() + 2 * (n - 1)));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

/// Key/value lines, aligned.
pub fn kv(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{k:<w$}  {v}\n"))
        .collect()
}

/// The context every command runs in: whether progress is shown (`-q` hides it; a
/// command printing `--json` hides its own), and the bars of the workspace's one
/// progress layer (`tensorvault_core::progress`), with rates for people.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ctx {
    /// `-q`: no progress bars.
    pub quiet: bool,
}

/// What a bar counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Rows (vectors, records): "12,345 rows/s".
    Rows,
    /// Bytes: "123.4 MiB/s".
    Bytes,
    /// Steps of a computation (settings tried, files): "3/7".
    Steps,
    /// Graph nodes (a model conversion): "1,024/2,048 nodes".
    Nodes,
}

impl Ctx {
    /// A bar over `total` `unit`s labelled `what`, hidden when quiet or `json`.
    #[must_use]
    pub fn bar(&self, total: u64, what: &str, unit: Unit, json: bool) -> ProgressBar {
        if self.quiet || json {
            return ProgressBar::hidden();
        }
        let template = match unit {
            Unit::Rows => "{msg:>12} [{bar:40}] {human_pos}/{human_len} rows ({rate}, eta {eta})",
            Unit::Bytes => {
                "{msg:>12} [{bar:40}] {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, eta {eta})"
            }
            Unit::Steps => "{msg:>12} [{bar:40}] {pos}/{len} (eta {eta})",
            Unit::Nodes => "{msg:>12} [{bar:40}] {human_pos}/{human_len} nodes (eta {eta})",
        };
        let style = ProgressStyle::with_template(template)
            .expect("valid template")
            .with_key(
                "rate",
                |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{} rows/s", count(s.per_sec() as u64));
                },
            )
            .progress_chars("=> ");
        let pb = ProgressBar::new(total);
        pb.set_style(style);
        pb.set_message(what.to_owned());
        pb
    }

    /// The library callback that moves `pb` (for `tensorvault_core::progress`).
    #[must_use]
    pub fn callback(pb: &ProgressBar) -> tensorvault_core::progress::ProgressFn {
        let pb = pb.clone();
        std::sync::Arc::new(move |done, _total| pb.set_position(done))
    }

    /// [`Self::callback`] for work whose total the library learns as it goes (a bar made
    /// with length 0): each call also sets the bar's length.
    #[must_use]
    pub fn sized_callback(pb: &ProgressBar) -> tensorvault_core::progress::ProgressFn {
        let pb = pb.clone();
        std::sync::Arc::new(move |done, total| {
            if pb.length() != Some(total) {
                pb.set_length(total);
            }
            pb.set_position(done);
        })
    }
}

/// A count with thousands separators ("1,234,567").
#[must_use]
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A progress bar over `total` rows labelled `what` (hidden when `quiet`), with rates
/// for people ([`Ctx::bar`]).
pub fn bar(total: u64, what: &str, quiet: bool) -> ProgressBar {
    Ctx { quiet }.bar(total, what, Unit::Rows, false)
}

/// Bytes as a human size (binary units).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_or_json_hides_every_kind_of_bar() {
        for unit in [Unit::Rows, Unit::Bytes, Unit::Steps, Unit::Nodes] {
            assert!(Ctx { quiet: true }.bar(10, "x", unit, false).is_hidden());
            assert!(Ctx { quiet: false }.bar(10, "x", unit, true).is_hidden());
        }
    }

    #[test]
    fn a_sized_callback_takes_the_total_from_the_library() {
        let pb = Ctx { quiet: true }.bar(0, "saving", Unit::Bytes, false);
        let cb = Ctx::sized_callback(&pb);
        cb(0, 5000);
        assert_eq!(pb.length(), Some(5000));
        cb(1200, 5000);
        assert_eq!(pb.position(), 1200);
        cb(5000, 5000);
        assert_eq!((pb.position(), pb.length()), (5000, Some(5000)));
    }

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
    }
}
