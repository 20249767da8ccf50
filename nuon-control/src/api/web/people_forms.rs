//! The people page's forms: invite, change a role, remove, make and
//! revoke API tokens, each the service's own operation, refused, done and
//! recorded as the API does it.

use axum::extract::{Form, Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use nuon_core::endpoint as ep;

use super::layout::html;
use super::{Fields, Web, error_page, field, pages, refused};
use crate::api::{SharedState, Source};
use crate::error::Error;
use crate::service::require_admin;

/// What a form on the people page does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PeopleAct {
    Invite,
    Role,
    Remove,
    MakeToken,
    Revoke,
}

/// Invites, changes a role, removes (once confirmed), makes a token
/// (its secret shown once) or revokes one (once confirmed): each the
/// service's own operation, which refuses it as the API does (an owner is
/// made only by an owner) and records it.
pub(super) async fn people_act(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
    act: PeopleAct,
) -> Response {
    use nuon_core::wire::{CreateToken, InviteUser, SetUserRole};
    if let Some(r) = refused(&web, &fields, require_admin) {
        return r;
    }
    // A role or a scope from the form's field `name`, read as the API
    // reads it from a body.
    fn choice<T: serde::de::DeserializeOwned>(fields: &Fields, name: &str) -> Result<T, Error> {
        let text = field(fields, name).unwrap_or_default().to_owned();
        serde_json::from_value(serde_json::Value::String(text))
            .map_err(|e| Error::bad_request(format!("the form: {e}")))
    }
    let caller = web.auth.caller_at(source);
    let services = state.services();
    let text = |name: &str| field(&fields, name).unwrap_or_default().to_owned();
    let confirmed = field(&fields, "confirm") == Some("yes");
    let ask = |question: String, what: &str, action: String| {
        html(pages::confirmation(
            &web,
            &pages::Confirm {
                question: &question,
                what: maud::html! { p { (what) } },
                action: &action,
                button: "Yes",
                class: "danger",
                hidden: &[],
                type_name: None,
                back: "/people",
            },
        ))
    };
    // Each act: what the service did; then one way back to the page.
    let result: Result<(), Error> = match act {
        PeopleAct::Invite => match choice(&fields, "role") {
            Ok(role) => {
                let req = InviteUser {
                    email: text("email"),
                    role,
                };
                services.invite_user(&caller, req).await.map(drop)
            }
            // Refused before the service saw it: recorded as the API
            // records a body it cannot read.
            Err(e) => {
                services
                    .audited_at::<ep::InviteUser, _>(&caller, &[], Err(e))
                    .await
            }
        },
        PeopleAct::Role => match choice(&fields, "role") {
            Ok(role) => services
                .set_user_role(&caller, &key, SetUserRole { role })
                .await
                .map(drop),
            Err(e) => {
                services
                    .audited_at::<ep::SetUserRole, _>(&caller, &[&key], Err(e))
                    .await
            }
        },
        PeopleAct::Remove => {
            if !confirmed {
                return ask(
                    "Remove this person?".into(),
                    "They can no longer sign in, and every token of theirs is revoked at once.",
                    format!("/people/{key}/remove"),
                );
            }
            services.remove_user(&caller, &key).await.map(drop)
        }
        PeopleAct::Revoke => {
            if !confirmed {
                return ask(
                    "Revoke this token?".into(),
                    "Whatever uses it is refused from then on; a dashboard session signed in with it ends.",
                    format!("/tokens/{key}/revoke"),
                );
            }
            services.revoke_token(&caller, &key).await.map(drop)
        }
        PeopleAct::MakeToken => {
            // Answered with the new token's secret, shown once.
            let made = match choice(&fields, "scope") {
                Ok(scope) => {
                    let req = CreateToken {
                        name: text("name"),
                        scope,
                        service_account: false,
                    };
                    services.create_token(&caller, req).await
                }
                Err(e) => {
                    services
                        .audited_at::<ep::CreateToken, _>(&caller, &[], Err(e))
                        .await
                }
            };
            return match made {
                Ok(made) => html(pages::token_made(&web, &made)),
                Err(e) => error_page(e),
            };
        }
    };
    match result {
        Ok(()) => Redirect::to("/people").into_response(),
        Err(e) => error_page(e),
    }
}
