"""Triton's own HTTP client (`tritonclient[http]`, from PyPI) against jig's Open Inference Protocol.

Usage: PYTHONPATH=.jig/python-clients python3 tests/oip/triton_client.py HOST:PORT MODEL [TOKEN]
MODEL is a slot serving the `mixed` test model (y = x * ids). Prints `ok` when every check passes.
"""

import sys

import numpy as np
import tritonclient.http as http
from tritonclient.utils import InferenceServerException

url, model = sys.argv[1], sys.argv[2]
token = sys.argv[3] if len(sys.argv) > 3 else None


def headers():
    """A fresh dict per call: the client adds its own headers (Inference-Header-Content-Length) to the one given."""
    return {"Authorization": f"Bearer {token}"} if token else None


client = http.InferenceServerClient(url=url)

assert client.is_server_live(), "not live"
assert client.is_server_ready(), "not ready"
assert client.is_model_ready(model, headers=headers()), "model not ready"
server = client.get_server_metadata()
assert server["name"] == "jig" and "binary_tensor_data" in server["extensions"], server
metadata = client.get_model_metadata(model, headers=headers())
inputs = {t["name"]: t for t in metadata["inputs"]}
assert inputs["x"]["datatype"] == "FP32" and inputs["x"]["shape"] == [-1, 4], metadata
assert inputs["ids"]["datatype"] == "INT64", metadata
assert [t["name"] for t in metadata["outputs"]] == ["y"], metadata
assert client.get_model_metadata(model, model_version="1", headers=headers()) == metadata

# Triton's repository, configuration and statistics extensions.
index = client.get_model_repository_index(headers=headers())
assert {"name": model, "version": "1", "state": "READY", "reason": ""} in index, index
config = client.get_model_config(model, headers=headers())
assert config["max_batch_size"] >= 1 and config["platform"] == "onnxruntime_onnx", config
assert {"name": "x", "data_type": "TYPE_FP32", "dims": [4]} in config["input"], config
assert config["instance_group"] and config["instance_group"][0]["kind"] == "KIND_CPU", config
before = client.get_inference_statistics(model, headers=headers())["model_stats"][0]

x = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
ids = np.arange(12, dtype=np.int64).reshape(3, 4) - 5
for binary in (True, False):
    tensors = [http.InferInput("x", [3, 4], "FP32"), http.InferInput("ids", [3, 4], "INT64")]
    tensors[0].set_data_from_numpy(x, binary_data=binary)
    tensors[1].set_data_from_numpy(ids, binary_data=binary)
    wanted = [http.InferRequestedOutput("y", binary_data=binary)]
    version = "1" if binary else ""  # the versioned path, then the plain one
    result = client.infer(model, tensors, model_version=version, outputs=wanted, request_id="r1", headers=headers())
    y = result.as_numpy("y")
    assert y.shape == (3, 4) and np.array_equal(y, x * ids.astype(np.float32)), (binary, y)
    assert result.get_response()["id"] == "r1", result.get_response()

after = client.get_inference_statistics(model, headers=headers())["model_stats"][0]
assert after["name"] == model and after["inference_count"] >= before["inference_count"] + 6, (before, after)
assert after["inference_stats"]["success"]["count"] >= before["inference_stats"]["success"]["count"] + 2, after
assert client.get_inference_statistics(headers=headers())["model_stats"], "no statistics of every model"

# Model control: an unloaded slot has no instance (503) and is not ready, the server is; a load brings it back.
client.unload_model(model, headers=headers())
assert not client.is_model_ready(model, headers=headers()), "an unloaded model is ready"
assert client.is_server_ready(), "an unloaded model made the server unready"
try:
    client.infer(model, tensors, headers=headers())
    raise AssertionError("an unloaded model answered")
except InferenceServerException as e:
    assert "no running instance" in str(e), str(e)
unloaded = [m for m in client.get_model_repository_index(headers=headers()) if m["name"] == model]
assert unloaded[0]["state"] == "UNAVAILABLE" and "unloaded" in unloaded[0]["reason"], unloaded
client.load_model(model, headers=headers())
assert client.is_model_ready(model, headers=headers()), "a loaded model is not ready"
assert np.array_equal(client.infer(model, tensors, headers=headers()).as_numpy("y"), x * ids.astype(np.float32))

# Malformed requests come back as the client's exception carrying the gateway's message.
try:
    bad = http.InferInput("x", [3, 4], "INT64")
    bad.set_data_from_numpy(ids)
    client.infer(model, [bad, tensors[1]], headers=headers())
    raise AssertionError("a wrong datatype was accepted")
except InferenceServerException as e:
    assert "is FP32, not INT64" in str(e), str(e)
try:
    client.get_model_metadata(model + "-nope", headers=headers())
    raise AssertionError("an unknown model was found")
except InferenceServerException as e:
    assert "unknown model" in str(e), str(e)
print("ok")
