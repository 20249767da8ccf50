//! The customer's switch: `nuon-runner disable` writes `WORK_DIR/disabled`
//! (the reason, one line) and `nuon-runner enable` removes it. The running
//! runner reads it before each claim: while it is there the runner still
//! calls the control plane (so the vendor sees it, disabled, with the
//! reason) but takes no new job; jobs already running finish. It works
//! with the control plane down, and needs nothing from the vendor.
//!
//! Break-glass roles work alike: `nuon-runner break-glass enable ROLE`
//! writes `WORK_DIR/break-glass/ROLE`; a job may run with that role only
//! while it is there, and the runner tells the control plane which are on
//! (which fires the app's `role-enabled` and `role-disabled` actions).

use std::path::Path;

/// The switch's file in the work directory.
pub const FILE: &str = "disabled";

/// Refuses a directory that is not a runner's work directory (it has no
/// `runner.lock`): a switch written elsewhere would silently do nothing.
pub fn check_work_dir(work_dir: &Path) -> std::io::Result<()> {
    if work_dir.join("runner.lock").exists() {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "not a runner's work directory (no runner.lock there): give the runner's --work-dir \
         (a runner installed by the VM bundle or the CloudFormation stack uses /var/lib/nuon-runner)",
    ))
}

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

/// The directory of the break-glass roles the customer turned on.
pub const BREAK_GLASS_DIR: &str = "break-glass";

/// Whether `role` is a role name (IAM's letters), so it names a file.
fn role_name_ok(role: &str) -> bool {
    !role.is_empty()
        && role.len() <= 64
        && role
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c))
        && !role.starts_with('.')
}

/// Whether the customer turned break-glass role `role` on.
pub fn break_glass_enabled(work_dir: &Path, role: &str) -> bool {
    role_name_ok(role) && work_dir.join(BREAK_GLASS_DIR).join(role).exists()
}

/// Turns break-glass role `role` on or off; whether that changed anything.
pub fn set_break_glass(work_dir: &Path, role: &str, on: bool) -> std::io::Result<bool> {
    if !role_name_ok(role) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{role:?} is not a role name (1 to 64 letters, digits and +=,.@_-)"),
        ));
    }
    let dir = work_dir.join(BREAK_GLASS_DIR);
    let file = dir.join(role);
    if on {
        if file.exists() {
            return Ok(false);
        }
        std::fs::create_dir_all(&dir)?;
        crate::sys::write_private(&file, &format!("{}\n", nuon_core::now_ms()))?;
        Ok(true)
    } else {
        match std::fs::remove_file(&file) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The break-glass roles the customer turned on, by name.
pub fn break_glass_roles(work_dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(work_dir.join(BREAK_GLASS_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| role_name_ok(n) && !n.ends_with(".tmp"))
        .collect();
    out.sort();
    out
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

    #[test]
    fn break_glass_roles_are_files_named_by_role_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        assert!(set_break_glass(dir.path(), "acme-bg", true).unwrap());
        assert!(!set_break_glass(dir.path(), "acme-bg", true).unwrap());
        assert!(break_glass_enabled(dir.path(), "acme-bg"));
        assert_eq!(break_glass_roles(dir.path()), ["acme-bg"]);
        assert!(set_break_glass(dir.path(), "../token", true).is_err());
        assert!(set_break_glass(dir.path(), "acme-bg", false).unwrap());
        assert!(break_glass_roles(dir.path()).is_empty());
    }
}
