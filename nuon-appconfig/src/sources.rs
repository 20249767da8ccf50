//! Reading where a component, the sandbox or an action step comes from.

use crate::reader::{Reader, text};
use nuon_core::app::*;

/// Reads the source of a component, sandbox or step: exactly one of the
/// `allowed` kinds.
pub(crate) fn source(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    allowed: &[&'static str],
    required: bool,
) -> Option<Source> {
    let mut found: Vec<(&str, Option<Source>, std::ops::Range<usize>)> = Vec::new();
    let repo = |t: &mut Reader<'_, '_>, d: &mut Diagnostics| {
        let repo = t.req_str(d, "repo");
        let directory = t.str(d, "directory");
        let branch = t.str(d, "branch");
        (repo, directory, branch)
    };
    for &kind in allowed {
        match kind {
            "path" | "oci" => {
                if let Some(v) = r.str(d, kind) {
                    let s = match kind {
                        "path" => Source::Path { path: v.text },
                        _ => Source::Oci { reference: v.text },
                    };
                    found.push((kind, Some(s), v.span));
                }
            }
            "public_repo" | "git" => {
                if let Some(mut t) = r.table(d, kind) {
                    let span = t.span();
                    let (repo, directory, branch) = repo(&mut t, d);
                    t.finish(d, &[], |_| None);
                    let s = repo.map(|repo| {
                        let directory = directory.map(|x| x.text).unwrap_or_else(|| ".".into());
                        let branch = branch.map(|x| x.text).unwrap_or_else(|| "main".into());
                        if kind == "git" {
                            Source::Git {
                                repo: repo.text,
                                directory,
                                branch,
                            }
                        } else {
                            Source::PublicRepo {
                                repo: repo.text,
                                directory,
                                branch,
                            }
                        }
                    });
                    found.push((kind, s, span));
                }
            }
            "helm_repo" => {
                if let Some(mut t) = r.table(d, kind) {
                    let span = t.span();
                    let url = t.req_str(d, "repo_url");
                    let chart = t.req_str(d, "chart");
                    let version = t.str(d, "version");
                    t.finish(d, &[], |_| None);
                    let s = url.zip(chart).map(|(u, c)| Source::HelmRepo {
                        repo_url: u.text,
                        chart: c.text,
                        version: text(version),
                    });
                    found.push((kind, s, span));
                }
            }
            "public" => {
                if let Some(mut t) = r.table(d, kind) {
                    let span = t.span();
                    let url = t.req_str(d, "image_url");
                    let tag = t.req_str(d, "tag");
                    t.finish(d, &[], |_| None);
                    let s = url.zip(tag).map(|(u, t)| Source::Image {
                        image_url: u.text,
                        tag: t.text,
                    });
                    found.push((kind, s, span));
                }
            }
            // Nuon's ECR image: pulled like any registry image, with the
            // build runner's own credentials for the registry.
            "aws_ecr" => {
                if let Some(mut t) = r.table(d, kind) {
                    let span = t.span();
                    let url = t.req_str(d, "image_url");
                    let tag = t.req_str(d, "tag");
                    let _region = t.str(d, "region");
                    if let Some(role) = t.str(d, "iam_role_arn") {
                        d.push(t.file.warn(&role.span, "iam_role_arn is not assumed: the build runner pulls from ECR with its own credentials for the registry (an `auths` entry of its docker config.json, e.g. from `aws ecr get-login-password`)"));
                    }
                    t.finish(d, &[], |_| None);
                    let s = url.zip(tag).map(|(u, t)| Source::Image {
                        image_url: u.text,
                        tag: t.text,
                    });
                    found.push((kind, s, span));
                }
            }
            other => unreachable!("unknown source kind {other}"),
        }
    }
    let shown = |k: &str| match k {
        "path" | "oci" => k.to_string(),
        _ => format!("[{k}]"),
    };
    match found.len() {
        0 if required => {
            let list: Vec<String> = allowed.iter().map(|k| shown(k)).collect();
            d.push(r.file.at(
                &r.span(),
                format!("missing a source: give one of {}", list.join(", ")),
            ));
            None
        }
        0 => None,
        1 => found.pop().and_then(|(_, s, _)| s),
        _ => {
            let (second, _, span) = &found[1];
            d.push(r.file.at(
                span,
                format!(
                    "only one source may be given, but there are {} and {}",
                    shown(found[0].0),
                    shown(second)
                ),
            ));
            None
        }
    }
}
