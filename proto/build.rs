//! Compiles `jobrelay/v1/relay.proto` with a pure-Rust protobuf compiler, so a
//! build needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "jobrelay/v1/relay.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["."])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // The RPC is named Connect; the generated `connect` constructor would clash.
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
