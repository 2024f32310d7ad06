//! Whole images built from small fake inputs: reproducible digests, the
//! config a Pod runs with, an index over the platforms, and a layout whose
//! every reference resolves.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::archive::tests::{Entry, listing};
use super::oci::{self, Image, Platform, Reference};
use super::spec::{Inputs, image_spec};

fn inputs() -> anyhow::Result<Inputs> {
    Ok(Inputs {
        binary: "jobrelay-agent".to_owned(),
        platform: Platform {
            architecture: "amd64".to_owned(),
            os: "linux".to_owned(),
        },
        version: "0.1.0".to_owned(),
        revision: "5c7e03a817a79bbfc8ab868da2970b91bfb5be62".to_owned(),
        license: Some("Apache-2.0".to_owned()),
        description: None,
        epoch: 1_700_000_000,
        binary_contents: b"\x7fELF fake agent".to_vec(),
    })
}

/// The same inputs for arm64, with that platform's binary.
fn arm64() -> anyhow::Result<Inputs> {
    let mut inputs = inputs()?;
    inputs.platform.architecture = "arm64".to_owned();
    inputs.binary_contents = b"\x7fELF fake arm64 agent".to_vec();
    Ok(inputs)
}

fn reference() -> anyhow::Result<Reference> {
    Reference::new("jobrelay/agent", "0.1.0")
}

/// An image of `platforms`' inputs, in that order.
fn build_all(platforms: &[Inputs]) -> anyhow::Result<Image> {
    let manifests = platforms
        .iter()
        .map(|inputs| oci::assemble(&image_spec(inputs)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    oci::index(&reference()?, manifests)
}

fn build(inputs: &Inputs) -> anyhow::Result<Image> {
    build_all(std::slice::from_ref(inputs))
}

fn json(bytes: &[u8]) -> anyhow::Result<Value> {
    Ok(serde_json::from_slice(bytes)?)
}

#[test]
fn same_inputs_give_the_same_digest_and_bytes() -> anyhow::Result<()> {
    let first = build(&inputs()?)?;
    let second = build(&inputs()?)?;
    assert_eq!(first.digest(), second.digest());
    assert_eq!(
        first.layout_tar(1_700_000_000)?,
        second.layout_tar(1_700_000_000)?
    );
    Ok(())
}

#[test]
fn each_input_changes_the_digest() -> anyhow::Result<()> {
    let original = build(&inputs()?)?;
    type Change = (&'static str, fn(&mut Inputs));
    let changes: [Change; 3] = [
        ("binary", |i| i.binary_contents.push(0)),
        ("revision", |i| i.revision = "unknown".to_owned()),
        ("epoch", |i| i.epoch += 1),
    ];
    for (what, change) in changes {
        let mut changed = inputs()?;
        change(&mut changed);
        assert_ne!(build(&changed)?.digest(), original.digest(), "{what}");
    }
    // The tag names the image; it is not part of what the digest covers.
    let manifest = oci::assemble(&image_spec(&inputs()?))?;
    let retagged = oci::index(&Reference::new("jobrelay/agent", "dev")?, vec![manifest])?;
    assert_eq!(retagged.digest(), original.digest());
    // Each platform's manifest is part of it.
    assert_ne!(
        build_all(&[inputs()?, arm64()?])?.digest(),
        original.digest()
    );
    Ok(())
}

#[test]
fn config_runs_the_binary_as_nonroot_with_labels() -> anyhow::Result<()> {
    let image = build(&inputs()?)?;
    let config = json(&image.manifests[0].config.bytes)?;
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
    assert_eq!(config["created"], "2023-11-14T22:13:20Z");
    let run = &config["config"];
    assert_eq!(run["User"], "65532:65532");
    assert_eq!(
        run["Entrypoint"],
        serde_json::json!(["/usr/local/bin/jobrelay-agent"])
    );
    assert_eq!(run["WorkingDir"], "/");
    let env = run["Env"].as_array().cloned().unwrap_or_default();
    assert_eq!(env.len(), 1);
    assert!(env[0].as_str().unwrap_or_default().starts_with("PATH="));
    let labels = &run["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], "jobrelay-agent");
    assert_eq!(labels["org.opencontainers.image.version"], "0.1.0");
    assert_eq!(
        labels["org.opencontainers.image.revision"],
        "5c7e03a817a79bbfc8ab868da2970b91bfb5be62"
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert_eq!(
        labels["org.opencontainers.image.source"],
        "https://github.com/jobrelay/jobrelay"
    );
    Ok(())
}

/// Every reference in the layout names a blob of that digest and size.
#[test]
fn layout_references_resolve_to_blobs() -> anyhow::Result<()> {
    let image = build(&inputs()?)?;
    let files = image.layout_files();
    let blob = |digest: &str| -> anyhow::Result<Vec<u8>> {
        let path = format!("blobs/{}", digest.replacen(':', "/", 1));
        let file = files.iter().find(|f| f.path == path);
        let bytes = file.map(|f| f.contents.clone());
        let bytes = bytes.ok_or_else(|| anyhow::anyhow!("no blob {path}"))?;
        let actual = format!("sha256:{:x}", Sha256::digest(&bytes));
        anyhow::ensure!(actual == digest, "{path} holds {actual}");
        Ok(bytes)
    };
    let check = |descriptor: &Value, media_type: &str| -> anyhow::Result<Vec<u8>> {
        assert_eq!(descriptor["mediaType"], media_type);
        let bytes = blob(descriptor["digest"].as_str().unwrap_or_default())?;
        assert_eq!(descriptor["size"].as_u64(), Some(bytes.len() as u64));
        Ok(bytes)
    };

    let layout = files.iter().find(|f| f.path == "oci-layout");
    let layout = json(&layout.map(|f| f.contents.clone()).unwrap_or_default())?;
    assert_eq!(layout["imageLayoutVersion"], "1.0.0");

    let layout_index = json(&image.layout_index)?;
    let entries = layout_index["manifests"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    let annotations = &entry["annotations"];
    assert_eq!(
        annotations["io.containerd.image.name"],
        "docker.io/jobrelay/agent:0.1.0"
    );
    assert_eq!(
        annotations["org.opencontainers.image.ref.name"],
        "docker.io/jobrelay/agent:0.1.0"
    );
    let index = json(&check(entry, "application/vnd.oci.image.index.v1+json")?)?;
    assert_eq!(entry["digest"], image.digest());
    let platforms = index["manifests"].as_array().cloned().unwrap_or_default();
    assert_eq!(platforms.len(), 1);
    assert_eq!(platforms[0]["platform"]["architecture"], "amd64");
    assert_eq!(platforms[0]["platform"]["os"], "linux");
    let manifest = json(&check(
        &platforms[0],
        "application/vnd.oci.image.manifest.v1+json",
    )?)?;

    let config = json(&check(
        &manifest["config"],
        "application/vnd.oci.image.config.v1+json",
    )?)?;
    let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
    assert_eq!(layers.len(), 2);
    let layer_type = "application/vnd.oci.image.layer.v1.tar";
    let base = listing(&check(&layers[0], layer_type)?)?;
    let app = listing(&check(&layers[1], layer_type)?)?;
    let diff_ids: Vec<&Value> = layers.iter().map(|l| &l["digest"]).collect();
    let config_diff_ids = config["rootfs"]["diff_ids"].as_array().cloned();
    assert_eq!(
        config_diff_ids
            .unwrap_or_default()
            .iter()
            .collect::<Vec<_>>(),
        diff_ids
    );
    assert_eq!(config["history"].as_array().map(Vec::len), Some(2));

    let files_of = |entries: &[Entry]| {
        entries
            .iter()
            .filter(|e| e.kind == tar::EntryType::Regular)
            .map(|e| (e.path.clone(), e.mode))
            .collect::<Vec<_>>()
    };
    let expected_base = [("etc/group", 0o644), ("etc/passwd", 0o644)];
    let expected_base: Vec<_> = expected_base.map(|(p, m)| (p.to_owned(), m)).into();
    assert_eq!(files_of(&base), expected_base);
    let expected_app = vec![("usr/local/bin/jobrelay-agent".to_owned(), 0o755)];
    assert_eq!(files_of(&app), expected_app);

    let docker = json(&image.docker_manifest)?;
    assert_eq!(
        docker[0]["RepoTags"],
        serde_json::json!(["jobrelay/agent:0.1.0"])
    );
    blob(&docker[0]["Config"].as_str().unwrap_or_default().replacen(
        "blobs/sha256/",
        "sha256:",
        1,
    ))?;
    for layer in docker[0]["Layers"].as_array().cloned().unwrap_or_default() {
        blob(
            &layer
                .as_str()
                .unwrap_or_default()
                .replacen("blobs/sha256/", "sha256:", 1),
        )?;
    }
    Ok(())
}

/// The tarball `docker load`, `podman load` and `ctr images import` read.
#[test]
fn layout_tarball_holds_the_layout_files() -> anyhow::Result<()> {
    let image = build(&inputs()?)?;
    let entries = listing(&image.layout_tar(1_700_000_000)?)?;
    let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
    let mut expected = vec!["blobs/", "blobs/sha256/"];
    let manifest = &image.manifests[0];
    let blobs: Vec<String> = manifest
        .layers
        .iter()
        .chain([&manifest.config, &manifest.manifest, &image.index])
        .map(oci::Blob::layout_path)
        .collect();
    let mut blobs: Vec<&str> = blobs.iter().map(String::as_str).collect();
    blobs.sort();
    expected.extend(blobs);
    expected.extend(["index.json", "manifest.json", "oci-layout"]);
    assert_eq!(paths, expected);
    for file in image.layout_files() {
        let entry = entries.iter().find(|e| e.path == file.path);
        assert_eq!(
            entry.map(|e| &e.contents),
            Some(&file.contents),
            "{}",
            file.path
        );
    }
    Ok(())
}

#[test]
fn references_are_qualified_as_containerd_stores_them() -> anyhow::Result<()> {
    let cases = [
        ("jobrelay/manager", "docker.io/jobrelay/manager:1"),
        ("busybox", "docker.io/library/busybox:1"),
        ("ghcr.io/org/manager", "ghcr.io/org/manager:1"),
        ("localhost:5000/manager", "localhost:5000/manager:1"),
        ("localhost/manager", "localhost/manager:1"),
    ];
    for (repository, qualified) in cases {
        assert_eq!(Reference::new(repository, "1")?.qualified(), qualified);
    }
    assert!(Reference::new("jobrelay/manager", "not:a:tag").is_err());
    assert!(Reference::new("Jobrelay/manager", "1").is_err());
    assert!(Reference::new("jobrelay//manager", "1").is_err());
    Ok(())
}

#[test]
fn rfc3339_dates() {
    assert_eq!(oci::rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(oci::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(oci::rfc3339(1_795_737_860), "2026-11-27T00:04:20Z");
}

#[test]
fn an_sbom_refers_to_the_image_and_leaves_its_digest_alone() -> anyhow::Result<()> {
    let image = build(&inputs()?)?;
    let digest = image.manifests[0].digest().to_owned();
    let document = br#"{"bomFormat":"CycloneDX"}"#.to_vec();
    let with =
        image
            .clone()
            .with_artifact(&digest, "application/vnd.cyclonedx+json", document.clone())?;
    assert_eq!(with.digest(), image.digest(), "the image is the same image");
    assert!(
        image
            .clone()
            .with_artifact("sha256:none", "text/plain", Vec::new())
            .is_err(),
        "an artifact refers to one of the image's manifests"
    );
    let index = json(&with.layout_index)?;
    let entries = index["manifests"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 2, "the image, then its SBOM: {index}");
    assert!(entries[0]["annotations"]["io.containerd.image.name"].is_string());
    assert_eq!(entries[1]["artifactType"], "application/vnd.cyclonedx+json");
    assert!(
        entries[1]["annotations"].is_null(),
        "the artifact carries no image name"
    );
    let files = with.layout_files();
    let blob = |digest: &str| {
        let path = format!("blobs/{}", digest.replacen(':', "/", 1));
        files
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.contents.clone())
    };
    let manifest =
        json(&blob(entries[1]["digest"].as_str().unwrap_or_default()).unwrap_or_default())?;
    assert_eq!(manifest["subject"]["digest"], digest.as_str());
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.empty.v1+json"
    );
    assert_eq!(
        blob(manifest["config"]["digest"].as_str().unwrap_or_default()),
        Some(b"{}".to_vec())
    );
    let layer = manifest["layers"][0]["digest"].as_str().unwrap_or_default();
    assert_eq!(blob(layer), Some(document), "the SBOM is in the layout");
    Ok(())
}

#[test]
fn an_index_lists_each_platform_and_they_share_the_base_layer() -> anyhow::Result<()> {
    let image = build_all(&[inputs()?, arm64()?])?;
    let index = json(&image.index.bytes)?;
    let platforms: Vec<_> = index["manifests"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| (m["platform"]["architecture"].clone(), m["digest"].clone()))
        .collect();
    assert_eq!(
        platforms,
        [
            ("amd64".into(), image.manifests[0].digest().into()),
            ("arm64".into(), image.manifests[1].digest().into()),
        ]
    );
    let arm64_config = json(&image.manifests[1].config.bytes)?;
    assert_eq!(arm64_config["architecture"], "arm64");
    let [amd64, arm64] = [&image.manifests[0], &image.manifests[1]];
    assert_eq!(amd64.layers[0], arm64.layers[0], "/etc is the same layer");
    assert_ne!(amd64.layers[1], arm64.layers[1], "each has its binary");
    // Docker's manifest.json names the first platform's image only.
    let docker = json(&image.docker_manifest)?;
    assert_eq!(
        docker[0]["Config"].as_str(),
        Some(amd64.config.layout_path().as_str())
    );
    let twice = build_all(&[inputs()?, inputs()?]).map(|_| ()).unwrap_err();
    assert!(twice.to_string().contains("linux/amd64"), "{twice}");
    Ok(())
}
