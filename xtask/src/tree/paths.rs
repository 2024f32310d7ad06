//! The paths a file's code names, read without a parser: every path that
//! starts at `crate::`, `super::` or `self::`, and the names its `use` items
//! bring in, each resolved to a path from the crate root.

use std::collections::BTreeMap;

/// A path from the crate root: module names, perhaps an item at the end.
pub type Path = Vec<String>;

/// One path of a `use` tree as written, and the name it is brought in as
/// when that is not its last segment.
#[derive(Debug, PartialEq)]
struct Written {
    segments: Vec<String>,
    alias: Option<String>,
}

/// Every path in `code` that starts at `crate::`, `super::` or `self::`,
/// resolved from the file's `module`. A braced group gives one path per
/// path in it; a glob names the module it is taken from.
pub fn used(code: &str, module: &[String]) -> Vec<Path> {
    let mut found = Vec::new();
    for keyword in ["crate", "super", "self"] {
        let prefix = format!("{keyword}::");
        for (at, _) in code.match_indices(&prefix) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| is_name(c) || c == ':' || c == '$') {
                continue;
            }
            for written in tree(&code[at..]) {
                found.extend(resolve(&written.segments, module));
            }
        }
    }
    found
}

/// The names the `use` items of `code` bring into `module`, each with the
/// path within the crate it names. Paths outside the crate, globs and
/// `as _` are left out; `is_module` tells a child module from a crate name.
pub fn imports(
    code: &str,
    module: &[String],
    is_module: impl Fn(&[String]) -> bool,
) -> BTreeMap<String, Path> {
    let mut names = BTreeMap::new();
    for (at, _) in code.match_indices("use ") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| !c.is_whitespace() && c != ')' && c != ';' && c != '{') {
            continue;
        }
        for written in tree(&code[at + "use ".len()..]) {
            let Some(last) = written.segments.last() else {
                continue;
            };
            if last == "*" {
                continue;
            }
            let name = written.alias.clone().unwrap_or_else(|| last.clone());
            if name == "_" {
                continue;
            }
            let path = match written.segments[0].as_str() {
                "crate" | "super" | "self" => resolve(&written.segments, module),
                _ => {
                    let child = [module, &written.segments[..1]].concat();
                    is_module(&child).then(|| [module, &written.segments[..]].concat())
                }
            };
            if let Some(path) = path {
                names.insert(name, path);
            }
        }
    }
    names
}

/// A path written from `module` as one from the crate root (`None` for a
/// `super` above the root).
fn resolve(segments: &[String], module: &[String]) -> Option<Path> {
    let mut at = module.to_vec();
    let mut rest = segments;
    if rest.first().is_some_and(|s| s == "crate") {
        at.clear();
        rest = &rest[1..];
    }
    while let Some(first) = rest.first() {
        match first.as_str() {
            "self" => {}
            "super" => {
                at.pop()?;
            }
            _ => break,
        }
        rest = &rest[1..];
    }
    at.extend(rest.iter().filter(|s| *s != "*").cloned());
    Some(at)
}

/// The paths of the `use` tree (or plain path) at the start of `text`.
fn tree(text: &str) -> Vec<Written> {
    let mut found = Vec::new();
    branch(text, &mut Vec::new(), &mut found);
    found
}

/// Reads segments onto `prefix` until the path ends or opens a group;
/// returns how far it read.
fn branch(text: &str, prefix: &mut Vec<String>, found: &mut Vec<Written>) -> usize {
    let depth = prefix.len();
    let mut at = 0;
    loop {
        at += blank(&text[at..]);
        let rest = &text[at..];
        if rest.starts_with('{') {
            at += 1;
            loop {
                at += blank(&text[at..]);
                if text[at..].starts_with('}') {
                    at += 1;
                    break;
                }
                let read = branch(&text[at..], prefix, found);
                at += read + blank(&text[at + read..]);
                if text[at..].starts_with(',') {
                    at += 1;
                } else if read == 0 {
                    // Not a path (or the text ends): stop here.
                    break;
                }
            }
            break;
        }
        if rest.starts_with('*') {
            at += 1;
            prefix.push("*".to_string());
            found.push(Written {
                segments: prefix.clone(),
                alias: None,
            });
            break;
        }
        let name: String = rest.chars().take_while(|c| is_name(*c)).collect();
        if name.is_empty() {
            break;
        }
        at += name.len();
        // `a::{self}` names `a` itself.
        let names_group = name == "self" && depth > 0 && prefix.len() == depth;
        if !names_group {
            prefix.push(name);
        }
        if text[at..].starts_with("::") {
            at += 2;
            continue;
        }
        let alias = alias(&text[at..]).map(|(name, read)| {
            at += read;
            name
        });
        found.push(Written {
            segments: prefix.clone(),
            alias,
        });
        break;
    }
    prefix.truncate(depth);
    at
}

/// The name after ` as ` at the start of `text`, and how far it reaches.
fn alias(text: &str) -> Option<(String, usize)> {
    let start = blank(text);
    let rest = text[start..].strip_prefix("as")?;
    let gap = blank(rest);
    if gap == 0 {
        return None;
    }
    let name: String = rest[gap..].chars().take_while(|c| is_name(*c)).collect();
    (!name.is_empty()).then(|| (name.clone(), start + 2 + gap + name.len()))
}

fn blank(text: &str) -> usize {
    text.len() - text.trim_start().len()
}

fn is_name(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn joined(paths: Vec<Path>) -> Vec<String> {
        let mut joined: Vec<_> = paths.into_iter().map(|p| p.join("::")).collect();
        joined.sort();
        joined
    }

    #[test]
    fn braced_groups_give_one_path_each_and_self_names_the_group() {
        let code = "use crate::job::{self, life::{Step, next}, placement::*};";
        assert_eq!(
            joined(used(code, &module(&["fleet"]))),
            [
                "job",
                "job::life::Step",
                "job::life::next",
                "job::placement"
            ]
        );
    }

    #[test]
    fn super_and_self_resolve_from_the_files_module() {
        let code = "use super::placement::Candidate;\nfn f() { super::super::fleet::x(); self::inner::y(); }";
        assert_eq!(
            joined(used(code, &module(&["job", "life"]))),
            [
                "fleet::x",
                "job::life::inner::y",
                "job::placement::Candidate"
            ]
        );
        assert!(used("use super::super::x;", &module(&["job"])).is_empty());
    }

    #[test]
    fn names_of_other_crates_and_visibility_are_no_paths() {
        let code = "use jobrelay_process::crate_name::x;\npub(crate) fn f() {}\npub(in crate::bench) fn g() {}\nmacro_rules! m { () => { $crate::x } }";
        assert_eq!(
            joined(used(code, &module(&["bench", "ceiling"]))),
            ["bench"]
        );
    }

    #[test]
    fn a_group_left_open_or_holding_no_path_ends_the_reading() {
        let from = module(&["job"]);
        assert_eq!(joined(used("use crate::{fleet, ", &from)), ["fleet"]);
        assert_eq!(
            joined(used("use crate::{fleet, /* x */ kinds};", &from)),
            ["fleet"]
        );
    }

    #[test]
    fn imports_are_named_by_their_last_segment_or_alias() {
        let code = "use std::sync::Arc;\npub use life::Step;\nuse self::plan::{Plan as Effects, after};\nuse crate::fleet::Fleet;\nuse super::*;\nuse crate::kinds::key as _;";
        let names = imports(code, &module(&["job"]), |m| {
            m == module(&["job", "life"]) || m == module(&["job", "plan"])
        });
        let names: Vec<_> = names
            .into_iter()
            .map(|(name, path)| format!("{name}={}", path.join("::")))
            .collect();
        assert_eq!(
            names,
            [
                "Effects=job::plan::Plan",
                "Fleet=fleet::Fleet",
                "Step=job::life::Step",
                "after=job::plan::after",
            ]
        );
    }
}
