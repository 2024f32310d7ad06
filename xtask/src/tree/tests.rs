use super::*;

fn source(crate_folder: &str) -> PathBuf {
    root().join(crate_folder).join("src")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The workspace's crates, as the folders `Cargo.toml` lists as members.
fn workspace_members() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml reads");
    let line = manifest
        .lines()
        .find(|line| line.trim_start().starts_with("members"))
        .expect("the workspace lists its members on one line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
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

fn module(path: &str) -> Module {
    path.split("::")
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

/// The edges `layers` draws in a crate of the given modules and their
/// code, each written `parent: from → to`.
fn layers_of(files: &[(&str, &str)]) -> Vec<String> {
    let code = files
        .iter()
        .map(|(path, text)| (module(path), code_of(text)))
        .collect();
    let mut edges = Vec::new();
    for (parent, uses) in Crate::from_code(code).layers() {
        for (from, tos) in uses {
            for to in tos {
                edges.push(format!("{}: {from} → {to}", written_name(&parent)));
            }
        }
    }
    edges
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
    let first: BTreeSet<String> = paths::used(&code_of(text), &module("controller"))
        .into_iter()
        .map(|path| path[0].clone())
        .collect();
    assert_eq!(first, BTreeSet::from(["fleet".into(), "job".into()]));
    assert!(paths::used(&code_of("use super::*;\nuse crate::fleet;\n"), &[]).is_empty());
}

/// A case: what it shows, a crate's modules with their code, and the edges
/// `layers` draws from them, each as `parent: from → to`.
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
);

/// One crate per row.
const CASES: &[Case] = &[
    (
        "a use is an edge between the siblings where the paths part",
        &[
            ("", "mod job; mod fleet;"),
            ("job", "pub mod life; pub mod placement;"),
            (
                "job::life",
                "use crate::job::placement::Candidate;\nuse crate::fleet::Fleet;",
            ),
            ("job::placement", ""),
            ("fleet", "use crate::job::life::Step;"),
        ],
        &[
            "crate: fleet → job",
            "crate: job → fleet",
            "job: life → placement",
        ],
    ),
    (
        "super and self paths resolve from the file's module",
        &[
            (
                "startup",
                "mod controllers; mod watches; use self::watches::Watches;",
            ),
            ("startup::controllers", "use super::watches::Watches;"),
            (
                "startup::watches",
                "fn f() { super::controllers::spawn(); }",
            ),
        ],
        &[
            "startup: controllers → watches",
            "startup: watches → controllers",
        ],
    ),
    (
        "a parent using its children or a child its parent's items is no edge",
        &[
            (
                "job",
                "pub mod life; pub mod plan; pub struct Key; use life::Step;",
            ),
            ("job::life", "use super::Key; use crate::job::Key as Same;"),
            ("job::plan", "use super::{Key, life};"),
        ],
        &["job: plan → life"],
    ),
    (
        "a name the parent imports counts as where it comes from",
        &[
            ("", "mod job; mod kinds; pub use kinds::Key;"),
            ("job", "pub mod life; pub mod plan; pub use life::Step;"),
            ("job::life", ""),
            ("job::plan", "use super::Step; use crate::Key;"),
            ("kinds", ""),
        ],
        &["crate: job → kinds", "job: plan → life"],
    ),
];

#[test]
fn each_use_draws_the_edge_the_rules_say() {
    for (case, files, expected) in CASES {
        assert_eq!(&layers_of(files), expected, "{case}");
    }
}

#[test]
fn files_hold_the_modules_their_paths_name() {
    let src = Path::new("src");
    let of = |file: &str, has_lib| module_of(src, &src.join(file), has_lib).map(|m| m.join("::"));
    assert_eq!(of("lib.rs", true).as_deref(), Some(""));
    assert_eq!(of("main.rs", false).as_deref(), Some(""));
    assert_eq!(of("main.rs", true), None);
    assert_eq!(of("job/mod.rs", true).as_deref(), Some("job"));
    assert_eq!(of("job/life.rs", true).as_deref(), Some("job::life"));
    assert_eq!(
        of("cli/election.rs", true).as_deref(),
        Some("cli::election")
    );
    assert_eq!(of("job/life_tests.rs", true), None);
    assert_eq!(of("fleet/tests.rs", true), None);
    assert_eq!(of("bin/jobrelay-cluster.rs", true), None);
}

#[test]
fn no_crate_has_a_module_circle() {
    let members = workspace_members();
    assert!(
        members.len() >= 7,
        "the workspace lists its crates: {members:?}"
    );
    for crate_folder in members {
        let found = module_circles(&source(&crate_folder));
        assert!(
            found.is_empty(),
            "{crate_folder}/src: module circles {found:#?}"
        );
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
