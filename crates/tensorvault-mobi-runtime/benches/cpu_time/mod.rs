//! A criterion measurement of the benchmark thread's CPU time
//! (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`, nanoseconds), so that single-threaded kernels
//! can be compared on a shared, loaded machine where wall time mostly measures waiting for
//! a core.

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::Throughput;

/// CPU time of the calling thread, nanoseconds.
pub struct CpuTime;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call, and
    // CLOCK_THREAD_CPUTIME_ID is a clock every Unix this runs on supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }

    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (div, unit) = match typical {
            t if t < 1e3 => (1.0, "ns cpu"),
            t if t < 1e6 => (1e3, "µs cpu"),
            t if t < 1e9 => (1e6, "ms cpu"),
            _ => (1e9, "s cpu"),
        };
        values.iter_mut().for_each(|v| *v /= div);
        unit
    }

    fn scale_throughputs(&self, _typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        let per = match t {
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Elements(n) => {
                *n as f64
            }
        };
        values.iter_mut().for_each(|v| *v = per * 1e9 / v.max(1.0));
        "per cpu second"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
