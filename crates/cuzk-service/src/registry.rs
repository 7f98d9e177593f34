//! Circuit kinds: how a request's bytes become a key and partition circuits.
//!
//! A kind parses key parameters (`LoadKey`) into a [`KindKey`], which names the key's shape in the key
//! directory, gives a circuit of that shape (to generate the key and record its shape) and turns one
//! partition's input bytes into a circuit. The porep-like and synthetic kinds ship registered; library
//! users add their own with [`Registry::register`]. Filecoin's kinds (`crate::filecoin`) read their
//! keys from Filecoin's parameter files and check each proof with Filecoin's verifier.

use std::collections::BTreeMap;
use std::sync::Arc;

use ark_bls12_381::Fr;
use ark_relations::gr1cs::ConstraintSynthesizer;
use cuzk_circuits::{PorepLike, Synthetic};
use serde::Deserialize;

pub use crate::kind::{BoxedCircuit, CircuitKind, KindError, KindKey};

/// The registered circuit kinds.
#[derive(Clone)]
pub struct Registry {
    kinds: BTreeMap<String, Arc<dyn CircuitKind>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.kinds.keys()).finish()
    }
}

impl Default for Registry {
    /// The built-in kinds: `synthetic`, `porep-like`, and Filecoin's `filecoin-porep-c2`,
    /// `filecoin-winning-post` and `filecoin-window-post`.
    fn default() -> Self {
        let mut r = Self { kinds: BTreeMap::new() };
        r.register(SyntheticKind);
        r.register(PorepLikeKind);
        for kind in crate::filecoin::kinds() {
            r.register(kind);
        }
        r
    }
}

impl Registry {
    /// Adds (or replaces) a kind under its name.
    pub fn register(&mut self, kind: impl CircuitKind) {
        self.kinds.insert(kind.name().to_owned(), Arc::new(kind));
    }

    /// The kind called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn CircuitKind>> {
        self.kinds.get(name)
    }

    /// Every kind's name.
    pub fn names(&self) -> Vec<String> {
        self.kinds.keys().cloned().collect()
    }
}

fn parse<'a, T: Deserialize<'a>>(what: &'static str, bytes: &'a [u8]) -> Result<T, KindError> {
    serde_json::from_slice(bytes).map_err(|source| KindError::Parse { what, source })
}

fn check_log(log: u32, min: u32, max: u32) -> Result<(), KindError> {
    if (min..=max).contains(&log) {
        Ok(())
    } else {
        Err(KindError::OutOfRange { what: "log size", value: log.into(), min: min.into(), max: max.into() })
    }
}

/// `synthetic`: key parameters `{"log_rows": K, "bit_share_per_mille": B}` (B optional, 0 to 1000),
/// partition input `{"seed": S}`.
struct SyntheticKind;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SyntheticParams {
    log_rows: u32,
    #[serde(default)]
    bit_share_per_mille: u16,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedInput {
    seed: u64,
}

/// A built-in kind's key: a template circuit, and how a partition's input fills it in.
struct BuiltInKey<C> {
    template: C,
    shape_id: String,
    rows: u64,
    fill: fn(&C, &[u8]) -> Result<C, KindError>,
    public_inputs: fn(&C) -> Vec<Fr>,
}

impl<C: ConstraintSynthesizer<Fr> + Copy + Send + Sync + 'static> KindKey for BuiltInKey<C> {
    fn shape_id(&self) -> String {
        self.shape_id.clone()
    }

    fn template(&self) -> Result<BoxedCircuit, KindError> {
        Ok(BoxedCircuit::new(self.template))
    }

    fn keygen_seed(&self) -> u64 {
        0
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn partition(&self, input: &[u8]) -> Result<BoxedCircuit, KindError> {
        (self.fill)(&self.template, input).map(BoxedCircuit::new)
    }

    fn public_inputs(&self, input: &[u8]) -> Result<Vec<Fr>, KindError> {
        (self.fill)(&self.template, input).map(|c| (self.public_inputs)(&c))
    }
}

impl CircuitKind for SyntheticKind {
    fn name(&self) -> &str {
        "synthetic"
    }

    fn key(&self, params: &[u8], max_log_rows: u32) -> Result<Box<dyn KindKey>, KindError> {
        let p: SyntheticParams = parse("synthetic key parameters", params)?;
        check_log(p.log_rows, 2, max_log_rows)?;
        if p.bit_share_per_mille > 1000 {
            return Err(KindError::OutOfRange {
                what: "bit_share_per_mille",
                value: p.bit_share_per_mille.into(),
                min: 0,
                max: 1000,
            });
        }
        let template = Synthetic::with_log_rows(p.log_rows, 0).with_bit_share(p.bit_share_per_mille);
        Ok(Box::new(BuiltInKey {
            template,
            shape_id: template.shape_id(),
            rows: 1 << p.log_rows,
            fill: |t, input| {
                let i: SeedInput = parse("synthetic partition input", input)?;
                Ok(Synthetic { seed: i.seed, ..*t })
            },
            public_inputs: Synthetic::public_input_values,
        }))
    }
}

/// `porep-like`: key parameters `{"log_constraints": K}`, partition input `{"seed": S, "partition": P}`
/// (the seed is the replica's, shared by a proof's partitions).
struct PorepLikeKind;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PorepParamsIn {
    log_constraints: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PorepInput {
    seed: u64,
    partition: u64,
}

impl CircuitKind for PorepLikeKind {
    fn name(&self) -> &str {
        "porep-like"
    }

    fn key(&self, params: &[u8], max_log_rows: u32) -> Result<Box<dyn KindKey>, KindError> {
        let p: PorepParamsIn = parse("porep-like key parameters", params)?;
        check_log(p.log_constraints, cuzk_circuits::porep::MIN_LOG_CONSTRAINTS, max_log_rows)?;
        let template = PorepLike::for_log_constraints(p.log_constraints, 0, 0).map_err(KindError::circuit)?;
        Ok(Box::new(BuiltInKey {
            template,
            shape_id: template.params.shape_id(),
            rows: 1 << p.log_constraints,
            fill: |t, input| {
                let i: PorepInput = parse("porep-like partition input", input)?;
                PorepLike::new(t.params, i.seed, i.partition).map_err(KindError::circuit)
            },
            public_inputs: PorepLike::public_input_values,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_kinds_parse_their_inputs_and_refuse_bad_ones() {
        let r = Registry::default();
        assert_eq!(
            r.names(),
            ["filecoin-porep-c2", "filecoin-window-post", "filecoin-winning-post", "porep-like", "synthetic"]
        );
        let syn = r.get("synthetic").unwrap();
        let key = syn.key(br#"{"log_rows": 6}"#, 27).unwrap();
        assert!(key.partition(br#"{"seed": 3}"#).is_ok());
        assert_eq!(key.public_inputs(br#"{"seed": 3}"#).unwrap().len(), 1);
        for bad in [&br#"{"seed": "x"}"#[..], b"", b"{\"seed\": 1, \"extra\": 2}", b"\xff"] {
            assert!(key.partition(bad).is_err(), "{bad:?}");
        }
        assert!(syn.key(br#"{"log_rows": 40}"#, 27).err().unwrap().to_string().contains("outside"));
        assert!(syn.key(br#"{"log_rows": 6, "bit_share_per_mille": 1001}"#, 27).is_err());
        assert!(syn.key(b"not json", 27).err().unwrap().to_string().contains("synthetic key parameters"));
        assert!(matches!(syn.key(br#"{"log_rows": 40}"#, 27), Err(KindError::OutOfRange { value: 40, .. })));
        assert!(matches!(syn.key(b"not json", 27), Err(KindError::Parse { .. })));
        assert!(r.get("nope").is_none());
    }
}
