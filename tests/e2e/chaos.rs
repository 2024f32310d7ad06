//! The chaos run: a few hundred Jobs over two workers — short, long,
//! failing, deleted mid-run, suspended and resumed — while the agents and the
//! leading manager replica (of two) are killed or paused and links are cut
//! at random; a replica that ends is started again, as its Pod's container
//! would be. The schedule comes from a
//! seed (printed; set `JOBRELAY_CHAOS_SEED` to replay a run) and is bounded
//! in time and count. At the end every Job that was not deleted shows the
//! outcome its workload really reached, every deleted one is gone, no Job
//! ever had live mirrors on two clusters at once, and the leak check is
//! clean.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jobrelay_e2e::scenario::Scenario;
use jobrelay_testbed::kit;
use jobrelay_testbed::relay::election::lease_holder;
use jobrelay_testbed::relay::proxy::Mode;
use jobrelay_testbed::relay::{Options, Relay};
use jobrelay_testbed::wait::{self, Seen};
use kube::api::{DeleteParams, Patch, PatchParams};

/// Jobs in one run (`JOBRELAY_CHAOS_JOBS` overrides: the long mode, e.g.
/// 500, stretches the windows and the fault budget in proportion).
const JOBS: u64 = 200;
/// For 200 Jobs: Jobs are created over this long, and faults happen over
/// this long.
const CREATE_WINDOW: Duration = Duration::from_secs(80);
const FAULT_WINDOW: Duration = Duration::from_secs(100);
/// For 200 Jobs: at most this many faults.
const MAX_FAULTS: usize = 30;
const CONVERGE: Duration = Duration::from_secs(300);

/// A small deterministic generator (SplitMix64), so a seed replays a run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..high`.
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low).max(1)
    }

    fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(self.range(low, high))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Short,
    Long,
    Failing,
    DeletedMidRun,
    SuspendedAndResumed,
}

#[derive(Debug, Clone)]
enum Step {
    Create(u64, Kind),
    Delete(u64),
    Suspend(u64, bool),
    KillAgent(usize),
    StartAgent(usize),
    KillLeader,
    StartManager,
    PauseLeader,
    ResumeManager,
    Cut(usize, Mode),
}

/// The whole run, decided up front from the seed: (when, what).
fn schedule(seed: u64, jobs: u64, workers: usize) -> Vec<(Duration, Step)> {
    let mut rng = Rng(seed);
    let mut steps = Vec::new();
    let scale = (jobs as f64 / JOBS as f64).max(1.0);
    let (create_window, fault_window) = (CREATE_WINDOW.mul_f64(scale), FAULT_WINDOW.mul_f64(scale));
    let max_faults = (MAX_FAULTS as f64 * scale) as usize;
    for i in 0..jobs {
        let at = create_window.mul_f64(i as f64 / jobs as f64);
        let kind = match rng.range(0, 100) {
            0..40 => Kind::Short,
            40..55 => Kind::Long,
            55..70 => Kind::Failing,
            70..85 => Kind::DeletedMidRun,
            _ => Kind::SuspendedAndResumed,
        };
        steps.push((at, Step::Create(i, kind)));
        match kind {
            Kind::DeletedMidRun => steps.push((at + rng.millis(1_000, 20_000), Step::Delete(i))),
            Kind::SuspendedAndResumed => {
                let suspend = at + rng.millis(500, 5_000);
                steps.push((suspend, Step::Suspend(i, true)));
                steps.push((suspend + rng.millis(2_000, 10_000), Step::Suspend(i, false)));
            }
            _ => {}
        }
    }
    // Faults: each takes its target down for a while; overlapping faults on
    // one target are skipped when the run is executed.
    let mut at = Duration::from_secs(5);
    let mut faults = 0;
    while at < fault_window && faults < max_faults {
        let down_for = rng.millis(1_000, 6_000);
        let worker = rng.range(0, workers as u64) as usize;
        match rng.range(0, 10) {
            0..4 => {
                steps.push((at, Step::KillAgent(worker)));
                steps.push((at + down_for, Step::StartAgent(worker)));
            }
            4 => {
                steps.push((at, Step::KillLeader));
                steps.push((at + down_for, Step::StartManager));
            }
            5 => {
                steps.push((at, Step::PauseLeader));
                steps.push((at + down_for, Step::ResumeManager));
            }
            6..8 => {
                steps.push((at, Step::Cut(worker, Mode::Drop)));
                steps.push((at + down_for, Step::Cut(worker, Mode::Pass)));
            }
            _ => {
                steps.push((at, Step::Cut(worker, Mode::BlackHole)));
                steps.push((at + down_for, Step::Cut(worker, Mode::Pass)));
            }
        }
        faults += 1;
        at += rng.millis(3_000, 6_000);
    }
    steps.sort_by_key(|(at, _)| *at);
    steps
}

/// Faults by what they take down.
fn faults_by_kind(steps: &[(Duration, Step)]) -> BTreeMap<&'static str, usize> {
    let mut kinds = BTreeMap::new();
    for (_, step) in steps {
        let kind = match step {
            Step::KillAgent(_) => "agent killed",
            Step::KillLeader => "leader killed",
            Step::PauseLeader => "leader paused",
            Step::Cut(_, Mode::Drop) => "link dropped",
            Step::Cut(_, Mode::BlackHole) => "link black-holed",
            _ => continue,
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

/// How many steps take something down.
fn faults(steps: &[(Duration, Step)]) -> usize {
    steps
        .iter()
        .filter(|(_, step)| {
            matches!(
                step,
                Step::KillAgent(_)
                    | Step::KillLeader
                    | Step::PauseLeader
                    | Step::Cut(_, Mode::Drop | Mode::BlackHole)
            )
        })
        .count()
}

fn name(i: u64) -> String {
    format!("chaos-{i}")
}

/// Carries out one step; faults on a target that is already down are skipped.
async fn execute(
    step: &Step,
    scenario: &Scenario,
    relay: &Relay,
    down: &mut BTreeMap<String, usize>,
    workers: &[String],
) {
    let jobs = &scenario.jobs;
    match step {
        Step::Create(i, kind) => {
            let job = scenario.job(&name(*i));
            let job = match kind {
                Kind::Short => job.run_for("2s"),
                Kind::Long => job.run_for("20s"),
                Kind::Failing => job.run_for("2s").failing(),
                Kind::DeletedMidRun => job.run_for("600s").terminate_after("1s"),
                Kind::SuspendedAndResumed => job.run_for("3s"),
            };
            scenario.create(job).await;
        }
        Step::Delete(i) => {
            let _ = jobs.delete(&name(*i), &DeleteParams::default()).await;
        }
        Step::Suspend(i, suspend) => {
            let patch = serde_json::json!({"spec": {"suspend": suspend}});
            let _ = jobs
                .patch(&name(*i), &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        }
        Step::KillAgent(w) | Step::StartAgent(w) | Step::Cut(w, _) => {
            let worker = &workers[*w];
            let key = format!("agent {worker}");
            let link = format!("link {worker}");
            match step {
                Step::KillAgent(_) if !down.contains_key(&key) => {
                    relay.kill_agent(worker);
                    down.insert(key, 1);
                }
                Step::StartAgent(_) if down.remove(&key).is_some() => {
                    relay.start_agent(worker).expect("restart the agent");
                }
                Step::Cut(_, Mode::Pass) => {
                    relay.link(worker).expect("proxied").set(Mode::Pass);
                    down.remove(&link);
                }
                Step::Cut(_, mode) if !down.contains_key(&link) => {
                    relay.link(worker).expect("proxied").set(*mode);
                    down.insert(link, 1);
                }
                _ => {}
            }
        }
        Step::KillLeader | Step::PauseLeader if !down.contains_key("manager") => {
            let Some(leader) = leader(scenario).await else {
                return;
            };
            match step {
                Step::KillLeader => relay.kill_replica(leader),
                _ => relay
                    .signal_replica(leader, libc::SIGSTOP)
                    .expect("pause the leader"),
            }
            down.insert("manager".into(), leader);
        }
        Step::StartManager | Step::ResumeManager => {
            if let Some(replica) = down.remove("manager") {
                match step {
                    Step::StartManager => {
                        relay.start_replica(replica).expect("restart the replica")
                    }
                    _ => relay
                        .signal_replica(replica, libc::SIGCONT)
                        .expect("resume the replica"),
                }
            }
        }
        Step::KillLeader | Step::PauseLeader => {}
    }
}

async fn leader(scenario: &Scenario) -> Option<usize> {
    lease_holder(&kit::client(scenario.clusters.manager()).await).await
}

/// Starts again every replica that ended (one that stepped down after a
/// pause), as the kubelet restarts a container; returns how many.
fn restart_ended(relay: &Relay) -> usize {
    (0..relay.replicas())
        .filter(|&replica| {
            relay.replica_exited(replica).is_some() && relay.start_replica(replica).is_ok()
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_survive_random_kills_and_cuts_and_leave_nothing_behind() {
    let seed = std::env::var("JOBRELAY_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let jobs = std::env::var("JOBRELAY_CHAOS_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(JOBS);
    println!("chaos seed {seed} ({jobs} Jobs); replay with JOBRELAY_CHAOS_SEED={seed}");

    let options = Options {
        proxied: true,
        ..Options::two_quick_replicas()
    };
    let (clusters, relay) = kit::relay_with(2, options).await;
    let scenario = Scenario::new(clusters, relay, "chaos").await;
    let workers: Vec<String> = clusters.workers().iter().map(|w| w.name.clone()).collect();
    let steps = schedule(seed, jobs, workers.len());
    let faults = faults(&steps);

    // Watches, every half second, that no Job has live mirrors on two clusters.
    let running = Arc::new(AtomicBool::new(true));
    let sampler = {
        let running = Arc::clone(&running);
        let scenario = Scenario {
            clusters,
            relay,
            ns: scenario.ns.clone(),
            jobs: scenario.jobs.clone(),
        };
        tokio::spawn(async move {
            let mut doubled = Vec::new();
            let mut samples = 0;
            let mut ticks = tokio::time::interval(Duration::from_millis(500));
            while running.load(Ordering::Relaxed) {
                ticks.tick().await;
                if let Ok(mirrors) = scenario.mirrors().await {
                    samples += 1;
                    doubled.extend(mirrors.into_iter().filter(|(_, on)| on.len() > 1));
                }
            }
            (samples, doubled)
        })
    };

    let started = Instant::now();
    let mut down = BTreeMap::new();
    let mut restarted = 0;
    for (at, step) in &steps {
        // The schedule is the stimulus: each step happens at its moment.
        tokio::time::sleep_until((started + *at).into()).await;
        execute(step, &scenario, relay, &mut down, &workers).await;
        restarted += restart_ended(relay);
    }
    let last_fault = Instant::now();
    let by_kind = faults_by_kind(&steps);
    println!(
        "schedule done after {:?}: {} steps, {faults} faults {by_kind:?}, {restarted} replicas restarted after stepping down",
        started.elapsed(),
        steps.len()
    );
    // A replica resumed by the last steps may step down only now.
    let restarter = {
        let running = Arc::clone(&running);
        tokio::spawn(async move {
            // A kubelet's look at its containers, every half second.
            let mut ticks = tokio::time::interval(Duration::from_millis(500));
            while running.load(Ordering::Relaxed) {
                ticks.tick().await;
                restart_ended(relay);
            }
        })
    };

    let mut expected = BTreeMap::new();
    for (_, step) in &steps {
        if let Step::Create(i, kind) = step {
            match kind {
                Kind::DeletedMidRun => {}
                Kind::Failing => {
                    expected.insert(name(*i), "Failed");
                }
                _ => {
                    expected.insert(name(*i), "Complete");
                }
            }
        }
    }
    scenario.wait_outcomes(&expected, CONVERGE).await;
    wait::until("every Job deleted mid-run gone", CONVERGE, || async {
        let left = scenario
            .jobs
            .list(&Default::default())
            .await
            .map(|l| l.items.len());
        match left {
            Ok(n) if n == expected.len() => Seen::Ready(()),
            other => Seen::Waiting(format!("{other:?} Jobs, want {}", expected.len())),
        }
    })
    .await;
    println!(
        "converged {:?} after the last fault ({:?} in all)",
        last_fault.elapsed(),
        started.elapsed()
    );

    running.store(false, Ordering::Relaxed);
    let (samples, doubled) = sampler.await.expect("sampler");
    restarter.await.expect("restarter");
    assert!(
        samples > 10,
        "the two-mirror check sampled only {samples} times"
    );
    assert!(
        doubled.is_empty(),
        "Jobs with live mirrors on two clusters: {doubled:?}"
    );
    // A suspended Job keeps its mirror (suspended); a lost one is replaced,
    // after the first is gone.
    scenario.assert_created_at_most(2);
    scenario.finish(CONVERGE).await;
    println!("chaos run clean in {:?} (seed {seed})", started.elapsed());
}

#[test]
fn a_seed_replays_the_same_schedule() {
    let render = |steps: Vec<(Duration, Step)>| format!("{steps:?}");
    assert_eq!(render(schedule(7, 50, 2)), render(schedule(7, 50, 2)));
    assert_ne!(render(schedule(7, 50, 2)), render(schedule(8, 50, 2)));
    let steps = schedule(7, 50, 2);
    let faults = faults(&steps);
    assert!(faults > 0 && faults <= MAX_FAULTS);
    assert!(
        steps
            .iter()
            .all(|(at, _)| *at < FAULT_WINDOW + Duration::from_secs(30))
    );
}
