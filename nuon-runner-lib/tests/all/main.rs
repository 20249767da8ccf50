//! Integration tests of the runner engine against an in-memory control plane.

mod delivery;
mod fake;
mod jobs;
mod signing;
mod terraform;
