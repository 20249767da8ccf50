//! A stack as one download: a POSIX shell script that writes the stack's
//! files (with their modes) into a directory of its own and prints how to
//! apply them. What the installer page hands a customer for the stacks of
//! more than one file (the VM bundle, the Helm chart).

use crate::wire::InstallStack;

/// `stack` as a shell script writing its files into `./DIR` (`dir`:
/// letters, digits, `-`, `_` and `.` only; anything else becomes `-`).
pub fn shell_bundle(stack: &InstallStack, dir: &str) -> String {
    let dir: String = dir
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let dir = if dir.is_empty() || dir.starts_with('.') {
        format!("stack{dir}")
    } else {
        dir
    };
    let mut end = "NUON_STACK_FILE_END".to_owned();
    while stack
        .files
        .iter()
        .any(|f| f.contents.lines().any(|l| l == end))
        || stack.instructions.lines().any(|l| l == end)
    {
        end.push('_');
    }
    let mut out = format!(
        "#!/bin/sh\n# The install stack of {install} ({format}): writes its files into ./{dir}, then says how to apply them.\n\
         set -eu\numask 077\nmkdir -p '{dir}'\n",
        install = one_line(&stack.install),
        format = stack.format,
    );
    for f in &stack.files {
        let path = format!("{dir}/{}", f.path);
        let quoted = quote(&path);
        if let Some((parent, _)) = path.rsplit_once('/') {
            out.push_str(&format!("mkdir -p {}\n", quote(parent)));
        }
        out.push_str(&format!("cat > {quoted} <<'{end}'\n{}", f.contents));
        if !f.contents.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("{end}\nchmod {:o} {quoted}\n", f.mode));
    }
    out.push_str(&format!(
        "cat <<'{end}'\nThe stack's files are in ./{dir}. In that directory:\n{}\n{end}\n",
        stack.instructions
    ));
    out
}

/// `s` single-quoted for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::StackFile;

    #[test]
    fn a_bundle_writes_each_file_with_its_mode_whatever_it_holds() {
        let stack = InstallStack {
            install: "acme".into(),
            format: "vm".into(),
            files: vec![
                StackFile {
                    path: "install.sh".into(),
                    contents: "#!/bin/sh\necho '$HOME' \"`x`\"\nNUON_STACK_FILE_END\n".into(),
                    mode: 0o755,
                },
                StackFile {
                    path: "templates/a b.yaml".into(),
                    contents: "no newline at the end".into(),
                    mode: 0o600,
                },
            ],
            instructions: "Run `sh install.sh`.".into(),
            token_expires_at_ms: 0,
        };
        let script = shell_bundle(&stack, "nuon stack/../x");
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let root = dir.path().join("nuon-stack-..-x");
        assert_eq!(
            std::fs::read_to_string(root.join("install.sh")).unwrap(),
            stack.files[0].contents
        );
        assert_eq!(
            std::fs::read_to_string(root.join("templates/a b.yaml")).unwrap(),
            "no newline at the end\n"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| {
            std::fs::metadata(root.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("install.sh"), 0o755);
        assert_eq!(mode("templates/a b.yaml"), 0o600);
        assert!(String::from_utf8_lossy(&out.stdout).contains("Run `sh install.sh`."));
    }
}
