//! The device's event clock calibrated against the host's monotonic clock, so device work can be
//! placed in time, not only measured in length.
//!
//! CUDA events give the device time between two events, never an absolute time. An anchor is an
//! event recorded on a stream of its own (idle, so the device timestamps it at once) at a known host
//! instant: the midpoint of the instants just before the record and just after the event completed,
//! which bounds the error by half that interval (tens of microseconds). Any later event's host instant
//! is the anchor's plus the device time between them. Anchors are renewed every
//! [`REANCHOR`], so drift between the two clocks and the precision of a long `f32` interval never
//! matter by more than microseconds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};

use crate::{CudaError, DriverContext};

/// How long an anchor is used before a new one is taken.
pub const REANCHOR: Duration = Duration::from_secs(1);

/// An event with the host instant it completed at.
pub struct ClockAnchor {
    event: CudaEvent,
    host: Instant,
    /// Half the host interval the event's completion was bounded by.
    uncertainty: Duration,
}

impl std::fmt::Debug for ClockAnchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClockAnchor")
            .field("host", &self.host)
            .field("uncertainty", &self.uncertainty)
            .finish()
    }
}

impl ClockAnchor {
    /// The host instant at which the device reached `event` (recorded after this anchor, and complete).
    pub fn to_host(&self, event: &CudaEvent) -> Result<Instant, CudaError> {
        let ms = self.event.elapsed_ms(event).during("reading an event time")?;
        let offset = Duration::from_secs_f64(f64::from(ms.abs()) / 1e3);
        Ok(if ms >= 0.0 { self.host + offset } else { self.host.checked_sub(offset).unwrap_or(self.host) })
    }

    /// How far the anchor's host instant may be from the device's (half the calibration interval).
    pub fn uncertainty(&self) -> Duration {
        self.uncertainty
    }
}

/// One device's clock: its anchor stream and the current anchor.
pub struct DeviceClock {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    current: Mutex<Option<Arc<ClockAnchor>>>,
}

impl std::fmt::Debug for DeviceClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceClock").finish_non_exhaustive()
    }
}

impl DeviceClock {
    /// The clock of `ctx`'s device, anchored once now.
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        let stream = ctx.new_stream().during("creating the clock stream")?;
        let clock = Self { ctx: ctx.clone(), stream, current: Mutex::new(None) };
        clock.anchor()?;
        Ok(clock)
    }

    /// An anchor taken no longer than [`REANCHOR`] ago (a new one when the current one is older).
    pub fn anchor(&self) -> Result<Arc<ClockAnchor>, CudaError> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = current.as_ref().filter(|a| a.host.elapsed() < REANCHOR) {
            return Ok(a.clone());
        }
        let event = self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .during("creating a clock event")?;
        let before = Instant::now();
        event.record(&self.stream).during("recording a clock event")?;
        event.synchronize().during("waiting for a clock event")?;
        let after = Instant::now();
        let uncertainty = (after - before) / 2;
        let anchor = Arc::new(ClockAnchor { event, host: before + uncertainty, uncertainty });
        *current = Some(anchor.clone());
        Ok(anchor)
    }
}
