"""KServe's Python SDK (`kserve`, from PyPI: its v2 gRPC client) against jig's Open Inference Protocol over gRPC.

Usage: PYTHONPATH=.jig/python-clients python3 tests/oip/kserve_grpc_client.py HOST:PORT MODEL [TOKEN]
HOST:PORT is the gateway's `--grpc-listen`; MODEL a slot serving the `mixed` test model (y = x * ids). Prints
`ok` when every check passes.
"""

import asyncio
import sys

import grpc
import numpy as np
from kserve import InferenceGRPCClient, InferInput, InferRequest

url, model = sys.argv[1], sys.argv[2]
headers = [("authorization", f"Bearer {sys.argv[3]}")] if len(sys.argv) > 3 else None


async def main():
    client = InferenceGRPCClient(url, retries=0, timeout=30)
    assert await client.is_server_live(), "not live"
    assert await client.is_server_ready(), "not ready"
    assert await client.is_model_ready(model, headers=headers), "model not ready"
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 2.5
    ids = np.arange(8, dtype=np.int64).reshape(2, 4)
    for binary in (False, True):  # typed `contents`, then `raw_input_contents`
        inputs = [InferInput("x", [2, 4], "FP32"), InferInput("ids", [2, 4], "INT64")]
        inputs[0].set_data_from_numpy(x, binary_data=binary)
        inputs[1].set_data_from_numpy(ids, binary_data=binary)
        response = await client.infer(InferRequest(model_name=model, infer_inputs=inputs, request_id="k1"), headers=headers)
        y = response.outputs[0].as_numpy()
        assert response.outputs[0].name == "y" and np.array_equal(y.reshape(2, 4), x * ids.astype(np.float32)), (binary, y)
        assert response.id == "k1", response.id
    bad = [InferInput("x", [2, 4], "FP32")]
    bad[0].set_data_from_numpy(x, binary_data=False)
    try:
        await client.infer(InferRequest(model_name=model, infer_inputs=bad), headers=headers)
        raise AssertionError("a request without `ids` was accepted")
    except grpc.aio.AioRpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "input `ids` is missing" in e.details(), e
    await client.close()
    print("ok")


asyncio.run(main())
