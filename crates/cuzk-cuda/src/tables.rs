//! Tables of precomputed multiples for a resident key's MSMs ([`GpuBases::precompute`]): which MSMs
//! get one, at which width, in the device memory a key leaves; then the batch sizes of the MSMs in the
//! memory the tables leave ([`GpuBases::set_batch`]).

use cuzk_field::{Curve, CurveId, G1, G2};
use cuzk_groth16::PreparedKey;

use crate::msm::{self, Batching, GpuBases, Plan, Sort, Table};
use crate::{CudaBackend, CudaError};

/// Tables [`CudaBackend::precompute_tables`] tries, best first: (window bits, multiples per point,
/// capped at the windows). On the H200, against 16-bit windows without a table: every window in one
/// set at 20 bits, G1 2^24 random 112 ms against 132 (G2 349 against 414), 2^22 random 33.7 against
/// 37.7, 2^22 bit-heavy 6.2 against 6.3. Partial tables did not pay: four windows per set at 20 bits
/// was 123 ms at 2^24 but slower than no table at 2^22 (38.6 ms, bit-heavy 11.4 ms), so a key whose
/// full table does not fit takes none (docs/benchmarks/cuda-msm.md).
pub const TABLE_CHOICES: &[(u32, u32)] = &[(20, 13)];

/// Fewest points per batch a table is built for: below, the 2^19 buckets of a 20-bit window outnumber
/// the entries.
pub const TABLE_MIN_POINTS: usize = 1 << 20;

/// Partial tables [`CudaBackend::precompute_partial_tables`] tries, most multiples first, for an MSM
/// over random scalars (H) that a full table did not fit: (window bits, multiples per point). A
/// table of `m` multiples folds `m` windows into a set, so 20-bit windows of a 255-bit scalar take
/// `ceil(13 / m)` sets instead of 13: fewer reductions and a shorter sort, the same additions. Each
/// count of sets (2, 3, 4, 5, 7) with its fewest multiples. On the H200, G1 2^27 random in one
/// batch: 4 multiples 652.8 ms against 719.9 without a table (docs/benchmarks/cuda-msm.md).
pub const PARTIAL_TABLE_CHOICES: &[(u32, u32)] = &[(20, 7), (20, 5), (20, 4), (20, 3), (20, 2)];

/// Fewest points per batch a partial table is built for: at 2^22 a table of four windows a set was
/// slower than none (38.6 ms against 37.7), at 2^24 faster (123 against 132).
pub const PARTIAL_TABLE_MIN_POINTS: usize = 1 << 24;

/// An MSM given a table by [`CudaBackend::precompute_tables`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableReport {
    /// Which of the key's MSMs: `h`, `l`, `b_g2`, `a`, `b_g1`.
    pub msm: &'static str,
    /// The table's window width and multiples.
    pub table: Table,
    /// Device bytes its points take now (the table replaces them).
    pub device_bytes: u64,
    /// How long the build took.
    pub build: std::time::Duration,
}

impl std::fmt::Display for TableReport {
    /// One sentence: `MSM h: 13 multiples at 20-bit windows, 20.94 GB, built in 6.1 s`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MSM {}: {} multiples at {}-bit windows, {:.2} GB, built in {:.1} s",
            self.msm,
            self.table.multiples,
            self.table.window_bits,
            self.device_bytes as f64 / 1e9,
            self.build.as_secs_f64()
        )
    }
}

/// An MSM given larger batches than the backend's [`crate::MsmConfig::batch`] by
/// [`CudaBackend::widen_batches`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchReport {
    /// Which of the key's MSMs: `h`, `l`, `b_g2`, `a`, `b_g1`.
    pub msm: &'static str,
    /// Most points per batch now.
    pub batch: usize,
    /// Batches per MSM now.
    pub batches: usize,
    /// The batches' window width.
    pub window_bits: u32,
    /// Chains per thread of the batches' first round where granted beyond the default
    /// ([`crate::msm::ROOMY_BATCH_CHAINS`]).
    pub chains: Option<u32>,
}

impl std::fmt::Display for BatchReport {
    /// One sentence: `MSM h: 1 batch of 134217727 points at 20-bit windows, 512 chains a thread`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = if self.batches == 1 { "" } else { "es" };
        write!(
            f,
            "MSM {}: {} batch{s} of {} points at {}-bit windows",
            self.msm, self.batches, self.batch, self.window_bits
        )?;
        match self.chains {
            Some(k) => write!(f, ", {k} chains a thread"),
            None => Ok(()),
        }
    }
}

/// What the workspace count needs of one of a key's MSMs: its curve, kept points, table, batch size
/// of its own and whether its bases are in host memory.
#[derive(Debug, Clone, Copy)]
struct MsmShape {
    curve: CurveId,
    points: usize,
    table: Option<Table>,
    batching: Batching,
    host: bool,
}

impl MsmShape {
    fn of<C: Curve>(bases: &GpuBases<C>) -> Self {
        Self {
            curve: C::ID,
            points: bases.kept(),
            table: bases.table(),
            batching: bases.batching(),
            host: !bases.is_resident(),
        }
    }
}

/// Whether the MSM named `msm` of a key sums over the witness (A, B, L: mostly zeros, ones and small
/// values in real circuits) rather than over random scalars (H, the quotient's coefficients).
fn witness_scalars(msm: &str) -> bool {
    msm != "h"
}

/// The window width a widened batch of `batch` points takes without a table, where the call's
/// config leaves it open: the narrow rule ([`Plan::default_window`], 16 bits from 2^23 points) for
/// MSMs over the witness, the curve's rule (20 bits for G1 batches from 2^25 points) otherwise. On
/// the H200, G1 2^27 in one batch with witness-like scalars (45% zeros, 45% ones, 8% 16-bit, 2%
/// random): 86.7 ms at 16 bits against 121.9 at 20 (docs/benchmarks/cuda-msm.md); the 13 sets of
/// 2^19 buckets cost their reduction whatever the scalars, and sparse scalars leave few additions to
/// save.
fn widened_window(msm: &str, batch: usize, table: Option<Table>, config: &crate::MsmConfig) -> Option<u32> {
    (witness_scalars(msm) && table.is_none() && config.window_bits.is_none())
        .then(|| Plan::default_window(batch))
}

/// How the MSMs over the witness sort their digits once [`CudaBackend::widen_batches`] has run:
/// [`Sort::Direct`], which needs no temporary of (bucket, entry) pairs (8 bytes an entry: 17.2 GB
/// for one 2^27 batch at 16-bit windows), so the memory goes to fewer batches and tables instead.
/// On witness scalars the direct scatter writes few entries (a zero none, a one one, in its bucket
/// by one atomic a warp), where the binned sort's first pass costs it most.
pub const WITNESS_SORT: Sort = Sort::Direct;

/// The sort [`CudaBackend::widen_batches`] gives an MSM named `msm`, whether or not it widens its
/// batches: [`WITNESS_SORT`] for the MSMs over the witness without a table, unless the call's config
/// asks for another than the default; `None` (the config's) otherwise.
fn widened_sort(msm: &str, table: Option<Table>, config: &crate::MsmConfig) -> Option<Sort> {
    (witness_scalars(msm) && table.is_none() && config.sort == Sort::default()).then_some(WITNESS_SORT)
}

/// Sets [`widened_sort`] on `bases`, the MSM named `msm` (for [`serve`]: it reports nothing).
fn set_widened_sort<C: Curve>(
    msm: &'static str,
    bases: &mut GpuBases<C>,
    config: &crate::MsmConfig,
) -> Result<Option<()>, CudaError> {
    bases.set_sort(widened_sort(msm, bases.table(), config));
    Ok(None)
}

/// The shapes of `key`'s five MSMs, in the order of [`precompute_tables`](CudaBackend::precompute_tables):
/// H, L, B in G2, A, B in G1.
fn shapes(key: &PreparedKey<CudaBackend>) -> [MsmShape; 5] {
    let [a, b_g1, l, h] = key.g1_bases();
    let g1 = MsmShape::of::<G1>;
    [g1(h), g1(l), MsmShape::of::<G2>(key.g2_bases()), g1(a), g1(b_g1)]
}

/// An MSM's place among a key's [`shapes`], and the shapes (updated as MSMs take tables or batches).
type Slot<'a> = (usize, &'a mut [MsmShape; 5]);

/// Runs `g1` or `g2` on each of `key`'s MSMs (its name, bases and slot) in the order tables and
/// batches serve them: H (random scalars in every proof), L, B in G2 (three times G1's cost per
/// point), A, B in G1. Returns what they report (`Some` for each MSM they changed).
fn serve<R>(
    key: &mut PreparedKey<CudaBackend>,
    mut g1: impl FnMut(&'static str, &mut GpuBases<G1>, Slot<'_>) -> Result<Option<R>, CudaError>,
    mut g2: impl FnMut(&'static str, &mut GpuBases<G2>, Slot<'_>) -> Result<Option<R>, CudaError>,
) -> Result<Vec<R>, CudaError> {
    let mut shapes = shapes(key);
    let (g1_bases, g2_bases) = key.bases_mut();
    let [a, b_g1, l, h] = g1_bases;
    let mut reports = Vec::new();
    for (i, bases) in [(0, h), (1, l)] {
        reports.extend(g1(SERVED[i], bases, (i, &mut shapes))?);
    }
    reports.extend(g2(SERVED[2], g2_bases, (2, &mut shapes))?);
    for (i, bases) in [(3, a), (4, b_g1)] {
        reports.extend(g1(SERVED[i], bases, (i, &mut shapes))?);
    }
    Ok(reports)
}

/// The scratch buffers an MSM of `shape` takes on a device of `sms` multiprocessors under `config`,
/// counted from its plans.
fn takes_on(sms: u32, shape: &MsmShape, config: &crate::MsmConfig) -> Result<msm::Takes, CudaError> {
    let config = shape.batching.over(config);
    match shape.curve {
        CurveId::G1 => msm::msm_takes::<G1>(sms, shape.points, shape.table, shape.host, &config),
        CurveId::G2 => msm::msm_takes::<G2>(sms, shape.points, shape.table, shape.host, &config),
    }
}

impl CudaBackend {
    /// The scratch buffers an MSM of `shape` takes, counted from its plans.
    fn takes_of(&self, shape: &MsmShape) -> Result<msm::Takes, CudaError> {
        takes_on(self.gpu().info().multiprocessors.max(1) as u32, shape, &self.msm_config())
    }

    /// Device bytes the MSM buffers of a key whose MSMs have `shapes` take once
    /// [`CudaBackend::reserve_msm_workspace`] has run (an upper bound, counted from their plans).
    fn workspace_for(&self, shapes: &[MsmShape]) -> Result<usize, CudaError> {
        let takes = shapes.iter().map(|s| self.takes_of(s)).collect::<Result<Vec<_>, _>>()?;
        Ok(msm::shelved_bytes(&takes))
    }

    /// Has each of `key`'s MSMs claim the shelves' buffers its plans count ([`crate::scratch`]),
    /// replacing what it claimed before: the shelves keep them while the key lives, and free those no
    /// other key needs when it goes.
    pub(crate) fn claim_workspace(&self, key: &PreparedKey<CudaBackend>) -> Result<(), CudaError> {
        let scratch = self.gpu().scratch();
        for bases in key.g1_bases() {
            bases.set_claim(scratch.claim(self.takes_of(&MsmShape::of(bases))?.needs()));
        }
        let g2 = key.g2_bases();
        g2.set_claim(scratch.claim(self.takes_of(&MsmShape::of(g2))?.needs()));
        Ok(())
    }

    /// Device bytes [`CudaBackend::reserve_msm_workspace`] will hold for `key`'s MSMs as they are now
    /// (an upper bound, counted on the host from their plans; MSMs of other keys with buffers of the
    /// same sizes share them).
    pub fn msm_workspace_estimate(&self, key: &PreparedKey<CudaBackend>) -> Result<usize, CudaError> {
        self.workspace_for(&shapes(key))
    }

    /// Gives `key`'s MSMs tables of precomputed multiples ([`GpuBases::precompute`]) while device
    /// memory allows, keeping `keep_free` bytes free beyond the MSMs' own buffers (for the partitions'
    /// buffers and a recorded shape). The MSMs' buffers are counted from their plans with the tables
    /// given so far ([`CudaBackend::msm_workspace_estimate`]). The MSMs are served in the order a table
    /// helps them most: H (random scalars in every proof), L, B in G2 (three times G1's cost per
    /// point), A, B in G1. Each takes the widest table that fits ([`TABLE_CHOICES`]) or none; MSMs
    /// whose batches have fewer than `min_points` points take none (the engine passes
    /// [`TABLE_MIN_POINTS`]). Call it before [`CudaBackend::reserve_msm_workspace`], as a table
    /// changes the MSMs' buffers. Returns one line per MSM given a table.
    pub fn precompute_tables(
        &self,
        key: &mut PreparedKey<CudaBackend>,
        keep_free: usize,
        min_points: usize,
    ) -> Result<Vec<TableReport>, CudaError> {
        self.serve_tables(key, keep_free, min_points, false)
    }

    /// Gives the MSM of `key` over random scalars (H) more chains a thread in its batched first round
    /// ([`crate::msm::ROOMY_BATCH_CHAINS`], where its batches would take the longest chains: G1, wide
    /// windows, the longest batches), if their partials fit beside `keep_free` bytes and the key's
    /// MSM buffers (counted from their plans). Call it last, after
    /// [`CudaBackend::precompute_partial_tables`] and before [`CudaBackend::reserve_msm_workspace`]:
    /// it is the least valuable use of the memory (on the H200, G1 2^27 random in one batch 650.0 ms
    /// against 657.2, about 7 ms of a 2^27 porep-like partition's 1.09 s, for about 4.8 GB). Returns
    /// one line for H if it was granted them.
    pub fn grant_chains(
        &self,
        key: &mut PreparedKey<CudaBackend>,
        keep_free: usize,
    ) -> Result<Vec<BatchReport>, CudaError> {
        let (config, shapes) = (self.msm_config(), shapes(key));
        let mut chosen = shapes
            .iter()
            .map(|shape| Ok((None, self.takes_of(shape)?)))
            .collect::<Result<Vec<_>, CudaError>>()?;
        let (free, _) = self.gpu().memory()?;
        let sms = self.gpu().info().multiprocessors.max(1) as u32;
        let roomy = |shape: &MsmShape| roomy_on(sms, shape, &config);
        grant_roomy(&shapes, &mut chosen, free.saturating_sub(keep_free), roomy, |s| self.takes_of(s))?;
        let choice = |i: usize| chosen[i].0;
        serve(
            key,
            |msm, bases, (i, _)| widen_to::<G1>(msm, bases, choice(i), &config),
            |msm, bases, (i, _)| widen_to::<G2>(msm, bases, choice(i), &config),
        )
    }

    /// Gives the MSMs of `key` over random scalars (H) that have no table a partial one
    /// ([`PARTIAL_TABLE_CHOICES`], the most multiples that fit beside `keep_free` bytes and the key's
    /// MSM buffers), where their batches have at least `min_points` points (the engine passes
    /// [`PARTIAL_TABLE_MIN_POINTS`]). Call it after [`CudaBackend::widen_batches`]: a partial table
    /// is worth less than the batches (G1 2^27 random: one batch instead of eight 121 ms, four
    /// multiples 67 ms), so it takes only the memory they leave. The MSMs over the witness take none:
    /// a partial table was slower than none on bit-heavy scalars (docs/benchmarks/cuda-msm.md).
    /// Returns one line per MSM given a table.
    pub fn precompute_partial_tables(
        &self,
        key: &mut PreparedKey<CudaBackend>,
        keep_free: usize,
        min_points: usize,
    ) -> Result<Vec<TableReport>, CudaError> {
        self.serve_tables(key, keep_free, min_points, true)
    }

    /// Runs [`CudaBackend::precompute_one`] on each of `key`'s MSMs that may take a table: with
    /// [`TABLE_CHOICES`] every MSM; with [`PARTIAL_TABLE_CHOICES`] (`partial`) only those over random
    /// scalars (H; B in G2 sums over the witness) that have no table yet.
    fn serve_tables(
        &self,
        key: &mut PreparedKey<CudaBackend>,
        keep_free: usize,
        min_points: usize,
        partial: bool,
    ) -> Result<Vec<TableReport>, CudaError> {
        let min = (self.msm_config().batch, min_points);
        let choices = if partial { PARTIAL_TABLE_CHOICES } else { TABLE_CHOICES };
        serve(
            key,
            |msm, bases, slot| match partial && (witness_scalars(msm) || bases.table().is_some()) {
                true => Ok(None),
                false => self.precompute_one::<G1>(msm, bases, slot, keep_free, min, choices),
            },
            |msm, bases, slot| match partial {
                true => Ok(None),
                false => self.precompute_one::<G2>(msm, bases, slot, keep_free, min, choices),
            },
        )
    }

    /// Gives `bases`, the MSM at `index` of `shapes`, the first table of `choices` that fits beside
    /// `keep_free` bytes and the key's MSM buffers with that table, and records it in `shapes`.
    fn precompute_one<C: Curve>(
        &self,
        msm: &'static str,
        bases: &mut GpuBases<C>,
        (index, shapes): Slot<'_>,
        keep_free: usize,
        (batch, min_points): (usize, usize),
        choices: &[(u32, u32)],
    ) -> Result<Option<TableReport>, CudaError> {
        let batch = bases.batch().unwrap_or(batch);
        if !bases.is_resident() || bases.kept().min(batch) < min_points.max(1) {
            return Ok(None);
        }
        for &(window_bits, multiples) in choices {
            let multiples = multiples.min(256u32.div_ceil(window_bits));
            let table = Table { window_bits, multiples };
            let bytes = bases.table_bytes(multiples);
            let mut with = *shapes;
            with[index].table = (multiples > 1).then_some(table);
            let workspace = self.workspace_for(&with)?;
            let (free, _) = self.gpu().memory()?;
            if !msm::table_fits(
                bytes,
                bases.device_bytes() as usize,
                workspace.saturating_add(keep_free),
                free,
            ) {
                continue;
            }
            let start = std::time::Instant::now();
            bases.precompute_leaving(self.gpu(), window_bits, multiples, workspace)?;
            shapes[index].table = bases.table();
            return Ok(Some(TableReport {
                msm,
                table,
                device_bytes: bases.device_bytes(),
                build: start.elapsed(),
            }));
        }
        Ok(None)
    }

    /// Gives `key`'s MSMs batches larger than the backend's [`crate::MsmConfig::batch`] while device
    /// memory allows, keeping `keep_free` bytes free beyond the MSMs' own buffers (as
    /// [`CudaBackend::precompute_tables`], after which it runs: the tables are worth more than the
    /// batches). Fewer batches mean fewer bucket reductions and less of the sort left out of the
    /// overlap with the sums, and wider default windows for G1 ([`crate::msm::WIDE_WINDOW_FROM`]):
    /// on the H200, G1 2^27 random in one batch at 20 bits 718.8 ms against 839.5 in batches of 2^24;
    /// 2^26 with a table 332.4 against 339.4 (docs/benchmarks/cuda-msm.md). The wider windows are
    /// for H's random scalars: the MSMs over the witness (A, B, L) keep 16 bits (`widened_window`),
    /// and without a table take [`WITNESS_SORT`] whether or not their batches widen.
    /// Each MSM may take batches of `ceil(kept / 2^j)` points or keep its own; of all these choices
    /// together, the first whose buffers fit wins, counted in the order of
    /// [`CudaBackend::precompute_tables`] (H's fewest batches before L's, and so on: `first_fit`).
    /// Call it before [`CudaBackend::reserve_msm_workspace`]. Returns one line per MSM given larger
    /// batches.
    pub fn widen_batches(
        &self,
        key: &mut PreparedKey<CudaBackend>,
        keep_free: usize,
    ) -> Result<Vec<BatchReport>, CudaError> {
        // First the sorts of the MSMs over the witness, so that each MSM's candidates below are
        // counted with them.
        let config = self.msm_config();
        serve(
            key,
            |msm, bases, _| set_widened_sort::<G1>(msm, bases, &config),
            |msm, bases, _| set_widened_sort::<G2>(msm, bases, &config),
        )?;
        let options = batch_options(&shapes(key), &config, |shape| self.takes_of(shape))?;
        let (free, _) = self.gpu().memory()?;
        let Some(chosen) = first_fit(&options, free.saturating_sub(keep_free)) else {
            return Ok(Vec::new());
        };
        let choice = |i: usize| options[i][chosen[i]].0;
        serve(
            key,
            |msm, bases, (i, _)| widen_to::<G1>(msm, bases, choice(i), &config),
            |msm, bases, (i, _)| widen_to::<G2>(msm, bases, choice(i), &config),
        )
    }
}

/// One MSM's choices of batching (`None`: its own) with the buffers each takes.
type Choices = Vec<(Option<Batching>, msm::Takes)>;

/// The batchings [`CudaBackend::widen_batches`] weighs for MSMs of `shapes` (in the order of
/// [`SERVED`]), each with the buffers it takes (`takes_of`): batches of `ceil(kept / 2^j)` points
/// while more than the MSM's own, fewest first, then its own (`None`). Bases in host memory keep
/// their own.
fn batch_options(
    shapes: &[MsmShape; 5],
    config: &crate::MsmConfig,
    takes_of: impl Fn(&MsmShape) -> Result<msm::Takes, CudaError>,
) -> Result<Vec<Choices>, CudaError> {
    let mut options = Vec::with_capacity(shapes.len());
    for (shape, msm) in shapes.iter().zip(SERVED) {
        let now = shape.batching.batch.unwrap_or(config.batch);
        let mut mine = Vec::new();
        if !shape.host {
            let batches = (0..usize::BITS).map(|j| shape.points.div_ceil(1 << j));
            for batch in batches.take_while(|&b| b > now) {
                let window = widened_window(msm, batch, shape.table, config);
                // Chains are granted afresh once the batches and tables are chosen (`grant_chains`).
                let batching =
                    Batching { batch: Some(batch), window, sort: shape.batching.sort, chains: None };
                match takes_of(&MsmShape { batching, ..*shape }) {
                    Ok(takes) => mine.push((Some(batching), takes)),
                    // A batch the sort refuses (2^31 points, 2^32 entries) is no candidate.
                    Err(CudaError::Size { .. }) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        // The key as it is counts without error (or the error is not the candidates').
        mine.push((None, takes_of(shape)?));
        options.push(mine);
    }
    Ok(options)
}

/// The key's MSMs by name, in the order of [`shapes`] and [`serve`].
const SERVED: [&str; 5] = ["h", "l", "b_g2", "a", "b_g1"];

/// Of the choices `options[i]` for each MSM `i` (with the scratch buffers each takes), the first in
/// lexical order (MSM 0's first choice before its second, whatever the others get) whose buffers
/// together take at most `room` bytes; `None` if none does. Buffers of equal size share a shelf
/// ([`msm::shelved_bytes`]), so one MSM's wider batch may fit only once another's has widened to
/// share it: MSM by MSM, the widest batch that fits beside the others' present ones can stop short
/// (the 2^27 porep-like key kept B in G2 and in G1 at two batches each where one batch each took
/// less). A prefix whose buffers exceed `room` is not followed: adding an MSM never lowers the count.
fn first_fit(options: &[Choices], room: usize) -> Option<Vec<usize>> {
    fn go<'a>(
        options: &'a [Choices],
        room: usize,
        picked: &mut Vec<&'a msm::Takes>,
        at: &mut Vec<usize>,
    ) -> bool {
        let Some(mine) = options.get(at.len()) else { return true };
        for (j, (_, takes)) in mine.iter().enumerate() {
            picked.push(takes);
            at.push(j);
            if msm::shelved_bytes(picked.iter().copied()) <= room && go(options, room, picked, at) {
                return true;
            }
            picked.pop();
            at.pop();
        }
        false
    }
    let mut at = Vec::with_capacity(options.len());
    go(options, room, &mut Vec::with_capacity(options.len()), &mut at).then_some(at)
}

/// For [`CudaBackend::grant_chains`]: gives H (random scalars, not [`witness_scalars`]) the chains
/// `roomy` says its shape may take, if what `takes_of` counts for them fits in `room` beside the
/// buffers of `chosen` (each MSM's new batching, `None` for its own in `shapes`, and its takes, in
/// the order of [`SERVED`]).
fn grant_roomy(
    shapes: &[MsmShape; 5],
    chosen: &mut [(Option<Batching>, msm::Takes)],
    room: usize,
    roomy: impl Fn(&MsmShape) -> Result<Option<u32>, CudaError>,
    takes_of: impl Fn(&MsmShape) -> Result<msm::Takes, CudaError>,
) -> Result<(), CudaError> {
    for (i, shape) in shapes.iter().enumerate() {
        if witness_scalars(SERVED[i]) {
            continue;
        }
        let batching = chosen[i].0.unwrap_or(shape.batching);
        let Some(chains) = roomy(&MsmShape { batching, ..*shape })? else { continue };
        let batching = Batching { chains: Some(chains), ..batching };
        let takes = takes_of(&MsmShape { batching, ..*shape })?;
        let all = chosen.iter().enumerate().map(|(j, c)| if j == i { &takes } else { &c.1 });
        if msm::shelved_bytes(all) <= room {
            chosen[i] = (Some(batching), takes);
        }
    }
    Ok(())
}

/// The chains a thread an MSM of `shape` may take beyond its default on a device of `sms`
/// multiprocessors under `config` ([`msm::roomy_chains`]).
fn roomy_on(sms: u32, shape: &MsmShape, config: &crate::MsmConfig) -> Result<Option<u32>, CudaError> {
    let config = shape.batching.over(config);
    let plain = Batching::default();
    match shape.curve {
        CurveId::G1 => msm::roomy_chains::<G1>(sms, shape.points, shape.table, plain, &config),
        CurveId::G2 => msm::roomy_chains::<G2>(sms, shape.points, shape.table, plain, &config),
    }
}

/// Gives `bases`, the MSM named `msm`, the batching `to` chose for it (none: it keeps its own), and
/// reports it.
fn widen_to<C: Curve>(
    msm: &'static str,
    bases: &mut GpuBases<C>,
    to: Option<Batching>,
    config: &crate::MsmConfig,
) -> Result<Option<BatchReport>, CudaError> {
    let Some(batching) = to else { return Ok(None) };
    bases.set_batch(batching.batch)?;
    bases.set_window(batching.window)?;
    bases.set_chains(batching.chains)?;
    let kept = bases.kept();
    let (plan, _, _) = msm::plan_for::<C>(kept, bases.table(), batching, config)?;
    let batch = batching.batch.unwrap_or(config.batch);
    let batches = kept.div_ceil(batch);
    Ok(Some(BatchReport { msm, batch, batches, window_bits: plan.c, chains: batching.chains }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MsmConfig;

    #[test]
    fn widened_witness_msms_keep_narrow_windows_and_h_takes_the_curves_rule() {
        let config = MsmConfig::default();
        for msm in ["a", "b_g1", "l", "b_g2"] {
            assert_eq!(widened_window(msm, 1 << 27, None, &config), Some(16), "{msm}");
            assert_eq!(widened_window(msm, 1 << 12, None, &config), Some(Plan::default_window(1 << 12)));
        }
        assert_eq!(widened_window("h", 1 << 27, None, &config), None);
        // A table fixes its window; a window the config sets stays.
        let table = Some(Table { window_bits: 20, multiples: 13 });
        assert_eq!(widened_window("l", 1 << 27, table, &config), None);
        let fixed = MsmConfig { window_bits: Some(18), ..config };
        assert_eq!(widened_window("l", 1 << 27, None, &fixed), None);
        // The plans the widened MSMs run with: H at 20 bits, L at 16, both in one batch of 2^27.
        let one = |window| Batching { batch: Some(1 << 27), window, ..Batching::default() };
        let (h, _, h_len) = msm::plan_for::<G1>(1 << 27, None, one(None), &config).unwrap();
        let (l, _, l_len) = msm::plan_for::<G1>(1 << 27, None, one(Some(16)), &config).unwrap();
        assert_eq!((h.c, h_len, l.c, l_len), (20, 1 << 27, 16, 1 << 27));
    }

    #[test]
    fn a_table_needs_its_own_size_to_build_then_leaves_the_reserve_once_the_points_go() {
        const GB: usize = 1 << 30;
        // 2^27 G1 points (12 GiB) replaced by two multiples each (24 GiB) with 96 GiB free: the
        // reserve may take what the points gave back.
        assert!(msm::table_fits(24 * GB, 12 * GB, 84 * GB, 96 * GB));
        assert!(!msm::table_fits(24 * GB, 12 * GB, 84 * GB + 1, 96 * GB));
        // The build needs the whole table free whatever the points give back after it.
        assert!(!msm::table_fits(97 * GB, 96 * GB, 0, 96 * GB));
        assert!(msm::table_fits(96 * GB, 96 * GB, 0, 96 * GB));
    }

    /// Device bytes the MSM buffers of a 2^27 porep-like key take with every MSM in one batch, H
    /// with `h_table`, the MSMs over the witness sorting by `witness_sort` (the config's if `None`).
    fn porep_like_2_27_buffers(h_table: Option<Table>, witness_sort: Option<Sort>) -> usize {
        let (config, n) = (MsmConfig::default(), 1usize << 27);
        let takes: Vec<_> = porep_like_2_27_shapes()
            .into_iter()
            .zip(SERVED)
            .map(|(shape, msm)| {
                let window = widened_window(msm, n, None, &config);
                let sort = witness_sort.filter(|_| witness_scalars(msm));
                let batching = Batching { batch: Some(n), window, sort, chains: None };
                let table = h_table.filter(|_| msm == "h");
                takes_on_132_sms(&MsmShape { batching, table, ..shape }).unwrap()
            })
            .collect();
        msm::shelved_bytes(&takes)
    }

    #[test]
    fn a_partial_table_for_h_of_a_2_27_key_takes_no_more_msm_buffers_than_none() {
        // H with each partial table: the table's fewer sets and its sort in two parts (pairs of at
        // most 10 windows, not 13) keep the key's buffers within what they take without a table,
        // so only the table's own bytes are new.
        let none = porep_like_2_27_buffers(None, Some(WITNESS_SORT));
        for &(window_bits, multiples) in PARTIAL_TABLE_CHOICES {
            let with = porep_like_2_27_buffers(Some(Table { window_bits, multiples }), Some(WITNESS_SORT));
            assert!(with <= none + (none >> 5), "{multiples} multiples: {with} bytes against {none}");
        }
    }

    #[test]
    fn partial_tables_fold_h_s_windows_into_fewer_sets_each_with_its_fewest_multiples() {
        let mut sets = Vec::new();
        for &(c, m) in PARTIAL_TABLE_CHOICES {
            let windows = 256u32.div_ceil(c);
            assert!(m > 1 && m < windows, "({c}, {m}) is not partial");
            Plan::with_multiples(1 << 27, c, m).unwrap();
            // No fewer multiples give as few sets.
            assert!(windows.div_ceil(m - 1) > windows.div_ceil(m), "({c}, {m})");
            sets.push(windows.div_ceil(m));
        }
        assert!(sets.windows(2).all(|w| w[0] < w[1]), "most multiples first: sets {sets:?}");
        assert!(!witness_scalars("h"));
    }

    #[test]
    fn witness_msms_sort_without_the_pairs_and_h_keeps_the_configs_sort() {
        let config = MsmConfig::default();
        for msm in ["a", "b_g1", "l", "b_g2"] {
            assert_eq!(widened_sort(msm, None, &config), Some(WITNESS_SORT), "{msm}");
        }
        assert_eq!(widened_sort("h", None, &config), None);
        // A table's MSM and a sort the config asks for keep theirs.
        let table = Some(Table { window_bits: 20, multiples: 13 });
        assert_eq!(widened_sort("a", table, &config), None);
        let other = if Sort::default() == Sort::Direct { Sort::Binned } else { Sort::Direct };
        assert_eq!(widened_sort("a", None, &MsmConfig { sort: other, ..config }), None);
        // One 2^27 batch at 16 bits: the direct sort's count lacks the binned sort's temporary of
        // pairs, 8 bytes for each of the 16 windows' entries of every point.
        let bytes = |sort| {
            let batching =
                Batching { batch: Some(1 << 27), window: Some(16), sort: Some(sort), chains: None };
            let takes = msm::msm_takes::<G1>(132, 1 << 27, None, false, &batching.over(&config)).unwrap();
            msm::shelved_bytes([&takes])
        };
        let (binned, direct) = (bytes(Sort::Binned), bytes(Sort::Direct));
        let pairs = (8 * 16) << 27;
        assert!(binned - direct >= pairs, "binned {binned} bytes, direct {direct}");
        assert!(binned - direct <= pairs + (64 << 20), "binned {binned} bytes, direct {direct}");
    }

    #[test]
    fn a_2_27_porep_like_keys_msms_fit_in_one_batch_each_in_half_the_binned_sorts_memory() {
        let (binned, direct) =
            (porep_like_2_27_buffers(None, None), porep_like_2_27_buffers(None, Some(WITNESS_SORT)));
        eprintln!("one batch each: binned {binned} bytes, witness sort {direct}");
        // H, L and A share two buffers of 2^31 entries (17.2 GB), B's two of 2^30; the pairs are
        // H's alone (7 of its 13 windows at a time).
        assert!(direct < 48 << 30, "{direct}");
        assert!(direct < binned / 10 * 6, "binned {binned}, witness sort {direct}");
    }

    /// The shapes of a 2^27 porep-like key's MSMs (in the order of [`SERVED`]) as `widen_batches`
    /// finds them: batches of the default config, the witness MSMs sorting by [`WITNESS_SORT`]. Kept
    /// points as in that key: H all but one, L all but the public inputs, A 86% of the variables, B
    /// 44% (in G1 and G2).
    fn porep_like_2_27_shapes() -> [MsmShape; 5] {
        let n = 1usize << 27;
        let kept = [n - 1, n - 2, n / 100 * 44, n / 100 * 86, n / 100 * 44];
        std::array::from_fn(|i| MsmShape {
            curve: if SERVED[i] == "b_g2" { CurveId::G2 } else { CurveId::G1 },
            points: kept[i],
            table: None,
            batching: Batching {
                sort: widened_sort(SERVED[i], None, &MsmConfig::default()),
                ..Batching::default()
            },
            host: false,
        })
    }

    fn takes_on_132_sms(shape: &MsmShape) -> Result<msm::Takes, CudaError> {
        takes_on(132, shape, &MsmConfig::default())
    }

    #[test]
    fn h_of_a_2_27_key_gets_more_chains_only_from_the_room_its_batches_leave() {
        let config = MsmConfig::default();
        let shapes = porep_like_2_27_shapes();
        let options = batch_options(&shapes, &config, takes_on_132_sms).unwrap();
        let one_each: Vec<_> = options.iter().map(|o| o[0].clone()).collect();
        let bytes = msm::shelved_bytes(one_each.iter().map(|c| &c.1));
        let granted = |room: usize| {
            let mut chosen = one_each.clone();
            let roomy = |s: &MsmShape| roomy_on(132, s, &config);
            grant_roomy(&shapes, &mut chosen, room, roomy, takes_on_132_sms).unwrap();
            chosen
        };
        // Room for one batch each and no more: H keeps its default chains.
        let tight = granted(bytes);
        assert!(tight.iter().zip(&one_each).all(|(a, b)| a.0 == b.0));
        // Room to spare: H alone takes the roomy chains, in the same batch, and its extra partials
        // (256 more chains on a wave of 132 x 4 x 128 threads, and the next round's) take 4-8 GB.
        let roomy = granted(usize::MAX);
        let h = roomy[0].0.unwrap();
        assert_eq!(h, Batching { chains: Some(msm::ROOMY_BATCH_CHAINS), ..one_each[0].0.unwrap() });
        assert!(roomy[1..].iter().zip(&one_each[1..]).all(|(a, b)| a.0 == b.0));
        let more = msm::shelved_bytes(roomy.iter().map(|c| &c.1)) - bytes;
        eprintln!("{} chains a thread for H: {more} bytes more", msm::ROOMY_BATCH_CHAINS);
        assert!((4 << 30..8 << 30).contains(&more), "{more} bytes more");
        // Exactly that room grants them; a byte less does not.
        assert_eq!(granted(bytes + more)[0].0, Some(h));
        assert_eq!(granted(bytes + more - 1)[0].0, one_each[0].0);
        // A plan whose chains the config fixes is granted none.
        let fixed = MsmConfig { batch_chains: Some(256), ..config };
        assert_eq!(roomy_on(132, &MsmShape { batching: h, ..shapes[0] }, &fixed).unwrap(), None);
        let mine = MsmShape { batching: one_each[0].0.unwrap(), ..shapes[0] };
        assert_eq!(roomy_on(132, &mine, &fixed).unwrap(), None);
        assert_eq!(roomy_on(132, &mine, &config).unwrap(), Some(msm::ROOMY_BATCH_CHAINS));
    }

    #[test]
    fn widening_finds_one_batch_each_where_msm_by_msm_stops_at_two_for_b() {
        let config = MsmConfig::default();
        let options = batch_options(&porep_like_2_27_shapes(), &config, takes_on_132_sms).unwrap();
        // About 2^27 points in batches of 2^24: one, two or four batches, or its own eight; B's 44%
        // of them one or two, or its own four.
        let own: Vec<usize> = options.iter().map(|o| o.len() - 1).collect();
        assert_eq!(own, [3, 3, 2, 3, 2]);
        assert!(options.iter().all(|o| o.last().unwrap().0.is_none()));
        assert_eq!(options[0][0].0.and_then(|b| b.batch), Some((1 << 27) - 1));
        let bytes = |at: &[usize]| msm::shelved_bytes(at.iter().zip(&options).map(|(&j, o)| &o[j].1));
        let one_each = bytes(&[0; 5]);
        // One MSM at a time, each taking the fewest batches that fit beside the others' present
        // ones, B in G2 and in G1 stop at two batches with 8% more room than one batch each takes:
        // either alone in one batch takes buffers of its own beside the other's two.
        let room = one_each / 100 * 108;
        let mut at: [usize; 5] = std::array::from_fn(|i| own[i]);
        for i in 0..5 {
            let with = |j| {
                let mut w = at;
                w[i] = j;
                w
            };
            at[i] = (0..=own[i]).find(|&j| bytes(&with(j)) <= room).unwrap();
        }
        assert_eq!(at, [0, 0, 1, 0, 1], "MSM by MSM");
        // Neither B can take one batch alone, though both together fit.
        for i in [2, 4] {
            let mut one = at;
            one[i] = 0;
            assert!(bytes(&one) > room, "{}", SERVED[i]);
        }
        assert_eq!(first_fit(&options, room), Some(vec![0; 5]));
        // With less room H keeps its one batch before any other MSM has fewer batches.
        let less = first_fit(&options, one_each - 1).unwrap();
        assert_eq!(less[0], 0);
        assert!(bytes(&less) < one_each, "{less:?}");
        // No room for the MSMs' own batches: no choice.
        let own_bytes = bytes(&own);
        assert_eq!(first_fit(&options, own_bytes - 1), None);
        let fits = first_fit(&options, own_bytes).unwrap();
        assert!(bytes(&fits) <= own_bytes, "{fits:?}");
    }
}
