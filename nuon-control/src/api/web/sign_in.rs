//! The sign-in pages: a token's form, and the confirmation a sign-in link
//! asks for before it signs the browser in.

use maud::{Markup, html};

use super::layout::layout;

/// The sign-in page.
pub(super) fn login(csrf: &str, error: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            section.login {
                h1 { "Sign in" }
                @if let Some(e) = error {
                    p.error role="alert" { (e) }
                }
                form method="post" action="/login" {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="token" { "API token" }
                    input id="token" type="password" name="token" autocomplete="current-password" required;
                    button.primary type="submit" { "Sign in" }
                }
                p.muted {
                    "A token from " code { "nuon orgs tokens create" } ", from signing in with "
                    code { "nuon login" } ", or the admin token in the control plane's data dir."
                }
            }
        },
    )
}

/// What a sign-in link signs in as, and the button that does it.
pub(super) fn confirm_sign_in(csrf: &str, code: &str, org: &str, who: &str, scope: &str) -> Markup {
    layout(
        "Sign in?",
        None,
        html! {
            section.login {
                h1 { "Sign in?" }
                p {
                    "This link signs you in to the org " strong { (org) } " as " strong { (who) }
                    " (" (scope) ")."
                }
                p.muted {
                    "Go on only if you asked for this link (by " code { "nuon dev" } " or "
                    code { "nuon orgs sign-in-link" } "). A link somebody else sent you would sign you in as them, and what you do would be theirs."
                }
                form method="post" action="/login/code" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="code" value=(code);
                    button.primary type="submit" { "Sign in as " (who) }
                }
                p { a href="/login" { "Cancel, and sign in with a token instead" } }
            }
        },
    )
}
