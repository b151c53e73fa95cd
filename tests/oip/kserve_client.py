"""KServe's Python SDK (`kserve`, from PyPI: its v2 REST client) against jig's Open Inference Protocol.

Usage: PYTHONPATH=.jig/python-clients python3 tests/oip/kserve_client.py HOST:PORT MODEL [TOKEN]
MODEL is a slot serving the `mixed` test model (y = x * ids). Prints `ok` when every check passes.
"""

import asyncio
import sys

import httpx
import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig

base, model = f"http://{sys.argv[1]}", sys.argv[2]
headers = {"Authorization": f"Bearer {sys.argv[3]}"} if len(sys.argv) > 3 else {}


async def main():
    client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=30))
    assert await client.is_server_live(base), "not live"
    assert await client.is_server_ready(base), "not ready"
    assert await client.is_model_ready(base, model, headers=headers), "model not ready"
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 2.5
    ids = np.arange(8, dtype=np.int64).reshape(2, 4)
    for binary in (False, True):
        inputs = [InferInput("x", [2, 4], "FP32"), InferInput("ids", [2, 4], "INT64")]
        inputs[0].set_data_from_numpy(x, binary_data=binary)
        inputs[1].set_data_from_numpy(ids, binary_data=binary)
        request = InferRequest(model_name=model, infer_inputs=inputs, request_id="k1")
        response = await client.infer(base, request, model_name=model, headers=dict(headers))
        y = response.outputs[0].as_numpy()
        assert response.outputs[0].name == "y" and np.array_equal(y, x * ids.astype(np.float32)), (binary, y)
        assert response.id == "k1", response.id
    bad = [InferInput("x", [2, 4], "FP32")]
    bad[0].set_data_from_numpy(x, binary_data=False)
    try:
        await client.infer(base, InferRequest(model_name=model, infer_inputs=bad), model_name=model, headers=dict(headers))
        raise AssertionError("a request without `ids` was accepted")
    except httpx.HTTPStatusError as e:
        assert e.response.status_code == 400 and "input `ids` is missing" in str(e), str(e)
    await client.close()
    print("ok")


asyncio.run(main())
