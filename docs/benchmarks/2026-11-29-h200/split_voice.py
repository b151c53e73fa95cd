"""Cut Piper's voice in two where its decoder starts, for voice.py's `split` configurations (staged by stage.sh).

On an H200 a line took as much host CPU on CUDA as wall time (123 ms; 84 ms on one CPU thread): the graph has 2,755
nodes, each a launch. They are not alike. On one Zen 5 core (ONNX Runtime's profiler, 2026-12-01), the decoder
(`/dec/`, a HiFi-GAN: 68 nodes, 23 of them convolutions at the audio's rate) takes 61% of a line's kernel time;
the text encoder, the duration predictor and the flow (2,687 nodes at the phonemes' or frames' rate) take the rest.
So the front may cost a core less than the whole line does on CUDA, and the decoder little host CPU a line on
the GPU. Both parts compute exactly what the whole does (the same audio, to the bit, with the noise scales at 0).

Writes STEM.front.onnx (the model's inputs to the decoder's input) and STEM.back.onnx (that tensor to the model's
output) beside MODEL.
Usage: PYTHONPATH=.jig/python python3 split_voice.py MODEL.onnx"""
import sys

import onnx
import onnx.utils


def decoder_input(model):
    """The one tensor from outside `/dec/` that the decoder reads."""
    made_by = {out: node.name for node in model.graph.node for out in node.output}
    weights = {w.name for w in model.graph.initializer}
    inputs = {i for node in model.graph.node if node.name.startswith("/dec/") for i in node.input
              if i and i not in weights and not made_by.get(i, "").startswith("/dec/")}
    if len(inputs) != 1:
        raise SystemExit(f"expected one tensor into the decoder (`/dec/` nodes), found {sorted(inputs)}")
    return inputs.pop()


if __name__ == "__main__":
    path = sys.argv[1]
    model = onnx.load(path, load_external_data=False)
    cut = decoder_input(model)
    names = lambda values: [v.name for v in values]
    stem = path.removesuffix(".onnx")
    onnx.utils.extract_model(path, f"{stem}.front.onnx", names(model.graph.input), [cut])
    onnx.utils.extract_model(path, f"{stem}.back.onnx", [cut], names(model.graph.output))
    print(f"{stem}.front.onnx and {stem}.back.onnx, cut at {cut}")
