//! What an MSM's buffers on the scratch shelves ([`crate::scratch`]) come to, counted on the host
//! from its plan: the device memory [`crate::CudaBackend::reserve_msm_workspace`] will hold for a
//! key, known before the key's tables are built, so that the tables leave that much free and no more.
//!
//! The count follows the takes of `sort::sort` and `buckets::reduce` buffer by buffer (the sizes come
//! from the same functions). It counts every take of the sort's outputs over the batches as held at
//! once, and of the buffers only one stream takes (given back before the next batch's sort or sums
//! take theirs) the most one sort or one batch's sums hold, so it is an upper bound of what the
//! shelves keep; the GPU suite checks it against the shelves after a reserve, for MSMs of one batch
//! and of many.

use std::any::TypeId;
use std::collections::HashMap;

use cuzk_field::Curve;

use super::buckets;
use super::plan::{MsmConfig, Ones, Plan, Sort};
use super::sort;
use super::Table;
#[cfg(test)]
use crate::kernels::msm::Bins;
use crate::kernels::msm::{SortPart, SCAN_BLOCK};
use crate::scratch::{Need, SPARE};
use crate::{CudaError, GpuAffine, Xyzz};

/// One shelf's part in an MSM: the element's size, how many of its buffers the MSM holds at once at
/// most, and how many the shelf keeps at least ([`SPARE`], or 1 for buffers only one stream uses).
#[derive(Debug, Clone, Copy)]
struct Shelf {
    size: usize,
    count: usize,
    spare: usize,
}

/// The scratch buffers one MSM takes, per shelf (element type and length).
#[derive(Debug, Default, Clone)]
pub(crate) struct Takes {
    shelves: HashMap<(TypeId, usize), Shelf>,
}

impl Takes {
    /// Counts a take of `n` elements of `T` (at least one, as [`crate::scratch::Scratch`] allocates).
    pub(crate) fn take<T: 'static>(&mut self, n: usize) {
        self.take_spare::<T>(n, SPARE);
    }

    /// Counts a take by `Scratch::take_serial`.
    pub(crate) fn take_serial<T: 'static>(&mut self, n: usize) {
        self.take_spare::<T>(n, 1);
    }

    fn take_spare<T: 'static>(&mut self, n: usize, spare: usize) {
        let size = std::mem::size_of::<T>();
        let e = self.shelves.entry((TypeId::of::<T>(), n.max(1))).or_insert(Shelf { size, count: 0, spare });
        e.count += 1;
        e.spare = e.spare.max(spare);
    }

    /// The takes of `sort::scan` on `n` elements.
    pub(crate) fn scan(&mut self, n: usize) {
        let blocks = n.div_ceil(SCAN_BLOCK).max(1);
        self.take::<u32>(n);
        self.take::<u32>(blocks);
        if blocks > 1 {
            self.scan(blocks);
        }
    }

    /// Adds the takes of one phase of an MSM (one batch's sort, or its sums): buffers the compute or
    /// the side stream take alone ([`SPARE`] 1) go back to their shelf before the next phase takes
    /// its own, so a shelf of those keeps the most any phase holds at once, not their sum; the
    /// others count in full (a batch's entries stay in use by its sums while the next batch is
    /// sorted).
    fn phase(&mut self, phase: Takes) {
        for (key, p) in phase.shelves {
            match self.shelves.get_mut(&key) {
                Some(e) => {
                    e.count =
                        if p.spare <= 1 && e.spare <= 1 { e.count.max(p.count) } else { e.count + p.count };
                    e.spare = e.spare.max(p.spare);
                }
                None => {
                    self.shelves.insert(key, p);
                }
            }
        }
    }

    /// What the shelves keep for this MSM once its reserve has run, per shelf: its spare buffers or
    /// as many as it holds at once, whichever is more (as [`shelved_bytes`] counts them).
    pub(crate) fn needs(&self) -> HashMap<crate::scratch::Key, Need> {
        self.shelves
            .iter()
            .map(|(&key, s)| (key, Need { bytes: key.1 * s.size, count: s.count.max(s.spare) }))
            .collect()
    }

    /// Bytes of one buffer per take.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.shelves.iter().map(|(&(_, len), s)| len * s.size * s.count).sum()
    }
}

/// Device bytes the shelves hold once `msms` have all run twice, as a key's reserve runs them: each
/// shelf keeps its spare buffers ([`SPARE`], or one for the compute stream's own), or as many as one
/// MSM takes, whichever is more; MSMs that take buffers of the same type and length share their shelf.
pub(crate) fn shelved_bytes<'a>(msms: impl IntoIterator<Item = &'a Takes>) -> usize {
    let mut most: HashMap<(TypeId, usize), Shelf> = HashMap::new();
    for t in msms {
        for (&key, s) in &t.shelves {
            let e = most.entry(key).or_insert(Shelf { count: 0, spare: 0, ..*s });
            (e.count, e.spare) = (e.count.max(s.count), e.spare.max(s.spare));
        }
    }
    most.iter().map(|(&(_, len), s)| len * s.size * s.count.max(s.spare)).sum()
}

/// The takes of an MSM over `points` kept bases on a device of `sms` multiprocessors, with `table`'s
/// multiples per point (or none), its bases in host memory when `host`.
pub(crate) fn msm_takes<C: Curve>(
    sms: u32,
    points: usize,
    table: Option<Table>,
    host: bool,
    config: &MsmConfig,
) -> Result<Takes, CudaError> {
    let mut takes = Takes::default();
    if points == 0 {
        return Ok(takes);
    }
    let (plan, m, batch_len) = super::plan_for::<C>(points, table, super::Batching::default(), config)?;
    let last = points - (points - 1) / batch_len * batch_len;
    let sizes: &[usize] = if last == batch_len { &[batch_len] } else { &[batch_len, last] };
    for &n in sizes {
        // An MSM the sort refuses takes nothing: refused here too.
        sort::check_batch(n, &plan)?;
        takes.phase(sort_takes(&plan, n));
        takes.phase(reduce_takes::<C>(sms, &plan, n * m)?);
    }
    if points > batch_len {
        // The next batch is sorted while one is summed.
        takes.phase(sort_takes(&plan, batch_len));
    }
    if host {
        for _ in 0..points.div_ceil(batch_len).min(2) {
            takes.take::<GpuAffine<C>>(batch_len);
        }
    }
    Ok(takes)
}

/// `sort::sort`'s takes for a batch of `n` points.
fn sort_takes(plan: &Plan, n: usize) -> Takes {
    let mut t = Takes::default();
    let takes = &mut t;
    let buckets = plan.buckets() as usize;
    takes.take::<u32>(buckets);
    takes.scan(buckets);
    takes.take::<u32>(sort::entries_len(plan.windows, n));
    match plan.sort {
        Sort::Direct => takes.take::<u32>(buckets),
        Sort::Binned => {
            let parts = SortPart::of(plan.digits());
            takes.take::<u32>(SortPart::most_bins(&parts) + 1);
            takes.take_serial::<u64>(sort::pairs_len(parts[0].windows, n));
            takes.take::<u32>(buckets);
        }
    }
    t
}

/// `buckets::reduce`'s takes for a batch of `points` bases (a table's multiples counted).
fn reduce_takes<C: Curve>(sms: u32, plan: &Plan, points: usize) -> Result<Takes, CudaError> {
    let mut t = Takes::default();
    let takes = &mut t;
    let buckets = plan.round_buckets() as usize;
    takes.take_serial::<Xyzz<C>>(plan.sets as usize + 1);
    if plan.ones != Ones::InRound {
        takes.take_serial::<Xyzz<C>>(plan.ones_threads as usize);
        buckets::reduce_levels(1, plan.ones_threads, |groups| takes.take_serial::<Xyzz<C>>(groups));
    }
    let (pieces, batched) = buckets::first_round::<C>(sms, plan, points)?;
    takes.take::<u32>(buckets);
    takes.take::<u32>(buckets);
    let items = pieces as usize + buckets;
    if batched.is_none() {
        takes.take_serial::<Xyzz<C>>(items);
    } else {
        takes.take_serial::<GpuAffine<C>>(items);
        takes.take_serial::<GpuAffine<C>>(pieces as usize);
        takes.take_serial::<u64>(pieces as usize * crate::kernels::msm::batch_prefix_words::<C>());
        takes.take_serial::<u32>(pieces as usize * 4);
    }
    let (mut rounds, mut len) = (0, 0);
    for next_items in buckets::later_round_items(pieces, points, items, buckets, batched.is_some()) {
        takes.take::<u32>(buckets);
        takes.scan(buckets);
        (rounds, len) = (rounds + 1, len.max(next_items));
    }
    for _ in 0..rounds.min(2) {
        takes.take_serial::<Xyzz<C>>(len);
    }
    takes.take_serial::<Xyzz<C>>((plan.sets * plan.segments) as usize);
    buckets::reduce_levels(plan.sets, plan.segments, |groups| takes.take_serial::<Xyzz<C>>(groups));
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_field::{G1, G2};

    /// The H200's multiprocessors.
    const SMS: u32 = 132;

    #[test]
    fn entries_of_a_keys_msms_share_a_shelf_and_waste_less_than_half() {
        for windows in [1u32, 13, 16, 43] {
            for n in (1..5000usize).chain([(1 << 24) - 7, 1 << 24, (1 << 24) + 1, 3 << 22]) {
                let (exact, len) = (windows as usize * n, sort::entries_len(windows, n));
                assert!(exact <= len && len < exact + exact.div_ceil(2), "{windows} x {n}: {len}");
                // The pairs are rounded finer: nearly equal batches share them.
                let pairs = sort::pairs_len(windows, n);
                assert!(exact <= pairs && pairs <= exact + exact / 16, "{windows} x {n}: {pairs}");
            }
        }
        // A, B, L and H of a 2^24-row key keep a few points fewer than 2^24, or all of them.
        let full = sort::entries_len(13, 1 << 24);
        assert_eq!(full, 16 << 24);
        assert!([1, 5, 1000].iter().all(|d| sort::entries_len(13, (1 << 24) - d) == full));
        // A 2^27-row porep-like key: H at 20-bit windows, L and A (86% of the variables) at 16 share
        // one length; B (44%) takes half of it.
        let n = 1usize << 27;
        for (windows, points) in [(13, n - 1), (16, n - 2), (16, n / 100 * 86)] {
            assert_eq!(sort::entries_len(windows, points), 1 << 31, "{windows} x {points}");
        }
        assert_eq!(sort::entries_len(16, n / 100 * 44), 1 << 30);
    }

    #[test]
    fn shelves_keep_two_buffers_or_what_one_msm_takes_and_msms_share_them() {
        let mut one = Takes::default();
        one.take::<u32>(100);
        assert_eq!((one.bytes(), shelved_bytes([&one])), (400, 2 * 400));
        let mut three = Takes::default();
        for _ in 0..3 {
            three.take::<u32>(100);
        }
        three.take::<u64>(100);
        // Same shelf (u32, 100): the most any one MSM takes; another type is another shelf.
        assert_eq!(shelved_bytes([&one, &three]), 3 * 400 + 2 * 800);
        // The compute stream's own buffers: one, unless an MSM holds more at once.
        let mut serial = Takes::default();
        serial.take_serial::<u64>(10);
        assert_eq!(shelved_bytes([&serial]), 80);
        serial.take_serial::<u64>(10);
        assert_eq!(shelved_bytes([&serial]), 160);
        // A shelf the sort and the sums share keeps the sort's spare.
        serial.take_serial::<u32>(100);
        assert_eq!(shelved_bytes([&serial, &one]), 160 + 2 * 400);
        assert_eq!(shelved_bytes([&one, &one]), shelved_bytes([&one]));
        assert_eq!(shelved_bytes(std::iter::empty()), 0);
    }

    #[test]
    fn a_tabled_2_24_msm_counts_its_entries_chains_and_partials() {
        let config = MsmConfig::default();
        let table = Some(Table { window_bits: 20, multiples: 13 });
        let g1 = msm_takes::<G1>(SMS, 1 << 24, table, false, &config).unwrap();
        let g2 = msm_takes::<G2>(SMS, 1 << 24, table, false, &config).unwrap();
        // Per MSM: 13 x 2^24 entries (872 MB, in a buffer of 16 x 2^24) and the binned sort's pairs, the batched round's chains (G1: 132 x 4 x 128 threads
        // of 128 chains; G2: 132 x 2 x 128 threads of 128) with their affine accumulators and
        // partials, prefix products and records, and the later rounds' partials.
        let (entries, pairs) = (16usize << 26, 13usize << 27);
        let chains_g1 = 132 * 4 * 128 * 128;
        let affine1 = std::mem::size_of::<GpuAffine<G1>>();
        let least = entries + pairs + chains_g1 * (2 * affine1 + 48 + 16);
        assert!(
            least <= g1.bytes() && g1.bytes() <= least / 10 * 13,
            "G1: {} bytes, {least} at least",
            g1.bytes()
        );
        assert!(g2.bytes() > entries + 132 * 2 * 128 * 128 * std::mem::size_of::<Xyzz<G2>>());
        // A key's five MSMs of nearly 2^24 points: two sets of the sort's buffers and one of its
        // pairs, shared by all, and one of the sums' buffers per curve, so about one G1 MSM's and one
        // G2 MSM's, less a set of pairs and less the batched round's words of field elements, which
        // the two curves share (G1's chains of one Fq take as many words as G2's half as many of Fq2).
        let h = msm_takes::<G1>(SMS, (1 << 24) - 1, table, false, &config).unwrap();
        let key = shelved_bytes([&h, &g1, &g1, &g2, &g1]);
        let words = chains_g1 * 48;
        assert!(key.abs_diff(g1.bytes() + g2.bytes() - pairs - words) < 64 << 20, "{key}");
        // The binned sort (the default) adds its pairs (8 bytes an entry, 1.75 GB), one set for the
        // whole key, and a cursor per bin, to what the direct sort takes.
        assert_eq!(config.sort, Sort::Binned);
        let direct = MsmConfig { sort: Sort::Direct, ..config };
        let g1_direct = msm_takes::<G1>(SMS, 1 << 24, table, false, &direct).unwrap();
        assert_eq!(g1.bytes() - g1_direct.bytes(), pairs + 4 * (Bins::of(1 << 19).count as usize + 1));
        let direct_key =
            [(1 << 24) - 1, 1 << 24].map(|n| msm_takes::<G1>(SMS, n, table, false, &direct).unwrap());
        // (Its bin cursors share a shelf with the scan's block sums, both 513 words.)
        let extra = shelved_bytes([&h, &g1]) - shelved_bytes(&direct_key);
        assert!((pairs..=pairs + 2 * 4 * 513).contains(&extra), "{extra}");
        eprintln!("per MSM: G1 {} G2 {}; the key's five MSMs: {key}", g1.bytes(), g2.bytes());
        // Bases in host memory add their two upload buffers; an empty MSM takes nothing.
        let host = msm_takes::<G1>(SMS, 1 << 24, None, true, &config).unwrap();
        let device = msm_takes::<G1>(SMS, 1 << 24, None, false, &config).unwrap();
        assert_eq!(host.bytes() - device.bytes(), affine1 << 24);
        assert_eq!(msm_takes::<G1>(SMS, 0, table, false, &config).unwrap().bytes(), 0);
        assert!(msm_takes::<G1>(SMS, 5, None, false, &MsmConfig { batch: 0, ..config }).is_err());
        // Batches the sort refuses: 2^31 points, or 2^32 entries (2^28 points of 16 windows).
        let huge = MsmConfig { batch: 1 << 31, ..config };
        assert!(msm_takes::<G1>(SMS, 1 << 31, None, false, &huge).is_err());
        assert!(
            msm_takes::<G1>(SMS, 1 << 28, None, false, &MsmConfig { window_bits: Some(16), ..huge }).is_err()
        );
        // Or 2^31 table points in one batch (an entry holds a point's index times the multiples).
        let wide = MsmConfig { batch: 1 << 28, ..config };
        assert!(msm_takes::<G1>(SMS, 1 << 28, table, false, &wide).is_err());
        assert!(msm_takes::<G1>(SMS, 1 << 27, table, false, &wide).is_ok());
    }

    #[test]
    fn ones_in_the_round_take_no_buffers_of_their_own_and_one_more_bucket() {
        // A batched 2^24 batch: apart, the ones' 2^16 partials (and the reduce's level of 256); in the
        // round, none, but the rounds' counts and offsets have one more bucket.
        let n = 1 << 24;
        let takes = |ones| {
            let config = MsmConfig { ones, ..MsmConfig::default() };
            let (plan, _, _) =
                crate::msm::plan_for::<G1>(n, None, crate::msm::Batching::default(), &config).unwrap();
            (plan, msm_takes::<G1>(SMS, n, None, false, &config).unwrap())
        };
        let ((apart_plan, apart), (round_plan, round)) = (takes(Ones::Apart), takes(Ones::Auto));
        assert_eq!((apart_plan.ones, round_plan.ones), (Ones::Apart, Ones::InRound));
        let xyzz = TypeId::of::<Xyzz<G1>>();
        let ones = apart_plan.ones_threads as usize;
        assert_eq!(ones, 1 << 16);
        assert!(apart.shelves.contains_key(&(xyzz, ones)) && !round.shelves.contains_key(&(xyzz, ones)));
        // The sort's counts have the ones' bucket either way; the rounds' now have it too.
        let u32s = TypeId::of::<u32>();
        let buckets = apart_plan.window_buckets() as usize;
        let count = |t: &Takes, len| t.shelves.get(&(u32s, len)).map_or(0, |s| s.count);
        assert!(count(&apart, buckets) > 0 && count(&round, buckets) == 0);
        assert!(count(&round, buckets + 1) > count(&apart, buckets + 1));
        assert!(round.bytes() < apart.bytes());
    }

    #[test]
    fn a_wide_untabled_batch_sorts_in_parts_through_a_temporary_of_the_largest() {
        // 2^27 points in one batch take 20-bit windows without a table: 13 sets of 2^19 buckets,
        // sorted in two parts of 7 and 6 sets, so the pairs are 7 x 2^27 (7.5 GB), not 13 x 2^27.
        let one_batch = MsmConfig { batch: 1 << 27, ..MsmConfig::default() };
        let t = msm_takes::<G1>(SMS, 1 << 27, None, false, &one_batch).unwrap();
        let pairs: Vec<usize> = t
            .shelves
            .iter()
            .filter(|(&(ty, _), _)| ty == TypeId::of::<u64>())
            .map(|(&(_, len), _)| len)
            .filter(|&len| len >= 1 << 27)
            .collect();
        assert_eq!(pairs, [sort::pairs_len(7, 1 << 27)]);
        assert_eq!(sort::pairs_len(7, 1 << 27), 7 << 27);
        // At 16 bits (batches of 2^24) one part takes all 16 windows, as before.
        let t = msm_takes::<G1>(SMS, 1 << 24, None, false, &MsmConfig::default()).unwrap();
        assert!(t.shelves.keys().any(|&(ty, len)| ty == TypeId::of::<u64>() && len == 16 << 24));
    }
}
