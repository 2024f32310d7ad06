//! Deterministic tar archives: the same files always give the same bytes.
//!
//! Entries are sorted by path, every parent directory is written as its own
//! entry, owners are root (0:0) without names, and every mtime is the one
//! given. Image layers and the OCI layout tarball are both written this way.

use std::collections::BTreeMap;
use std::io;

use tar::{Builder, EntryType, Header};

/// One regular file of an archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    /// Relative to the archive's root, `/`-separated, e.g. `usr/local/bin/x`
    /// (a leading `/` is accepted and dropped).
    pub path: String,
    /// Permission bits, e.g. `0o755`.
    pub mode: u32,
    pub contents: Vec<u8>,
}

impl File {
    pub fn new(path: &str, mode: u32, contents: impl Into<Vec<u8>>) -> Self {
        File {
            path: path.to_owned(),
            mode,
            contents: contents.into(),
        }
    }
}

/// Directories the archive creates for the files it holds.
const DIRECTORY_MODE: u32 = 0o755;

/// The tar of `files` and their parent directories, every entry with
/// `mtime` (seconds since the epoch).
pub fn tar(files: &[File], mtime: u64) -> anyhow::Result<Vec<u8>> {
    let mut entries: BTreeMap<String, Option<&File>> = BTreeMap::new();
    for file in files {
        let path = file.path.trim_start_matches('/');
        anyhow::ensure!(
            !path.is_empty() && !path.ends_with('/'),
            "{:?} is not a file path",
            file.path
        );
        anyhow::ensure!(
            !path.split('/').any(|part| part.is_empty() || part == ".."),
            "{:?} has an empty or `..` component",
            file.path
        );
        for (at, _) in path.match_indices('/') {
            let parent = &path[..at];
            if let Some(Some(clash)) = entries.insert(parent.to_owned(), None) {
                anyhow::bail!("{:?} is both a file and a directory", clash.path);
            }
        }
        match entries.insert(path.to_owned(), Some(file)) {
            Some(Some(_)) => anyhow::bail!("{:?} is in the archive twice", file.path),
            Some(None) => anyhow::bail!("{:?} is both a file and a directory", file.path),
            None => {}
        }
    }

    let mut builder = Builder::new(Vec::new());
    for (path, file) in &entries {
        let mut header = Header::new_gnu();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(mtime);
        match file {
            Some(file) => {
                header.set_entry_type(EntryType::Regular);
                header.set_mode(file.mode);
                header.set_size(file.contents.len() as u64);
                builder.append_data(&mut header, path, file.contents.as_slice())?;
            }
            None => {
                header.set_entry_type(EntryType::Directory);
                header.set_mode(DIRECTORY_MODE);
                header.set_size(0);
                builder.append_data(&mut header, format!("{path}/"), io::empty())?;
            }
        }
    }
    Ok(builder.into_inner()?)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// One entry of an archive, as read back.
    pub struct Entry {
        pub path: String,
        pub kind: EntryType,
        pub mode: u32,
        pub owner: (u64, u64),
        pub mtime: u64,
        pub contents: Vec<u8>,
    }

    /// Every entry of the tar `bytes`, in order.
    pub fn listing(bytes: &[u8]) -> anyhow::Result<Vec<Entry>> {
        let mut archive = ::tar::Archive::new(bytes);
        let mut out = Vec::new();
        for entry in archive.entries()? {
            let mut entry = entry?;
            let header = entry.header().clone();
            let mut contents = Vec::new();
            io::Read::read_to_end(&mut entry, &mut contents)?;
            out.push(Entry {
                path: entry.path()?.to_string_lossy().into_owned(),
                kind: header.entry_type(),
                mode: header.mode()?,
                owner: (header.uid()?, header.gid()?),
                mtime: header.mtime()?,
                contents,
            });
        }
        Ok(out)
    }

    #[test]
    fn entries_are_sorted_with_parents_root_owned_and_one_mtime() -> anyhow::Result<()> {
        let files = [
            File::new("/usr/local/bin/app", 0o755, "binary"),
            File::new("/etc/passwd", 0o644, "root:x:0:0::/:\n"),
            File::new("/etc/group", 0o644, "root:x:0:\n"),
        ];
        let listing = listing(&tar(&files, 1_700_000_000)?)?;
        let paths: Vec<&str> = listing.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "etc/",
                "etc/group",
                "etc/passwd",
                "usr/",
                "usr/local/",
                "usr/local/bin/",
                "usr/local/bin/app"
            ]
        );
        for entry in &listing {
            let path = &entry.path;
            assert_eq!(
                (entry.owner, entry.mtime),
                ((0, 0), 1_700_000_000),
                "{path}"
            );
            let expected = match path.as_str() {
                "etc/group" | "etc/passwd" => (EntryType::Regular, 0o644),
                "usr/local/bin/app" => (EntryType::Regular, 0o755),
                _ => (EntryType::Directory, 0o755),
            };
            assert_eq!((entry.kind, entry.mode), expected, "{path}");
        }
        assert_eq!(listing[6].contents, b"binary");
        Ok(())
    }

    #[test]
    fn order_of_the_input_does_not_matter() -> anyhow::Result<()> {
        let a = File::new("a/x", 0o644, "1");
        let b = File::new("b/y", 0o644, "2");
        assert_eq!(tar(&[a.clone(), b.clone()], 0)?, tar(&[b, a], 0)?);
        Ok(())
    }

    #[test]
    fn long_paths_survive() -> anyhow::Result<()> {
        let path = format!("{}/file", "d".repeat(120));
        let listing = listing(&tar(&[File::new(&path, 0o644, "x")], 0)?)?;
        assert_eq!(listing.last().map(|e| e.path.as_str()), Some(path.as_str()));
        Ok(())
    }

    #[test]
    fn duplicates_and_clashes_are_refused() {
        let twice = [File::new("a", 0o644, "1"), File::new("/a", 0o644, "2")];
        assert!(tar(&twice, 0).is_err());
        let clash = [File::new("a", 0o644, "1"), File::new("a/b", 0o644, "2")];
        assert!(tar(&clash, 0).is_err());
        assert!(tar(&[File::new("a/../b", 0o644, "1")], 0).is_err());
    }
}
