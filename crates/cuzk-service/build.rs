//! Generates the gRPC code from `proto/cuzk.proto` with the protoc that ships in
//! `protoc-bin-vendored`, so a machine needs nothing installed to build the service; and the encoded
//! descriptors the reflection service serves.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        // Undecodable requests are the client's error (INVALID_ARGUMENT), not INTERNAL.
        .codec_path("crate::codec::Codec")
        .file_descriptor_set_path(out.join("cuzk_descriptor.bin"))
        .compile_with_config(config, &["proto/cuzk.proto"], &["proto"])?;
    Ok(())
}
