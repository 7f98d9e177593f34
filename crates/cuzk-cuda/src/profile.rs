//! Timing kernels where they are launched: a [`Probe`] records CUDA events around each launch it is
//! given, and reads them once the work is done. MSMs and NTTs take the probe as an argument; a disabled
//! probe ([`Probe::default`]) records nothing and costs nothing. The backend gives each timed stage of a
//! proof its own enabled probe (inside the stage's device timer), so a stage's report splits into
//! steps: NTT passes, coset scaling, sorting, bucket sums, the ones' batch addition, reductions.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::{CudaError, DriverContext, Gpu};

/// Per-kernel timing: CUDA events around each launch, read after the work. Off by default;
/// the events cost a little host time per launch. Kernels of different streams may overlap, so the
/// sum of the times can exceed the wall time of a batched MSM.
#[derive(Default)]
pub struct Probe {
    enabled: bool,
    open: Option<cudarc::driver::CudaEvent>,
    marks: Vec<(&'static str, cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)>,
    host: Vec<(&'static str, std::time::Instant)>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").field("enabled", &self.enabled).field("marks", &self.marks.len()).finish()
    }
}

impl Probe {
    /// A probe that records.
    pub fn enabled() -> Self {
        Self { enabled: true, ..Self::default() }
    }

    fn event(gpu: &Gpu, stream: &Arc<CudaStream>) -> Result<cudarc::driver::CudaEvent, CudaError> {
        let ev = gpu
            .context()
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .during("creating an event")?;
        ev.record(stream).during("recording an event")?;
        Ok(ev)
    }

    pub(crate) fn before(&mut self, gpu: &Gpu, stream: &Arc<CudaStream>) -> Result<(), CudaError> {
        if self.enabled {
            self.open = Some(Self::event(gpu, stream)?);
        }
        Ok(())
    }

    pub(crate) fn after(
        &mut self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        name: &'static str,
    ) -> Result<(), CudaError> {
        if let Some(start) = self.open.take() {
            self.marks.push((name, start, Self::event(gpu, stream)?));
        }
        Ok(())
    }

    pub(crate) fn host_mark(&mut self, name: &'static str) {
        if self.enabled {
            self.host.push((name, std::time::Instant::now()));
        }
    }

    /// The host's side of the call, in milliseconds after it began: when the last batch was queued
    /// ("queued"), when its window sums had arrived ("copied") and when the result was ready
    /// ("combined").
    pub fn host_phases(&self) -> Vec<(&'static str, f64)> {
        let Some((_, origin)) = self.host.first() else { return Vec::new() };
        self.host.iter().skip(1).map(|(name, t)| (*name, (*t - *origin).as_secs_f64() * 1e3)).collect()
    }

    /// Milliseconds per launch, in launch order (waits for the last event).
    pub fn kernel_times(&self) -> Result<Vec<(&'static str, f32)>, CudaError> {
        Ok(self.kernel_spans()?.into_iter().map(|(name, a, b)| (name, b - a)).collect())
    }

    /// Per launch, start and end in milliseconds after the first launch's start (waits for the events).
    pub fn kernel_spans(&self) -> Result<Vec<(&'static str, f32, f32)>, CudaError> {
        let Some((_, origin, _)) = self.marks.first() else { return Ok(Vec::new()) };
        self.marks
            .iter()
            .map(|(name, a, b)| {
                b.synchronize().during("waiting for an event")?;
                let start = origin.elapsed_ms(a).during("reading an event time")?;
                Ok((*name, start, origin.elapsed_ms(b).during("reading an event time")?))
            })
            .collect()
    }

    /// Milliseconds during which at least one probed kernel ran (the union of the spans, so kernels
    /// overlapping on different streams count once; copies are not kernels).
    pub fn busy_ms(&self) -> Result<f32, CudaError> {
        let spans: Vec<(f32, f32)> = self
            .kernel_spans()?
            .into_iter()
            .filter(|(n, ..)| *n != DOWNLOAD)
            .map(|(_, a, b)| (a, b))
            .collect();
        Ok(union_length(spans))
    }
}

impl Probe {
    /// Device time per kind of work, the kernels grouped into steps, in order of first launch
    /// (waits for the events).
    pub fn steps(&self) -> Result<Vec<(&'static str, std::time::Duration)>, CudaError> {
        let mut steps: Vec<(&'static str, f64)> = Vec::new();
        for (name, ms) in self.kernel_times()? {
            let step = step_of(name);
            match steps.iter_mut().find(|(s, _)| *s == step) {
                Some((_, total)) => *total += f64::from(ms),
                None => steps.push((step, f64::from(ms))),
            }
        }
        Ok(steps
            .into_iter()
            .map(|(s, ms)| (s, std::time::Duration::from_secs_f64(ms.max(0.0) / 1e3)))
            .collect())
    }
}

/// The probe's name for the copy of a batch's window sums to the host (a copy, not a kernel).
pub(crate) const DOWNLOAD: &str = "download (window sums)";

/// The step a kernel belongs to, for [`Probe::steps`].
fn step_of(kernel: &'static str) -> &'static str {
    match kernel {
        "msm_count" | "scan_blocks" | "scan_add" | "msm_scatter" | "msm_bin_cursors" | "msm_scatter_bins"
        | "msm_place" => "sort",
        "sum_affine" | "sum_batch" | "sum_xyzz" | "sum_partials" | "msm_flat_counts" | "msm_chunk_counts" => {
            "bucket sums"
        }
        "sum_ones" => "ones (batch addition)",
        "window_segments" | "reduce" => "reductions",
        "ntt_pass" => "ntt passes",
        "scale" => "coset scaling",
        other => other,
    }
}

/// The total length of the union of intervals `(start, end)`.
fn union_length(mut spans: Vec<(f32, f32)>) -> f32 {
    spans.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut total, mut open): (f32, Option<(f32, f32)>) = (0.0, None);
    for (a, b) in spans {
        open = match open {
            Some((s, e)) if a <= e => Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + open.map_or(0.0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_spans_count_once() {
        assert_eq!(union_length(vec![]), 0.0);
        assert_eq!(union_length(vec![(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]), 4.0);
        assert_eq!(union_length(vec![(4.0, 5.0), (0.0, 1.0), (1.0, 2.0)]), 3.0);
    }
}
