//! The layering of the crates' source trees, checked: in every crate of the
//! workspace, at every depth, no module uses a sibling that uses it back
//! (directly or round a longer circle), and the manager's `job/` — the pure
//! life of a Job — reads no API.
//!
//! Siblings are the modules under one parent, and each parent's children
//! form a graph: a use of `crate::a::b::c` from module `crate::a::x` is an
//! edge x → b among the children of `a`. A module's uses are the paths from
//! `crate::`, `super::` and `self::` in its file, outside comments and unit
//! tests. A parent using its own children is no edge, nor a child using an
//! item its parent defines; a name the parent imports counts as the path it
//! imports.

mod paths;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use paths::Path as ItemPath;

/// A module's place in its crate: the names from the crate root down.
type Module = Vec<String>;

/// Module → the siblings it uses.
type Uses = BTreeMap<String, BTreeSet<String>>;

/// Parent module → the uses among its children.
type Layers = BTreeMap<Module, Uses>;

/// A crate's modules, each with its code and the names it imports.
struct Crate {
    code: BTreeMap<Module, String>,
    imports: BTreeMap<Module, BTreeMap<String, ItemPath>>,
}

impl Crate {
    /// The crate whose source folder is `src`: every file but the tests
    /// and the binaries under `bin/`.
    fn read(src: &Path) -> Crate {
        let has_lib = src.join("lib.rs").exists();
        let mut code = BTreeMap::<Module, String>::new();
        for file in rust_files(src) {
            let Some(module) = module_of(src, &file, has_lib) else {
                continue;
            };
            let text = std::fs::read_to_string(&file).expect("a source file reads");
            code.entry(module).or_default().push_str(&code_of(&text));
        }
        Crate::from_code(code)
    }

    fn from_code(code: BTreeMap<Module, String>) -> Crate {
        let imports = code
            .iter()
            .map(|(module, text)| {
                let names = paths::imports(text, module, |m| code.contains_key(m));
                (module.clone(), names)
            })
            .collect();
        Crate { code, imports }
    }

    /// The uses among siblings, parent by parent.
    fn layers(&self) -> Layers {
        let mut layers = Layers::new();
        for (module, text) in &self.code {
            for used in paths::used(text, module) {
                if let Some((parent, from, to)) = self.edge(module, used) {
                    layers
                        .entry(parent)
                        .or_default()
                        .entry(from)
                        .or_default()
                        .insert(to);
                }
            }
        }
        layers
    }

    /// The edge that `module` naming `used` draws: the parent where the two
    /// paths part, and the children of it they go through. None when
    /// `used` lies inside `module`, is one of its ancestors, or is an item
    /// its parent defines.
    fn edge(&self, module: &[String], mut used: ItemPath) -> Option<(Module, String, String)> {
        // Each round follows one import; a bound keeps a circle of imports
        // (which would not compile) from looping.
        for _ in 0..16 {
            let shared = module.iter().zip(&used).take_while(|(a, b)| a == b).count();
            if shared == module.len() || shared == used.len() {
                return None;
            }
            let parent = &module[..shared];
            let sibling = [parent, &used[shared..=shared]].concat();
            if self.code.contains_key(&sibling) {
                return Some((
                    parent.to_vec(),
                    module[shared].clone(),
                    used[shared].clone(),
                ));
            }
            let imported = self.imports.get(parent)?.get(&used[shared])?;
            used = [imported, &used[shared + 1..]].concat();
        }
        None
    }
}

/// Every circle in the crate whose source folder is `src`, each written as
/// `parent: a → b → c` (`crate` for the root).
fn module_circles(src: &Path) -> Vec<String> {
    let mut written = Vec::new();
    for (parent, uses) in Crate::read(src).layers() {
        for circle in circles(&uses) {
            written.push(format!("{}: {}", written_name(&parent), circle.join(" → ")));
        }
    }
    written
}

/// A module as a path from the crate root, `crate` for the root itself.
fn written_name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
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

/// The module a file holds: `a/b.rs` and `a/b/mod.rs` hold `a::b`, the
/// crate root (`lib.rs`, or `main.rs` of a crate without one) holds the
/// root. `None` for files of unit tests (`tests.rs`, `*_tests.rs`) and for
/// other crates: the binaries under `bin/` and a `main.rs` beside `lib.rs`.
fn module_of(src: &Path, file: &Path, has_lib: bool) -> Option<Module> {
    let relative = file.strip_prefix(src).ok()?;
    let mut names: Module = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_str().map(str::to_string))
        .collect::<Option<_>>()?;
    let stem = names.last()?.clone();
    if names[0] == "bin" || stem == "tests" || stem.ends_with("_tests") {
        return None;
    }
    match (names.len(), stem.as_str()) {
        (1, "lib") => names.clear(),
        (1, "main") if has_lib => return None,
        (1, "main") => names.clear(),
        (_, "mod") => {
            names.pop();
        }
        _ => {}
    }
    Some(names)
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

#[cfg(test)]
mod tests;
