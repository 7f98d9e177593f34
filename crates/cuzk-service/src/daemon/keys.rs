//! Making keys resident: reading them from the key directory, or generating the missing ones (once
//! per key, admitted by the host budget, stopped when the call is given up).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use ark_serialize::CanonicalSerialize;
use rand::SeedableRng;

use super::{check_id, lock, shown, Daemon, Loaded, Resident};
use crate::error::ServiceError;
use crate::registry::{BoxedCircuit, KindKey};

impl Daemon {
    /// Makes a key resident under `key_id` (blocking: it may read or generate a large key).
    pub fn load_key(&self, key_id: &str, kind: &str, params: &[u8]) -> Result<Loaded, ServiceError> {
        self.load_key_unless(key_id, kind, params, &AtomicBool::new(false))
    }

    /// [`Daemon::load_key`], given up (CANCELLED) once `cancel` is set: a key being generated for
    /// it stops within a fraction of a second, and nothing is saved or made resident. Generation
    /// stops too when the daemon stops accepting (a shutdown).
    pub fn load_key_unless(
        &self,
        key_id: &str,
        kind: &str,
        params: &[u8],
        cancel: &AtomicBool,
    ) -> Result<Loaded, ServiceError> {
        let result = self.load_key_counted(key_id, kind, params, cancel);
        match &result {
            Ok(l) => tracing::info!(
                key = key_id,
                kind,
                shape = %l.shape_id,
                constraints = l.constraints,
                generated = l.generated,
                seconds = l.seconds,
                "key resident"
            ),
            Err(e) => {
                self.metrics.key_loads_failed.inc();
                tracing::warn!(key = %shown(key_id), kind = %shown(kind), error = %e, "key not loaded");
            }
        }
        result
    }

    fn load_key_counted(
        &self,
        key_id: &str,
        kind: &str,
        params: &[u8],
        cancel: &AtomicBool,
    ) -> Result<Loaded, ServiceError> {
        let t = Instant::now();
        check_id("key id", key_id)?;
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(ServiceError::Unavailable("the daemon is shutting down".into()));
        }
        {
            let keys = lock(&self.keys);
            let mut loading = lock(&self.loading);
            if keys.contains_key(key_id) || loading.contains(key_id) {
                return Err(ServiceError::AlreadyExists(format!(
                    "key {key_id:?} is already resident or loading"
                )));
            }
            if keys.len() + loading.len() >= self.config.max_keys {
                return Err(ServiceError::ResourceExhausted(format!(
                    "{} keys are resident or loading (max_keys)",
                    keys.len() + loading.len()
                )));
            }
            loading.insert(key_id.to_owned());
        }
        let result = self.load_reserved(key_id, kind, params, t, cancel);
        lock(&self.loading).remove(key_id);
        result
    }

    /// [`Daemon::load_key`] once the id is reserved.
    fn load_reserved(
        &self,
        key_id: &str,
        kind: &str,
        params: &[u8],
        t: Instant,
        cancel: &AtomicBool,
    ) -> Result<Loaded, ServiceError> {
        let k = self
            .registry
            .get(kind)
            .ok_or_else(|| ServiceError::NotFound(format!("unknown circuit kind {}", shown(kind))))?;
        let spec = k
            .key(params, self.config.max_log_rows)
            .map_err(|e| ServiceError::InvalidArgument(e.to_string()))?;
        let shape_id = spec.shape_id();
        let (key, generated) = match spec.resident_key(&self.engine) {
            // The kind reads its key itself (Filecoin's parameter files).
            Some(own) => (
                own.map_err(|e| ServiceError::Failed(format!("loading the key for {shape_id}: {e}")))?,
                false,
            ),
            None => {
                let generated = self.generate_if_missing(spec.as_ref(), &shape_id, cancel)?;
                if cancel.load(Ordering::SeqCst) {
                    return Err(ServiceError::Cancelled(format!(
                        "loading the key for {shape_id}: the call was given up"
                    )));
                }
                let (key, _) = self
                    .engine
                    .load_key_from_store(&self.store, &shape_id)
                    .map_err(|e| ServiceError::from_engine(&format!("loading the key for {shape_id}"), &e))?;
                (key, generated)
            }
        };
        let constraints = key.shape_counts().map(|c| c.constraints).unwrap_or_default();
        let mut verifying_key = Vec::new();
        key.vk()
            .serialize_compressed(&mut verifying_key)
            .map_err(|e| ServiceError::Failed(format!("serializing the verifying key: {e}")))?;
        let pipeline = self
            .engine
            .pipeline_sharing::<BoxedCircuit>(&key, self.config.scheduler(), &self.budget)
            .map_err(|e| match e {
                cuzk::Error::HostBudget { .. } => ServiceError::ResourceExhausted(format!(
                    "key {key_id:?}: {e}; resident keys hold their part until they are evicted and \
                     their proofs collected"
                )),
                e => ServiceError::from_engine(&format!("starting the pipeline for {shape_id}"), &e),
            })?;
        let tables = key.msm_tables().into_iter().map(|(device, t)| format!("GPU {device}: {t}"));
        let batches = key.msm_batches().into_iter().map(|(device, b)| format!("GPU {device}: {b}"));
        let msm_tables: Vec<String> = tables.chain(batches).collect();
        for table in &msm_tables {
            tracing::info!(key = key_id, msm = %table, "MSM table or batches");
        }
        let resident = Arc::new(Resident {
            id: key_id.to_owned(),
            kind: kind.to_owned(),
            spec,
            shape_id: shape_id.clone(),
            constraints,
            domain_size: key.domain_size(),
            // The key's own count is 1 on the CPU (the host); the wire says GPUs.
            devices: if self.engine.cuda_devices().is_empty() { 0 } else { key.devices() },
            msm_tables,
            pipeline,
        });
        lock(&self.keys).insert(key_id.to_owned(), resident);
        Ok(Loaded { shape_id, constraints, generated, seconds: t.elapsed().as_secs_f64(), verifying_key })
    }

    /// Generates the key for `shape_id` unless the key directory has it; true if it generated it.
    /// One load at a time generates a given shape: the others wait for it and then read its key.
    fn generate_if_missing(
        &self,
        spec: &dyn KindKey,
        shape_id: &str,
        cancel: &AtomicBool,
    ) -> Result<bool, ServiceError> {
        let in_store = || {
            self.store
                .contains(shape_id)
                .map_err(|e| ServiceError::from_engine("the key directory", &e.into()))
        };
        if in_store()? {
            return Ok(false);
        }
        if !self.config.generate_missing_keys {
            return Err(ServiceError::NotFound(format!(
                "the key directory has no key for shape {shape_id} and generating keys is off"
            )));
        }
        let gate = Arc::clone(lock(&self.generating).entry(shape_id.to_owned()).or_default());
        let result = self.wait_turn(&gate, shape_id, cancel).and_then(|_turn| {
            // Another load may have generated it while this one waited.
            match in_store() {
                Ok(true) => Ok(false),
                Ok(false) => self.generate(spec, shape_id, cancel).map(|()| true),
                Err(e) => Err(e),
            }
        });
        let mut generating = lock(&self.generating);
        // The map's reference and this one: nobody else waits on the gate.
        if Arc::strong_count(&gate) == 2 {
            generating.remove(shape_id);
        }
        result
    }

    /// Waits for `gate` (another load generating the same key), giving up when `cancel` is set or
    /// the daemon stops accepting.
    fn wait_turn<'a>(
        &self,
        gate: &'a Mutex<()>,
        shape_id: &str,
        cancel: &AtomicBool,
    ) -> Result<MutexGuard<'a, ()>, ServiceError> {
        loop {
            match gate.try_lock() {
                Ok(turn) => return Ok(turn),
                Err(TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
            if cancel.load(Ordering::SeqCst) || !self.accepting.load(Ordering::SeqCst) {
                return Err(ServiceError::Cancelled(format!(
                    "waiting for another load to generate the key for {shape_id}: the call was given up \
                     or the daemon is shutting down"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Generates the key and records the shape for `spec` into the key directory, once the host
    /// budget has room for the generation's peak.
    fn generate(&self, spec: &dyn KindKey, shape_id: &str, cancel: &AtomicBool) -> Result<(), ServiceError> {
        let failed = |what: &'static str| {
            move |e: &dyn std::fmt::Display| ServiceError::Failed(format!("{what} for {shape_id}: {e}"))
        };
        let stop = || cancel.load(Ordering::SeqCst) || !self.accepting.load(Ordering::SeqCst);
        let stopped = || {
            ServiceError::Cancelled(format!(
                "generating the key for {shape_id} was stopped: the call was given up or the daemon is \
                 shutting down"
            ))
        };
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        let needed = cuzk::setup_host_bytes(spec.rows());
        let _room = self.budget.try_reserve(needed).ok_or_else(|| {
            let (capacity, used, _) = self.budget();
            ServiceError::ResourceExhausted(format!(
                "generating the key for {shape_id} ({} rows) needs about {:.2} GiB of host memory; the \
                 host budget has {:.2} GiB of {:.2} GiB free now",
                spec.rows(),
                gib(needed),
                gib(capacity.saturating_sub(used)),
                gib(capacity)
            ))
        })?;
        let template = || spec.template().map_err(|e| ServiceError::InvalidArgument(e.to_string()));
        let mut rng = rand::rngs::StdRng::seed_from_u64(spec.keygen_seed());
        tracing::info!(shape = shape_id, rows = spec.rows(), reserved_bytes = needed, "generating a key");
        let pk = cuzk::generate_key(template()?, &mut rng, &stop).map_err(|e| match e {
            cuzk::SetupError::Stopped => stopped(),
            e => failed("generating the key")(&e),
        })?;
        if stop() {
            return Err(stopped());
        }
        let shape = cuzk::R1csShape::record(template()?).map_err(|e| failed("recording the shape")(&e))?;
        if stop() {
            return Err(stopped());
        }
        self.store.save_shape(shape_id, &shape).map_err(|e| failed("saving the shape")(&e))?;
        // The key last: a key in the store always has its shape beside it.
        self.store.save(shape_id, &pk).map_err(|e| failed("saving the key")(&e))?;
        Ok(())
    }
}
