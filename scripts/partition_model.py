#!/usr/bin/env python3
"""PPipe's DNN pre-partitioning (PPipe §5.2): cut an ONNX model into N blocks of consecutive layers of about
equal runtime, each block an ONNX model of its own, so that a planner can serve the model split into partitions
(runs of consecutive blocks, whose latency is the sum of their blocks') across pools of segments.

A layer is an ONNX node, in topological order. A block may end only at a valid cut: a place where exactly one
activation produced before it is used after it (or is a graph output), so that every block has one activation
input (the first block takes the model's inputs) and one activation output, and where ONNX shape inference gives
that activation a fully known shape (every dimension a number or a named dimension such as the batch): the
blocks declare it as their input and output, and the ONNX checker requires a shape there. Initializers, the
outputs of Constant nodes and of nodes computed from those alone are weights, not activations: each block keeps
a copy of the ones it uses. Skip connections that span a place (residual blocks, feature pyramids) make it no cut.

The cuts are chosen from a fixed cost model, not from timings, so that the same model and arguments give the same
blocks, byte for byte, on any machine and however busy it is. Each layer's runtime is estimated from the shapes of
the tensors it reads and writes at the given input (batch 1 unless --shape says otherwise; ONNX shape inference,
and one run of the model for the shapes inference leaves open): its FLOPs (convolutions, matrix products) at 100
GFLOP/s, or at 8 GFLOP/s for grouped and depthwise convolutions, plus the bytes of its inputs, weights and
outputs at 25 GB/s, plus 8 µs. The rates are those of one CPU core running ONNX Runtime with graph optimisations
off (so that every node runs as itself), fitted to the PP-OCRv4 recognizer's layers: its estimated total is
within 10% of its measured one (45 ms against 40-43), per layer the correlation is 0.99; on the detector and the
angle classifier it is 0.97, their totals 20% under and 75% over. The estimate serves to balance the blocks, and
`ms` below is the estimate, not a measurement: served with optimisations on, the blocks run faster, and `jig
profile` measures them where they are served. PPipe profiles on one selected GPU type and finds that the choice
makes little difference to the cuts.

Usage: PYTHONPATH=.jig/python python3 scripts/partition_model.py MODEL.onnx OUT_DIR [--blocks 10]
           [--shape NAME=d1,d2,...] [--partitions B1,B2,...] [--bundle DIR] [--check]

--shape gives an input's shape where the model leaves dimensions open; an open first dimension (the batch)
is 1 unless given. (--runs N, which set how often earlier versions timed each layer, is accepted and ignored.)
Writes OUT_DIR/<stem>.block<i>.onnx (i from 0) and OUT_DIR/<stem>.blocks.json:

    model, cost_model (its rates, input shapes), layers, valid_cuts (those with a shape), cuts_without_shape,
    blocks_asked, total_ms, batch_dynamic,
    blocks: [{index, file, layers: [first, end), inputs and outputs: [{name, dtype, shape}],
              ms, output_bytes_per_row}]

Shapes are those at the estimated input (batch 1, or the first dimension --shape gives). output_bytes_per_row
is the size of a block's output for one row, which a planner turns into transfer latency. Every block (and
partition) passes the ONNX checker before anything is written; one that does not stops the script (exit 1),
naming the model, the block and its cuts, and the command that reruns it.
--bundle DIR also writes a bundle of the blocks for `jig profile` and PPipe: DIR/jig.toml, a chain of `forward`
tasks, one slot per block (`block0`, `block1`, …, the block files in DIR/models, the glue from
target/wasm32-wasip2/release/forward.wasm, `make functions` builds it), and DIR/ppipe.toml, a `[ppipe]` spec over
the profile table `jig profile DIR --segment …` writes (its SLO five times the blocks' estimated total, as PPipe
sets its SLOs; one class, this machine's cores on `cpu:1` segments: add a class per kind of segment profiled).

--partitions also writes OUT_DIR/<stem>.part<p>.onnx, the runs of blocks between the given block indices (`--partitions 5`
on 10 blocks: blocks 0-4 and 5-9), as a planned pipeline serves them, listed in the json as `partitions`: [{index,
file, blocks: [first, end)}]. --check runs the
whole model and the chained blocks on random inputs (batch 1, and 4 where the batch dimension is open) and
exits 1, naming the block, unless every block's output matches the model's own value of that tensor within
1e-4 (relative and absolute). A missing or unreadable model, a bad --shape, a model without a valid cut or
--blocks < 1 exit 2 with a message.
"""

import argparse
import heapq
import json
import math
import os
import re
import shlex
import shutil
import sys

import numpy as np
import onnx
from onnx import helper

TOLERANCE = 1e-4

# The cost model (see the module docs): one CPU core, ONNX Runtime, graph optimisations off.
DENSE_FLOPS_PER_S = 100e9  # convolutions of one group, matrix products
GROUPED_FLOPS_PER_S = 8e9  # grouped and depthwise convolutions
BYTES_PER_S = 25e9  # each tensor a layer reads (weights included) or writes
LAYER_S = 8e-6  # each layer's own overhead
# Convolutions: the index of the weight input. Matrix products: FLOPs from the first input's last dimension.
CONVOLUTIONS = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3, "ConvTranspose": 1}
MATRIX_PRODUCTS = {"MatMul", "MatMulInteger", "QLinearMatMul", "FusedMatMul", "Gemm"}


class Refused(Exception):
    """A request this script cannot serve: the message says what to do; exit 2."""


class Failed(Exception):
    """The script could not do what was asked of a valid request (a block the ONNX checker rejects): exit 1."""


def rerun_command():
    """The command line that reruns this script as it was run."""
    env = f"PYTHONPATH={shlex.quote(os.environ['PYTHONPATH'])} " if os.environ.get("PYTHONPATH") else ""
    return f"{env}python3 {shlex.join(sys.argv)}"


def load(path):
    if not os.path.isfile(path):
        raise Refused("no such model file; give the path of an ONNX model (`make setup` writes jig's into .jig/models)")
    try:
        return onnx.load(path)
    except Exception as e:  # protobuf raises its own DecodeError, among others
        raise Refused(f"not an ONNX model ({e}); give the path of an ONNX model") from None


def node_inputs(node):
    """The tensors a node reads, with those its subgraphs (If, Loop, Scan) read from the enclosing graph."""
    names = [name for name in node.input if name]
    for attr in node.attribute:
        for graph in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            inner = {t.name for t in graph.input} | {t.name for t in graph.initializer}
            inner |= {out for n in graph.node for out in n.output}
            names += [name for n in graph.node for name in node_inputs(n) if name not in inner]
    return names


def topological(graph):
    """The indices of the graph's nodes in topological order, keeping the file's order where it is free to."""
    producer = {out: i for i, node in enumerate(graph.node) for out in node.output if out}
    waiting, users = [0] * len(graph.node), [[] for _ in graph.node]
    for i, node in enumerate(graph.node):
        for name in set(node_inputs(node)):
            if name in producer:
                waiting[i] += 1
                users[producer[name]].append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in users[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(graph.node):
        raise Refused("the graph has a cycle; it is not a valid ONNX model")
    return order


def split_weights(order, graph):
    """(layers, weights): the nodes (indices, in order) that compute on activations, and the names of the weight
    tensors."""
    weights = {t.name for t in graph.initializer}
    layers = []
    for i in order:
        node = graph.node[i]
        if node.op_type == "Constant" or (node.input and all(name in weights for name in node_inputs(node))):
            weights.update(out for out in node.output if out)
        else:
            layers.append(i)
    return layers, weights


def fully_shaped(info):
    """Whether a value info gives a tensor a shape with every dimension known: a number or a named dimension (some
    exports write an open one as -1)."""
    if info is None or not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
        return False
    return all(d.HasField("dim_value") or d.dim_param for d in info.type.tensor_type.shape.dim)


def agrees(info, shape):
    """Whether a value info's shape is that of a tensor of `shape`: the same rank, the same numbered dimensions."""
    dims = info.type.tensor_type.shape.dim
    return len(dims) == len(shape) and all(
        not d.HasField("dim_value") or d.dim_value < 0 or d.dim_value == n for d, n in zip(dims, shape)
    )


def valid_cuts(layers, weights, graph):
    """{k: the tensor crossing} for the places k (a block ends before layers[k]) where exactly one activation
    crosses, one that a layer produced."""
    produced = {t.name: -1 for t in graph.input if t.name not in weights}
    last_use = {}
    for k, node in enumerate(graph.node[i] for i in layers):
        for out in node.output:
            if out:
                produced[out] = k
        for name in node_inputs(node):
            if name not in weights:
                last_use[name] = k
    for t in graph.output:
        last_use[t.name] = len(layers)
    crossing = [[] for _ in range(len(layers) + 1)]
    for name, first in produced.items():
        for k in range(first + 1, last_use.get(name, first) + 1):
            crossing[k].append(name)
    return {k: crossing[k][0] for k in range(1, len(layers)) if len(crossing[k]) == 1 and produced[crossing[k][0]] >= 0}


def input_shapes(graph, weights, given):
    """Each model input's concrete shape: --shape where given, else its static dimensions (an open first one
    is the batch: 1)."""
    names = [t.name for t in graph.input if t.name not in weights]
    unknown = set(given) - set(names)
    if unknown:
        raise Refused(
            f"--shape names {', '.join(sorted(unknown))}, no input of the model; its inputs: {', '.join(names)}"
        )
    shapes = {}
    for t in graph.input:
        if t.name in weights:
            continue
        dims = t.type.tensor_type.shape.dim
        if t.name in given:
            if len(given[t.name]) != len(dims):
                raise Refused(f"--shape {t.name}: {len(given[t.name])} dimensions given; the input has {len(dims)}")
            shapes[t.name] = given[t.name]
            continue
        shape = []
        for axis, d in enumerate(dims):
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            elif axis == 0:
                shape.append(1)
            else:
                raise Refused(
                    f"input `{t.name}` has an open dimension {axis}; give its shape with --shape {t.name}=d1,d2,..."
                )
        shapes[t.name] = shape
    return shapes


def batch_dynamic(graph, weights):
    dims = [t.type.tensor_type.shape.dim for t in graph.input if t.name not in weights]
    return all(d and not d[0].HasField("dim_value") for d in dims)


def random_feeds(graph, weights, shapes, batch, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for t in graph.input:
        if t.name in weights:
            continue
        dtype = helper.tensor_dtype_to_np_dtype(t.type.tensor_type.elem_type)
        shape = [batch] + list(shapes[t.name][1:])
        if np.issubdtype(dtype, np.floating):
            feeds[t.name] = rng.uniform(-1, 1, shape).astype(dtype)
        else:
            feeds[t.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def session(model, options=None):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def tensor_sizes(model, feeds, needed, wanted):
    """{name: (shape, numpy dtype)} of the model's tensors at the input `feeds`: initializers, what ONNX shape
    inference with the inputs' shapes fixed gives in full, and, from one run of the model on `feeds`, those of the
    tensors `needed` it leaves open and those `wanted` (whose shapes are then the run's). The values do not
    matter, so the shapes are the same on every run."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for t in fixed.graph.input:
        if t.name in feeds:
            for d, n in zip(t.type.tensor_type.shape.dim, feeds[t.name].shape):
                d.Clear()
                d.dim_value = n
    inferred = fixed
    for options in [{"data_prop": True}, {}]:
        try:
            inferred = onnx.shape_inference.infer_shapes(fixed, **options)
            break
        except Exception:  # inference that fails leaves the shapes to the run below
            continue
    sizes = {}
    for t in model.graph.initializer:
        sizes[t.name] = (tuple(t.dims), helper.tensor_dtype_to_np_dtype(t.data_type))
    g = inferred.graph
    for info in list(g.input) + list(g.value_info) + list(g.output):
        tensor = info.type.tensor_type
        if (
            info.type.HasField("tensor_type")
            and tensor.HasField("shape")
            and tensor.elem_type
            and all(d.HasField("dim_value") and d.dim_value >= 0 for d in tensor.shape.dim)
        ):
            dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
            sizes[info.name] = (tuple(d.dim_value for d in tensor.shape.dim), dtype)
    for name, value in feeds.items():
        sizes[name] = (value.shape, value.dtype)
    run = list(dict.fromkeys([name for name in needed if name not in sizes] + list(wanted)))
    if run:
        probe = session(with_outputs(model, run, {}))
        for out, value in zip([o.name for o in probe.get_outputs()], probe.run(None, feeds)):
            if isinstance(value, np.ndarray):
                sizes[out] = (tuple(value.shape), value.dtype)
    return sizes


def attribute(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def layer_ms(node, sizes):
    """A layer's estimated runtime in ms, from the cost model (see the module docs) and the tensors' `sizes`."""
    def elements(name):
        return math.prod(sizes[name][0]) if name in sizes else 0

    def shape(name):
        return sizes[name][0] if name in sizes else None

    tensors = [name for name in list(node.input) + list(node.output) if name]
    moved = sum(elements(name) * sizes[name][1].itemsize for name in tensors if name in sizes)
    flops, rate = 0, DENSE_FLOPS_PER_S
    op = node.op_type
    if op in CONVOLUTIONS and len(node.input) > CONVOLUTIONS[op] and shape(node.input[CONVOLUTIONS[op]]):
        w = shape(node.input[CONVOLUTIONS[op]])
        # Each output element of a convolution sums over its input channels (of its group) and the kernel; a
        # transposed one spreads each input element over its output channels and the kernel.
        per = math.prod(w[1:])
        flops = 2 * per * (elements(node.input[0]) if op == "ConvTranspose" else elements(node.output[0]))
        if attribute(node, "group", 1) != 1:
            rate = GROUPED_FLOPS_PER_S
    elif op in MATRIX_PRODUCTS and shape(node.input[0]):
        a = shape(node.input[0])
        k = (a[0] if attribute(node, "transA", 0) else a[-1]) if op == "Gemm" and len(a) == 2 else (a[-1] if a else 1)
        flops = 2 * elements(node.output[0]) * k
    return 1000 * (flops / rate + moved / BYTES_PER_S + LAYER_S)


def group(times, cuts, n):
    """PPipe's greedy grouping: from the first layer, extend a block (of at least one stretch: the layers up to
    the next valid cut) while adding the next stretch brings its runtime closer to total/N, then start the next
    one. A tie ends the block.
    Each block leaves at least one stretch to every block still to come, and the N-th block takes all that is
    left, so there are exactly min(N, stretches) blocks; the last absorbs what the greedy rule left over.
    Returns (first layer, end layer) per block."""
    bounds = [0] + cuts + [len(times)]
    stretches = [sum(times[a:b]) for a, b in zip(bounds, bounds[1:])]
    n = min(n, len(stretches))
    target = sum(stretches) / n
    blocks, start = [], 0
    while len(blocks) < n - 1:
        acc, end = stretches[start], start + 1
        room = len(stretches) - (n - 1 - len(blocks))
        while end < room and abs(acc + stretches[end] - target) < abs(acc - target):
            acc += stretches[end]
            end += 1
        blocks.append((start, end))
        start = end
    blocks.append((start, len(stretches)))
    return [(bounds[a], bounds[b]) for a, b in blocks]


def with_outputs(model, names, value_info):
    """The model with the tensors `names` as extra graph outputs (typed by `value_info` where it has them)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    have = {t.name for t in out.graph.output}
    out.graph.output.extend(
        value_info[name] if name in value_info else helper.make_empty_tensor_value_info(name)
        for name in names
        if name not in have
    )
    return out


def tensor_info(name, size):
    shape, dtype = size
    return {"name": name, "dtype": str(dtype), "shape": list(shape)}


def check(model, blocks, boundary, graph, weights, shapes, dynamic, value_info, name):
    """Exit 1 unless the chained blocks compute what the whole model does (see the module docs)."""
    whole = session(model)
    probe = session(with_outputs(model, boundary, value_info))
    sessions = [session(b) for b in blocks]
    outputs = [t.name for t in graph.output]
    for batch in [1, 4] if dynamic else [1]:
        feeds = random_feeds(graph, weights, shapes, batch, seed=batch)
        want = dict(zip([o.name for o in probe.get_outputs()], probe.run(None, feeds)))
        want.update(zip(outputs, whole.run(None, feeds)))
        values = dict(feeds)
        for i, sess in enumerate(sessions):
            got = sess.run(None, {t.name: values[t.name] for t in sess.get_inputs()})
            for out, value in zip([o.name for o in sess.get_outputs()], got):
                expected = want[out]
                if value.shape != expected.shape or not np.allclose(value, expected, rtol=TOLERANCE, atol=TOLERANCE):
                    gap = np.max(np.abs(value - expected)) if value.shape == expected.shape else "shape"
                    sys.exit(
                        f"partition_model: {name}: block {i} ({out}) differs from the whole model at batch {batch}: "
                        f"shape {list(value.shape)} against {list(expected.shape)}, largest difference {gap}"
                    )
                values[out] = value
        print(f"partition_model: {name}: {len(sessions)} chained blocks match the whole model at batch {batch}")


def parse_shapes(items):
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        try:
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise Refused(f"--shape {item}: expected NAME=d1,d2,... with whole numbers") from None
        if not name or any(d < 1 for d in shapes[name]):
            raise Refused(f"--shape {item}: expected NAME=d1,d2,... with a name and positive dimensions")
    return shapes


def partition(args):
    if args.blocks < 1:
        raise Refused(f"--blocks {args.blocks}: ask for at least 1 block")
    model = load(args.model)
    name = os.path.basename(args.model)
    stem = os.path.splitext(name)[0]
    graph = model.graph
    layers, weights = split_weights(topological(graph), graph)
    cuts = valid_cuts(layers, weights, graph)
    if not cuts:
        raise Refused(
            f"no valid cut: no place in its {len(layers)} layers where one activation alone crosses "
            "(skip connections span them all); serve it whole"
        )
    shapes = input_shapes(graph, weights, parse_shapes(args.shape))
    feeds = random_feeds(graph, weights, shapes, shapes[next(iter(shapes))][0], seed=0)
    # Shape inference first: the extractor takes each block's input and output types from the value_info, and a
    # tensor becomes a block's input and output only where that gives it a fully known shape.
    extractor = onnx.utils.Extractor(onnx.shape_inference.infer_shapes(model))
    value_info = extractor.value_infos
    shaped = {k: t for k, t in cuts.items() if fully_shaped(value_info.get(t))}
    needed = [t for i in layers for t in list(graph.node[i].input) + list(graph.node[i].output) if t]
    sizes = tensor_sizes(model, feeds, needed, shaped.values())
    # A cut whose tensor a run shows in another shape than inference declares is no cut either.
    shaped = {k: t for k, t in shaped.items() if t in sizes and agrees(value_info[t], sizes[t][0])}
    if not shaped:
        raise Refused(
            f"no valid cut with a known shape: ONNX shape inference leaves the shape of all {len(cuts)} tensors "
            "that cross a valid cut open; serve it whole"
        )
    if len(shaped) < args.blocks - 1:
        print(
            f"partition_model: {name}: only {len(shaped)} valid cuts with a known shape, so {len(shaped) + 1} "
            f"blocks, not {args.blocks}",
            file=sys.stderr,
        )
    times = [layer_ms(graph.node[i], sizes) for i in layers]
    spans = group(times, sorted(shaped), args.blocks)
    # The tensor crossing each chosen cut: the one output of the block before and the one input of the next.
    boundary = [shaped[end] for _, end in spans[:-1]]
    model_inputs = list(shapes)
    model_outputs = [t.name for t in graph.output]
    ins = [model_inputs] + [[t] for t in boundary]
    outs = [[t] for t in boundary] + [model_outputs]
    rows = shapes[model_inputs[0]][0]

    def checked(proto, what):
        """`proto` once the ONNX checker passes it; else Failed, naming `what` and the command that reruns this."""
        try:
            onnx.checker.check_model(proto)
        except Exception as e:  # ValidationError, and whatever else the checker raises on a malformed graph
            raise Failed(
                f"{what} fails the ONNX checker, so nothing was written: {str(e).strip()}\n"
                f"Rerun it with `{rerun_command()}` (jig's own partitions: `make setup`)"
            ) from None
        return proto

    def cut(index):
        """Where block `index` starts: the model's inputs or the cut before its first layer, and its tensor."""
        return f"the cut before layer {spans[index][0]} (`{boundary[index - 1]}`)" if index else "the model's inputs"

    def ends(index):
        """Where block `index` ends: the cut after its last layer, and its tensor, or the model's outputs."""
        if index < len(boundary):
            return f"the cut before layer {spans[index][1]} (`{boundary[index]}`)"
        return "the model's outputs"

    # Every block and partition is extracted and checked before any file is written.
    blocks, entries = [], []
    for i, ((first, end), block_in, block_out) in enumerate(zip(spans, ins, outs)):
        block = extractor.extract_model(block_in, block_out)
        block.graph.name = f"{stem}.block{i}"
        blocks.append(checked(block, f"block {i} (layers {first}-{end - 1}, from {cut(i)} to {ends(i)})"))
        entries.append(
            {
                "index": i,
                "file": f"{stem}.block{i}.onnx",
                "layers": [first, end],
                "inputs": [tensor_info(t, sizes[t]) for t in block_in],
                "outputs": [tensor_info(t, sizes[t]) for t in block_out],
                "ms": round(sum(times[first:end]), 4),
                "output_bytes_per_row": sum(math.prod(sizes[t][0]) * sizes[t][1].itemsize for t in block_out) // rows,
            }
        )
    parts = partition_points(args.partitions, len(entries))
    models, partitions = [], []
    for p, (first, end) in enumerate(zip([0] + parts, parts + [len(entries)])):
        part = extractor.extract_model(ins[first], outs[end - 1])
        part.graph.name = f"{stem}.part{p}"
        models.append(checked(part, f"partition {p} (blocks {first}-{end - 1}, from {cut(first)} to "
                                    f"{ends(end - 1)})"))
        partitions.append({"index": p, "file": f"{stem}.part{p}.onnx", "blocks": [first, end]})

    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, f"{stem}.blocks.json")
    if os.path.exists(path):  # it would describe blocks this run replaces
        os.remove(path)
    for model_proto, entry in zip(blocks + models, entries + partitions):
        target = os.path.join(args.out_dir, entry["file"])
        onnx.save(model_proto, target + ".tmp")
        os.replace(target + ".tmp", target)
    written = {e["file"] for e in entries + partitions}
    for file in sorted(os.listdir(args.out_dir)):  # blocks and partitions of an earlier run into more of them
        if re.fullmatch(re.escape(stem) + r"\.(block|part)[0-9]+\.onnx", file) and file not in written:
            os.remove(os.path.join(args.out_dir, file))
    dynamic = batch_dynamic(graph, weights)
    summary = {
        "model": name,
        "cost_model": {
            "dense_flops_per_s": DENSE_FLOPS_PER_S,
            "grouped_flops_per_s": GROUPED_FLOPS_PER_S,
            "bytes_per_s": BYTES_PER_S,
            "layer_s": LAYER_S,
            "inputs": shapes,
        },
        "layers": len(layers),
        "valid_cuts": len(shaped),
        "cuts_without_shape": len(cuts) - len(shaped),
        "blocks_asked": args.blocks,
        "total_ms": round(sum(times), 4),
        "batch_dynamic": dynamic,
        "blocks": entries,
        "partitions": partitions,
    }
    if args.check:
        check(model, blocks, boundary, graph, weights, shapes, dynamic, value_info, name)
    with open(path + ".tmp", "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)  # last: a blocks json newer than the model means the blocks are complete
    if args.bundle:
        write_bundle(args.bundle, stem, path, summary)
    ms = " ".join(f"{e['ms']:.2f}" for e in entries)
    print(f"partition_model: {name}: {len(shaped)} valid cuts, {len(entries)} blocks ({ms} estimated ms) -> {path}")


def write_bundle(bundle, stem, blocks_json, summary):
    """The blocks as a bundle of `forward` tasks, and a PPipe spec over its profile table (see the usage)."""
    glue = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "target", "wasm32-wasip2",
                        "release", "forward.wasm")
    if not os.path.isfile(glue):
        raise Refused(f"{glue} is missing: build the glue with `make functions` before --bundle")
    os.makedirs(os.path.join(bundle, "models"), exist_ok=True)
    os.makedirs(os.path.join(bundle, "glue"), exist_ok=True)
    shutil.copyfile(glue, os.path.join(bundle, "glue", "forward.wasm"))
    shutil.copyfile(blocks_json, os.path.join(bundle, os.path.basename(blocks_json)))
    blocks = summary["blocks"]
    toml = [f'name = "{stem}-blocks"', "", "[slo]", "latency_ms = 60000", "accuracy = 0.5", ""]
    for i, block in enumerate(blocks):
        shutil.copyfile(os.path.join(os.path.dirname(blocks_json), block["file"]),
                        os.path.join(bundle, "models", block["file"]))
        port = ', port = "next"' if i + 1 < len(blocks) else ""
        toml += ["[[tasks]]", f'name = "block{i}"', 'glue = "glue/forward.wasm"', f'slot = "block{i}"',
                 f'config = {{ slot = "block{i}"{port} }}', ""]
    for i in range(len(blocks) - 1):
        toml += ["[[edges]]", f'from = "block{i}.next"', f'to = "block{i + 1}"', ""]
    for i, block in enumerate(blocks):
        io = block["inputs"][0]
        toml += ["[[variants]]", f'slot = "block{i}"', f'name = "{stem}-block{i}"', f'model = "models/{block["file"]}"',
                 "accuracy = 1.0", f'shapes = {{ {json.dumps(io["name"])} = {json.dumps(io["shape"][1:])} }}', ""]
    with open(os.path.join(bundle, "jig.toml"), "w") as f:
        f.write("\n".join(toml))
    slo = max(1, round(5 * summary["total_ms"]))
    spec = [
        "# PPipe over this bundle's blocks (docs/src/guides/planners.md, \"PPipe\"): profile them first, e.g.",
        f"#   jig profile {bundle} --segment cpu:1 --max-batch 8",
        "# then add a class per kind of segment profiled (GPU shares: { 1 = \"mps:0:100\", 2 = \"mps:0:50\" }).",
        "[ppipe]",
        f'model = "{stem}"',
        f'blocks_json = "{os.path.basename(blocks_json)}"',
        'profiles = "profiles.csv"',
        f"slo_ms = {slo}",
        "classes = [",
        f'  {{ name = "cores", units = {os.cpu_count() or 1}, segments = {{ 1 = "cpu:1" }} }},',
        "]",
        "",
    ]
    with open(os.path.join(bundle, "ppipe.toml"), "w") as f:
        f.write("\n".join(spec))


def partition_points(text, blocks):
    """The block indices --partitions cuts at: ascending, each in 1..blocks-1."""
    if not text:
        return []
    try:
        points = [int(p) for p in text.split(",")]
    except ValueError:
        raise Refused(f"--partitions {text}: give block indices separated by commas, e.g. 5") from None
    if points != sorted(set(points)) or points[0] < 1 or points[-1] > blocks - 1:
        raise Refused(f"--partitions {text}: give ascending block indices between 1 and {blocks - 1}")
    return points


def main():
    ap = argparse.ArgumentParser(
        description="Cut an ONNX model into blocks of about equal estimated runtime (PPipe §5.2)."
    )
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--shape", action="append", default=[], metavar="NAME=d1,d2,...")
    ap.add_argument("--runs", type=int, help=argparse.SUPPRESS)  # earlier versions timed layers; ignored
    ap.add_argument("--partitions", metavar="B1,B2,...", help="also write the runs of blocks between these block indices")
    ap.add_argument("--bundle", metavar="DIR", help="also write the blocks as a bundle, with a PPipe spec")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    try:
        partition(args)
    except Refused as e:
        print(f"partition_model: {args.model}: {e}", file=sys.stderr)
        sys.exit(2)
    except Failed as e:
        print(f"partition_model: {args.model}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
