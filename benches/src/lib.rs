//! Benchmarks live in `job_loop.rs`; see BENCHMARKS.md.
