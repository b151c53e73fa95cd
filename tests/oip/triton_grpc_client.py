"""Triton's own gRPC client (`tritonclient.grpc`, from PyPI) against jig's Open Inference Protocol over gRPC.

Usage: PYTHONPATH=.jig/python-clients python3 tests/oip/triton_grpc_client.py HOST:PORT MODEL [TOKEN]
HOST:PORT is the gateway's `--grpc-listen`; MODEL a slot serving the `mixed` test model (y = x * ids). Prints
`ok` when every check passes.
"""

import sys

import numpy as np
import tritonclient.grpc as grpc
from tritonclient.utils import InferenceServerException

url, model = sys.argv[1], sys.argv[2]
headers = {"authorization": f"Bearer {sys.argv[3]}"} if len(sys.argv) > 3 else None

client = grpc.InferenceServerClient(url=url)

assert client.is_server_live(), "not live"
assert client.is_server_ready(), "not ready"
assert client.is_model_ready(model, headers=headers), "model not ready"
server = client.get_server_metadata()
assert server.name == "jig" and "binary_tensor_data" in server.extensions, server
metadata = client.get_model_metadata(model, headers=headers, as_json=True)
inputs = {t["name"]: t for t in metadata["inputs"]}
assert inputs["x"]["datatype"] == "FP32" and inputs["x"]["shape"] == ["-1", "4"], metadata
assert inputs["ids"]["datatype"] == "INT64", metadata
assert [t["name"] for t in metadata["outputs"]] == ["y"], metadata

# Triton's configuration, statistics and repository RPCs.
config = client.get_model_config(model, headers=headers, as_json=True)["config"]
assert int(config["max_batch_size"]) >= 1 and config["platform"] == "onnxruntime_onnx", config
assert {"name": "x", "data_type": "TYPE_FP32", "dims": ["4"]} in config["input"], config
assert config["instance_group"][0]["kind"] == "KIND_CPU", config
index = client.get_model_repository_index(headers=headers, as_json=True)["models"]
assert {"name": model, "version": "1", "state": "READY"}.items() <= next(m for m in index if m["name"] == model).items()
before = client.get_inference_statistics(model, headers=headers, as_json=True)["model_stats"][0]

x = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
ids = np.arange(12, dtype=np.int64).reshape(3, 4) - 5
tensors = [grpc.InferInput("x", [3, 4], "FP32"), grpc.InferInput("ids", [3, 4], "INT64")]
tensors[0].set_data_from_numpy(x)
tensors[1].set_data_from_numpy(ids)
result = client.infer(model, tensors, outputs=[grpc.InferRequestedOutput("y")], request_id="g1", headers=headers)
y = result.as_numpy("y")
assert y.shape == (3, 4) and np.array_equal(y, x * ids.astype(np.float32)), y
assert result.get_response().id == "g1", result.get_response()

after = client.get_inference_statistics(model, headers=headers, as_json=True)["model_stats"][0]
assert int(after["inference_count"]) >= int(before.get("inference_count", 0)) + 3, (before, after)

# Model control over gRPC: unloaded, the model is not ready; loaded again, it answers.
client.unload_model(model, headers=headers)
assert not client.is_model_ready(model, headers=headers), "an unloaded model is ready"
client.load_model(model, headers=headers)
assert client.is_model_ready(model, headers=headers), "a loaded model is not ready"

# Refusals come back as the client's exception with the gateway's message and the protocol's status.
try:
    bad = grpc.InferInput("x", [3, 4], "INT64")
    bad.set_data_from_numpy(ids)
    client.infer(model, [bad, tensors[1]], headers=headers)
    raise AssertionError("a wrong datatype was accepted")
except InferenceServerException as e:
    assert "is FP32, not INT64" in str(e) and e.status() == "StatusCode.INVALID_ARGUMENT", (str(e), e.status())
try:
    client.get_model_metadata(model + "-nope", headers=headers)
    raise AssertionError("an unknown model was found")
except InferenceServerException as e:
    assert "unknown model" in str(e) and e.status() == "StatusCode.NOT_FOUND", (str(e), e.status())
if headers:
    try:
        client.infer(model, tensors)
        raise AssertionError("a call without the token was served")
    except InferenceServerException as e:
        assert e.status() == "StatusCode.UNAUTHENTICATED", (str(e), e.status())
print("ok")
