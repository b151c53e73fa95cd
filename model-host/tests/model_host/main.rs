//! jig-model-host's integration tests, one binary: ONNX Runtime sessions on the models `make setup`
//! generates, instances, and GPU placements on a machine without a GPU.

mod gpu_binding;
mod instance;
mod onnx;
