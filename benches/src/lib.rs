//! Benchmarks live in `job_loop.rs` and its siblings; see BENCHMARKS.md.

pub mod dispatch;
pub mod terraform;
