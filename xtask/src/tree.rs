//! The layering of the crates' source trees, checked: no two top-level
//! modules of a crate use each other (directly or round a longer circle),
//! and the manager's `job/` — the pure life of a Job — reads no API.
//!
//! A module's uses are the `crate::` paths in its files outside comments
//! and unit tests, and the `super::` paths of its submodules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module → the top-level modules it uses.
type Uses = BTreeMap<String, BTreeSet<String>>;

/// The uses between the top-level modules of the crate whose `src` is `src`.
fn uses(src: &Path) -> Uses {
    let mut uses = Uses::new();
    for file in rust_files(src) {
        let Some(module) = top_module(src, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a source file reads");
        let used = uses.entry(module.clone()).or_default();
        for used_module in crate_paths(&code_of(&text)) {
            if used_module != module {
                used.insert(used_module);
            }
        }
    }
    uses
}

/// The circles among `uses`, each as the modules on it (empty if none).
fn circles(uses: &Uses) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for start in uses.keys() {
        let mut path = vec![start.clone()];
        walk(uses, &mut path, &mut done, &mut found);
        done.insert(start.clone());
    }
    found
}

/// Follows every use from the end of `path`; a use back onto `path` is a
/// circle. Modules already `done` were searched from, so any circle through
/// them was found then.
fn walk(
    uses: &Uses,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
    found: &mut Vec<Vec<String>>,
) {
    let last = path.last().expect("a path has a start").clone();
    for next in uses.get(&last).into_iter().flatten() {
        if done.contains(next) {
            continue;
        }
        if let Some(at) = path.iter().position(|m| m == next) {
            let circle = path[at..].to_vec();
            if at == 0 && !found.contains(&circle) {
                found.push(circle);
            }
            continue;
        }
        path.push(next.clone());
        walk(uses, path, done, found);
        path.pop();
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a source folder reads") {
        let path = entry.expect("a folder entry reads").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The top-level module a file belongs to (`None` for the crate root and
/// `main.rs`, which may use everything).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    let name = name.strip_suffix("_tests").unwrap_or(name);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The text of a file without comments and without its unit tests (what
/// follows `#[cfg(test)]`, by the crates' convention the end of a file).
/// Files of tests only (`*_tests.rs`) keep nothing.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    if code.starts_with("use super::*;") {
        return String::new();
    }
    code.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment of every `crate::` path in `code`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .filter(|(at, _)| !code[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(at, prefix)| {
            code[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|segment| !segment.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(crate_folder: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(crate_folder)
            .join("src")
    }

    fn graph(edges: &[(&str, &str)]) -> Uses {
        let mut uses = Uses::new();
        for (from, to) in edges {
            uses.entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
        uses
    }

    #[test]
    fn a_circle_of_three_is_found_once_and_a_chain_is_none() {
        let chain = graph(&[
            ("controller", "fleet"),
            ("fleet", "job"),
            ("controller", "job"),
        ]);
        assert!(circles(&chain).is_empty());
        let circle = graph(&[
            ("job", "fleet"),
            ("fleet", "kueue"),
            ("kueue", "job"),
            ("controller", "job"),
        ]);
        assert_eq!(circles(&circle), [["fleet", "kueue", "job"]]);
    }

    #[test]
    fn uses_are_read_from_code_not_comments_or_tests() {
        let text = "use crate::fleet::Fleet;\n/// see [`crate::kueue`]\nfn f() { crate::job::life::next(); } // crate::leader\n#[cfg(test)]\nmod tests { use crate::webhook; }\n";
        assert_eq!(
            crate_paths(&code_of(text)),
            BTreeSet::from(["fleet".into(), "job".into()])
        );
        assert!(crate_paths(&code_of("use super::*;\nuse crate::fleet;\n")).is_empty());
    }

    #[test]
    fn no_crate_has_a_module_circle() {
        for crate_folder in ["manager", "worker-agent", "process"] {
            let found = circles(&uses(&source(crate_folder)));
            assert!(found.is_empty(), "{crate_folder}: module circles {found:?}");
        }
    }

    #[test]
    fn the_managers_job_module_reads_no_api() {
        for file in rust_files(&source("manager").join("job")) {
            let code = code_of(&std::fs::read_to_string(&file).expect("a source file reads"));
            for talks in ["kube::Api", "Api<", "kube::Client", ".await"] {
                assert!(!code.contains(talks), "{} has {talks}", file.display());
            }
        }
    }
}
