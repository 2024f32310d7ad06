//! Which platforms an image is built for, and which binary may go into a
//! platform's image: one whose ELF header names that platform's machine
//! and no loader (the images hold none).

use std::fs;
use std::path::Path;

use anyhow::Context;
use jobrelay_testbed::deploy::platforms::{self, PLATFORMS, Platform};

/// The platforms `--platform` names, in [`PLATFORMS`]' order; all of them
/// when it names none.
pub(super) fn chosen(named: &[String]) -> anyhow::Result<Vec<Platform>> {
    for name in named {
        platforms::platform(name)?;
    }
    Ok(PLATFORMS
        .into_iter()
        .filter(|p| named.is_empty() || named.iter().any(|name| name == p.architecture))
        .collect())
}

/// The binary at `path`, once its ELF header says it is static and built
/// for `platform`.
pub(super) fn static_binary(path: &Path, platform: &Platform) -> anyhow::Result<Vec<u8>> {
    let contents =
        fs::read(path).with_context(|| format!("reading the binary {}", path.display()))?;
    let name = path.display().to_string();
    fits(&name, &platforms::elf(&name, &contents)?, platform)?;
    Ok(contents)
}

/// Whether a binary whose ELF header says `elf` may go into `platform`'s
/// image: built for it, and static, since the image holds no loader.
fn fits(name: &str, elf: &platforms::Elf, platform: &Platform) -> anyhow::Result<()> {
    anyhow::ensure!(
        elf.architecture == platform.architecture,
        "{name} is built for {}, not {} ({})",
        elf.architecture,
        platform.architecture,
        platform.target
    );
    match &elf.interpreter {
        Some(loader) => anyhow::bail!(
            "{name} is linked dynamically (it asks for {loader}); images hold static binaries only: build it for {}",
            platform.target
        ),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(architecture: &str, interpreter: Option<&str>) -> platforms::Elf {
        platforms::Elf {
            architecture: architecture.to_owned(),
            interpreter: interpreter.map(str::to_owned),
        }
    }

    #[test]
    fn a_static_binary_of_the_platform_fits_its_image() -> anyhow::Result<()> {
        fits("agent", &elf("arm64", None), &platforms::platform("arm64")?)
    }

    #[test]
    fn a_binary_of_another_platform_or_a_dynamic_one_does_not() -> anyhow::Result<()> {
        let arm64 = platforms::platform("arm64")?;
        let wrong = fits("agent", &elf("amd64", None), &arm64).unwrap_err();
        assert!(
            wrong.to_string().contains("built for amd64, not arm64"),
            "{wrong}"
        );
        let loader = "/lib/ld-linux-aarch64.so.1";
        let dynamic = fits("agent", &elf("arm64", Some(loader)), &arm64).unwrap_err();
        assert!(dynamic.to_string().contains(loader), "{dynamic}");
        assert!(
            dynamic.to_string().contains("aarch64-unknown-linux-musl"),
            "{dynamic}"
        );
        Ok(())
    }

    #[test]
    fn the_platforms_asked_for_come_in_the_index_order() -> anyhow::Result<()> {
        let names = |platforms: Vec<Platform>| -> Vec<&str> {
            platforms.iter().map(|p| p.architecture).collect()
        };
        assert_eq!(names(chosen(&[])?), ["amd64", "arm64"]);
        let asked = ["arm64".to_owned(), "amd64".to_owned()];
        assert_eq!(names(chosen(&asked)?), ["amd64", "arm64"]);
        assert_eq!(names(chosen(&asked[1..])?), ["amd64"]);
        assert!(chosen(&["s390x".to_owned()]).is_err());
        Ok(())
    }
}
