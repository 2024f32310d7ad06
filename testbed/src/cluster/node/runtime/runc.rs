//! runc for a real node: built with cgo and seccomp against Debian's static
//! libseccomp, fetched and unpacked without installing anything, or the
//! host's runc when that package cannot be had.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::go::controlplane::{Error, go_command, run, seconds, source_dir};
use crate::host::debian::{self, find_file};

use super::{RUNC_VERSION, build_args};

/// Builds runc with cgo (its `nsenter` part is C) and seccomp — containerd
/// runs every sandbox with the runtime's default seccomp profile, which a
/// runc without it refuses ("unable to init seccomp") — linked statically
/// against the static libseccomp of Debian's `libseccomp-dev`, fetched and
/// unpacked here (no headers need to be installed). Without that package,
/// a runc on `PATH` is used instead, and said so.
pub(super) fn build_runc(partial: &Path, log: &mut dyn FnMut(&str)) -> Result<(), Error> {
    let seccomp = partial.join("libseccomp");
    let pkgconfig = match fetch_libseccomp(&seccomp, log) {
        Ok(pkgconfig) => pkgconfig,
        Err(error) => {
            let Some(runc) = on_path("runc") else {
                return Err(error);
            };
            log(&format!(
                "no libseccomp to build runc with ({error}); using {} instead",
                runc.display()
            ));
            return std::fs::write(partial.join("runc-path"), runc.display().to_string())
                .map_err(|e| Error::Io("writing runc-path".into(), e));
        }
    };
    let args = build_args(
        &format!("{}/runc", partial.join("bin").display()),
        "seccomp urfave_cli_no_docs netgo osusergo",
        &format!("-s -w -X main.gitCommit={RUNC_VERSION} -extldflags -static"),
        &["github.com/opencontainers/runc"],
    );
    log(&format!("building runc (go {})", args.join(" ")));
    let started = Instant::now();
    run(go_command(&source_dir().join("node").join("runc"))
        .env("CGO_ENABLED", "1")
        .env("PKG_CONFIG_PATH", &pkgconfig)
        .args(&args))?;
    log(&format!("built runc in {}", seconds(started.elapsed())));
    let _ = std::fs::remove_dir_all(&seccomp);

    let runc = partial.join("bin").join("runc");
    let out = Command::new(&runc)
        .arg("--version")
        .output()
        .map_err(|e| Error::Io(runc.display().to_string(), e))?;
    let found = String::from_utf8_lossy(&out.stdout).to_string();
    let expected = RUNC_VERSION.trim_start_matches('v');
    if !found.contains(&format!("runc version {expected}")) || !found.contains("libseccomp") {
        return Err(Error::WrongVersion {
            binary: "runc".into(),
            found,
            expected: format!("{expected} with libseccomp"),
        });
    }
    Ok(())
}

/// Unpacks Debian's `libseccomp-dev` into `dir` and returns a
/// `PKG_CONFIG_PATH` whose `libseccomp.pc` points there.
fn fetch_libseccomp(dir: &Path, log: &mut dyn FnMut(&str)) -> Result<PathBuf, Error> {
    let (root, deb) = debian::unpack("libseccomp-dev", dir, log)?;
    let found = find_file(&root, "libseccomp.pc").ok_or_else(|| {
        Error::Io(
            format!("libseccomp.pc in {deb}"),
            std::io::ErrorKind::NotFound.into(),
        )
    })?;
    let text =
        std::fs::read_to_string(&found).map_err(|e| Error::Io(found.display().to_string(), e))?;
    let pkgconfig = dir.join("pkgconfig");
    std::fs::create_dir_all(&pkgconfig)
        .map_err(|e| Error::Io(pkgconfig.display().to_string(), e))?;
    let fixed = relocate_pc(&text, &root);
    let pc = pkgconfig.join("libseccomp.pc");
    std::fs::write(&pc, fixed).map_err(|e| Error::Io(pc.display().to_string(), e))?;
    Ok(pkgconfig)
}

/// A `.pc` file's text with its `prefix=` moved under `root`, where the
/// package was unpacked.
fn relocate_pc(text: &str, root: &Path) -> String {
    text.lines()
        .map(|line| match line.strip_prefix("prefix=") {
            Some(prefix) => format!("prefix={}{prefix}", root.display()),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn on_path(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pc_file_is_moved_under_where_it_was_unpacked() {
        let text =
            "prefix=/usr\nlibdir=${prefix}/lib/x86_64-linux-gnu\nLibs: -L${libdir} -lseccomp";
        let fixed = relocate_pc(text, Path::new("/tmp/x/root"));
        assert_eq!(
            fixed,
            "prefix=/tmp/x/root/usr\nlibdir=${prefix}/lib/x86_64-linux-gnu\nLibs: -L${libdir} -lseccomp"
        );
    }
}
