//! The install stack on the installer page: its downloads with the
//! commands that apply them and, for a CloudFormation stack when the
//! control plane has a template bucket, a "Launch stack" link: a URL of
//! the control plane's own with a one-time token (never the invitation's)
//! that puts the install's template in the bucket and sends the browser
//! to CloudFormation's quick-create page with a presigned link to it (AWS's
//! console reads quick-create templates from S3 only).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use nuon_core::endpoint::push_segment;
use nuon_core::now_ms;
use nuon_core::stack::{StackFormat, cloudformation_stack_name, shell_bundle};
use nuon_core::token::{hash_token, issue_template_token};

use super::super::cookies::cookie;
use super::super::error_page;
use super::{CUSTOMER_COOKIE, MAX_TOKEN, Opened, forbidden, mine, offer, open, said};
use crate::api::{SharedState, Source};
use crate::error::Error;
use crate::store::StoredInvitation;
use nuon_core::model::Install;

/// How long a quick-create link's template URL works: the customer opens
/// the console from the page, and the console fetches it at once.
const TEMPLATE_TTL_MS: i64 = 60 * 60 * 1000;

/// Where the templates of quick-create links are served.
pub(super) const TEMPLATE_PATH: &str = "/stack-templates";

/// The page's "apply the install stack" section: each form as a
/// download with its commands and, for a CloudFormation stack, the
/// "Launch stack" link (a new one each time the page is drawn; the one
/// before stops working), or why there is none.
pub(super) async fn section(
    state: &SharedState,
    token: &str,
    inv: &StoredInvitation,
    install: &Install,
    runner: &str,
) -> Result<Markup, Error> {
    let forms = formats(runner);
    let cloudformation = forms.contains(&StackFormat::CloudFormation);
    let launch = if cloudformation && state.ops.stack_templates.is_some() {
        let issued = issue_template_token();
        state
            .store
            .set_invitation_template(&inv.id, &issued.hash, now_ms() + TEMPLATE_TTL_MS)
            .await?;
        Some(format!("{TEMPLATE_PATH}/{}", issued.secret))
    } else {
        None
    };
    Ok(html! {
        section #stack {
            h2 { "1. Apply the install stack" }
            p { (super::where_it_runs(runner)) " Each download carries a new one-time token for the stack's first call (the one before stops working)." }
            @if let Some(link) = &launch {
                div.stack-form {
                    h3 { "Launch in the AWS console" }
                    p { a #launch-stack href=(link) rel="noopener noreferrer" target="_blank" { "Launch stack" } }
                    p.muted { "Opens CloudFormation's quick-create page in your account, signed in as you, with this install's template (its link works once, for an hour; this page makes a new one when drawn again). Tick the IAM acknowledgement and create the stack." }
                }
            } @else if cloudformation {
                p.muted #no-launch { "No one-click launch here: the vendor has not given the control plane a bucket for templates (AWS's console reads them from S3 only). Download template.json and create the stack with the command below." }
            }
            @for f in forms {
                div.stack-form {
                    h3 { (f) }
                    p { a href={ "/install/" (token) "/stack/" (f) } download=(download_name(&install.name, f)) { "Download " (download_name(&install.name, f)) } }
                    pre { code { (commands(&install.name, f)) } }
                }
            }
        }
    })
}

/// AWS's quick-create link for a stack named `stack_name` from the
/// template at `template_url`.
fn quick_create_link(template_url: &str, stack_name: &str) -> String {
    let mut link = String::from(
        "https://console.aws.amazon.com/cloudformation/home#/stacks/create/review?templateURL=",
    );
    push_segment(&mut link, template_url);
    link.push_str("&stackName=");
    push_segment(&mut link, stack_name);
    link
}

/// `GET /stack-templates/{token}` (the page's "Launch stack"): the
/// install's CloudFormation template (its runner's one-time token new) put
/// in the vendor's bucket, and the customer's browser sent to the
/// quick-create page with a presigned link to it. The link works once.
pub(super) async fn launch(
    State(state): State<SharedState>,
    Source(source): Source,
    Path(token): Path<String>,
) -> Response {
    let Some(bucket) = state.ops.stack_templates.clone() else {
        return gone();
    };
    let (install, body) = match spend_template(&state, source, &token).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let name = format!("{}/{}.json", install.id, super::super::cookies::secret());
    match bucket.put_template(&name, body, now_ms()).await {
        Ok(url) => Redirect::to(&quick_create_link(
            &url,
            &cloudformation_stack_name(&install.name),
        ))
        .into_response(),
        Err(e) => {
            tracing::warn!(install = %install.id, error = %e, "a quick-create template was not put in the bucket");
            said(
                StatusCode::BAD_GATEWAY,
                "The template could not be prepared",
                "The control plane could not put it in the vendor's template bucket (its log says why). Go back to your installer link and download template.json instead (its commands are on the page), or tell the vendor.",
            )
        }
    }
}

/// The page a template link that does not work shows.
fn gone() -> Response {
    said(
        StatusCode::NOT_FOUND,
        "This template link does not work",
        "A stack-template link works once, for an hour, and only the newest one of an install. Open your installer link again: its page has a new Launch stack link.",
    )
}

/// Spends a template link: the install it is for and its CloudFormation
/// template (a new runner token in it), or the page that says why not.
async fn spend_template(
    state: &SharedState,
    source: String,
    token: &str,
) -> Result<(Install, String), Response> {
    if token.is_empty() || token.len() > MAX_TOKEN {
        return Err(gone());
    }
    let inv = match state
        .store
        .spend_invitation_template(&hash_token(token), now_ms())
        .await
    {
        Ok(Some(inv)) => inv,
        Ok(None) => return Err(gone()),
        Err(e) => return Err(error_page(e.into())),
    };
    let made = async {
        let o = offer(state, &inv, source).await?;
        let install = mine(state, &o.caller, &inv).await?;
        let stack = state
            .services()
            .stack_of(&o.caller, &install, Some(StackFormat::CloudFormation))
            .await?;
        match stack.files.as_slice() {
            [one] => Ok((install, one.contents.clone())),
            _ => Err(Error::internal("a CloudFormation stack is one template")),
        }
    }
    .await;
    made.map_err(error_page)
}

/// The stack forms offered for a runner type, the one it asks for first.
pub(super) fn formats(runner_type: &str) -> Vec<StackFormat> {
    match StackFormat::for_runner_type(runner_type) {
        StackFormat::CloudFormation => vec![StackFormat::CloudFormation, StackFormat::Terraform],
        other => vec![other],
    }
}

/// What a download of `format` is called.
fn download_name(install: &str, format: StackFormat) -> String {
    match format {
        StackFormat::CloudFormation => "template.json".into(),
        StackFormat::Terraform => "main.tf.json".into(),
        _ => format!("nuon-stack-{install}.sh"),
    }
}

/// The commands that apply a downloaded `format`.
fn commands(install: &str, format: StackFormat) -> String {
    match format {
        StackFormat::CloudFormation => format!(
            "aws cloudformation create-stack --stack-name {} \\\n  --template-body file://template.json --capabilities CAPABILITY_NAMED_IAM",
            cloudformation_stack_name(install)
        ),
        StackFormat::Terraform => format!(
            "mkdir nuon-{install} && mv main.tf.json nuon-{install}/ && cd nuon-{install}\nterraform init && terraform apply"
        ),
        StackFormat::Vm => format!(
            "sh nuon-stack-{install}.sh && cd nuon-stack-{install}\nsudo sh install.sh    # --binary PATH when nuon-runner is not on PATH"
        ),
        StackFormat::Helm => format!(
            "sh nuon-stack-{install}.sh && cd nuon-stack-{install}\n# then the helm command it prints"
        ),
    }
}

/// The stack of the install this browser made, as a download: a new
/// one-time token each time.
pub(super) async fn stack(
    State(state): State<SharedState>,
    Source(source): Source,
    headers: HeaderMap,
    Path((token, format)): Path<(String, String)>,
) -> Response {
    let Some(cookie) = cookie(&headers, CUSTOMER_COOKIE) else {
        return forbidden();
    };
    let inv = match open(&state, &token, &cookie).await {
        Ok(Opened::Mine(inv)) => inv,
        Ok(_) => return forbidden(),
        Err(e) => return error_page(e),
    };
    let format = match StackFormat::parse(&format) {
        Ok(f) => f,
        Err(e) => return error_page(Error::not_found(e)),
    };
    let made = async {
        let o = offer(&state, &inv, source).await?;
        let install = mine(&state, &o.caller, &inv).await?;
        let stack = state
            .services()
            .stack_of(&o.caller, &install, Some(format))
            .await?;
        Ok::<_, Error>((install, stack))
    }
    .await;
    let (install, stack) = match made {
        Ok(m) => m,
        Err(e) => return error_page(e),
    };
    let name = download_name(&install.name, format);
    let body = match (format, stack.files.as_slice()) {
        (StackFormat::CloudFormation | StackFormat::Terraform, [one]) => one.contents.clone(),
        _ => shell_bundle(&stack, &format!("nuon-stack-{}", install.name)),
    };
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        body,
    )
        .into_response()
}
