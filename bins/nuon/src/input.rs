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

/// Asks before `verb` (`teardown`, `deprovision`, `delete`, `forget`)
/// destroys or removes install `key`: with `yes`, nothing is asked; on a
/// terminal, the install's name must be typed; otherwise `--yes` is
/// needed. `what` says what is lost.
pub(crate) async fn confirm_destroy(
    client: &nuon_client::ControlClient,
    key: &str,
    verb: &str,
    what: &str,
    yes: bool,
) -> Result<(), CliError> {
    use std::io::IsTerminal;
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError {
            message: format!(
                "`nuon installs {verb} {key}` {what}: give --yes to go on (there is no terminal to ask on)"
            ),
            code: 64,
            api_code: None,
        });
    }
    // The install's name, and a clear error for one that is not there.
    let name = client.get_install(key).await?.name;
    eprint!("`nuon installs {verb} {key}` {what}.\nType the install's name ({name}) to go on: ");
    let mut typed = String::new();
    std::io::stdin()
        .read_line(&mut typed)
        .map_err(|e| CliError {
            message: format!("cannot read the confirmation: {e}"),
            code: 1,
            api_code: None,
        })?;
    let typed = typed.trim();
    if typed == name || typed == key {
        return Ok(());
    }
    Err(CliError {
        message: format!(
            "not confirmed ({typed:?} is not {name:?}): nothing was done; type the name, or give --yes"
        ),
        code: 1,
        api_code: None,
    })
}
