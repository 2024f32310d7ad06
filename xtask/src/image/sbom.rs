//! The software bill of materials of an image's binary: every crate linked
//! into it — what `cargo metadata` resolves for the build platform along
//! normal dependencies from the binary's package (build scripts', tests'
//! and procedural macros' crates are not in the binary) — as a CycloneDX
//! 1.5 JSON document, with
//! each crate's `pkg:cargo` package URL, licence and the SHA-256 that
//! `Cargo.lock` records for crates from the registry. Scanners read it in
//! place of a package database, which an image of one static binary has
//! not.
//!
//! Pure: it reads the metadata and the lock file as given; the same inputs
//! give the same bytes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::oci::rfc3339;

/// The media type of the document, and of the OCI artifact carrying it.
pub const MEDIA_TYPE: &str = "application/vnd.cyclonedx+json";

/// One crate in the binary.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Component {
    pub name: String,
    pub version: String,
    pub license: Option<String>,
    /// SHA-256 of the crate file, from `Cargo.lock` (none for the
    /// workspace's own crates).
    pub checksum: Option<String>,
}

impl Component {
    fn purl(&self) -> String {
        format!("pkg:cargo/{}@{}", self.name, self.version)
    }
}

/// The checksums `Cargo.lock` records, by name and version.
pub fn lock_checksums(lock: &str) -> BTreeMap<(String, String), String> {
    let mut checksums = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|line| {
                let (name, value) = line.split_once('=')?;
                (name.trim() == key).then(|| value.trim().trim_matches('"').to_string())
            })
        };
        if let (Some(name), Some(version), Some(sum)) =
            (field("name"), field("version"), field("checksum"))
        {
            checksums.insert((name, version), sum);
        }
    }
    checksums
}

/// The crates linked into `package`'s binary: the package itself first,
/// then every crate reached from it by normal dependencies in `metadata`
/// (`cargo metadata --format-version 1 --filter-platform <host>`), sorted.
pub fn components(
    metadata: &Value,
    package: &str,
    checksums: &BTreeMap<(String, String), String>,
) -> anyhow::Result<Vec<Component>> {
    let packages: BTreeMap<&str, &Value> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["id"].as_str()?, p)))
        .collect();
    let nodes: BTreeMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let root = packages
        .iter()
        .find(|(_, p)| p["name"] == package)
        .map(|(id, _)| *id)
        .ok_or_else(|| anyhow::anyhow!("cargo metadata knows no package {package}"))?;
    let mut reached = BTreeSet::from([root]);
    let mut queue = VecDeque::from([root]);
    while let Some(id) = queue.pop_front() {
        let deps = nodes.get(id).and_then(|n| n["deps"].as_array());
        for dep in deps.into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|kind| kind["kind"].is_null());
            let Some(next) = dep["pkg"].as_str() else {
                continue;
            };
            // A procedural macro runs in the compiler; neither it nor what
            // it uses is linked in.
            let linked = packages.get(next).is_some_and(|p| !proc_macro(p));
            if normal && linked && reached.insert(next) {
                queue.push_back(next);
            }
        }
    }
    let component = |id: &str| {
        let p = packages.get(id)?;
        let (name, version) = (p["name"].as_str()?, p["version"].as_str()?);
        Some(Component {
            name: name.to_string(),
            version: version.to_string(),
            license: p["license"].as_str().map(str::to_string),
            checksum: checksums
                .get(&(name.to_string(), version.to_string()))
                .cloned(),
        })
    };
    let first = component(root).into_iter();
    let mut rest: Vec<Component> = reached
        .iter()
        .filter(|id| **id != root)
        .filter_map(|id| component(id))
        .collect();
    rest.sort();
    Ok(first.chain(rest).collect())
}

/// Whether a package is a procedural macro.
fn proc_macro(package: &Value) -> bool {
    package["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|target| {
            target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == "proc-macro"))
        })
}

/// The CycloneDX document of `components` (the binary's package first),
/// made at `epoch`.
pub fn document(components: &[Component], epoch: u64) -> anyhow::Result<Vec<u8>> {
    let (binary, libraries) = components
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("an SBOM needs the binary's package"))?;
    let entry = |c: &Component, kind: &str| {
        let mut entry = json!({
            "type": kind,
            "bom-ref": c.purl(),
            "name": c.name,
            "version": c.version,
            "purl": c.purl(),
        });
        if let Some(license) = &c.license {
            entry["licenses"] = json!([{ "expression": license }]);
        }
        if let Some(sum) = &c.checksum {
            entry["hashes"] = json!([{ "alg": "SHA-256", "content": sum }]);
        }
        entry
    };
    let listed: Vec<Value> = libraries.iter().map(|c| entry(c, "library")).collect();
    let mut document = json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "timestamp": rfc3339(epoch),
            "tools": { "components": [{ "type": "application", "name": "cargo xtask image" }] },
            "component": entry(binary, "application"),
        },
        "components": listed,
    });
    // The same bill, the same serial number.
    let digest = Sha256::digest(serde_json::to_vec(&document)?);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    document["serialNumber"] = json!(format!(
        "urn:uuid:{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ));
    Ok(serde_json::to_vec_pretty(&document)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> Value {
        let dep = |pkg: &str, kind: Value| json!({"pkg": pkg, "dep_kinds": [{"kind": kind}]});
        json!({
            "packages": [
                {"id": "bin", "name": "jobrelay-agent", "version": "0.1.0", "license": "Apache-2.0"},
                {"id": "a", "name": "tokio", "version": "1.0.0", "license": "MIT"},
                {"id": "b", "name": "bytes", "version": "1.2.0", "license": "MIT"},
                {"id": "c", "name": "cc", "version": "1.0.0", "license": "MIT"},
                {"id": "d", "name": "proptest", "version": "1.0.0", "license": null},
                {"id": "m", "name": "serde_derive", "version": "1.0.0", "license": "MIT",
                 "targets": [{"kind": ["proc-macro"]}]},
                {"id": "s", "name": "syn", "version": "2.0.0", "license": "MIT"},
            ],
            "resolve": {"nodes": [
                {"id": "bin", "deps": [dep("a", Value::Null), dep("c", json!("build")), dep("d", json!("dev"))]},
                {"id": "a", "deps": [dep("b", Value::Null), dep("m", Value::Null)]},
                {"id": "m", "deps": [dep("s", Value::Null)]},
                {"id": "s", "deps": []},
                {"id": "b", "deps": []},
                {"id": "c", "deps": []},
                {"id": "d", "deps": [dep("b", Value::Null)]},
            ]},
        })
    }

    #[test]
    fn only_the_crates_linked_in_by_normal_dependencies_are_listed_not_macros() {
        let sums = lock_checksums(
            "version = 4\n\n[[package]]\nname = \"tokio\"\nversion = \"1.0.0\"\nsource = \"registry\"\nchecksum = \"abc\"\n\n[[package]]\nname = \"jobrelay-agent\"\nversion = \"0.1.0\"\n",
        );
        let listed = components(&metadata(), "jobrelay-agent", &sums).expect("listed");
        let names: Vec<&str> = listed.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["jobrelay-agent", "bytes", "tokio"]);
        assert_eq!(listed[2].checksum.as_deref(), Some("abc"));
        assert_eq!(listed[0].checksum, None, "the workspace's own crate");
    }

    #[test]
    fn the_document_is_cyclonedx_and_the_same_for_the_same_inputs() {
        let listed = components(&metadata(), "jobrelay-agent", &BTreeMap::new()).expect("listed");
        let bytes = document(&listed, 1_700_000_000).expect("a document");
        assert_eq!(bytes, document(&listed, 1_700_000_000).expect("again"));
        let doc: Value = serde_json::from_slice(&bytes).expect("JSON");
        assert_eq!(doc["bomFormat"], "CycloneDX");
        assert_eq!(doc["specVersion"], "1.5");
        assert_eq!(
            doc["metadata"]["component"]["purl"],
            "pkg:cargo/jobrelay-agent@0.1.0"
        );
        assert_eq!(doc["components"].as_array().map(Vec::len), Some(2));
        assert_eq!(doc["components"][1]["licenses"][0]["expression"], "MIT");
        assert!(
            doc["serialNumber"]
                .as_str()
                .is_some_and(|s| s.starts_with("urn:uuid:") && s.len() == 45),
            "{}",
            doc["serialNumber"]
        );
    }

    #[test]
    fn an_unknown_package_is_named() {
        let error = components(&metadata(), "nope", &BTreeMap::new()).expect_err("unknown");
        assert!(error.to_string().contains("nope"), "{error}");
    }
}
