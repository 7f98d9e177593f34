//! `cargo xtask sass [--module NAME] [KERNEL...]`: what the kernels compile to, counted by the unit
//! that runs each instruction, with a throughput model of each innermost loop.
//!
//! Each entry file (or the one `--module` names, e.g. `field_test`) is compiled for sm_90 by the
//! pinned nvcc, as `cargo xtask ptx` does, and disassembled by `cuobjdump` (from `CUZK_CUOBJDUMP`,
//! else `PATH`, else PyPI's `nvidia-cuda-cuobjdump` in `.tools/sass-venv`: PyPI has no 13.0 release,
//! and 13.2's reads 13.0's cubins). Kernels whose name contains one of the `KERNEL` words (all when
//! none is given) are listed with their instructions by class, and so is every loop that holds no
//! other loop (a backward branch and its target), where a kernel spends its time.
//!
//! The model charges a warp's instruction to its scheduler's pipes as an H100/H200 runs them: one
//! instruction issued a cycle; `IMAD.WIDE` / `IMAD.HI` 4 cycles of the FMA pipe, other integer
//! multiply-adds 2 (FP32 arithmetic is charged the same, more than Hopper needs; the field code has
//! none); the ALU (adds, logic, shifts, selects, compares, moves) 2 cycles; the FP64 units (`DFMA`,
//! `DADD`, ...) 4 cycles, as measured: at 2 (the H200's 64 FP64 units a multiprocessor) the model
//! gave `mul_fp64` 1.39x the integer Fr rate, the H200 ran it at 0.90x (2026-12-05), which 4
//! reproduces within 10%. A loop's cycles a warp are the busiest of the four: a ceiling on
//! throughput with latency, memory and occupancy ignored. It reproduces the measured integer Fr and
//! Fq multiplication rates within 10% (docs/benchmarks/cuda-field-ntt.md), but not warps of both
//! kinds on one scheduler: `MulUnits::Mixed` measured 0.99x where separate pipes would add up, so
//! the two kinds share a limit the model lacks. The counts are static:
//! a loop with branches inside counts every path, and of two back-edges to one header only the
//! shorter loop is reported.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::ptx;

/// PyPI's oldest cuobjdump for CUDA 13 (none is published for 13.0), and the nvdisasm it runs.
const CUOBJDUMP_VERSION: &str = "13.2.86";
const SASS_PACKAGES: [&str; 2] = ["nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"];

/// The unit an instruction occupies, as the model counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Class {
    /// `IMAD.WIDE`, `IMAD.HI`: the FMA pipe for 4 cycles a warp.
    FmaWide,
    /// Other integer and FP32 multiply-adds: the FMA pipe for 2 cycles.
    Fma,
    /// Integer adds, logic, shifts, selects, compares and moves: the ALU for 2 cycles.
    Alu,
    /// Double precision: the FP64 units for 4 cycles (calibrated on the H200).
    Fp64,
    /// Loads, stores, shuffles, atomics and constants: issued, their pipes not modelled.
    Memory,
    /// The uniform datapath (`U...`): issued, not modelled.
    Uniform,
    /// Branches, barriers, special registers and the rest: issued only.
    Other,
}

impl Class {
    const ALL: [Class; 7] =
        [Class::FmaWide, Class::Fma, Class::Alu, Class::Fp64, Class::Memory, Class::Uniform, Class::Other];

    fn name(self) -> &'static str {
        match self {
            Class::FmaWide => "imad-wide",
            Class::Fma => "fma",
            Class::Alu => "alu",
            Class::Fp64 => "fp64",
            Class::Memory => "memory",
            Class::Uniform => "uniform",
            Class::Other => "other",
        }
    }

    /// The class of an opcode with its modifiers, e.g. `IMAD.WIDE.U32`.
    pub(crate) fn of(opcode: &str) -> Class {
        let base = opcode.split('.').next().unwrap_or(opcode);
        if base == "IMAD" && (opcode.starts_with("IMAD.WIDE") || opcode.starts_with("IMAD.HI")) {
            return Class::FmaWide;
        }
        match base {
            "IMAD" | "IMUL" | "FFMA" | "FMUL" | "FADD" | "HFMA2" | "IDP" => Class::Fma,
            "IADD3" | "LOP3" | "SHF" | "SEL" | "ISETP" | "LEA" | "VIADD" | "VIADDMNMX" | "VIMNMX"
            | "IMNMX" | "PRMT" | "MOV" | "FLO" | "BREV" | "PLOP3" | "IABS" | "POPC" | "FSEL" | "FSETP"
            | "FMNMX" | "CS2R" | "P2R" | "R2P" | "BMSK" | "SGXT" => Class::Alu,
            "DFMA" | "DADD" | "DMUL" | "DSETP" | "DMNMX" => Class::Fp64,
            _ if base.starts_with("LD")
                || base.starts_with("ST")
                || base.starts_with("ATOM")
                || base.starts_with("RED")
                || base == "SHFL" =>
            {
                Class::Memory
            }
            _ if base.starts_with('U') => Class::Uniform,
            _ => Class::Other,
        }
    }
}

/// One instruction of a disassembled function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instruction {
    pub(crate) address: u64,
    /// The opcode with its modifiers, the predicate guard removed.
    pub(crate) opcode: String,
    /// A branch's target, when the instruction is a `BRA` with an address.
    pub(crate) target: Option<u64>,
}

/// A function's instructions, in address order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) code: Vec<Instruction>,
}

/// Parses `cuobjdump -sass` output into functions.
pub(crate) fn parse(sass: &str) -> Vec<Function> {
    let mut functions: Vec<Function> = Vec::new();
    for line in sass.lines() {
        if let Some(name) = line.trim().strip_prefix("Function : ") {
            functions.push(Function { name: name.trim().to_string(), code: Vec::new() });
            continue;
        }
        let Some(f) = functions.last_mut() else { continue };
        let Some(rest) = line.trim_start().strip_prefix("/*") else { continue };
        let Some((address, text)) = rest.split_once("*/") else { continue };
        let Ok(address) = u64::from_str_radix(address, 16) else { continue };
        let text = text.split(';').next().unwrap_or("").trim();
        // A guard such as `@P0`, `@!P1` or `@!UPT`.
        let text = match text.strip_prefix('@') {
            Some(guarded) => guarded.split_once(char::is_whitespace).map_or("", |(_, t)| t.trim_start()),
            None => text,
        };
        let Some(opcode) = text.split_whitespace().next() else { continue };
        if opcode.starts_with("NOP") {
            continue;
        }
        let target = (opcode.split('.').next() == Some("BRA"))
            .then(|| text.split([' ', ',']).rev().find_map(|w| w.strip_prefix("0x")))
            .flatten()
            .and_then(|hex| u64::from_str_radix(hex, 16).ok());
        f.code.push(Instruction { address, opcode: opcode.to_string(), target });
    }
    functions
}

/// Counts of a stretch of code by class.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counts(pub(crate) BTreeMap<Class, u64>);

impl Counts {
    pub(crate) fn of(code: &[Instruction]) -> Self {
        let mut counts = BTreeMap::new();
        for i in code {
            *counts.entry(Class::of(&i.opcode)).or_insert(0) += 1;
        }
        Counts(counts)
    }

    fn get(&self, c: Class) -> u64 {
        self.0.get(&c).copied().unwrap_or(0)
    }

    /// The model's cycles a warp and the pipe that bounds them.
    pub(crate) fn model(&self) -> (u64, &'static str) {
        let issue: u64 = self.0.values().sum();
        let pipes = [
            (issue, "issue"),
            (4 * self.get(Class::FmaWide) + 2 * self.get(Class::Fma), "FMA pipe"),
            (2 * self.get(Class::Alu), "ALU"),
            (4 * self.get(Class::Fp64), "FP64 units"),
        ];
        pipes.into_iter().fold((0, "issue"), |best, p| if p.0 > best.0 { p } else { best })
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for c in Class::ALL {
            let _ = write!(out, "{} {}  ", c.name(), self.get(c));
        }
        let (cycles, bound) = self.model();
        let _ = write!(out, "\n    model: {cycles} cycles a warp, bound by the {bound}");
        out
    }
}

/// The loops of `f` that hold no other loop, as index ranges into its code (target to branch).
pub(crate) fn innermost_loops(f: &Function) -> Vec<std::ops::Range<usize>> {
    let index_of = |address: u64| f.code.iter().position(|i| i.address == address);
    let loops: Vec<std::ops::Range<usize>> = f
        .code
        .iter()
        .enumerate()
        .filter_map(|(at, i)| {
            // A branch to itself is the trap after the exit, not work.
            let start = index_of(i.target.filter(|&t| t < i.address)?)?;
            Some(start..at + 1)
        })
        .collect();
    let holds = |outer: &std::ops::Range<usize>, inner: &std::ops::Range<usize>| {
        outer != inner && outer.start <= inner.start && inner.end <= outer.end
    };
    let mut inner: Vec<_> = loops.iter().filter(|l| !loops.iter().any(|o| holds(l, o))).cloned().collect();
    inner.sort_by_key(|l| l.start);
    inner.dedup();
    inner
}

fn cuobjdump_in_venv(root: &Path) -> PathBuf {
    ptx::cuda_bin_in_venv(root, "sass-venv").join("cuobjdump")
}

fn works(tool: &Path) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Finds cuobjdump, installing it from PyPI when none is available.
fn cuobjdump(root: &Path) -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("CUZK_CUOBJDUMP") {
        return Ok(PathBuf::from(p));
    }
    if works(Path::new("cuobjdump")) {
        return Ok(PathBuf::from("cuobjdump"));
    }
    let local = cuobjdump_in_venv(root);
    if works(&local) && local.with_file_name("nvdisasm").exists() {
        return Ok(local);
    }
    ptx::install_wheels(root, "sass-venv", &SASS_PACKAGES, CUOBJDUMP_VERSION)?;
    let local = cuobjdump_in_venv(root);
    if works(&local) {
        Ok(local)
    } else {
        Err(format!("cuobjdump not found at {} after install", local.display()))
    }
}

/// Compiles, disassembles and reports; `args` are `--module NAME` and kernel name filters.
pub(crate) fn sass(root: &Path, args: &[String]) -> Result<(), String> {
    let (mut module, mut filters) = (None, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--module" => {
                module = Some(it.next().ok_or("--module needs a file name, e.g. field_test")?.clone())
            }
            flag if flag.starts_with('-') => return Err(format!("unknown flag `{flag}`")),
            word => filters.push(word.to_string()),
        }
    }
    let files: Vec<PathBuf> = ptx::entry_files(root)?
        .into_iter()
        .filter(|f| module.as_deref().is_none_or(|m| f.file_stem().is_some_and(|s| s == m)))
        .collect();
    if files.is_empty() {
        return Err(format!("no kernel file kernels/*/{}.cu", module.unwrap_or_default()));
    }
    let (nvcc, objdump) = (ptx::nvcc(root)?, cuobjdump(root)?);
    let tmp = std::env::temp_dir().join(format!("cuzk-sass-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let mut shown = 0;
    let result: Result<(), String> = files.iter().try_for_each(|file| {
        let (cubin, compiled) = ptx::cubin(&nvcc, root, file, &tmp)?;
        let resources = ptx::resources(&String::from_utf8_lossy(&compiled.stderr));
        let mut dump = Command::new(&objdump);
        // cuobjdump runs nvdisasm: the one beside it first.
        if let Some(dir) = objdump.parent().filter(|d| !d.as_os_str().is_empty()) {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let paths = std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&path));
            dump.env("PATH", std::env::join_paths(paths).map_err(|e| e.to_string())?);
        }
        let out = ptx::run(dump.arg("-sass").arg(&cubin))?;
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        for f in parse(&String::from_utf8_lossy(&out.stdout)) {
            if !filters.is_empty() && !filters.iter().any(|w| f.name.contains(w.as_str())) {
                continue;
            }
            shown += 1;
            println!("{stem}: {} ({} instructions)", f.name, f.code.len());
            for (_, line) in resources.iter().filter(|(name, _)| *name == f.name) {
                println!("  {line}");
            }
            println!("  whole kernel: {}", Counts::of(&f.code).render());
            for l in innermost_loops(&f) {
                let (from, to) = (f.code[l.start].address, f.code[l.end - 1].address);
                println!(
                    "  loop {from:#06x}..{to:#06x} ({} instructions): {}",
                    l.len(),
                    Counts::of(&f.code[l]).render()
                );
            }
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&tmp);
    result?;
    if shown == 0 {
        return Err(format!("no kernel's name contains any of {filters:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SASS: &str = "
        Function : k
        /*0000*/                   LDC R1, c[0x0][0x28] ;          /* 0x00000a00ff017b82 */
                                                                    /* 0x000fe20000000800 */
        /*0010*/                   IMAD.WIDE.U32 R2, R3, R4, RZ ;  /* 0x0 */
        /*0020*/                   IMAD.HI.U32 R5, R3, R4, RZ ;    /* 0x0 */
        /*0030*/                   IADD3 R6, P0, R2, R5, RZ ;      /* 0x0 */
        /*0040*/                   DFMA R8, R10, R12, R14 ;        /* 0x0 */
        /*0050*/              @!P0 BRA P1, 0x20 ;                  /* 0x0 */
        /*0060*/                   IMAD.X R7, RZ, RZ, R7, P0 ;     /* 0x0 */
        /*0070*/               @P1 BRA 0x10 ;                      /* 0x0 */
        /*0080*/                   BRA 0x90 ;                      /* 0x0 */
        /*0090*/                   EXIT ;                          /* 0x0 */
        /*00a0*/                   NOP;                            /* 0x0 */
        Function : empty
    ";

    #[test]
    fn instructions_are_classed_by_the_unit_that_runs_them() {
        assert_eq!(Class::of("IMAD.WIDE.U32"), Class::FmaWide);
        assert_eq!(Class::of("IMAD.HI.U32"), Class::FmaWide);
        assert_eq!(Class::of("IMAD.X"), Class::Fma);
        assert_eq!(Class::of("IMAD.MOV.U32"), Class::Fma);
        assert_eq!(Class::of("IADD3.X"), Class::Alu);
        assert_eq!(Class::of("DFMA.RM"), Class::Fp64);
        assert_eq!(Class::of("LDG.E.128"), Class::Memory);
        assert_eq!(Class::of("STS.64"), Class::Memory);
        assert_eq!(Class::of("UIADD3"), Class::Uniform);
        assert_eq!(Class::of("BRA"), Class::Other);
        assert_eq!(Class::of("I2F.U32.RP"), Class::Other);
    }

    #[test]
    fn the_innermost_loop_is_found_and_modelled() {
        let functions = parse(SASS);
        assert_eq!(functions.len(), 2);
        let f = &functions[0];
        assert_eq!(f.name, "k");
        assert_eq!(f.code.len(), 10, "the NOP and the encoding lines are not instructions");
        assert_eq!(f.code[5].opcode, "BRA");
        assert_eq!(f.code[5].target, Some(0x20), "a guarded branch with a predicate operand");
        // Two backward branches: 0x20..0x50 inside 0x10..0x70; the forward one is no loop.
        let loops = innermost_loops(f);
        assert_eq!(loops, vec![2..6]);
        let counts = Counts::of(&f.code[loops[0].clone()]);
        assert_eq!(counts.get(Class::FmaWide), 1);
        assert_eq!(counts.get(Class::Alu), 1);
        assert_eq!(counts.get(Class::Fp64), 1);
        assert_eq!(counts.get(Class::Other), 1);
        // Issue 4 cycles; the FMA pipe 4 (one wide product), the FP64 units 4 (one DFMA): a tie is
        // called issue-bound.
        assert_eq!(counts.model(), (4, "issue"));
        let whole = Counts::of(&f.code);
        // Issue 10, FMA pipe 4 + 4 + 2 = 10.
        assert_eq!(whole.model().0, 10);
        assert!(functions[1].code.is_empty());
    }
}
