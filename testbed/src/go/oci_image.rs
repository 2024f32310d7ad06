//! Container images the test bed makes itself, for a real node's containerd
//! to import (`ctr images import`): an OCI image layout in a tar archive,
//! one uncompressed layer from scratch. Written reproducibly — entries
//! sorted, timestamps zero, owned by root — with no daemon and no registry,
//! so the same files always give the same image digest.

use std::path::Path;

use serde_json::json;
use sha2::{Digest, Sha256};

/// One file of an image's single layer.
#[derive(Debug, Clone)]
pub struct ImageFile {
    /// Where it lies in the image, without a leading `/` (`pause`, `bin/x`).
    pub path: String,
    pub content: Vec<u8>,
    /// Permission bits, e.g. `0o755`.
    pub mode: u32,
}

/// An image from scratch: its files and how its container starts.
#[derive(Debug, Clone)]
pub struct Image {
    /// The name containerd records it under, e.g. `jobrelay.test/pause:1`.
    pub name: String,
    pub entrypoint: Vec<String>,
    /// The user it runs as unless a Pod says otherwise (`65532`).
    pub user: String,
    pub files: Vec<ImageFile>,
}

/// The tar format cannot name an entry longer than this without extensions.
const NAME_LIMIT: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("image {image}: the path {path:?} is longer than {NAME_LIMIT} bytes")]
    LongPath { image: String, path: String },
    #[error("writing {0}: {1}")]
    Write(String, #[source] std::io::Error),
}

/// Writes `image` as an OCI archive to `path` (through a temporary file, so
/// a reader never sees half an archive).
pub fn write_archive(image: &Image, path: &Path) -> Result<(), Error> {
    let bytes = archive(image)?;
    let partial = path.with_extension("partial");
    std::fs::write(&partial, bytes).map_err(|e| Error::Write(partial.display().to_string(), e))?;
    std::fs::rename(&partial, path).map_err(|e| Error::Write(path.display().to_string(), e))
}

/// The OCI archive of `image`: `oci-layout`, `index.json` naming the image
/// (`io.containerd.image.name`), and the blobs of its manifest, config and
/// layer.
pub fn archive(image: &Image) -> Result<Vec<u8>, Error> {
    let layer = layer(image)?;
    let layer_digest = sha256(&layer);
    let (os, architecture) = ("linux", go_architecture());
    let config = json!({
        "architecture": architecture,
        "os": os,
        "config": {
            "Entrypoint": image.entrypoint,
            "User": image.user,
            "Env": ["PATH=/"],
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "the jobrelay test kit"}],
    });
    let config = serde_json::to_vec(&config).expect("a JSON value serializes");
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": sha256(&config),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": layer_digest,
            "size": layer.len(),
        }],
    });
    let manifest = serde_json::to_vec(&manifest).expect("a JSON value serializes");
    let tag = image.name.rsplit_once(':').map_or("latest", |(_, tag)| tag);
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": sha256(&manifest),
            "size": manifest.len(),
            "platform": {"architecture": architecture, "os": os},
            "annotations": {
                "io.containerd.image.name": image.name,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    });
    let index = serde_json::to_vec(&index).expect("a JSON value serializes");

    let mut blobs: Vec<(String, Vec<u8>)> = [layer, config, manifest]
        .into_iter()
        .map(|blob| {
            let digest = sha256(&blob);
            let hex = digest.trim_start_matches("sha256:").to_string();
            (format!("blobs/sha256/{hex}"), blob)
        })
        .collect();
    blobs.sort();
    let mut tar = Tar::default();
    tar.directory("blobs/");
    tar.directory("blobs/sha256/");
    for (path, blob) in &blobs {
        tar.file(path, blob, 0o644);
    }
    tar.file("index.json", &index, 0o644);
    tar.file("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#, 0o644);
    Ok(tar.finish())
}

/// The image's one layer: its files, and the folders above them, sorted.
fn layer(image: &Image) -> Result<Vec<u8>, Error> {
    let mut files = image.files.clone();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let mut directories = std::collections::BTreeSet::new();
    for file in &files {
        let path = file.path.trim_start_matches('/');
        if path.len() + 1 > NAME_LIMIT {
            return Err(Error::LongPath {
                image: image.name.clone(),
                path: file.path.clone(),
            });
        }
        let mut parent = Path::new(path).parent();
        while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
            directories.insert(format!("{}/", dir.display()));
            parent = dir.parent();
        }
    }
    let mut tar = Tar::default();
    for dir in &directories {
        tar.directory(dir);
    }
    for file in &files {
        tar.file(file.path.trim_start_matches('/'), &file.content, file.mode);
    }
    Ok(tar.finish())
}

/// `sha256:<hex>` of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// This machine's architecture as Go and OCI name it.
pub(crate) fn go_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// A ustar writer for short names, enough for image layouts and layers.
#[derive(Default)]
struct Tar {
    bytes: Vec<u8>,
}

impl Tar {
    const BLOCK: usize = 512;

    fn directory(&mut self, path: &str) {
        self.entry(path, &[], 0o755, b'5');
    }

    fn file(&mut self, path: &str, content: &[u8], mode: u32) {
        self.entry(path, content, mode, b'0');
    }

    fn entry(&mut self, path: &str, content: &[u8], mode: u32, kind: u8) {
        let mut header = [0u8; Self::BLOCK];
        header[..path.len()].copy_from_slice(path.as_bytes());
        octal(&mut header[100..108], u64::from(mode));
        octal(&mut header[108..116], 0); // uid
        octal(&mut header[116..124], 0); // gid
        octal(&mut header[124..136], content.len() as u64);
        octal(&mut header[136..148], 0); // mtime
        header[156] = kind;
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        header[265..269].copy_from_slice(b"root");
        header[297..301].copy_from_slice(b"root");
        // The checksum is taken with its own field read as spaces.
        header[148..156].fill(b' ');
        let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
        let field = format!("{sum:06o}\0 ");
        header[148..156].copy_from_slice(field.as_bytes());
        self.bytes.extend_from_slice(&header);
        self.bytes.extend_from_slice(content);
        let padding = (Self::BLOCK - content.len() % Self::BLOCK) % Self::BLOCK;
        self.bytes.extend(std::iter::repeat_n(0, padding));
    }

    /// The archive, closed by two empty blocks.
    fn finish(mut self) -> Vec<u8> {
        self.bytes.extend(std::iter::repeat_n(0, 2 * Self::BLOCK));
        self.bytes
    }
}

/// Writes `value` in octal, zero-padded, NUL-terminated, into `field`.
fn octal(field: &mut [u8], value: u64) {
    let width = field.len() - 1;
    let text = format!("{value:0width$o}");
    field[..width].copy_from_slice(text.as_bytes());
    field[width] = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Name, size and content of every entry, read back from a tar.
    fn entries(tar: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at + 512 <= tar.len() && tar[at] != 0 {
            let header = &tar[at..at + 512];
            let name_end = header[..100].iter().position(|&b| b == 0).unwrap_or(100);
            let name = String::from_utf8(header[..name_end].to_vec()).unwrap();
            let size =
                u64::from_str_radix(std::str::from_utf8(&header[124..135]).unwrap().trim(), 8)
                    .unwrap() as usize;
            let stored: u32 =
                u32::from_str_radix(std::str::from_utf8(&header[148..154]).unwrap(), 8).unwrap();
            let mut blank = header.to_vec();
            blank[148..156].fill(b' ');
            assert_eq!(
                stored,
                blank.iter().map(|&b| u32::from(b)).sum::<u32>(),
                "{name}"
            );
            out.push((name, tar[at + 512..at + 512 + size].to_vec()));
            at += 512 + size.div_ceil(512) * 512;
        }
        out
    }

    fn image() -> Image {
        Image {
            name: "jobrelay.test/workload:1".into(),
            entrypoint: vec!["/bin/workload".into()],
            user: "65532".into(),
            files: vec![ImageFile {
                path: "bin/workload".into(),
                content: b"#!binary".to_vec(),
                mode: 0o755,
            }],
        }
    }

    #[test]
    fn the_index_names_the_image_and_every_digest_matches_its_blob() {
        let archive = archive(&image()).unwrap();
        let files: std::collections::BTreeMap<String, Vec<u8>> =
            entries(&archive).into_iter().collect();
        let blob = |digest: &serde_json::Value| {
            let hex = digest.as_str().unwrap().trim_start_matches("sha256:");
            let bytes = &files[&format!("blobs/sha256/{hex}")];
            assert_eq!(sha256(bytes), digest.as_str().unwrap());
            bytes.clone()
        };
        let index: serde_json::Value = serde_json::from_slice(&files["index.json"]).unwrap();
        let described = &index["manifests"][0];
        assert_eq!(
            described["annotations"]["io.containerd.image.name"],
            "jobrelay.test/workload:1"
        );
        let manifest: serde_json::Value =
            serde_json::from_slice(&blob(&described["digest"])).unwrap();
        let config: serde_json::Value =
            serde_json::from_slice(&blob(&manifest["config"]["digest"])).unwrap();
        assert_eq!(config["config"]["User"], "65532");
        assert_eq!(
            config["rootfs"]["diff_ids"][0],
            manifest["layers"][0]["digest"]
        );
        let layer = blob(&manifest["layers"][0]["digest"]);
        assert_eq!(
            entries(&layer),
            [
                ("bin/".to_string(), Vec::new()),
                ("bin/workload".to_string(), b"#!binary".to_vec()),
            ]
        );
        assert!(files.contains_key("oci-layout"));
    }

    #[test]
    fn the_same_image_gives_the_same_bytes() {
        assert_eq!(archive(&image()).unwrap(), archive(&image()).unwrap());
    }

    #[test]
    fn a_path_too_long_for_tar_is_refused_by_name() {
        let mut image = image();
        image.files[0].path = "x".repeat(120);
        let err = archive(&image).unwrap_err().to_string();
        assert!(err.contains("jobrelay.test/workload:1"), "{err}");
    }
}
