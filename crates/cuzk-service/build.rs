//! Generates the gRPC code from `proto/cuzk.proto` with the protoc that ships in
//! `protoc-bin-vendored`, so a machine needs nothing installed to build the service.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure().compile_with_config(config, &["proto/cuzk.proto"], &["proto"])?;
    Ok(())
}
