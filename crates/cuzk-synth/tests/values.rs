//! The porep-like circuit's witness against a real one's: Filecoin's own PoRep partitions (2 KiB and
//! 8 MiB test sectors, `cuzk filecoin shape --sector`) hold 50.6-51.2% zeros, 46.5-47.2% ones, no
//! values from 2 to below 2^128 and 1.6-2.9% wider ones (docs/benchmarks/gpu-groth16.md).

use cuzk_circuits::{PorepLike, PorepParams};
use cuzk_synth::{synthesize, SynthesisOptions, ValueSizes};

#[test]
fn a_porep_like_witness_holds_values_as_a_real_porep_witness_does() {
    let params = PorepParams::filecoin_like(2);
    let s = synthesize(PorepLike::new(params, 7, 0).unwrap(), &SynthesisOptions::default()).unwrap();
    let v = ValueSizes::of(&s.assignment[s.counts().instance..]);
    eprintln!(
        "porep-like, 2 challenges: {} witness variables, zeros {:.2}%, ones {:.2}%, wider {:.2}%",
        v.len,
        v.percent(v.zeros),
        v.percent(v.ones),
        v.percent(v.wider)
    );
    assert_eq!((v.below_2_16, v.below_2_64, v.below_2_128), (0, 0, 0), "{v:?}");
    assert!((50.0..60.0).contains(&v.percent(v.zeros)), "{v:?}");
    assert!((38.0..50.0).contains(&v.percent(v.ones)), "{v:?}");
    assert!((1.0..4.0).contains(&v.percent(v.wider)), "{v:?}");
}
