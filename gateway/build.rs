//! Compiles the Open Inference Protocol's gRPC service (proto/grpc_predict_v2.proto) into the server `grpc`
//! serves; `bytes` fields become `Bytes`, so tensors are not copied out of the decoded message.

fn main() {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(false)
        .bytes(".")
        .compile_protos(&["proto/grpc_predict_v2.proto"], &["proto"])
        .expect("compiling proto/grpc_predict_v2.proto (protoc comes with `make setup`)");
}
