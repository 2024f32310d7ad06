//! What the fleet bench runs and where: the workers' node pools (uneven
//! room), a seeded mix of Jobs of several sizes and run times, and the
//! ideal makespan they set — all plain data.

use jobrelay_testbed::cluster::pools::NodePool;

/// A Job of the mix: `pods` Pods at once (parallelism = completions), each
/// asking `cpu` whole CPUs and running `seconds`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct JobSpec {
    pub name: String,
    pub pods: u32,
    pub cpu: u32,
    pub seconds: u64,
}

impl JobSpec {
    /// CPU-seconds of work.
    pub fn work(&self) -> u64 {
        u64::from(self.pods) * u64::from(self.cpu) * self.seconds
    }
}

const PODS: [u32; 3] = [1, 2, 4];
const CPUS: [u32; 4] = [1, 2, 4, 8];
const SECONDS: [u64; 3] = [10, 20, 40];

/// `n` Jobs drawn from `seed`: 1, 2 or 4 Pods of 1, 2, 4 or 8 CPUs, each
/// running 10, 20 or 40 s. The same seed gives the same mix, so every system
/// runs the same Jobs.
pub fn mix(n: usize, seed: u64) -> Vec<JobSpec> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|i| JobSpec {
            name: format!("fleet-{i}"),
            pods: PODS[rng.usize(..PODS.len())],
            cpu: CPUS[rng.usize(..CPUS.len())],
            seconds: SECONDS[rng.usize(..SECONDS.len())],
        })
        .collect()
}

/// The node pools each worker gets, in worker order: the first has four
/// 8-CPU Nodes (32 CPUs), the second three 16-CPU Nodes (48 CPUs). Every Pod
/// of the mix fits on any Node, so what is measured is how the Jobs are
/// spread, not whether one can run at all.
pub fn pools() -> Vec<NodePool> {
    vec![
        NodePool::new("eight", 4).cpu("8").memory("32Gi"),
        NodePool::new("sixteen", 3).cpu("16").memory("64Gi"),
    ]
}

/// Whole CPUs a pool has in all; 0 if its CPU is not a whole number.
pub fn cpus(pool: &NodePool) -> u32 {
    let each: u32 = pool
        .declared()
        .get("cpu")
        .and_then(|cpu| cpu.parse().ok())
        .unwrap_or(0);
    each * u32::try_from(pool.count()).unwrap_or(0)
}

/// The shortest the mix could take on `room` CPUs: its work spread evenly
/// over them, and never less than its longest Job.
pub fn ideal_seconds(jobs: &[JobSpec], room: u32) -> f64 {
    let work: u64 = jobs.iter().map(JobSpec::work).sum();
    let longest = jobs.iter().map(|j| j.seconds).max().unwrap_or(0);
    (work as f64 / f64::from(room.max(1))).max(longest as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_mix_of_every_size() {
        let jobs = mix(60, 7);
        assert_eq!(jobs, mix(60, 7));
        assert_ne!(jobs, mix(60, 8));
        for size in CPUS {
            assert!(
                jobs.iter().any(|j| j.cpu == size),
                "some Job asks {size} CPUs"
            );
        }
        assert!(jobs.iter().all(|j| PODS.contains(&j.pods)));
        assert!(jobs.iter().all(|j| SECONDS.contains(&j.seconds)));
    }

    #[test]
    fn every_pod_of_the_mix_fits_on_any_node() {
        let largest = CPUS.iter().max().copied().unwrap_or(0);
        for pool in pools() {
            assert!(cpus(&pool) / u32::try_from(pool.count()).unwrap_or(1) >= largest);
        }
        assert_eq!(pools().iter().map(cpus).collect::<Vec<_>>(), [32, 48]);
    }

    #[test]
    fn the_ideal_is_the_work_over_the_room_and_never_less_than_the_longest_job() {
        let job = |pods, cpu, seconds| JobSpec {
            name: String::new(),
            pods,
            cpu,
            seconds,
        };
        // 2×4×10 + 1×8×40 = 400 CPU-seconds on 10 CPUs.
        assert_eq!(ideal_seconds(&[job(2, 4, 10), job(1, 8, 40)], 10), 40.0);
        assert_eq!(ideal_seconds(&[job(2, 4, 10), job(1, 8, 40)], 5), 80.0);
        // On a large fleet the longest Job bounds it.
        assert_eq!(ideal_seconds(&[job(1, 1, 40)], 1000), 40.0);
        assert_eq!(ideal_seconds(&[], 0), 0.0);
    }
}
