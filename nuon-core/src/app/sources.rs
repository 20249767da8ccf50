//! Where a component, the sandbox or an action step comes from: a path of
//! the config, a public or a private git repository, an OCI artifact.

use super::{Component, ComponentKind, Source};

/// The clone URL of a `[public_repo]`'s `repo`: `owner/name` on GitHub,
/// or the URL itself when it is one (`https://…`, `file://…`, `git@…`).
pub fn public_repo_url(repo: &str) -> String {
    if repo.contains("://") || repo.starts_with("git@") {
        repo.to_owned()
    } else {
        format!("https://github.com/{repo}.git")
    }
}

/// The directory of a `path` source relative to the config's root,
/// `/`-separated, without `./` (`"./src/app/"` is `src/app`; `"."` is
/// the empty string). An absolute path, or one that leaves the root, is
/// an error saying so.
pub fn source_dir(path: &str) -> Result<String, String> {
    if path.starts_with('/') || path.starts_with('\\') {
        return Err(format!(
            "path {path:?} is absolute: give it relative to the app config's directory"
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split(['/', '\\']) {
        match p {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "path {path:?} leaves the app config's directory: the source must be inside it"
                ));
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

impl Component {
    /// The tag an image component's artifact gets in the install's store
    /// when synced, read as `.outputs.image.tag`: the one its `[public]`
    /// source names, else its digest as a tag (`sha256-HEX`, as cosign
    /// names what it attaches); none for other kinds.
    pub fn image_tag(&self, digest: &crate::artifact::Digest) -> Option<String> {
        match (self.kind(), &self.source) {
            (ComponentKind::ContainerImage, Source::Image { tag, .. }) => Some(tag.clone()),
            (ComponentKind::ContainerImage | ComponentKind::DockerBuild, _) => {
                Some(format!("sha256-{}", digest.hex()))
            }
            _ => None,
        }
    }
}
