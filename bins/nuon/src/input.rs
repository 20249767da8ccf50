//! What the CLI reads besides its arguments: files, or standard input for
//! `-`.

use crate::CliError;

/// The text of `--helm-values`/`--tf-vars` FILE (`-`: standard input).
pub(crate) fn read_values(flag: &str, path: &str) -> Result<String, CliError> {
    read_text(path).map_err(|e| CliError {
        message: format!("--{flag}: cannot read {path}: {e}"),
        code: 64,
        api_code: None,
    })
}

/// The text of the file at `path`, or of standard input for `-`.
fn read_text(path: &str) -> std::io::Result<String> {
    if path == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map(|_| s)
    } else {
        std::fs::read_to_string(path)
    }
}

/// A secret's value from a file, or standard input for `-`.
pub(crate) fn read_secret(name: &str, path: &str) -> Result<String, CliError> {
    let text = read_text(path).map_err(|e| CliError {
        message: format!("cannot read secret {name:?} from {path}: {e}"),
        code: 64,
        api_code: None,
    })?;
    let text = text.strip_suffix('\n').unwrap_or(&text);
    Ok(text.strip_suffix('\r').unwrap_or(text).to_owned())
}
