//! The images users run, read from the tarballs `cargo xtask image` wrote
//! (what `docker load` and `ctr images import` take): each is one image
//! index over linux/amd64 and linux/arm64, under the digest `images.json`
//! gives; each platform's binary is static and built for that platform,
//! and runs — on this host for amd64, under qemu-user (Debian's
//! `qemu-user-static`) for arm64 — saying the image's version; and each
//! platform's manifest has its SBOM beside it, listing the crates linked
//! into its binary.

use std::collections::BTreeMap;
use std::io::Read;

use jobrelay_testbed::deploy::images::{self, Image};
use jobrelay_testbed::deploy::platforms::{self, PLATFORMS};
use serde_json::Value;
use sha2::Digest;

const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const SBOM: &str = "application/vnd.cyclonedx+json";

/// The files of an image tarball, by path.
struct Layout {
    name: String,
    files: BTreeMap<String, Vec<u8>>,
}

impl Layout {
    fn read(image: &Image) -> anyhow::Result<Self> {
        let bytes = std::fs::read(&image.tar)?;
        Ok(Layout {
            name: image.reference.clone(),
            files: untar(&bytes)?,
        })
    }

    fn file(&self, path: &str) -> anyhow::Result<&[u8]> {
        self.files
            .get(path)
            .map(Vec::as_slice)
            .ok_or_else(|| anyhow::anyhow!("{} holds no {path}", self.name))
    }

    /// The blob `digest` names, checked against it.
    fn blob(&self, digest: &str) -> anyhow::Result<&[u8]> {
        let bytes = self.file(&format!("blobs/{}", digest.replacen(':', "/", 1)))?;
        let actual = format!("sha256:{:x}", sha2::Sha256::digest(bytes));
        anyhow::ensure!(
            actual == digest,
            "{}: blob {digest} holds {actual}",
            self.name
        );
        Ok(bytes)
    }

    fn json(&self, digest: &str) -> anyhow::Result<Value> {
        Ok(serde_json::from_slice(self.blob(digest)?)?)
    }
}

fn untar(bytes: &[u8]) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    for entry in tar::Archive::new(bytes).entries()? {
        let mut entry = entry?;
        if entry.header().entry_type().is_file() {
            let path = entry.path()?.to_string_lossy().into_owned();
            let mut contents = Vec::new();
            entry.read_to_end(&mut contents)?;
            files.insert(path, contents);
        }
    }
    Ok(files)
}

fn digest(value: &Value) -> &str {
    value["digest"].as_str().unwrap_or_default()
}

/// Checks one image end to end; says what it ran.
fn check(image: &Image) -> anyhow::Result<()> {
    let layout = Layout::read(image)?;
    let top: Value = serde_json::from_slice(layout.file("index.json")?)?;
    let entries = top["manifests"].as_array().cloned().unwrap_or_default();
    let named: Vec<&Value> = entries
        .iter()
        .filter(|e| e["annotations"]["io.containerd.image.name"].is_string())
        .collect();
    assert_eq!(
        named.len(),
        1,
        "{}: one named image: {top}",
        image.reference
    );
    assert_eq!(named[0]["mediaType"], INDEX, "{}", image.reference);
    assert_eq!(digest(named[0]), image.digest, "images.json's digest");

    let index = layout.json(&image.digest)?;
    let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
    let listed: Vec<(String, String)> = manifests
        .iter()
        .map(|m| {
            let platform = &m["platform"];
            let text = |key: &str| platform[key].as_str().unwrap_or_default().to_owned();
            (text("os"), text("architecture"))
        })
        .collect();
    let expected: Vec<(String, String)> = PLATFORMS
        .iter()
        .map(|p| ("linux".to_owned(), p.architecture.to_owned()))
        .collect();
    assert_eq!(
        listed, expected,
        "{}: the index's platforms",
        image.reference
    );

    let sboms = entries
        .iter()
        .filter(|e| e["artifactType"] == SBOM)
        .map(|e| layout.json(digest(e)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (entry, (_, architecture)) in manifests.iter().zip(&listed) {
        let manifest = layout.json(digest(entry))?;
        let config = layout.json(digest(&manifest["config"]))?;
        assert_eq!(config["architecture"], architecture.as_str());
        let version = config["config"]["Labels"]["org.opencontainers.image.version"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
        let app = untar(layout.blob(digest(layers.last().unwrap_or(&Value::Null)))?)?;
        let path = format!("usr/local/bin/{}", image.binary);
        let binary = app
            .get(&path)
            .ok_or_else(|| anyhow::anyhow!("{}/{architecture}: no {path}", image.reference))?;

        let elf = platforms::elf(&path, binary)?;
        assert_eq!(&elf.architecture, architecture, "{}", image.reference);
        assert_eq!(
            elf.interpreter, None,
            "{} {architecture}: static",
            image.reference
        );

        let said = run(&image.binary, architecture, binary)?;
        assert_eq!(
            said,
            format!("{} {version}", image.binary),
            "{} on {architecture}",
            image.reference
        );
        println!(
            "{} linux/{architecture} {}: static, runs, says {said:?}",
            image.reference,
            digest(entry)
        );

        let sbom = sboms
            .iter()
            .find(|artifact| digest(&artifact["subject"]) == digest(entry))
            .ok_or_else(|| anyhow::anyhow!("{} {architecture}: no SBOM", image.reference))?;
        let document: Value = serde_json::from_slice(layout.blob(digest(&sbom["layers"][0]))?)?;
        assert_eq!(document["bomFormat"], "CycloneDX");
        assert_eq!(document["metadata"]["component"]["name"], image.binary);
        let components = document["components"].as_array().map_or(0, Vec::len);
        assert!(
            components > 50,
            "{} {architecture}: the SBOM lists {components} crates",
            image.reference
        );
        println!("  its SBOM lists {components} crates");
    }
    Ok(())
}

/// What `<binary> --version` prints, run from a copy of `contents` on
/// `architecture`.
fn run(binary: &str, architecture: &str, contents: &[u8]) -> anyhow::Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!(
        "jobrelay-images-{}-{architecture}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(binary);
    std::fs::write(&path, contents)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    let output = platforms::command(architecture, &path, &mut |line| println!("{line}"))?
        .arg("--version")
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let output = output?;
    anyhow::ensure!(
        output.status.success(),
        "{binary} --version on {architecture} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[test]
fn each_image_is_an_index_of_static_binaries_that_run_on_amd64_and_arm64() -> anyhow::Result<()> {
    let images = images::images()?;
    for image in [&images.manager, &images.agent] {
        check(image)?;
    }
    Ok(())
}
