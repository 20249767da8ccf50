//! The customer's switch: `nuon-runner disable` writes `WORK_DIR/disabled`
//! (the reason, one line) and `nuon-runner enable` removes it. The running
//! runner reads it before each claim: while it is there the runner still
//! calls the control plane (so the vendor sees it, disabled, with the
//! reason) but takes no new job; jobs already running finish. It works
//! with the control plane down, and needs nothing from the vendor.

use std::path::Path;

/// The switch's file in the work directory.
pub const FILE: &str = "disabled";

/// The reason given when the runner is disabled, `None` when it is not.
pub fn disabled(work_dir: &Path) -> Option<String> {
    match std::fs::read_to_string(work_dir.join(FILE)) {
        Ok(text) => {
            let reason = text.lines().next().unwrap_or("").trim();
            Some(if reason.is_empty() {
                "disabled by the customer".into()
            } else {
                reason.to_owned()
            })
        }
        Err(_) => None,
    }
}

/// Disables the runner of `work_dir`, saying why (one line, at most 200
/// characters, kept).
pub fn disable(work_dir: &Path, reason: &str) -> std::io::Result<()> {
    let reason: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    std::fs::create_dir_all(work_dir)?;
    crate::sys::write_private(&work_dir.join(FILE), &format!("{}\n", reason.trim()))
}

/// Enables the runner of `work_dir`; `false` when it was not disabled.
pub fn enable(work_dir: &Path) -> std::io::Result<bool> {
    match std::fs::remove_file(work_dir.join(FILE)) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_round_trips_with_its_reason_on_one_line() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(disabled(dir.path()), None);
        disable(dir.path(), "maintenance window\nsecond line").unwrap();
        assert_eq!(
            disabled(dir.path()).as_deref(),
            Some("maintenance window second line")
        );
        disable(dir.path(), "").unwrap();
        assert_eq!(
            disabled(dir.path()).as_deref(),
            Some("disabled by the customer")
        );
        assert!(enable(dir.path()).unwrap());
        assert!(!enable(dir.path()).unwrap());
        assert_eq!(disabled(dir.path()), None);
    }
}
