//! Growth: a site whose live bytes keep rising through the run, even if everything is freed at
//! teardown; a warm-up followed by a plateau is not growth.
//!
//! The test reads the site's *floor* per step (the lowest live bytes in each bucket, or between
//! two marks), which churn does not raise and a leak does. The run is cut after the floor's last
//! highest point (so a free at teardown is left out), and must still reach the last quarter of
//! the run; the floors of its four quarters must each be higher than the one before, and the
//! floor must have risen at least [`MIN_RISES`] times, the last time no longer ago than about
//! the longest pause between two earlier rises. A plateau after warm-up fails the quarter test
//! or the last one, steady churn has a flat floor, and a cache dropped midway does not reach
//! the end.

use gpuleak_format::StackId;

use super::series::Span;

/// Steps needed to judge (buckets or marks the site lived through).
pub const MIN_POINTS: usize = 8;
/// Times the floor must have risen.
pub const MIN_RISES: usize = 4;

/// A site that kept growing.
#[derive(Debug, Clone, PartialEq)]
pub struct Growth {
    /// Allocation stack.
    pub stack: StackId,
    /// Floor at the start of its rise.
    pub from_bytes: u64,
    /// Highest floor, at the end of its rise.
    pub to_bytes: u64,
    /// `to_bytes - from_bytes`.
    pub growth_bytes: u64,
    /// Steps (marks, or times the floor rose when there are no marks).
    pub steps: u64,
    /// Bytes per step.
    pub bytes_per_step: u64,
    /// Bytes per second of the trace's clock, when the rise took measurable time.
    pub bytes_per_second: Option<f64>,
    /// Whether steps are `Mark` records (else inferred from the rises).
    pub from_marks: bool,
    /// Floor per step over the rise (bounded: one per bucket).
    pub floors: Vec<u64>,
}

/// Judges one site's series; `times` gives each bucket's end time, `width` the steps per
/// bucket (marks per bucket when `from_marks`).
pub fn detect(stack: StackId, points: &[Span], times: &[u64], width: u64, from_marks: bool) -> Option<Growth> {
    let floors: Vec<u64> = points.iter().map(|p| p.min).collect();
    // The rise starts in the step before the floor first left zero (churn before it is flat).
    let first = floors.iter().position(|f| *f > 0)?.saturating_sub(1);
    let top = *floors.iter().max()?;
    if top == 0 {
        return None;
    }
    let last_top = floors.iter().rposition(|f| *f == top)?;
    // The rise must go on into the last quarter of the run.
    if (last_top + 1) * 4 < points.len() * 3 {
        return None;
    }
    let rise = &floors[first..=last_top];
    let n = rise.len();
    // Through the run: at least a quarter of it (a burst at the end is no trend).
    if n < MIN_POINTS || n * 4 < points.len() {
        return None;
    }
    let quarter = |k: usize| rise[k * n / 4..(k + 1) * n / 4].iter().min().copied().unwrap_or(0);
    let q = [quarter(0), quarter(1), quarter(2), quarter(3)];
    if !(q[0] < q[1] && q[1] < q[2] && q[2] < q[3]) {
        return None;
    }
    let rising: Vec<usize> = (1..n).filter(|&i| rise[i] > rise[i - 1]).collect();
    let rises = rising.len();
    if rises < MIN_RISES {
        return None;
    }
    // A plateau at the top longer than the longest pause between two earlier rises is a
    // warm-up that ended, not a rise that goes on.
    let longest_pause = rising.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(1);
    let final_plateau = (n - 1) - rising[rises - 1];
    if final_plateau > longest_pause * 3 / 2 + 1 {
        return None;
    }
    let from = rise[0];
    let growth = top - from;
    let steps = if from_marks {
        (n as u64 - 1) * width
    } else {
        rises as u64
    }
    .max(1);
    let start = times.get(first.saturating_sub(1)).copied().unwrap_or(0);
    let end = times.get(last_top).copied().unwrap_or(start);
    let seconds = end.saturating_sub(start) as f64 / 1e9;
    Some(Growth {
        stack,
        from_bytes: from,
        to_bytes: top,
        growth_bytes: growth,
        steps,
        bytes_per_step: growth / steps,
        bytes_per_second: (seconds > 0.0).then(|| growth as f64 / seconds),
        from_marks,
        floors: rise.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(values: &[u64]) -> Vec<Span> {
        // Each bucket: the value, with a temporary allocation of 7 on top (churn).
        values
            .iter()
            .map(|&v| Span {
                min: v,
                max: v + 7,
                last: v,
            })
            .collect()
    }

    fn run(values: &[u64]) -> Option<Growth> {
        let times: Vec<u64> = (0..values.len() as u64).map(|i| i * 1_000_000).collect();
        detect(StackId(1), &spans(values), &times, 1, false)
    }

    #[test]
    fn a_staircase_freed_at_teardown_is_growth() {
        let mut v: Vec<u64> = (1..=20).map(|i| i * 100).collect();
        v.push(0);
        let g = run(&v).expect("growth");
        assert_eq!(
            (g.from_bytes, g.to_bytes, g.steps, g.bytes_per_step),
            (100, 2000, 19, 100)
        );
        assert!(g.bytes_per_second.is_some());
    }

    #[test]
    fn warm_up_then_plateau_is_not_growth() {
        let mut v: Vec<u64> = (1..=5).map(|i| i * 100).collect();
        v.extend(std::iter::repeat_n(500, 20));
        v.push(0);
        assert_eq!(run(&v), None);
    }

    #[test]
    fn churn_with_a_flat_floor_and_a_cache_dropped_midway_are_not_growth() {
        assert_eq!(run(&[0; 30]), None);
        let mut v: Vec<u64> = (1..=12).map(|i| i * 100).collect();
        v.extend(std::iter::repeat_n(0, 12));
        assert_eq!(run(&v), None);
    }

    #[test]
    fn a_fast_warm_up_then_a_shorter_plateau_is_not_growth() {
        // Rises every step for 16 steps, then holds for 8 before everything is freed.
        let mut v: Vec<u64> = (1..=16).map(|i| i * 100).collect();
        v.extend(std::iter::repeat_n(1600, 8));
        v.push(0);
        assert_eq!(run(&v), None);
        // Slow steps (every 4 buckets) with the last one held for a step are growth.
        let v: Vec<u64> = (0..40).map(|i| (i / 4 + 1) * 100).chain([0]).collect();
        assert!(run(&v).is_some());
    }

    #[test]
    fn a_burst_in_the_last_tenth_of_the_run_is_not_growth() {
        let mut v = vec![0u64; 90];
        v.extend((1..=10).map(|i| i * 100));
        assert_eq!(run(&v), None);
        // The same steps spread over the last half are.
        let mut v = vec![0u64; 50];
        v.extend((1..=50).map(|i| i / 5 * 100));
        assert!(run(&v).is_some());
    }

    #[test]
    fn too_few_steps_are_not_judged() {
        assert_eq!(run(&[100, 200, 300, 0]), None);
    }
}
