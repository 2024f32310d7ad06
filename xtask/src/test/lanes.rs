//! The end-to-end targets run in lanes side by side: each target starts
//! clusters of its own and spends most of its time waiting on them, so two
//! run in the time of little more than one. Which target goes when is
//! decided here over plain data (the targets `tests/Cargo.toml` lists,
//! their usual durations); [`run`] carries it out.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use jobrelay_testbed::go::controlplane::seconds;

use crate::{log, workspace_root};

/// Each target's usual duration on the CI machine, in seconds, longest
/// first; a target runs earlier the longer it takes, so the lanes end
/// together.
const SECONDS: [(&str, u32); 23] = [
    ("kueue", 240),
    ("cronjob", 160),
    ("restarts", 145),
    ("security", 140),
    ("chaos", 140),
    ("mirror_lost", 115),
    ("relay", 65),
    ("placement", 60),
    ("deploy", 60),
    ("deploy_guide", 65),
    ("jobset", 50),
    ("deploy_upgrade", 50),
    ("ha", 50),
    ("jobset_kit", 50),
    ("registration", 50),
    ("orphan_sweep", 45),
    ("retention", 40),
    ("kubernetes", 20),
    ("real_node", 15),
    ("terminated_pods", 12),
    ("helm", 11),
    ("policy_narrowed", 6),
    ("images", 5),
];

/// Targets that run real nodes on the host, which share its network and
/// cgroups: one after the other, never beside each other.
const REAL_NODES: [&str; 4] = ["deploy", "deploy_guide", "deploy_upgrade", "real_node"];

/// The names of the test targets a Cargo manifest lists (`[[test]]`).
pub fn targets(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_test = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_test = line == "[[test]]";
        } else if in_test && let Some(value) = line.strip_prefix("name") {
            let name = value.trim_start().trim_start_matches('=').trim();
            names.push(name.trim_matches('"').to_string());
        }
    }
    names
}

/// The jobs the lanes take, in the order they take them: each target alone,
/// but the real-node ones together; the longest first. An error names a
/// target without a usual duration.
pub fn jobs(targets: &[String]) -> Result<Vec<Vec<String>>, String> {
    let weight = |name: &str| {
        SECONDS
            .iter()
            .find(|(target, _)| *target == name)
            .map(|(_, seconds)| *seconds)
            .ok_or_else(|| {
                format!("e2e target {name} has no usual duration in xtask/src/test/lanes.rs")
            })
    };
    let mut jobs: Vec<(u32, Vec<String>)> = Vec::new();
    let mut together = (0, Vec::new());
    for target in targets {
        let seconds = weight(target)?;
        match REAL_NODES.contains(&target.as_str()) {
            true => {
                together.0 += seconds;
                together.1.push(target.clone());
            }
            false => jobs.push((seconds, vec![target.clone()])),
        }
    }
    if !together.1.is_empty() {
        jobs.push(together);
    }
    jobs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    Ok(jobs.into_iter().map(|(_, job)| job).collect())
}

/// Runs `jobs` in `lanes` lanes, each target's test binary (`executables`,
/// by target) as cargo would run it — from the package's folder, with
/// `CARGO` and `env`, given `rest` — its output kept in
/// `target/e2e-logs/<target>.log` and printed whole once it ends. Running
/// the binaries, not `cargo test` per target, leaves cargo's build alone
/// while the tests build the binaries they run. After a failure no new job
/// starts; the error names every target that failed.
pub fn run(
    jobs: Vec<Vec<String>>,
    executables: &BTreeMap<String, PathBuf>,
    lanes: usize,
    rest: &[String],
    env: &[(&str, &std::ffi::OsStr)],
) -> anyhow::Result<()> {
    let logs = workspace_root().join("target/e2e-logs");
    std::fs::create_dir_all(&logs)?;
    let queue = Mutex::new(VecDeque::from(jobs));
    let failed = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for lane in 1..=lanes.max(1) {
            let (queue, failed, logs) = (&queue, &failed, &logs);
            scope.spawn(move || {
                loop {
                    let job = {
                        let stop = !lock(failed).is_empty();
                        match stop {
                            true => None,
                            false => lock(queue).pop_front(),
                        }
                    };
                    let Some(job) = job else { return };
                    for target in job {
                        let Some(executable) = executables.get(&target) else {
                            log(&format!("{target} was not built"));
                            lock(failed).push(target);
                            break;
                        };
                        let ran = Run {
                            target: &target,
                            executable,
                            lane,
                        };
                        if let Err(error) = ran.run(rest, env, logs) {
                            log(&format!("{target} failed: {error:#}"));
                            lock(failed).push(target);
                            break;
                        }
                    }
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap_or_else(|p| p.into_inner());
    anyhow::ensure!(
        failed.is_empty(),
        "e2e targets failed: {} (their output is above, and in {})",
        failed.join(", "),
        logs.display()
    );
    Ok(())
}

/// The test binaries a `cargo test --no-run --message-format=json` built,
/// by target, from its output lines.
pub fn executables(messages: &str) -> BTreeMap<String, PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| message["target"]["kind"] == serde_json::json!(["test"]))
        .filter_map(|message| {
            let name = message["target"]["name"].as_str()?.to_string();
            Some((name, PathBuf::from(message["executable"].as_str()?)))
        })
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// One target's run in a lane.
struct Run<'a> {
    target: &'a str,
    executable: &'a Path,
    lane: usize,
}

impl Run<'_> {
    /// Runs the target, its output into its log file, then prints that.
    fn run(
        &self,
        rest: &[String],
        env: &[(&str, &std::ffi::OsStr)],
        logs: &Path,
    ) -> anyhow::Result<()> {
        let (target, lane) = (self.target, self.lane);
        let started = Instant::now();
        let path = logs.join(format!("{target}.log"));
        let out = std::fs::File::create(&path)?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        log(&format!("lane {lane}: {target} started"));
        let status = Command::new(self.executable)
            .current_dir(workspace_root().join("tests"))
            .args(rest)
            .env("CARGO", cargo)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .status()?;
        let output = std::fs::read_to_string(&path).unwrap_or_default();
        let took = seconds(started.elapsed());
        let outcome = match status.success() {
            true => "passed",
            false => "FAILED",
        };
        eprintln!("xtask: ── lane {lane}: {target} {outcome} in {took} ──\n{output}");
        anyhow::ensure!(status.success(), "{}: {status}", self.executable.display());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_targets_are_the_manifests_test_sections() {
        let manifest = r#"
[package]
name = "jobrelay-e2e"

[[bin]]
name = "jobrelay-cluster"

[[test]]
name = "relay"
path = "e2e/relay.rs"

[[test]]
name="helm"
"#;
        assert_eq!(targets(manifest), ["relay", "helm"]);
    }

    #[test]
    fn the_built_test_binaries_are_read_from_cargos_messages() {
        let messages = [
            r#"{"reason":"compiler-artifact","target":{"kind":["test"],"name":"relay"},"executable":"/t/relay-1"}"#,
            r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"jobrelay_e2e"},"executable":"/t/lib-2"}"#,
            r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"serde"},"executable":null}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "not json",
        ]
        .join("\n");
        assert_eq!(
            executables(&messages),
            BTreeMap::from([("relay".to_string(), PathBuf::from("/t/relay-1"))])
        );
    }

    #[test]
    fn the_longest_go_first_and_the_real_node_targets_together() {
        let names = ["helm", "real_node", "kueue", "deploy", "relay"].map(String::from);
        assert_eq!(
            jobs(&names).expect("all known"),
            [
                vec!["kueue".to_string()],
                vec!["real_node".to_string(), "deploy".to_string()],
                vec!["relay".to_string()],
                vec!["helm".to_string()],
            ]
        );
    }

    #[test]
    fn a_target_without_a_usual_duration_is_named() {
        let error = jobs(&["relay".into(), "brand_new".into()]).expect_err("unknown");
        assert!(error.contains("brand_new"), "{error}");
    }

    #[test]
    fn every_target_of_the_e2e_crate_has_a_usual_duration() {
        let manifest = std::fs::read_to_string(workspace_root().join("tests/Cargo.toml"))
            .expect("tests/Cargo.toml");
        let listed = targets(&manifest);
        assert_eq!(listed.len(), SECONDS.len(), "{listed:?}");
        jobs(&listed).expect("every target weighed");
    }
}
