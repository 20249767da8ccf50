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
