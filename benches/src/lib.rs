//! Benchmarks live in `job_loop.rs` and its siblings; see BENCHMARKS.md.

pub mod dispatch;
pub mod terraform;

/// `nuon ARGS` against `cp`: its standard output, or an error with the
/// command and what it printed on standard error.
pub fn nuon_ok(cp: &nuon_tests::ControlPlane, args: &[&str]) -> anyhow::Result<String> {
    let out = cp.nuon(args);
    if !out.status.success() {
        anyhow::bail!(
            "nuon {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
