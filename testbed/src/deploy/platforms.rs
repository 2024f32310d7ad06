//! The platforms jobrelay's images are built for, and what running a
//! binary of each takes here: amd64 runs on this host, arm64 under
//! `qemu-aarch64-static` (Debian's `qemu-user-static`, unpacked into the
//! cache once). A binary's platform and whether it needs a loader are read
//! from its ELF header.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use object::read::elf::{FileHeader, ProgramHeader};

use crate::go::controlplane::{STAMP, cache_root, complete};
use crate::host::debian;

/// An image platform: OCI's architecture name and the Rust target its
/// binaries are built for (static, against musl).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Platform {
    pub architecture: &'static str,
    pub target: &'static str,
}

/// Every platform an image is built for; the first is the one this host
/// (and the test clusters' nodes) run.
pub const PLATFORMS: [Platform; 2] = [
    Platform {
        architecture: "amd64",
        target: "x86_64-unknown-linux-musl",
    },
    Platform {
        architecture: "arm64",
        target: "aarch64-unknown-linux-musl",
    },
];

/// The platform OCI calls `architecture`.
pub fn platform(architecture: &str) -> anyhow::Result<Platform> {
    PLATFORMS
        .into_iter()
        .find(|platform| platform.architecture == architecture)
        .with_context(|| {
            let known: Vec<_> = PLATFORMS.iter().map(|p| p.architecture).collect();
            format!(
                "jobrelay builds no image for {architecture:?} (it builds {})",
                known.join(", ")
            )
        })
}

/// What an executable's ELF header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elf {
    /// OCI's name for its machine: `amd64`, `arm64`, …
    pub architecture: String,
    /// The loader it asks for (`PT_INTERP`); none for a static binary.
    pub interpreter: Option<String>,
}

/// Reads `bytes`, the executable `name`, as a 64-bit ELF file.
pub fn elf(name: &str, bytes: &[u8]) -> anyhow::Result<Elf> {
    type Header = object::elf::FileHeader64<object::Endianness>;
    let header = Header::parse(bytes)
        .map_err(|error| anyhow::anyhow!("{name} is not a 64-bit ELF executable: {error}"))?;
    let endian = header
        .endian()
        .map_err(|error| anyhow::anyhow!("{name}: {error}"))?;
    let architecture = match header.e_machine(endian) {
        object::elf::EM_X86_64 => "amd64",
        object::elf::EM_AARCH64 => "arm64",
        object::elf::EM_RISCV => "riscv64",
        object::elf::EM_PPC64 => "ppc64le",
        object::elf::EM_S390 => "s390x",
        other => anyhow::bail!("{name} is built for ELF machine {other:#x}, not one OCI names"),
    };
    let mut interpreter = None;
    let segments = header
        .program_headers(endian, bytes)
        .map_err(|error| anyhow::anyhow!("{name}'s program headers: {error}"))?;
    for segment in segments {
        if let Some(path) = segment
            .interpreter(endian, bytes)
            .map_err(|error| anyhow::anyhow!("{name}'s interpreter: {error}"))?
        {
            interpreter = Some(String::from_utf8_lossy(path).into_owned());
        }
    }
    Ok(Elf {
        architecture: architecture.to_owned(),
        interpreter,
    })
}

/// A command that runs `binary`, built for `architecture`, on this host:
/// the binary itself on amd64, under qemu-user on arm64.
pub fn command(
    architecture: &str,
    binary: &Path,
    log: &mut dyn FnMut(&str),
) -> anyhow::Result<Command> {
    Ok(match architecture {
        "amd64" => Command::new(binary),
        "arm64" => {
            let mut command = Command::new(qemu_aarch64(log)?);
            command.arg(binary);
            command
        }
        other => anyhow::bail!("no way to run a {other} binary here"),
    })
}

/// `qemu-aarch64-static` from Debian's `qemu-user-static`, unpacked into
/// the cache on first use; its stamp names the package (and so its
/// version).
pub fn qemu_aarch64(log: &mut dyn FnMut(&str)) -> anyhow::Result<PathBuf> {
    let dir = cache_root().join("qemu-user-static");
    let binary = dir.join("qemu-aarch64-static");
    if dir.join(STAMP).is_file() {
        return Ok(binary);
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    let (root, package) = debian::unpack("qemu-user-static", &partial, log)?;
    // Only the one emulator is kept (the package holds one per machine).
    let emulator = root.join("usr/bin/qemu-aarch64-static");
    anyhow::ensure!(
        emulator.is_file(),
        "{package} holds no usr/bin/qemu-aarch64-static"
    );
    std::fs::rename(&emulator, partial.join("qemu-aarch64-static"))?;
    std::fs::remove_dir_all(&root)?;
    complete(&partial, &dir, &package)?;
    log(&format!("{package} unpacked into {}", dir.display()));
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal little-endian ELF64 header for `machine`, with one program
    /// header, a `PT_INTERP` naming `interpreter` if there is one.
    fn executable(machine: u16, interpreter: Option<&str>) -> Vec<u8> {
        let mut bytes = vec![0u8; 64 + 56];
        bytes[..4].copy_from_slice(b"\x7fELF");
        bytes[4] = 2; // 64-bit
        bytes[5] = 1; // little-endian
        bytes[6] = 1; // version
        bytes[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        bytes[18..20].copy_from_slice(&machine.to_le_bytes());
        bytes[20..24].copy_from_slice(&1u32.to_le_bytes());
        bytes[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        bytes[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        bytes[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        bytes[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        let (kind, path) = match interpreter {
            Some(path) => (object::elf::PT_INTERP, format!("{path}\0")),
            None => (object::elf::PT_LOAD, String::new()),
        };
        let offset = bytes.len() as u64;
        bytes[64..68].copy_from_slice(&kind.to_le_bytes());
        bytes[72..80].copy_from_slice(&offset.to_le_bytes()); // p_offset
        bytes[96..104].copy_from_slice(&(path.len() as u64).to_le_bytes()); // p_filesz
        bytes.extend_from_slice(path.as_bytes());
        bytes
    }

    #[test]
    fn a_static_binary_names_its_machine_and_no_loader() -> anyhow::Result<()> {
        let amd64 = elf("app", &executable(object::elf::EM_X86_64, None))?;
        assert_eq!(amd64.architecture, "amd64");
        assert_eq!(amd64.interpreter, None);
        let arm64 = elf("app", &executable(object::elf::EM_AARCH64, None))?;
        assert_eq!(arm64.architecture, "arm64");
        Ok(())
    }

    #[test]
    fn a_dynamic_binary_names_its_loader() -> anyhow::Result<()> {
        let bytes = executable(object::elf::EM_X86_64, Some("/lib64/ld-linux-x86-64.so.2"));
        let read = elf("app", &bytes)?;
        assert_eq!(
            read.interpreter.as_deref(),
            Some("/lib64/ld-linux-x86-64.so.2")
        );
        Ok(())
    }

    #[test]
    fn what_is_not_elf_or_not_named_by_oci_is_an_error_naming_the_file() {
        let error = elf("app", b"#!/bin/sh\n").map(|_| ()).unwrap_err();
        assert!(error.to_string().contains("app"), "{error}");
        let error = elf("app", &executable(0x28, None)).map(|_| ()).unwrap_err();
        assert!(error.to_string().contains("0x28"), "{error}");
    }

    #[test]
    fn platforms_are_named_by_architecture() -> anyhow::Result<()> {
        assert_eq!(platform("arm64")?.target, "aarch64-unknown-linux-musl");
        assert_eq!(PLATFORMS[0].architecture, "amd64");
        let error = platform("mips").map(|_| ()).unwrap_err();
        assert!(error.to_string().contains("amd64, arm64"), "{error}");
        Ok(())
    }
}
