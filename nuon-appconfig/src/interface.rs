//! What a component's local Terraform module declares (its `variable` and
//! `output` blocks), and the config checked against it: a `[vars]` key no
//! variable takes, a variable without a default that nothing sets, and a
//! `.nuon.components.NAME.outputs.KEY` that the module never outputs. All
//! warnings: an install's own Terraform variables, or a module that makes
//! its blocks in ways this reading does not follow, may still be right.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::template::{self, Reference};
use super::{AppConfig, Diagnostic, Source, SourceFile, did_you_mean};

/// The blocks a Terraform module declares at its top level.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleInterface {
    /// Each variable, and where it is declared (file, byte offset); `true`
    /// when it has a `default`.
    pub variables: BTreeMap<String, (bool, usize, usize)>,
    /// Each output.
    pub outputs: BTreeSet<String>,
}

/// The interface of the module made of `files` (its `.tf` files), read
/// from their top-level blocks. Strings, comments and heredocs are passed
/// over, so a brace or a `variable` inside them is not taken for one.
pub fn module_interface(files: &[SourceFile]) -> ModuleInterface {
    let mut out = ModuleInterface::default();
    for (fi, f) in files.iter().enumerate() {
        scan(&f.text, fi, &mut out);
    }
    out
}

/// What a block opened at depth 0 is.
enum Open {
    Variable(String),
    Other,
}

fn scan(text: &str, file: usize, out: &mut ModuleInterface) {
    let b = text.as_bytes();
    let (mut i, mut depth) = (0usize, 0usize);
    let mut line_start = true;
    let mut block: Option<Open> = None;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line_start = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' => {
                i = skip_line(b, i);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = skip_line(b, i);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                continue;
            }
            b'"' => {
                i = skip_string(b, i);
            }
            b'<' if b.get(i + 1) == Some(&b'<') => {
                i = skip_heredoc(text, i);
            }
            b'{' => {
                depth += 1;
                i += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    block = None;
                }
                i += 1;
            }
            _ if line_start && (c.is_ascii_alphabetic() || c == b'_') => {
                let word_end = b[i..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-'))
                    .map_or(b.len(), |n| i + n);
                let word = &text[i..word_end];
                match depth {
                    0 => {
                        let label = label_after(text, word_end);
                        block = Some(match (word, label) {
                            ("variable", Some(name)) => {
                                out.variables.insert(name.clone(), (false, file, i));
                                Open::Variable(name)
                            }
                            ("output", Some(name)) => {
                                out.outputs.insert(name);
                                Open::Other
                            }
                            _ => Open::Other,
                        });
                    }
                    1 if word == "default" && text[word_end..].trim_start().starts_with('=') => {
                        if let Some(Open::Variable(name)) = &block
                            && let Some(v) = out.variables.get_mut(name)
                        {
                            v.0 = true;
                        }
                    }
                    _ => {}
                }
                i = word_end;
            }
            _ => i += 1,
        }
        line_start = false;
    }
}

/// The quoted label after a block's keyword (`variable "name" {`).
fn label_after(text: &str, at: usize) -> Option<String> {
    let rest = text[at..].trim_start_matches([' ', '\t']);
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(rest[..end].to_owned())
}

fn skip_line(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|c| *c == b'\n')
        .map_or(b.len(), |n| i + n)
}

/// Past a quoted string starting at `i` (its escapes and `${...}` parts
/// included).
fn skip_string(b: &[u8], mut i: usize) -> usize {
    i += 1;
    let mut nested = 0usize;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'$' if b.get(i + 1) == Some(&b'{') => {
                nested += 1;
                i += 1;
            }
            b'}' if nested > 0 => nested -= 1,
            b'"' if nested == 0 => return i + 1,
            b'\n' if nested == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Past a heredoc (`<<EOT` or `<<-EOT` up to its closing line), or past
/// the `<<` alone when it is not one.
fn skip_heredoc(text: &str, i: usize) -> usize {
    let rest = &text[i + 2..];
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if ident.is_empty() {
        return i + 2;
    }
    let body = text[i..].find('\n').map_or(text.len(), |n| i + n + 1);
    let mut at = body;
    for line in text[body..].split_inclusive('\n') {
        at += line.len();
        if line.trim() == ident {
            return at;
        }
    }
    text.len()
}

/// The config checked against the interfaces of its components' local
/// Terraform modules: `module(dir)` gives the `.tf` files of a module
/// directory (named from the config's directory), or `None` when it has
/// none to read. `files` are the config's own, to place each warning at
/// the component's file.
pub fn check_module_interfaces(
    config: &AppConfig,
    files: &[SourceFile],
    module: &dyn Fn(&str) -> Option<Vec<SourceFile>>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut interfaces: BTreeMap<&str, (ModuleInterface, Vec<SourceFile>, String)> =
        BTreeMap::new();
    for c in &config.components {
        let (Some(_), Source::Path { path }) = (c.terraform(), &c.source) else {
            continue;
        };
        let Ok(dir) = super::source_dir(path) else {
            continue;
        };
        let Some(tf) = module(&dir).filter(|f| !f.is_empty()) else {
            continue;
        };
        interfaces.insert(&c.name, (module_interface(&tf), tf, path.clone()));
    }
    let component_file = |name: &str| {
        files.iter().find(|f| {
            f.name.starts_with("components/")
                && f.text.lines().any(|l| {
                    l.trim_start().starts_with("name") && l.contains(&format!("\"{name}\""))
                })
        })
    };
    let at = |file: Option<&SourceFile>, needle: &str, message: String| {
        let (name, line, col) = match file {
            Some(f) => {
                let (l, c) = f.text.find(needle).map_or((1, 1), |o| f.position(o));
                (f.name.clone(), l, c)
            }
            None => ("components".to_owned(), 1, 1),
        };
        Diagnostic {
            file: name,
            line,
            col,
            warning: true,
            message,
        }
    };
    for c in &config.components {
        let Some((iface, tf, path)) = interfaces.get(c.name.as_str()) else {
            continue;
        };
        let Some(t) = c.terraform() else { continue };
        let file = component_file(&c.name);
        let declared: Vec<&str> = iface.variables.keys().map(String::as_str).collect();
        for key in t.vars.keys() {
            if !iface.variables.contains_key(key) {
                out.push(at(
                    file,
                    &format!("{key} ="),
                    format!(
                        "component {}: [vars] sets {key:?}, but its module ({path}) declares no variable {key:?}: Terraform ignores it{}",
                        c.name,
                        did_you_mean(key, declared.iter().copied())
                    ),
                ));
            }
        }
        // A variable without a default that nothing here sets: its plan
        // fails, unless an install's own variables or a var file set it.
        if t.var_files.is_empty() {
            for (name, (has_default, fi, offset)) in &iface.variables {
                let by_env = t.env_vars.contains_key(&format!("TF_VAR_{name}"));
                if !has_default && !by_env && !t.vars.contains_key(name) {
                    let f = &tf[*fi];
                    let (line, col) = f.position(*offset);
                    out.push(Diagnostic {
                        file: format!("{}/{}", path.trim_start_matches("./"), f.name),
                        line,
                        col,
                        warning: true,
                        message: format!(
                            "component {}: variable {name:?} has no default and its [vars] do not set it: its plan fails unless each install sets it (`nuon installs create --tf-vars {}=FILE`)",
                            c.name, c.name
                        ),
                    });
                }
            }
        }
    }
    // What each component reads of another's outputs.
    for c in &config.components {
        let mut texts = Vec::new();
        strings(&serde_json::to_value(c).unwrap_or(Value::Null), &mut texts);
        let mut seen = BTreeSet::new();
        for t in texts {
            for a in template::scan(&t).0 {
                let Reference::ComponentOutput { component, path } = a.reference else {
                    continue;
                };
                let (Some(key), Some((iface, _, module))) =
                    (path.first(), interfaces.get(component.as_str()))
                else {
                    continue;
                };
                if iface.outputs.contains(key) || !seen.insert((component.clone(), key.clone())) {
                    continue;
                }
                out.push(at(
                    component_file(&c.name),
                    &format!("{component}.outputs.{key}"),
                    format!(
                        "component {} reads .nuon.components.{component}.outputs.{key}, but {component}'s module ({module}) declares no output {key:?}{}",
                        c.name,
                        did_you_mean(key, iface.outputs.iter().map(String::as_str))
                    ),
                ));
            }
        }
    }
    out.sort();
    out
}

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(m) => m.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modules_blocks_are_read_and_strings_comments_and_heredocs_passed_over() {
        let tf = SourceFile::new(
            "main.tf",
            r#"# variable "commented" {}
variable "size" {
  type    = number
  default = 5
}

variable "name" {
  description = "a } brace and a variable \"x\" { in a string"
}

/* output "hidden" { value = 1 } */
resource "terraform_data" "x" {
  input = <<-EOT
    output "in_heredoc" {
  EOT
  nested {
    default = 1
  }
}

output "size" {
  value = var.size
}
"#,
        );
        let i = module_interface(&[tf]);
        let vars: Vec<(&str, bool)> = i.variables.iter().map(|(k, v)| (k.as_str(), v.0)).collect();
        assert_eq!(vars, [("name", false), ("size", true)]);
        assert_eq!(i.outputs, ["size".to_owned()].into());
    }

    #[test]
    fn vars_and_output_references_are_checked_against_the_module() {
        let files = [
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new(
                "components/queue.toml",
                "name = \"queue\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/queue\"\n\n[vars]\nqueue_sise = \"5\"\n",
            ),
            SourceFile::new(
                "components/worker.toml",
                "name = \"worker\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/worker\"\ndependencies = [\"queue\"]\n\n[vars]\nsize = \"{{ .nuon.components.queue.outputs.sise }}\"\n",
            ),
        ];
        let (config, d) = super::super::parse(&files);
        let config = config.unwrap_or_else(|| panic!("{d}"));
        let module = |dir: &str| -> Option<Vec<SourceFile>> {
            match dir {
                "src/queue" => Some(vec![SourceFile::new(
                    "main.tf",
                    "variable \"queue_size\" {\n  type = number\n}\noutput \"size\" {\n  value = var.queue_size\n}\n",
                )]),
                "src/worker" => Some(vec![SourceFile::new("main.tf", "variable \"size\" {}\n")]),
                _ => None,
            }
        };
        let said: Vec<String> = check_module_interfaces(&config, &files, &module)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(said.len(), 3, "{said:#?}");
        assert!(said[0].starts_with("components/queue.toml:7:1: warning: component queue: [vars] sets \"queue_sise\", but its module (./src/queue) declares no variable \"queue_sise\": Terraform ignores it, did you mean \"queue_size\"?"), "{said:#?}");
        assert!(said[1].starts_with("components/worker.toml:8:29:") && said[1].contains("reads .nuon.components.queue.outputs.sise, but queue's module (./src/queue) declares no output \"sise\", did you mean \"size\"?"), "{said:#?}");
        assert!(said[2].starts_with("src/queue/main.tf:1:1: warning: component queue: variable \"queue_size\" has no default"), "{said:#?}");
    }
}
