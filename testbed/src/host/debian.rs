//! Debian packages unpacked into a folder of the test bed's, without
//! installing anything: `apt-get download` (after `apt-get update` if the
//! first try fails), then `dpkg -x`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::go::controlplane::{Error, run};

/// Downloads `package` into `dir` and unpacks it under `dir/root`; returns
/// that root and the package's file name (which carries its version).
pub fn unpack(
    package: &str,
    dir: &Path,
    log: &mut dyn FnMut(&str),
) -> Result<(PathBuf, String), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Io(dir.display().to_string(), e))?;
    log(&format!("fetching {package} (apt-get download)"));
    let download = || {
        run(Command::new("apt-get")
            .args(["download", package])
            .current_dir(dir))
    };
    if download().is_err() {
        log("apt-get download failed; running apt-get update and trying again");
        run(Command::new("apt-get").args(["update", "-q"]))?;
        download()?;
    }
    let entries = std::fs::read_dir(dir).map_err(|e| Error::Io(dir.display().to_string(), e))?;
    let deb = entries
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .ok_or_else(|| {
            Error::Io(
                format!("the {package} package in {}", dir.display()),
                std::io::ErrorKind::NotFound.into(),
            )
        })?;
    let root = dir.join("root");
    run(Command::new("dpkg").arg("-x").arg(&deb).arg(&root))?;
    let name = deb
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let _ = std::fs::remove_file(&deb);
    Ok((root, name))
}

/// The first file called `name` under `dir`, depth first.
pub fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if entry.file_name() == name {
            return Some(path);
        }
    }
    None
}
