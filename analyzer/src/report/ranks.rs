//! The ranks of a distributed job side by side: one row per process that knows its rank
//! (peak, leaked, growth, findings), with the ranks whose value stands apart flagged.
//!
//! A value stands apart when it is above `median + max(3 × 1.4826 × MAD, median / 10)` of the
//! same column over every rank (MAD: the median of the distances to the median; 1.4826 × MAD
//! estimates the standard deviation of normal data without letting the outlier itself widen
//! it). The tenth of the median keeps ranks that differ by a few percent, as ranks of one job
//! always do, from being flagged when all but one are equal. At least three ranks are needed to
//! say that one stands apart.

use super::{ProcessReport, Report};

/// One rank's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankRow {
    /// Index into the report's processes.
    pub process: usize,
    /// Rank in the job.
    pub rank: u64,
    /// Highest owned bytes live at once.
    pub peak_bytes: u64,
    /// Leaked bytes.
    pub leaked_bytes: u64,
    /// Bytes the growth findings of the memory pass add up to (`None` without `--memory`).
    pub growth_bytes: Option<u64>,
    /// Findings.
    pub findings: u64,
    /// The columns in which this rank stands apart: `peak`, `leaked`, `growth`.
    pub outliers: Vec<&'static str>,
}

/// The ranks of the report, by rank (then by process order); empty unless at least two
/// processes know their rank.
pub fn table(report: &Report) -> Vec<RankRow> {
    table_of(&report.processes)
}

fn table_of(processes: &[ProcessReport]) -> Vec<RankRow> {
    let rows: Vec<RankRow> = processes
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let rank = p.process.as_ref()?.rank.as_ref()?.rank;
            Some(RankRow {
                process: i,
                rank,
                peak_bytes: p.summary.peak_bytes,
                leaked_bytes: p.summary.leaked_bytes,
                growth_bytes: p
                    .memory
                    .as_ref()
                    .map(|m| m.growth.iter().fold(0u64, |s, g| s.saturating_add(g.growth_bytes))),
                findings: p.summary.findings,
                outliers: Vec::new(),
            })
        })
        .collect();
    flag(rows)
}

/// Sorts `rows` by rank and flags the values that stand apart; empty for fewer than two.
pub fn flag(mut rows: Vec<RankRow>) -> Vec<RankRow> {
    if rows.len() < 2 {
        return Vec::new();
    }
    rows.sort_by_key(|r| (r.rank, r.process));
    type Column = (&'static str, fn(&RankRow) -> Option<u64>);
    let columns: [Column; 3] = [
        ("peak", |r| Some(r.peak_bytes)),
        ("leaked", |r| Some(r.leaked_bytes)),
        ("growth", |r| r.growth_bytes),
    ];
    for (name, get) in columns {
        let values: Vec<u64> = rows.iter().filter_map(get).collect();
        let Some(limit) = outlier_limit(&values) else { continue };
        for r in &mut rows {
            if get(r).is_some_and(|v| v as f64 > limit) {
                r.outliers.push(name);
            }
        }
    }
    rows
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The value above which one stands apart (`None` for fewer than three values).
pub fn outlier_limit(values: &[u64]) -> Option<f64> {
    if values.len() < 3 {
        return None;
    }
    let mut v: Vec<f64> = values.iter().map(|&x| x as f64).collect();
    v.sort_by(f64::total_cmp);
    let m = median(&v);
    let mut dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    dev.sort_by(f64::total_cmp);
    let mad = median(&dev);
    Some(m + (3.0 * 1.4826 * mad).max(m / 10.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_apart_is_flagged_and_ranks_a_few_percent_apart_are_not() {
        let limit = outlier_limit(&[100, 101, 99, 100, 102, 98, 100, 160]).unwrap();
        assert!(160.0 > limit && 102.0 < limit, "{limit}");
        // Eight equal ranks but one 5% higher: within a tenth of the median.
        let limit = outlier_limit(&[100, 100, 100, 100, 100, 100, 100, 105]).unwrap();
        assert!(105.0 < limit, "{limit}");
        // Nothing leaked but by one rank: any leak stands apart.
        let limit = outlier_limit(&[0, 0, 0, 0, 0, 0, 0, 1]).unwrap();
        assert!(1.0 > limit);
        // Every rank leaks the same: none stands apart.
        let limit = outlier_limit(&[7, 7, 7, 7]).unwrap();
        assert!(7.0 <= limit);
        assert_eq!(outlier_limit(&[1, 100]), None);
    }
}
