//! An OCI image assembled in memory from plain data: per platform, layer
//! tars, the config and the manifest; over them, one image index; and the
//! files of an OCI image layout (with a Docker `manifest.json` beside them,
//! for the first platform, so older `docker load` takes it too).
//!
//! Nothing here reads the clock, the host or the environment: the same spec
//! gives the same bytes, hence the same manifest digest.

use std::collections::BTreeMap;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::archive::{self, File};

const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The config of an artifact that has none: `{}`.
const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";

/// Where an image is known by: `repository:tag`, e.g. `jobrelay/manager:0.1.0`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub repository: String,
    pub tag: String,
}

impl Reference {
    pub fn new(repository: &str, tag: &str) -> anyhow::Result<Self> {
        let tag_ok = tag.len() <= 128
            && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        anyhow::ensure!(
            tag_ok,
            "{tag:?} is not a valid image tag (letters, digits, `_`, `.`, `-`; at most 128)"
        );
        let repository_ok = !repository.is_empty()
            && repository.split('/').all(|part| !part.is_empty())
            && repository
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/:".contains(c));
        anyhow::ensure!(
            repository_ok,
            "{repository:?} is not a valid image repository"
        );
        Ok(Reference {
            repository: repository.to_owned(),
            tag: tag.to_owned(),
        })
    }

    /// As people and `docker` write it: `jobrelay/manager:0.1.0`.
    pub fn familiar(&self) -> String {
        format!("{}:{}", self.repository, self.tag)
    }

    /// Fully qualified, as containerd (and so the kubelet) stores it:
    /// `docker.io/jobrelay/manager:0.1.0`.
    pub fn qualified(&self) -> String {
        let (first, rest) = self.repository.split_once('/').unwrap_or(("", ""));
        let has_registry = first.contains(['.', ':']) || first == "localhost";
        match (has_registry, rest.is_empty()) {
            (true, _) => self.familiar(),
            (false, true) => format!("docker.io/library/{}", self.familiar()),
            (false, false) => format!("docker.io/{}", self.familiar()),
        }
    }
}

/// The platform an image runs on, in OCI's words (`amd64`, `linux`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    pub architecture: String,
    pub os: String,
}

/// Everything one platform's image is made of.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    pub platform: Platform,
    /// Bottom layer first; each layer is the files it adds.
    pub layers: Vec<Vec<File>>,
    /// `uid:gid` the process runs as.
    pub user: String,
    pub entrypoint: Vec<String>,
    /// `NAME=value` lines.
    pub env: Vec<String>,
    pub working_dir: String,
    pub labels: BTreeMap<String, String>,
    /// Seconds since the epoch: every file's mtime and the image's `created`.
    pub epoch: u64,
}

/// A content-addressed blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    /// `sha256:<hex>`.
    pub digest: String,
    pub bytes: Vec<u8>,
}

impl Blob {
    pub fn new(bytes: Vec<u8>) -> Self {
        let digest = format!("sha256:{}", hex(&Sha256::digest(&bytes)));
        Blob { digest, bytes }
    }

    /// Where the blob lives in an OCI layout: `blobs/sha256/<hex>`.
    pub fn layout_path(&self) -> String {
        format!("blobs/{}", self.digest.replacen(':', "/", 1))
    }

    fn descriptor(&self, media_type: &str) -> serde_json::Value {
        json!({ "mediaType": media_type, "digest": self.digest, "size": self.bytes.len() })
    }
}

/// One platform's image: its layers, config and manifest.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub platform: Platform,
    pub layers: Vec<Blob>,
    pub config: Blob,
    pub manifest: Blob,
}

impl Manifest {
    /// The manifest digest.
    pub fn digest(&self) -> &str {
        &self.manifest.digest
    }
}

/// An image in memory: an image index over one manifest per platform.
#[derive(Clone, Debug)]
pub struct Image {
    pub manifests: Vec<Manifest>,
    /// The image index: each platform's manifest, with its platform.
    pub index: Blob,
    /// The layout's `index.json`: the image index, with its names, then the
    /// artifacts that refer to its manifests.
    pub layout_index: Vec<u8>,
    /// Docker's `manifest.json`, for `docker load` without OCI support.
    pub docker_manifest: Vec<u8>,
    /// The blobs of artifacts that refer to the manifests (their SBOMs):
    /// their manifests, configs and contents.
    pub referrers: Vec<Blob>,
}

impl Image {
    /// The index digest, by which registries and runtimes know the image
    /// on every platform.
    pub fn digest(&self) -> &str {
        &self.index.digest
    }

    /// The files of the OCI image layout (plus Docker's `manifest.json`),
    /// each blob once.
    pub fn layout_files(&self) -> Vec<File> {
        let mut files = vec![
            File::new("oci-layout", 0o644, r#"{"imageLayoutVersion":"1.0.0"}"#),
            File::new("index.json", 0o644, self.layout_index.clone()),
            File::new("manifest.json", 0o644, self.docker_manifest.clone()),
        ];
        let blobs = self
            .manifests
            .iter()
            .flat_map(|m| m.layers.iter().chain([&m.config, &m.manifest]))
            .chain([&self.index])
            .chain(&self.referrers)
            .map(|blob| File::new(&blob.layout_path(), 0o644, blob.bytes.clone()));
        for blob in blobs {
            if !files.iter().any(|file| file.path == blob.path) {
                files.push(blob);
            }
        }
        files
    }

    /// The image with an artifact of `artifact_type` holding `contents`
    /// that refers to the manifest `subject` (OCI 1.1: the artifact's
    /// manifest names it as its `subject`), listed in the layout's index
    /// after the image.
    pub fn with_artifact(
        mut self,
        subject: &str,
        artifact_type: &str,
        contents: Vec<u8>,
    ) -> anyhow::Result<Image> {
        let subject = self
            .manifests
            .iter()
            .find(|m| m.digest() == subject)
            .ok_or_else(|| anyhow::anyhow!("the image has no manifest {subject}"))?;
        let contents = Blob::new(contents);
        let empty = Blob::new(b"{}".to_vec());
        let mut config = empty.descriptor(EMPTY_MEDIA_TYPE);
        config["data"] = json!("e30=");
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": artifact_type,
            "config": config,
            "layers": [contents.descriptor(artifact_type)],
            "subject": subject.manifest.descriptor(MANIFEST_MEDIA_TYPE),
        });
        let manifest = Blob::new(serde_json::to_vec(&manifest)?);
        let mut entry = manifest.descriptor(MANIFEST_MEDIA_TYPE);
        entry["artifactType"] = json!(artifact_type);
        let mut index: serde_json::Value = serde_json::from_slice(&self.layout_index)?;
        index["manifests"]
            .as_array_mut()
            .ok_or_else(|| anyhow::anyhow!("the layout's index lists no manifests"))?
            .push(entry);
        self.layout_index = serde_json::to_vec(&index)?;
        self.referrers.extend([manifest, empty, contents]);
        Ok(self)
    }

    /// The layout as one tarball, for `docker load`, `podman load`,
    /// `ctr images import` and `skopeo copy oci-archive:`.
    pub fn layout_tar(&self, epoch: u64) -> anyhow::Result<Vec<u8>> {
        archive::tar(&self.layout_files(), epoch)
    }
}

/// Builds the layers, config and manifest of `spec`.
pub fn assemble(spec: &ImageSpec) -> anyhow::Result<Manifest> {
    let layers = spec
        .layers
        .iter()
        .map(|files| Ok(Blob::new(archive::tar(files, spec.epoch)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let created = rfc3339(spec.epoch);
    // Layers are not compressed, so each layer's diff ID is its digest.
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    let history: Vec<_> = (0..layers.len())
        .map(|n| json!({ "created": created, "created_by": format!("cargo xtask image (layer {n})") }))
        .collect();
    let config = json!({
        "created": created,
        "architecture": spec.platform.architecture,
        "os": spec.platform.os,
        "config": {
            "User": spec.user,
            "Env": spec.env,
            "Entrypoint": spec.entrypoint,
            "WorkingDir": spec.working_dir,
            "Labels": spec.labels,
        },
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
        "history": history,
    });
    let config = Blob::new(serde_json::to_vec(&config)?);

    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": config.descriptor(CONFIG_MEDIA_TYPE),
        "layers": layers.iter().map(|l| l.descriptor(LAYER_MEDIA_TYPE)).collect::<Vec<_>>(),
    });
    Ok(Manifest {
        platform: spec.platform.clone(),
        manifest: Blob::new(serde_json::to_vec(&manifest)?),
        layers,
        config,
    })
}

/// The image `reference` names: an image index over `manifests`, one per
/// platform, the first also in Docker's `manifest.json`.
pub fn index(reference: &Reference, manifests: Vec<Manifest>) -> anyhow::Result<Image> {
    let first = manifests
        .first()
        .ok_or_else(|| anyhow::anyhow!("{} has no manifest", reference.familiar()))?;
    for (n, manifest) in manifests.iter().enumerate() {
        anyhow::ensure!(
            !manifests[..n]
                .iter()
                .any(|m| m.platform == manifest.platform),
            "{} has two manifests for {}/{}",
            reference.familiar(),
            manifest.platform.os,
            manifest.platform.architecture
        );
    }
    let entries: Vec<_> = manifests
        .iter()
        .map(|m| {
            let mut entry = m.manifest.descriptor(MANIFEST_MEDIA_TYPE);
            entry["platform"] = json!({
                "architecture": m.platform.architecture,
                "os": m.platform.os,
            });
            entry
        })
        .collect();
    let index = Blob::new(serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": entries,
    }))?);

    let mut entry = index.descriptor(INDEX_MEDIA_TYPE);
    // containerd and Docker name the image from `io.containerd.image.name`;
    // podman from `ref.name`, which must then be the whole reference (a bare
    // tag there makes podman call the image `localhost/<tag>:latest`).
    entry["annotations"] = json!({
        "io.containerd.image.name": reference.qualified(),
        "org.opencontainers.image.ref.name": reference.qualified(),
    });
    let layout_index = json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [entry],
    });

    let docker_manifest = json!([{
        "Config": first.config.layout_path(),
        "RepoTags": [reference.familiar()],
        "Layers": first.layers.iter().map(Blob::layout_path).collect::<Vec<_>>(),
    }]);

    Ok(Image {
        layout_index: serde_json::to_vec(&layout_index)?,
        docker_manifest: serde_json::to_vec(&docker_manifest)?,
        index,
        manifests,
        referrers: Vec::new(),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `seconds` since the epoch as an RFC 3339 UTC time, e.g. `2023-11-14T22:13:20Z`.
pub fn rfc3339(seconds: u64) -> String {
    let days = seconds / 86_400;
    let rest = seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}
