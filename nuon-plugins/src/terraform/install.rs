//! Terraform and OpenTofu installed by version, as Nuon's runner does (and
//! tfenv or tenv on a workstation): a component pins `terraform_version`,
//! and a runner without a matching binary fetches that release from a
//! mirror, checks it, and keeps it in its work directory for every later
//! job.
//!
//! A release is taken only when the mirror's `SHA256SUMS` file carries a
//! valid OpenPGP signature by the product's key (HashiCorp's for
//! Terraform, OpenTofu's for OpenTofu: fetched and pinned by fingerprint,
//! or the operator's key file) and the zip's SHA-256 is the one listed
//! there. The binary is unpacked beside the cache, asked its version, and
//! only then moved into place: a failed or interrupted install leaves
//! nothing a job could pick up.
//!
//! The cache is `DIR/terraform/1.11.4/terraform` (`tofu` for OpenTofu),
//! shared by every job of the runner.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use nuon_core::PluginError;
use nuon_core::version::{Constraint, Version};
use sha2::{Digest, Sha256};

use super::{Terraform, version_of};
use crate::openpgp::Keyring;

/// The largest release zip taken (Terraform's is about 30 MB).
const MAX_ZIP_BYTES: u64 = 1 << 30;
/// The largest `SHA256SUMS`, signature, key or index file taken.
const MAX_SMALL_BYTES: usize = 8 << 20;

/// Which binary, from whose releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Product {
    /// HashiCorp's Terraform.
    Terraform,
    /// OpenTofu.
    OpenTofu,
}

impl Product {
    /// The binary's name.
    pub fn binary(self) -> &'static str {
        match self {
            Product::Terraform => "terraform",
            Product::OpenTofu => "tofu",
        }
    }

    /// Where the product publishes its releases.
    pub fn default_mirror(self) -> &'static str {
        match self {
            Product::Terraform => "https://releases.hashicorp.com/terraform",
            Product::OpenTofu => "https://github.com/opentofu/opentofu/releases/download",
        }
    }

    /// Where the product publishes its release signing key, and the
    /// fingerprint that key must have (as each product documents it).
    fn signing_key(self) -> (&'static str, &'static str) {
        match self {
            Product::Terraform => (
                "https://www.hashicorp.com/.well-known/pgp-key.txt",
                "C874011F0AB405110D02105534365D9472D7468F",
            ),
            Product::OpenTofu => (
                "https://get.opentofu.org/opentofu.asc",
                "E3E6E43D84CB852EADB0051D0C0AF313E5FD9F80",
            ),
        }
    }

    /// The directory of one release under the mirror.
    fn release_dir(self, v: &Version) -> String {
        match self {
            Product::Terraform => v.to_string(),
            Product::OpenTofu => format!("v{v}"),
        }
    }

    /// The release's zip for this machine, its `SHA256SUMS` and the
    /// signature of that file.
    fn files(self, v: &Version) -> (String, String, String) {
        let b = self.binary();
        let sums = format!("{b}_{v}_SHA256SUMS");
        let sig = match self {
            Product::Terraform => format!("{sums}.sig"),
            Product::OpenTofu => format!("{sums}.gpgsig"),
        };
        (format!("{b}_{v}_{}_{}.zip", os(), arch()), sums, sig)
    }

    /// The list of releases: HashiCorp's `index.json` beside its releases;
    /// OpenTofu's API for its own site, `index.json` in a mirror.
    fn index_url(self, mirror: &str) -> String {
        match self {
            Product::OpenTofu if mirror == self.default_mirror() => {
                "https://get.opentofu.org/tofu/api.json".into()
            }
            _ => format!("{mirror}/index.json"),
        }
    }
}

impl std::str::FromStr for Product {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "terraform" => Ok(Product::Terraform),
            "opentofu" | "tofu" => Ok(Product::OpenTofu),
            other => Err(format!(
                "{other:?} is not terraform or opentofu (the releases a runner installs)"
            )),
        }
    }
}

/// The operating system in release file names.
fn os() -> &'static str {
    std::env::consts::OS
}

/// The architecture in release file names.
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// Installs releases of one product into a cache directory.
pub struct Installer {
    product: Product,
    mirror: String,
    /// The operator's key file; none: the product's own key, fetched and
    /// pinned by fingerprint.
    key: Option<Keyring>,
    fetched: tokio::sync::OnceCell<Keyring>,
    dir: PathBuf,
    http: reqwest::Client,
    /// One install at a time: two jobs pinning the same version download it once.
    installing: tokio::sync::Mutex<()>,
}

/// A release installed, and what was checked on the way.
#[derive(Debug)]
pub struct Installed {
    /// The binary.
    pub terraform: Terraform,
    /// One line per step, for the job's log.
    pub notes: Vec<String>,
}

impl Installer {
    /// Installs `product` from its own releases into `dir`.
    pub fn new(product: Product, dir: impl Into<PathBuf>) -> Self {
        Installer {
            product,
            mirror: product.default_mirror().into(),
            key: None,
            fetched: tokio::sync::OnceCell::new(),
            dir: dir.into(),
            http: reqwest::Client::builder()
                .connect_timeout(std::time::Duration::from_secs(15))
                .build()
                .unwrap_or_default(),
            installing: tokio::sync::Mutex::new(()),
        }
    }

    /// Releases from `url` (laid out as the product's own release site).
    pub fn mirror(mut self, url: &str) -> Self {
        self.mirror = url.trim_end_matches('/').to_owned();
        self
    }

    /// Checks `SHA256SUMS` against the keys of this key file (armored or
    /// binary) instead of the product's own key.
    pub fn key(mut self, bytes: &[u8]) -> Result<Self, PluginError> {
        self.key = Some(
            Keyring::parse(bytes)
                .map_err(|e| PluginError::Invalid(format!("the mirror's signing key: {e}")))?,
        );
        Ok(self)
    }

    /// The product installed.
    pub fn product(&self) -> Product {
        self.product
    }

    /// Where releases come from.
    pub fn mirror_url(&self) -> &str {
        &self.mirror
    }

    fn product_dir(&self) -> PathBuf {
        self.dir.join(self.product.binary())
    }

    /// The releases in the cache, newest first.
    pub fn held(&self) -> Vec<Terraform> {
        let binary = self.product.binary();
        let mut held: Vec<Terraform> = std::fs::read_dir(self.product_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let version: Version = e.file_name().to_str()?.parse().ok()?;
                let path = e.path().join(binary);
                path.is_file().then_some(Terraform { path, version })
            })
            .collect();
        held.sort_by(|a, b| b.version.cmp_release(&a.version));
        held
    }

    /// The newest release in the cache that satisfies `wanted`.
    pub fn find(&self, wanted: &Constraint) -> Option<Terraform> {
        self.held().into_iter().find(|t| wanted.matches(&t.version))
    }

    /// The newest release in the cache that satisfies `wanted`, installed
    /// from the mirror first when there is none.
    pub async fn install(&self, wanted: &Constraint) -> Result<Installed, PluginError> {
        let _one = self.installing.lock().await;
        if let Some(t) = self.find(wanted) {
            return Ok(Installed {
                terraform: t,
                notes: Vec::new(),
            });
        }
        let name = self.product.binary();
        let fail = |why: String| {
            PluginError::Missing(format!(
                "cannot install {name} for terraform_version {:?} from {}: {why}",
                wanted.to_string(),
                self.mirror
            ))
        };
        let version = match wanted.exact() {
            Some(v) => v.clone(),
            None => self.newest(wanted).await.map_err(fail)?,
        };
        self.install_version(&version).await.map_err(fail)
    }

    /// The newest release the mirror lists that satisfies `wanted`.
    async fn newest(&self, wanted: &Constraint) -> Result<Version, String> {
        let url = self.product.index_url(&self.mirror);
        let bytes = self.get_small(&url).await?;
        let index: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{url} is not a JSON list of releases: {e}"))?;
        // HashiCorp: {"versions": {"1.11.4": {...}}}; OpenTofu: {"versions": [{"id": "1.9.0"}]}.
        let listed: Vec<Version> = match &index["versions"] {
            serde_json::Value::Object(m) => m.keys().filter_map(|k| k.parse().ok()).collect(),
            serde_json::Value::Array(a) => a
                .iter()
                .filter_map(|v| v["id"].as_str().or(v["version"].as_str())?.parse().ok())
                .collect(),
            _ => return Err(format!("{url} has no \"versions\"")),
        };
        listed
            .into_iter()
            .filter(|v| wanted.matches(v))
            .max_by(|a, b| a.cmp_release(b))
            .ok_or_else(|| format!("{url} lists no release that satisfies it"))
    }

    async fn keyring(&self) -> Result<&Keyring, String> {
        if let Some(k) = &self.key {
            return Ok(k);
        }
        let (url, fingerprint) = self.product.signing_key();
        self.fetched
            .get_or_try_init(|| async {
                let bytes = self.get_small(url).await?;
                Keyring::parse(&bytes)
                    .and_then(|k| k.pinned(fingerprint))
                    .map_err(|e| format!("the signing key from {url}: {e}"))
            })
            .await
    }

    async fn install_version(&self, version: &Version) -> Result<Installed, String> {
        let binary = self.product.binary();
        let base = format!("{}/{}", self.mirror, self.product.release_dir(version));
        let (zip_name, sums_name, sig_name) = self.product.files(version);
        let mut notes = vec![format!("installing {binary} {version} from {base}")];

        let sums = self.get_small(&format!("{base}/{sums_name}")).await?;
        let sig = self.get_small(&format!("{base}/{sig_name}")).await?;
        let signer = self
            .keyring()
            .await?
            .verify(&sums, &sig)
            .map_err(|e| format!("{sig_name} refused: {e}"))?;
        notes.push(format!(
            "{sums_name}: signature good, by key {} (primary key {})",
            signer.key, signer.primary
        ));
        let text = String::from_utf8_lossy(&sums);
        let want = text
            .lines()
            .find_map(|l| {
                let (sum, file) = l.split_once(char::is_whitespace)?;
                (file.trim().trim_start_matches('*') == zip_name).then(|| sum.to_lowercase())
            })
            .ok_or_else(|| format!("{sums_name} lists no {zip_name} (this machine's build)"))?;

        std::fs::create_dir_all(self.product_dir())
            .map_err(|e| format!("cannot make {}: {e}", self.product_dir().display()))?;
        let mut zip = tempfile::NamedTempFile::new_in(self.product_dir())
            .map_err(|e| format!("cannot make a download file: {e}"))?;
        let got = self
            .download(&format!("{base}/{zip_name}"), zip.as_file_mut())
            .await?;
        if got != want {
            return Err(format!(
                "{zip_name} does not match {sums_name}: its SHA-256 is {got}, the signed list says {want} (a corrupt or altered download; nothing was installed)"
            ));
        }
        notes.push(format!("{zip_name}: SHA-256 {got} as signed"));

        let dir = self.product_dir();
        let version = version.clone();
        let terraform = tokio::task::spawn_blocking(move || {
            let unpacked = unpack(zip.path(), &dir, binary, &version);
            drop(zip);
            unpacked
        })
        .await
        .map_err(|e| format!("the unpack stopped: {e}"))??;
        notes.push(format!("installed {}", terraform.path.display()));
        Ok(Installed { terraform, notes })
    }

    async fn get(&self, url: &str) -> Result<reqwest::Response, String> {
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| format!("cannot fetch {url}: {}", error_chain(&e)))?;
        if !resp.status().is_success() {
            return Err(format!("{url} answered {}", resp.status()));
        }
        Ok(resp)
    }

    /// A small file, whole.
    async fn get_small(&self, url: &str) -> Result<Vec<u8>, String> {
        let mut resp = self.get(url).await?;
        let mut out = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("cannot read {url}: {}", error_chain(&e)))?
        {
            out.extend_from_slice(&chunk);
            if out.len() > MAX_SMALL_BYTES {
                return Err(format!("{url} is larger than {MAX_SMALL_BYTES} bytes"));
            }
        }
        Ok(out)
    }

    /// Streams `url` into `file`; its SHA-256, lower-case hex.
    async fn download(&self, url: &str, file: &mut std::fs::File) -> Result<String, String> {
        let resp = self.get(url).await?;
        let mut stream = resp.bytes_stream();
        let (mut hash, mut len) = (Sha256::new(), 0u64);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("cannot read {url}: {}", error_chain(&e)))?;
            len += chunk.len() as u64;
            if len > MAX_ZIP_BYTES {
                return Err(format!("{url} is larger than {MAX_ZIP_BYTES} bytes"));
            }
            hash.update(&chunk);
            file.write_all(&chunk)
                .map_err(|e| format!("cannot write the download of {url}: {e}"))?;
        }
        file.flush()
            .map_err(|e| format!("cannot write the download of {url}: {e}"))?;
        Ok(hex::encode(hash.finalize()))
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Unpacks `binary` from the release zip into `DIR/VERSION/`, through a
/// directory of its own that is renamed into place once the binary
/// answers with the version it should be.
fn unpack(zip: &Path, dir: &Path, binary: &str, version: &Version) -> Result<Terraform, String> {
    let file = std::fs::File::open(zip).map_err(|e| format!("cannot open the download: {e}"))?;
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| format!("the release is not a zip: {e}"))?;
    let mut entry = archive
        .by_name(binary)
        .map_err(|e| format!("the release zip has no {binary}: {e}"))?;
    let partial = tempfile::Builder::new()
        .prefix(".partial-")
        .tempdir_in(dir)
        .map_err(|e| format!("cannot make a directory in {}: {e}", dir.display()))?;
    let path = partial.path().join(binary);
    let mut out =
        std::fs::File::create(&path).map_err(|e| format!("cannot write {binary}: {e}"))?;
    let copied = std::io::copy(&mut (&mut entry).take(MAX_ZIP_BYTES * 4), &mut out)
        .map_err(|e| format!("the release zip's {binary} cannot be read: {e}"))?;
    if copied == 0 {
        return Err(format!("the release zip's {binary} is empty"));
    }
    drop(out);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("cannot make {binary} executable: {e}"))?;
    }
    let said = version_of(&path).map_err(|e| format!("the installed binary: {e}"))?;
    if said.cmp_release(version) != std::cmp::Ordering::Equal {
        return Err(format!(
            "the release {version}'s {binary} says it is {said}: refused"
        ));
    }
    let target = dir.join(version.to_string());
    let partial = partial.keep();
    if let Err(e) = std::fs::rename(&partial, &target) {
        let _ = std::fs::remove_dir_all(&partial);
        if !target.join(binary).is_file() {
            return Err(format!(
                "cannot move the release into {}: {e}",
                target.display()
            ));
        }
    }
    Ok(Terraform {
        path: target.join(binary),
        version: version.clone(),
    })
}

#[cfg(test)]
mod tests {
    use nuon_test_fixtures::mirror::{Flavor, ReleaseMirror};

    use super::*;

    /// The machine's own `terraform` and its version, or `None` (skipped).
    fn machine_terraform() -> Option<Terraform> {
        if !nuon_test_fixtures::have_tool("terraform", "install it from a mirror") {
            return None;
        }
        super::super::all_in(std::env::var_os("PATH"))
            .into_iter()
            .find(|t| t.path.ends_with("terraform"))
    }

    fn installer(m: &ReleaseMirror, product: Product, dir: &Path) -> Installer {
        Installer::new(product, dir)
            .mirror(&m.url)
            .key(&std::fs::read(&m.key).unwrap())
            .unwrap()
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[tokio::test]
    async fn a_release_is_installed_only_when_its_signature_and_checksum_hold() {
        let Some(tf) = machine_terraform() else {
            return;
        };
        let v = tf.version.to_string();
        let Some(m) = ReleaseMirror::start(Flavor::Terraform, &v, &tf.path).unwrap() else {
            return;
        };
        let cache = tempfile::tempdir().unwrap();
        let want = |c: &str| c.parse::<Constraint>().unwrap();

        // Signed by a key the runner does not trust: refused, nothing kept.
        m.sign_with_a_stranger().unwrap();
        let i = installer(&m, Product::Terraform, cache.path());
        let e = i.install(&want(&v)).await.unwrap_err().to_string();
        assert!(
            e.contains(".sig refused") && e.contains("not in the keyring"),
            "{e}"
        );
        assert!(i.held().is_empty());

        // A SHA256SUMS changed after it was signed: refused.
        m.republish(&tf.path).unwrap();
        m.alter_sums().unwrap();
        let e = i.install(&want(&v)).await.unwrap_err().to_string();
        assert!(e.contains("does not verify"), "{e}");

        // A zip whose bytes changed: its checksum is not the signed one.
        m.republish(&tf.path).unwrap();
        m.corrupt_zip().unwrap();
        let e = i.install(&want(&v)).await.unwrap_err().to_string();
        assert!(
            e.contains("does not match") && e.contains("nothing was installed"),
            "{e}"
        );
        assert!(i.held().is_empty());
        assert_eq!(
            leftovers(&cache.path().join("terraform")),
            Vec::<String>::new()
        );

        // The real release: installed, its version asked, kept in the cache.
        m.republish(&tf.path).unwrap();
        let done = i.install(&want(&v)).await.unwrap();
        assert_eq!(done.terraform.version, tf.version);
        assert_eq!(
            done.terraform.path,
            cache.path().join(format!("terraform/{v}/terraform"))
        );
        let notes = done.notes.join("\n");
        assert!(notes.contains("signature good"), "{notes}");
        assert!(notes.contains("as signed"), "{notes}");
        // The next job finds it in the cache, without the mirror.
        let again = i.install(&want(&v)).await.unwrap();
        assert!(again.notes.is_empty());
        assert_eq!(i.held().len(), 1);
        // A range is resolved with the mirror's index (the newest that fits).
        let fresh = tempfile::tempdir().unwrap();
        let ranged = installer(&m, Product::Terraform, fresh.path());
        let major = tf.version.parts[0];
        let got = ranged
            .install(&want(&format!(">= {major}.0")))
            .await
            .unwrap();
        assert_eq!(got.terraform.version, tf.version);
        let e = ranged
            .install(&want(">= 99.0"))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("lists no release") && e.contains(">= 99.0"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_signing_subkey_and_opentofus_layout_are_read() {
        let Some(tf) = machine_terraform() else {
            return;
        };
        let v = tf.version.to_string();
        let Some(m) = ReleaseMirror::start(Flavor::OpenTofu, &v, &tf.path).unwrap() else {
            return;
        };
        m.sign_with_an_ed25519_subkey().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let i = installer(&m, Product::OpenTofu, cache.path());
        let done = i.install(&v.parse().unwrap()).await.unwrap();
        assert_eq!(
            done.terraform.path,
            cache.path().join(format!("tofu/{v}/tofu"))
        );
        let signed = done
            .notes
            .iter()
            .find(|n| n.contains("signature good"))
            .unwrap();
        let keys = Keyring::parse(&std::fs::read(&m.key).unwrap()).unwrap();
        let primary = &keys.primaries()[0];
        assert!(
            signed.contains(&format!("(primary key {primary})"))
                && !signed.contains(&format!("by key {primary}")),
            "signed by the subkey: {signed}"
        );
        // Pinned to another fingerprint, the same key file is refused.
        let e = keys
            .pinned("C874 011F 0AB4 0511 0D02 1055 3436 5D94 72D7 468F")
            .unwrap_err();
        assert!(e.to_string().contains("not the expected C874011F"), "{e}");
    }
}
