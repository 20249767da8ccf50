//! Terraform's dependency lock file (`.terraform.lock.hcl`) as `terraform
//! init` writes it: one `provider "ADDR" { version, constraints, hashes }`
//! block per provider. The runner's provider cache keeps each module's
//! lock file, hands the next job of the module the providers' versions
//! only, and checks the checksums itself: Terraform, given the hashes,
//! would hash the cached package three times over (700 MB for the AWS
//! provider); given the versions only, it links the cached package and
//! hashes it once, into the lock it writes, which is compared here with
//! the kept one.

use std::collections::BTreeMap;

/// One provider's entry.
#[derive(Debug, Default, PartialEq)]
pub struct Locked {
    /// The version selected.
    pub version: String,
    /// Its checksums (`h1:` of the unpacked package, `zh:` of zip files).
    pub hashes: Vec<String>,
}

/// The entries of a lock file, by provider address.
pub fn parse(text: &str) -> BTreeMap<String, Locked> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, Locked)> = None;
    let mut in_hashes = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("provider ") {
            let addr = rest.trim_end_matches('{').trim().trim_matches('"');
            current = Some((addr.to_owned(), Locked::default()));
            continue;
        }
        let Some((_, entry)) = current.as_mut() else {
            continue;
        };
        if in_hashes || t.starts_with("hashes") {
            in_hashes = !t.contains(']');
            let quoted = t.split('"').skip(1).step_by(2);
            entry.hashes.extend(quoted.map(str::to_owned));
        } else if let Some(v) = t.strip_prefix("version") {
            entry.version = v
                .trim_start_matches([' ', '='])
                .trim_matches('"')
                .to_owned();
        } else if t == "}"
            && let Some((addr, entry)) = current.take()
        {
            out.insert(addr, entry);
        }
    }
    out
}

/// The lock file with its `hashes` left out: the versions still pin what
/// `terraform init` selects.
pub fn without_hashes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_hashes = false;
    for line in text.lines() {
        let t = line.trim();
        if in_hashes || t.starts_with("hashes") {
            in_hashes = !t.contains(']');
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Whether the lock `init` wrote (`now`) agrees with the `kept` one: each
/// provider locked at the same version must have a package checksum
/// (`h1:`) the kept lock recorded. The error names the provider and both checksums.
pub fn check(kept: &str, now: &str) -> Result<(), String> {
    // `h1:` is the hash of an unpacked package, the one a cached package
    // can be checked by (`zh:` hashes are of the registry's zip files).
    let h1 = |l: &Locked| -> Vec<String> {
        let all = l.hashes.iter().filter(|h| h.starts_with("h1:"));
        all.cloned().collect()
    };
    let kept = parse(kept);
    for (addr, n) in parse(now) {
        let Some(k) = kept.get(&addr) else { continue };
        let (was, is) = (h1(k), h1(&n));
        if k.version != n.version || was.is_empty() {
            continue;
        }
        if !is.iter().any(|h| was.contains(h)) {
            return Err(format!(
                "the runner's provider cache holds {addr} {} with checksum {}, which is none of the checksums recorded when it was installed ({}): the cached package was changed; remove it from the runner's provider cache (`plugins/{addr}/{}`) and run the job again",
                n.version,
                is.join(", "),
                was.join(", "),
                n.version,
            ));
        }
    }
    Ok(())
}

/// Whether the two lock files select the same providers at the same
/// versions.
pub fn same_selections(a: &str, b: &str) -> bool {
    let versions = |t: &str| -> Vec<(String, String)> {
        parse(t).into_iter().map(|(a, l)| (a, l.version)).collect()
    };
    versions(a) == versions(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEPT: &str = r#"# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/hashicorp/aws" {
  version     = "5.100.0"
  constraints = "5.100.0"
  hashes = [
    "h1:edXOJWE4ORX8Fm+dpVpICzMZJat4AX0VRCAy/xkcOc0=",
    "zh:0123",
  ]
}

provider "registry.terraform.io/hashicorp/random" {
  version = "3.6.0"
  hashes  = ["h1:rand="]
}
"#;

    #[test]
    fn entries_versions_and_hashes_are_read() {
        let l = parse(KEPT);
        assert_eq!(l.len(), 2);
        let aws = &l["registry.terraform.io/hashicorp/aws"];
        assert_eq!(aws.version, "5.100.0");
        assert_eq!(
            aws.hashes,
            ["h1:edXOJWE4ORX8Fm+dpVpICzMZJat4AX0VRCAy/xkcOc0=", "zh:0123"]
        );
        assert_eq!(
            l["registry.terraform.io/hashicorp/random"].hashes,
            ["h1:rand="]
        );
    }

    #[test]
    fn without_hashes_keeps_the_versions_only() {
        let stripped = without_hashes(KEPT);
        assert!(
            !stripped.contains("h1:") && !stripped.contains("hashes"),
            "{stripped}"
        );
        let l = parse(&stripped);
        assert_eq!(l["registry.terraform.io/hashicorp/aws"].version, "5.100.0");
        assert_eq!(l["registry.terraform.io/hashicorp/random"].version, "3.6.0");
        assert!(same_selections(KEPT, &stripped));
    }

    #[test]
    fn a_cached_package_with_another_checksum_is_refused_by_name() {
        let same = KEPT.replace("\"zh:0123\",\n", "");
        assert!(check(KEPT, &same).is_ok());
        let changed = KEPT.replace("edXOJWE4", "TAMPERED");
        let e = check(KEPT, &changed).unwrap_err();
        assert!(
            e.contains("registry.terraform.io/hashicorp/aws 5.100.0 with checksum h1:TAMPERED"),
            "{e}"
        );
        // Another version is a new selection, not a changed package.
        let upgraded = changed.replace("5.100.0", "5.101.0");
        assert!(check(KEPT, &upgraded).is_ok());
        assert!(!same_selections(KEPT, &upgraded));
    }
}
