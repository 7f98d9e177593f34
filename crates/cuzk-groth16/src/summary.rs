//! Repeated measurements summarised one way everywhere: count, minimum, median and maximum, where the
//! median of an even count is the mean of the middle two (so two runs report their mean, never the
//! faster one), and any quantile interpolates linearly between the closest ranks.

/// A summary of repeated measurements (seconds, say).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many measurements.
    pub count: usize,
    /// The smallest.
    pub min: f64,
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The largest.
    pub max: f64,
}

impl Summary {
    /// The summary of `values`, `None` when there are none or one is not a number.
    pub fn of(values: &[f64]) -> Option<Self> {
        let sorted = sorted(values)?;
        Some(Self {
            count: sorted.len(),
            min: sorted[0],
            median: quantile_of_sorted(&sorted, 0.5),
            max: sorted[sorted.len() - 1],
        })
    }

    /// The index of the measurement nearest the median (of two equally near, the larger, so a report
    /// that shows one run's details never shows the flattering one).
    pub fn nearest_median(&self, values: &[f64]) -> Option<usize> {
        let distance = |v: f64| (v - self.median).abs();
        values
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| distance(**a).total_cmp(&distance(**b)).then(b.total_cmp(a)))
            .map(|(i, _)| i)
    }
}

/// The `q` quantile (0 to 1) of `values`, interpolating linearly between the closest ranks; `None`
/// when there are none or one is not a number. `quantile(v, 0.5)` is [`Summary::of`]'s median.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    Some(quantile_of_sorted(&sorted(values)?, q.clamp(0.0, 1.0)))
}

fn sorted(values: &[f64]) -> Option<Vec<f64>> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some(v)
}

fn quantile_of_sorted(v: &[f64], q: f64) -> f64 {
    let at = q * (v.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_even_count_takes_the_mean_of_the_middle_two() {
        let s = Summary::of(&[3.0, 1.0]).unwrap();
        assert_eq!(s, Summary { count: 2, min: 1.0, median: 2.0, max: 3.0 });
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        assert_eq!(Summary::of(&[5.0, 1.0, 3.0]).unwrap().median, 3.0);
        assert_eq!(Summary::of(&[7.0]).unwrap(), Summary { count: 1, min: 7.0, median: 7.0, max: 7.0 });
    }

    #[test]
    fn nothing_or_not_a_number_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn quantiles_interpolate_and_the_median_is_the_half_quantile() {
        let v = [10.0, 20.0, 30.0, 40.0, 50.0];
        assert_eq!(quantile(&v, 0.0), Some(10.0));
        assert_eq!(quantile(&v, 1.0), Some(50.0));
        assert_eq!(quantile(&v, 0.95), Some(48.0));
        let even = [1.0, 2.0, 6.0, 9.0];
        assert_eq!(quantile(&even, 0.5), Some(Summary::of(&even).unwrap().median));
    }

    #[test]
    fn the_run_shown_is_the_one_nearest_the_median_and_the_slower_of_a_tie() {
        let walls = [2.0, 1.0];
        let s = Summary::of(&walls).unwrap();
        assert_eq!(s.nearest_median(&walls), Some(0), "of 1 s and 2 s the 2 s run is shown");
        let walls = [5.0, 1.0, 3.0];
        assert_eq!(Summary::of(&walls).unwrap().nearest_median(&walls), Some(2));
    }
}
