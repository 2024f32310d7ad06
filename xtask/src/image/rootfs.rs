//! What a jobrelay image's root filesystem holds, decided from plain data:
//! the files under /etc, the shared libraries `ldd` names, and the platform the
//! binary was built for. No shell, no package manager, nothing else.

use std::path::PathBuf;

use super::archive::File;
use super::oci::Platform;

/// The uid and gid of `nonroot`, as in distroless images.
pub const NONROOT_ID: u32 = 65532;

/// `/etc/passwd` and `/etc/group`, so tools that map ids to names find
/// `nonroot` (and root); and `/etc/nsswitch.conf`, without which glibc asks
/// DNS before `/etc/hosts` (the file a Pod's `hostAliases` are written to).
pub fn etc_files() -> Vec<File> {
    let id = NONROOT_ID;
    vec![
        File::new(
            "/etc/passwd",
            0o644,
            format!(
                "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{id}:{id}:nonroot:/:/sbin/nologin\n"
            ),
        ),
        File::new("/etc/group", 0o644, format!("root:x:0:\nnonroot:x:{id}:\n")),
        File::new("/etc/nsswitch.conf", 0o644, "hosts: files dns\n"),
    ]
}

/// The shared objects, dynamic loader included, that `ldd` printed for a
/// binary, in its order. A static binary needs none.
pub fn libraries_from_ldd(binary: &str, output: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut libraries = Vec::new();
    for line in output.lines().map(str::trim) {
        if line.is_empty()
            || line.contains("statically linked")
            || line.contains("not a dynamic executable")
        {
            continue;
        }
        let target = match line.split_once("=>") {
            Some((name, target)) => {
                let target = target.trim();
                anyhow::ensure!(
                    !target.starts_with("not found"),
                    "{binary} needs {}, which the host's loader does not find",
                    name.trim()
                );
                target
            }
            // The loader itself, or a virtual object such as linux-vdso.so.1.
            None => line,
        };
        let path = target.split_whitespace().next().unwrap_or_default();
        if path.starts_with('/') {
            libraries.push(PathBuf::from(path));
        }
    }
    Ok(libraries)
}

/// The platform an ELF binary was built for, from its header.
pub fn elf_platform(binary: &str, bytes: &[u8]) -> anyhow::Result<Platform> {
    anyhow::ensure!(
        bytes.len() >= 20 && bytes.starts_with(b"\x7fELF"),
        "{binary} is not an ELF executable"
    );
    // e_machine, in the byte order EI_DATA (byte 5) says.
    let machine = match bytes[5] {
        1 => u16::from_le_bytes([bytes[18], bytes[19]]),
        _ => u16::from_be_bytes([bytes[18], bytes[19]]),
    };
    let architecture = match machine {
        0x3e => "amd64",
        0xb7 => "arm64",
        0xf3 => "riscv64",
        0x15 => "ppc64le",
        0x16 => "s390x",
        other => anyhow::bail!("{binary} is built for ELF machine {other:#x}, not one OCI names"),
    };
    Ok(Platform {
        architecture: architecture.to_owned(),
        os: "linux".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_LDD: &str = "\tlinux-vdso.so.1 (0x00007ffc8a1f0000)
\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1c0a2b0000)
\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f1c0a1d0000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f1c09fe0000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f1c0b6c0000)
";

    #[test]
    fn ldd_output_gives_libraries_and_loader_without_the_vdso() -> anyhow::Result<()> {
        let libraries = libraries_from_ldd("app", DEBIAN_LDD)?;
        let expected = [
            "/lib/x86_64-linux-gnu/libgcc_s.so.1",
            "/lib/x86_64-linux-gnu/libm.so.6",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ];
        assert_eq!(libraries, expected.map(PathBuf::from));
        Ok(())
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let output = "\tlibssl.so.3 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n";
        let error = libraries_from_ldd("app", output).map(|_| ()).unwrap_err();
        assert!(error.to_string().contains("libssl.so.3"), "{error}");
    }

    #[test]
    fn a_static_binary_needs_nothing() -> anyhow::Result<()> {
        assert!(libraries_from_ldd("app", "\tstatically linked\n")?.is_empty());
        assert!(libraries_from_ldd("app", "\tnot a dynamic executable\n")?.is_empty());
        Ok(())
    }

    #[test]
    fn elf_header_names_the_platform() -> anyhow::Result<()> {
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(b"\x7fELF");
        header[5] = 1;
        header[18] = 0x3e;
        assert_eq!(elf_platform("app", &header)?.architecture, "amd64");
        header[18] = 0xb7;
        assert_eq!(elf_platform("app", &header)?.architecture, "arm64");
        assert!(elf_platform("app", b"#!/bin/sh\n").is_err());
        Ok(())
    }

    #[test]
    fn nonroot_is_65532_in_passwd_and_group() {
        let files = etc_files();
        let text = |path: &str| {
            let file = files.iter().find(|f| f.path == path);
            file.map(|f| String::from_utf8_lossy(&f.contents).into_owned())
        };
        let passwd = text("/etc/passwd").unwrap_or_default();
        assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");
        let group = text("/etc/group").unwrap_or_default();
        assert!(group.contains("nonroot:x:65532:"), "{group}");
    }
}
