//! Names that must fit a cloud's limits, checked at validate with the limit
//! and the length: as written, or as they render for any install when they
//! read nothing but ids.

use super::RunnerSettings;
use super::platform::Loaded;
use nuon_core::app::{Diagnostic, Diagnostics, SourceFile};

/// A stand-in id of the kind `prefix` (`ins`, `org`, ...): as long as a
/// real one, for rendering before there is an install.
pub fn stand_in_id(prefix: &str) -> String {
    format!("{prefix}_{}", "0".repeat(26))
}

/// The longest name an AWS IAM role may have.
pub const IAM_ROLE_NAME_MAX: usize = 64;

/// How long a role name is for any install: as written, or as it renders
/// when it reads nothing but ids (every id is as long as any other). `None`
/// when it reads more (an install's name, an input): that is checked when
/// the install's stack is made, with its values.
pub fn role_name_length(name: &str) -> Option<(usize, String)> {
    use super::template::{self, Reference, RenderContext};
    if !template::is_template(name) {
        return Some((name.len(), name.to_owned()));
    }
    let (refs, errors) = template::scan(name);
    let ids_only = errors.is_empty()
        && refs.iter().all(|a| match &a.reference {
            Reference::InstallId | Reference::OrgId | Reference::AppId => true,
            Reference::State(p) => p == &["runner", "id"],
            _ => false,
        });
    if !ids_only {
        return None;
    }
    let id = stand_in_id;
    let ctx = RenderContext {
        install_id: id(nuon_core::InstallId::PREFIX),
        org_id: id(nuon_core::OrgId::PREFIX),
        app_id: id(nuon_core::AppId::PREFIX),
        runner_id: id(nuon_core::RunnerId::PREFIX),
        ..Default::default()
    };
    let rendered = template::render(name, &ctx).ok()?;
    Some((rendered.len(), rendered))
}

/// Reports each role name past IAM's limit whose role is AWS's (it says
/// so, `cloud_platform = "aws"`, or it does not and the runner is on AWS),
/// at the name's place in its file.
pub(crate) fn report_long_role_names(
    files: &[SourceFile],
    platform: &Loaded,
    runner: Option<&RunnerSettings>,
    d: &mut Diagnostics,
) {
    let aws_runner = runner.is_some_and(|r| r.runner_type.starts_with("aws"));
    let perms = &platform.permissions;
    for role in perms.roles.iter().chain(&perms.break_glass) {
        let aws = match role.cloud_platform.as_deref() {
            Some(p) => p == "aws",
            None => aws_runner,
        };
        let Some((len, rendered)) = role_name_length(&role.name) else {
            continue;
        };
        if !aws || len <= IAM_ROLE_NAME_MAX {
            continue;
        }
        let as_rendered = if rendered == role.name {
            String::new()
        } else {
            format!(" as it renders for an install ({rendered:?})")
        };
        let message = format!(
            "role name {:?} is {len} characters long{as_rendered}; an AWS IAM role name is at most {IAM_ROLE_NAME_MAX}: shorten it",
            role.name
        );
        // Where the name is written (a role file's strings, read in order).
        let at = platform.strings.iter().find_map(|(file, strings)| {
            let s = strings.iter().find(|s| s.text == role.name)?;
            Some((files.get(*file)?, s.span.clone()))
        });
        match at {
            Some((file, span)) => d.push(file.at(&span, message)),
            None => d.push(Diagnostic {
                file: "permissions".into(),
                line: 1,
                col: 1,
                warning: false,
                message,
            }),
        }
    }
}
