"""Measure the accuracy of each model variant of the sign reader on the labelled evaluation set.

    python3 scripts/eval_sign_reader.py [--jig target/release/jig] [--write]

Starts `jig up` on a free loopback port with a scratch state directory. For each variant of the `det` and
`rec` slots it deploys the sign reader's text half (detect → recognize) with that variant and the other slot's
first (fp32) variant, reads every image of .jig/samples/eval (`make setup` renders them, with their lines),
and scores the answers:

* word accuracy: the share of the label's words read without a single character wrong, from a
  character-level alignment of recognized and labelled text (spaces left out: the recognizer is unreliable
  about the width of a space, and a word should not count as wrong for a missing space);
* character error rate: the edit distance between recognized and labelled text over the label's length,
  spaces left out likewise.

Prints a table; with --write, stores each variant's word accuracy as its `accuracy` in
examples/sign-reader/jig.toml, which the planner reads.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = os.path.join(ROOT, "examples", "sign-reader")
EVAL = os.path.join(ROOT, ".jig", "samples", "eval")


def align(got, truth):
    """The edit distance between `got` and `truth`, and for each character of `truth` whether the alignment
    matched it."""
    n, m = len(got), len(truth)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (got[i - 1] != truth[j - 1]))
    matched = [False] * m
    i, j = n, m
    while i > 0 and j > 0:
        if d[i][j] == d[i - 1][j - 1] + (got[i - 1] != truth[j - 1]):
            matched[j - 1] = got[i - 1] == truth[j - 1]
            i, j = i - 1, j - 1
        elif d[i][j] == d[i - 1][j] + 1:
            i -= 1
        else:
            j -= 1
    return d[n][m], matched


def variants():
    """(slot, name, model) of every variant in the manifest, in order."""
    text = open(os.path.join(BUNDLE, "jig.toml")).read()
    found = re.findall(r'\[\[variants\]\]\nslot = "([^"]+)"\nname = "([^"]+)"\nmodel = "([^"]+)"', text)
    return found


def manifest(det, rec):
    return f"""name = "sign-reader-eval"
[[tasks]]
name = "detect"
glue = "glue/ocr_detect.wasm"
slot = "det"
[[tasks]]
name = "recognize"
glue = "glue/ocr_recognize.wasm"
slot = "rec"
config_files = {{ charset = "models/ppocr-rec.charset.txt" }}
[[edges]]
from = "detect.lines"
to = "recognize"
[[variants]]
slot = "det"
name = "{det[1]}"
model = "{det[2]}"
[[variants]]
slot = "rec"
name = "{rec[1]}"
model = "{rec[2]}"
"""


def score(url, labels):
    words_found = words_total = errors = chars = 0
    for file, lines in sorted(labels.items()):
        with open(os.path.join(EVAL, file), "rb") as f:
            request = urllib.request.Request(url + "/v1/apps/sign-reader-eval/invoke", data=f.read(), method="POST")
        answer = json.load(urllib.request.urlopen(request, timeout=60))
        read = [part["json"]["text"] for part in answer["outputs"]]
        truth_words = " ".join(lines).split()
        truth, got = "".join(truth_words), "".join(" ".join(read).split())
        distance, matched = align(got, truth)
        start = 0
        for word in truth_words:
            words_found += all(matched[start : start + len(word)])
            start += len(word)
        words_total += len(truth_words)
        errors += distance
        chars += len(truth)
    return words_found / words_total, errors / chars


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jig", default=os.path.join(ROOT, "target", "release", "jig"))
    parser.add_argument("--write", action="store_true", help="store the word accuracies in the manifest")
    args = parser.parse_args()
    labels = json.load(open(os.path.join(EVAL, "samples.json")))
    all_variants = variants()
    first = {}
    for v in all_variants:
        first.setdefault(v[0], v)

    with tempfile.TemporaryDirectory() as scratch:
        gateway = subprocess.Popen(
            [args.jig, "up", "--listen", "127.0.0.1:0", "--state-dir", os.path.join(scratch, "state")],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "RUST_LOG": "warn"},
        )
        try:
            url = re.search(r"http://[0-9.:]+", gateway.stdout.readline()).group(0)
            results = {}
            for variant in all_variants:
                if variant[0] not in ("det", "rec"):
                    continue
                det = variant if variant[0] == "det" else first["det"]
                rec = variant if variant[0] == "rec" else first["rec"]
                bundle = os.path.join(scratch, variant[1])
                os.makedirs(bundle)
                with open(os.path.join(bundle, "jig.toml"), "w") as f:
                    f.write(manifest(det, rec))
                for sub in ("glue", "models"):
                    os.symlink(os.path.join(BUNDLE, sub), os.path.join(bundle, sub))
                subprocess.run([args.jig, "deploy", bundle, "--gateway", url], check=True, capture_output=True)
                results[variant[1]] = score(url, labels)
                print(f"{variant[0]:<4} {variant[1]:<22} word accuracy {results[variant[1]][0]:.3f}   "
                      f"character error rate {results[variant[1]][1]:.3f}", flush=True)
        finally:
            gateway.terminate()
            gateway.wait()

    if args.write:
        path = os.path.join(BUNDLE, "jig.toml")
        text = open(path).read()
        for name, (accuracy, _) in results.items():
            text = re.sub(
                rf'(name = "{re.escape(name)}"\nmodel = "[^"]+"\naccuracy = )[0-9.]+', rf"\g<1>{accuracy:.3f}", text
            )
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote the accuracies into {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
