#!/usr/bin/env python3
"""PPipe's DNN pre-partitioning (PPipe §5.2): cut an ONNX model into N blocks of consecutive layers of about
equal runtime, each block an ONNX model of its own, so that a planner can serve the model split into partitions
(runs of consecutive blocks, whose latency is the sum of their blocks') across pools of segments.

A layer is an ONNX node, in topological order. A block may end only at a valid cut: a place where exactly one
activation produced before it is used after it (or is a graph output), so that every block has one activation
input (the first block takes the model's inputs) and one activation output. Initializers, the outputs of
Constant nodes and of nodes computed from those alone are weights, not activations: each block keeps a copy of
the ones it uses. Skip connections that span a place (residual blocks, feature pyramids) make it no cut.

Per-layer runtimes come from ONNX Runtime's profiler on CPU: one thread, graph optimisations off (so that every
node runs as itself and its time can be named), the median over a few runs of one random input at batch 1.
Weights computed by nodes are left out (a served session folds them). The figures are for choosing cuts: served
with optimisations on, the blocks run faster. PPipe profiles on one selected GPU type and finds that the choice
makes little difference to the cuts.

Usage: PYTHONPATH=.jig/python python3 scripts/partition_model.py MODEL.onnx OUT_DIR [--blocks 10]
           [--shape NAME=d1,d2,...] [--runs 5] [--partitions B1,B2,...] [--bundle DIR] [--check]

--shape gives an input's shape where the model leaves dimensions open; an open first dimension (the batch)
is 1 unless given. Writes OUT_DIR/<stem>.block<i>.onnx (i from 0) and OUT_DIR/<stem>.blocks.json:

    model, profile (provider, threads, runs, input shapes), layers, valid_cuts, blocks_asked, total_ms,
    batch_dynamic, blocks: [{index, file, layers: [first, end), inputs and outputs: [{name, dtype, shape}],
                             ms, output_bytes_per_row}]

Shapes are those at the profiled input (batch 1, or the first dimension --shape gives). output_bytes_per_row
is the size of a block's output for one row, which a planner turns into transfer latency. --check runs the
--bundle DIR also writes a bundle of the blocks for `jig profile` and PPipe: DIR/jig.toml, a chain of `forward`
tasks, one slot per block (`block0`, `block1`, …, the block files in DIR/models, the glue from
target/wasm32-wasip2/release/forward.wasm, `make functions` builds it), and DIR/ppipe.toml, a `[ppipe]` spec over
the profile table `jig profile DIR --segment …` writes (its SLO five times the blocks' measured total, as PPipe
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
import os
import shutil
import statistics
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper

TOLERANCE = 1e-4


class Refused(Exception):
    """A request this script cannot serve: the message says what to do; exit 2."""


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


def profile(model, layers, feeds, runs):
    """Each layer's runtime in ms: the median of `runs` profiled runs after one warm-up."""
    import onnxruntime as ort

    named = onnx.ModelProto()
    named.CopyFrom(model)
    for i, node in enumerate(named.graph.node):
        node.name = f"jig_node_{i}"
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "profile")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.log_severity_level = 3
        sess = session(named, options)
        for _ in range(runs + 1):
            sess.run(None, feeds)
        with open(sess.end_profiling()) as f:
            events = json.load(f)
    times = {}
    for e in events:
        name = e.get("name", "")
        if e.get("cat") == "Node" and name.startswith("jig_node_") and name.endswith("_kernel_time"):
            times.setdefault(int(name[len("jig_node_") : -len("_kernel_time")]), []).append(e["dur"] / 1000)
    # The first of each node's times is the warm-up run.
    return [statistics.median(times[i][1:] or times[i]) if i in times else 0.0 for i in layers]


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
    """The model with the tensors `names` as extra graph outputs."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    have = {t.name for t in out.graph.output}
    out.graph.output.extend(value_info[name] for name in names if name not in have)
    return out


def tensor_info(name, value):
    return {"name": name, "dtype": str(value.dtype), "shape": list(value.shape)}


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
    if args.runs < 1:
        raise Refused(f"--runs {args.runs}: profile at least 1 run")
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
    if len(cuts) < args.blocks - 1:
        print(
            f"partition_model: {name}: only {len(cuts)} valid cuts, so {len(cuts) + 1} blocks, not {args.blocks}",
            file=sys.stderr,
        )
    shapes = input_shapes(graph, weights, parse_shapes(args.shape))
    feeds = random_feeds(graph, weights, shapes, shapes[next(iter(shapes))][0], seed=0)
    times = profile(model, layers, feeds, args.runs)
    spans = group(times, sorted(cuts), args.blocks)
    # The tensor crossing each chosen cut: the one output of the block before and the one input of the next.
    boundary = [cuts[end] for _, end in spans[:-1]]
    model_inputs = list(shapes)
    model_outputs = [t.name for t in graph.output]
    # Shape inference first: the extractor takes each block's input and output types from the value_info.
    extractor = onnx.utils.Extractor(onnx.shape_inference.infer_shapes(model))
    value_info = extractor.value_infos
    missing = [t for t in boundary if t not in value_info]
    if missing:
        raise Refused(f"ONNX shape inference gives no type for {', '.join(missing)}; cannot cut there")
    ins = [model_inputs] + [[t] for t in boundary]
    outs = [[t] for t in boundary] + [model_outputs]

    # Shapes at the profiled input, from the model itself with the boundary tensors as extra outputs.
    probe = session(with_outputs(model, boundary, value_info))
    values = dict(feeds)
    values.update(zip([o.name for o in probe.get_outputs()], probe.run(None, feeds)))
    rows = shapes[model_inputs[0]][0]

    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, f"{stem}.blocks.json")
    if os.path.exists(path):  # it would describe blocks this run replaces
        os.remove(path)
    blocks, entries = [], []
    for i, ((first, end), block_in, block_out) in enumerate(zip(spans, ins, outs)):
        block = extractor.extract_model(block_in, block_out)
        block.graph.name = f"{stem}.block{i}"
        onnx.checker.check_model(block)
        file = f"{stem}.block{i}.onnx"
        onnx.save(block, os.path.join(args.out_dir, file + ".tmp"))
        os.replace(os.path.join(args.out_dir, file + ".tmp"), os.path.join(args.out_dir, file))
        blocks.append(block)
        entries.append(
            {
                "index": i,
                "file": file,
                "layers": [first, end],
                "inputs": [tensor_info(t, values[t]) for t in block_in],
                "outputs": [tensor_info(t, values[t]) for t in block_out],
                "ms": round(sum(times[first:end]), 4),
                "output_bytes_per_row": sum(values[t].nbytes for t in block_out) // rows,
            }
        )
    for file in os.listdir(args.out_dir):  # blocks of an earlier run into more blocks
        if file.startswith(f"{stem}.block") and file.endswith(".onnx") and file not in {e["file"] for e in entries}:
            os.remove(os.path.join(args.out_dir, file))
    dynamic = batch_dynamic(graph, weights)
    summary = {
        "model": name,
        "profile": {
            "provider": "CPUExecutionProvider",
            "threads": 1,
            "optimization": "disabled",
            "runs": args.runs,
            "inputs": shapes,
        },
        "layers": len(layers),
        "valid_cuts": len(cuts),
        "blocks_asked": args.blocks,
        "total_ms": round(sum(times), 4),
        "batch_dynamic": dynamic,
        "blocks": entries,
    }
    parts = partition_points(args.partitions, len(entries))
    summary["partitions"] = []
    for p, (first, end) in enumerate(zip([0] + parts, parts + [len(entries)])):
        part = extractor.extract_model(ins[first], outs[end - 1])
        part.graph.name = f"{stem}.part{p}"
        onnx.checker.check_model(part)
        file = f"{stem}.part{p}.onnx"
        onnx.save(part, os.path.join(args.out_dir, file + ".tmp"))
        os.replace(os.path.join(args.out_dir, file + ".tmp"), os.path.join(args.out_dir, file))
        summary["partitions"].append({"index": p, "file": file, "blocks": [first, end]})
    if args.check:
        check(model, blocks, boundary, graph, weights, shapes, dynamic, value_info, name)
    with open(path + ".tmp", "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)  # last: a blocks json newer than the model means the blocks are complete
    if args.bundle:
        write_bundle(args.bundle, stem, path, summary)
    ms = " ".join(f"{e['ms']:.2f}" for e in entries)
    print(f"partition_model: {name}: {len(cuts)} valid cuts, {len(entries)} blocks ({ms} ms) -> {path}")


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
        "# PPipe over this bundle's blocks (README, \"PPipe\"): profile them first, e.g.",
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
    ap = argparse.ArgumentParser(description="Cut an ONNX model into blocks of about equal runtime (PPipe §5.2).")
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--shape", action="append", default=[], metavar="NAME=d1,d2,...")
    ap.add_argument("--runs", type=int, default=5, help="profiled runs per layer (the median is kept)")
    ap.add_argument("--partitions", metavar="B1,B2,...", help="also write the runs of blocks between these block indices")
    ap.add_argument("--bundle", metavar="DIR", help="also write the blocks as a bundle, with a PPipe spec")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    try:
        partition(args)
    except Refused as e:
        print(f"partition_model: {args.model}: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
