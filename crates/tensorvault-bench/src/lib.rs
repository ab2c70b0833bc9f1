//! Comparison benchmarks of tensorvault against peer engines, in one unpublished crate so
//! that the library crates do not depend on the peers (not even as dev-dependencies):
//!
//! - `benches/cgeb.rs`: CGEB vs serde_json, bincode and rkyv on a fused embedding record
//!   (`cargo bench -p tensorvault-bench --bench cgeb`, or `bench/cgeb/run.sh` for the table);
//! - `benches/store.rs`: the temporal tensor store's core latencies with redb's put and get
//!   on the same blocks (`cargo bench -p tensorvault-bench --bench store`);
//! - `examples/store_bench.rs`: the store and redb side by side in one run, with
//!   percentiles, throughput, replay and memory (`bench/store/run.sh`).
//!
//! The library itself is empty.
