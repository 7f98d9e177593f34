//! The README's example is `examples/alone.rs`, word for word, so what the CPU suite compiles (the
//! README as a doctest) is what the GPU suite runs (the example, in `tests/gpu.rs`).

#[test]
fn the_readme_example_is_the_alone_example() {
    let readme = include_str!("../README.md");
    let example = include_str!("../examples/alone.rs");
    let start =
        readme.find("```rust,no_run\n").expect("the README has the example") + "```rust,no_run\n".len();
    let block = &readme[start..];
    let block = &block[..block.find("```").expect("the block ends")];
    assert_eq!(block, example, "README.md's example and examples/alone.rs differ");
}
