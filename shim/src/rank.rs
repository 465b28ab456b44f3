//! The process's place in a distributed job, read once from its launcher's environment: the
//! trace's `Rank` record and the `rank` label of every metric.
//!
//! Launchers are tried in this order, the first that names a rank winning: torchrun (and any
//! launcher that sets `RANK`, as `torch.distributed` expects), Open MPI, MVAPICH, PMI (MPICH's
//! Hydra, Intel MPI), PMIx, then Slurm. The framework's `RANK` comes first because it is the
//! one the program itself uses: under `sbatch` with one Slurm task per node, torchrun starts
//! every worker with the same `SLURM_PROCID` and a different `RANK`.

use std::sync::OnceLock;

/// Where the process stands; `None` fields are ones its launcher does not give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rank {
    pub rank: u64,
    pub local_rank: Option<u64>,
    pub world_size: Option<u64>,
    pub launcher: &'static str,
}

/// (launcher, rank, local rank, world size) variables, in the order they are tried.
const LAUNCHERS: [(&str, &str, &str, &str); 6] = [
    ("torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE"),
    (
        "openmpi",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_SIZE",
    ),
    (
        "mvapich",
        "MV2_COMM_WORLD_RANK",
        "MV2_COMM_WORLD_LOCAL_RANK",
        "MV2_COMM_WORLD_SIZE",
    ),
    ("pmi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),
    ("pmix", "PMIX_RANK", "", ""),
    ("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
];

/// Reads the rank from variables `get` returns. A variable that is not a plain decimal number
/// is not a rank (it is ignored, never guessed at).
pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Option<Rank> {
    let number = |name: &str| -> Option<u64> {
        if name.is_empty() {
            return None;
        }
        let v = get(name)?;
        let v = v.trim();
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        v.parse().ok()
    };
    LAUNCHERS.iter().find_map(|&(launcher, rank, local, world)| {
        let r = number(rank)?;
        let launcher = if launcher == "torchrun" && get("TORCHELASTIC_RUN_ID").is_none() {
            "env"
        } else {
            launcher
        };
        Some(Rank {
            rank: r,
            local_rank: number(local),
            world_size: number(world),
            launcher,
        })
    })
}

/// This process's rank, read from its environment the first time it is asked for.
pub fn current() -> Option<&'static Rank> {
    static RANK: OnceLock<Option<Rank>> = OnceLock::new();
    RANK.get_or_init(|| from_vars(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())))
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn torchrun_under_slurm_is_the_frameworks_rank() {
        let r = from_vars(vars(&[
            ("RANK", "5"),
            ("LOCAL_RANK", "1"),
            ("WORLD_SIZE", "8"),
            ("TORCHELASTIC_RUN_ID", "none"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
        ]))
        .unwrap();
        assert_eq!(
            r,
            Rank {
                rank: 5,
                local_rank: Some(1),
                world_size: Some(8),
                launcher: "torchrun"
            }
        );
    }

    #[test]
    fn each_launcher() {
        type Case<'a> = (&'a [(&'a str, &'a str)], u64, Option<u64>, Option<u64>, &'a str);
        let cases: [Case<'_>; 6] = [
            (&[("RANK", "3")], 3, None, None, "env"),
            (
                &[
                    ("OMPI_COMM_WORLD_RANK", "2"),
                    ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
                    ("OMPI_COMM_WORLD_SIZE", "4"),
                ],
                2,
                Some(0),
                Some(4),
                "openmpi",
            ),
            (
                &[("MV2_COMM_WORLD_RANK", "9"), ("MV2_COMM_WORLD_SIZE", "16")],
                9,
                None,
                Some(16),
                "mvapich",
            ),
            (
                &[("PMI_RANK", "1"), ("PMI_SIZE", "2"), ("MPI_LOCALRANKID", "1")],
                1,
                Some(1),
                Some(2),
                "pmi",
            ),
            (&[("PMIX_RANK", "6")], 6, None, None, "pmix"),
            (
                &[("SLURM_PROCID", "11"), ("SLURM_LOCALID", "3"), ("SLURM_NTASKS", "12")],
                11,
                Some(3),
                Some(12),
                "slurm",
            ),
        ];
        for (env, rank, local, world, launcher) in cases {
            assert_eq!(
                from_vars(vars(env)),
                Some(Rank {
                    rank,
                    local_rank: local,
                    world_size: world,
                    launcher
                }),
                "{env:?}"
            );
        }
    }

    #[test]
    fn nothing_or_garbage_is_no_rank() {
        assert_eq!(from_vars(vars(&[])), None);
        assert_eq!(from_vars(vars(&[("RANK", "")])), None);
        assert_eq!(from_vars(vars(&[("RANK", "-1")])), None);
        assert_eq!(from_vars(vars(&[("RANK", "0x3")])), None);
        assert_eq!(from_vars(vars(&[("RANK", "99999999999999999999999")])), None);
        // A bad RANK falls through to the next launcher that has a good one.
        assert_eq!(
            from_vars(vars(&[("RANK", "x"), ("SLURM_PROCID", "4")])).map(|r| (r.rank, r.launcher)),
            Some((4, "slurm"))
        );
        // A bad world size is left unknown, the rank kept.
        assert_eq!(
            from_vars(vars(&[("RANK", "1"), ("WORLD_SIZE", "eight")])).map(|r| (r.rank, r.world_size)),
            Some((1, None))
        );
    }
}
