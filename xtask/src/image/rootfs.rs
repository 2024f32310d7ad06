//! What a jobrelay image's root filesystem holds besides its static binary:
//! the files under /etc. No loader, no libraries, no shell, no package
//! manager.

use super::archive::File;

/// The uid and gid of `nonroot`, as in distroless images.
pub const NONROOT_ID: u32 = 65532;

/// `/etc/passwd` and `/etc/group`, so tools that map ids to names find
/// `nonroot` (and root). (musl reads `/etc/hosts` before DNS without an
/// `nsswitch.conf`.)
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
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

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
