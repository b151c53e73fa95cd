"""Measure the accuracy of each model variant of the sign reader on the labelled evaluation set.

    python3 scripts/eval_sign_reader.py [--jig target/release/jig] [--slot det|rec|voice]... [--write]
    python3 scripts/eval_sign_reader.py --set photos [--reference] [--slot det|rec]...

Starts `jig up` on a free loopback port with a scratch state directory. For each variant of the `det` and
`rec` slots it deploys the sign reader's text half (detect → recognize) with that variant and the other slot's
first (fp32) variant, reads every image of .jig/samples/eval (`make setup` renders them, with their lines),
and scores the answers:

* word accuracy: the share of the label's words read without a single character wrong, from a
  character-level alignment of recognized and labelled text (spaces left out: the recognizer is unreliable
  about the width of a space, and a word should not count as wrong for a missing space);
* character error rate: the edit distance between recognized and labelled text over the label's length,
  spaces left out likewise.

For each variant of the `voice` slot it deploys the speech task alone, has it say every labelled line, and
transcribes the audio with PocketSphinx (its US English model, from the `pocketsphinx` PyPI package, which
the script installs into .jig/python-eval the first time), listening for the signs' vocabulary: word accuracy
is the share of the line's words (numbers spelled out, as the speech glue says them) found in a word-level
alignment with the transcript. The recognizer is small and makes mistakes of its own on clean speech, so the
voice figures compare the variants with each other more than they measure the voice.

Prints a table; with --write, stores each variant's word accuracy as its `accuracy` in
examples/sign-reader/jig.toml, which the planner reads.

`--set photos` reads .jig/samples/photos instead: signs as photographed (turned up to 10°, serif and sans,
coloured panels in a grey surround). `--reference` also reads the set with `rapidocr-onnxruntime` itself (the
same PP-OCR models and ONNX Runtime, with its own OpenCV pre- and post-processing; its dependencies are
installed into .jig/python-eval the first time) and prints its figures beside jig's. Each row also gives the
mean seconds per image: for jig, an `invoke` over loopback HTTP; for the reference, its in-process call,
after one warm-up image.
"""

import argparse
import base64
import time
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
import wave

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = os.path.join(ROOT, "examples", "sign-reader")
SAMPLES = os.path.join(ROOT, ".jig", "samples")
ASR_DIR = os.path.join(ROOT, ".jig", "python-eval")
ASR_PACKAGE = "pocketsphinx==5.1.1"
# What rapidocr-onnxruntime (in .jig/python, from set-up) needs to run rather than only ship its models.
REFERENCE_PACKAGES = ["opencv-python-headless==5.0.0.93", "pyclipper==1.4.0", "shapely==2.2.0", "numpy==2.4.6",
                      "pyyaml==6.0.4", "six==1.17.0", "tqdm==4.70.1"]


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


def detect_config():
    """The sign reader's `detect` task's config table (`{ max_side = ... }`), as the bundle deploys it."""
    text = open(os.path.join(BUNDLE, "jig.toml")).read()
    found = re.search(r'name = "detect"\n(?:[^\[\n][^\n]*\n)*?config = (\{[^\n]*\})', text)
    return found.group(1) if found else "{}"


def manifest(det, rec):
    return f"""name = "sign-reader-eval"
[[tasks]]
name = "detect"
glue = "glue/ocr_detect.wasm"
slot = "det"
config = {detect_config()}
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


def voice_manifest(voice):
    return f"""name = "sign-reader-voice-eval"
[[tasks]]
name = "speak"
glue = "glue/tts_frame.wasm"
config_files = {{ phoneme-id-map = "models/piper-joe.phonemes.json", lexicon = "models/cmudict.txt" }}
[[variants]]
slot = "voice"
name = "{voice[1]}"
model = "{voice[2]}"
"""


ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen " \
    "seventeen eighteen nineteen".split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n):
    """`n` < 1 000 000 in words, as the speech glue's `g2p::number_words` says it."""
    if n >= 1000:
        rest = number_words(n % 1000) if n % 1000 else ""
        return (number_words(n // 1000) + " thousand " + rest).strip()
    if n >= 100:
        return (ONES[n // 100] + " hundred " + (number_words(n % 100) if n % 100 else "")).strip()
    if n >= 20:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    return ONES[n]


def spoken_words(line):
    words = []
    for word in re.findall(r"[A-Za-z']+|[0-9]+", line):
        words.extend(number_words(int(word)).split() if word.isdigit() and len(word) < 7 else [word.lower()])
    return words


def transcriber():
    """PocketSphinx's decoder, installed into .jig/python-eval when missing, listening for any sequence of the
    words the evaluation signs are made of (`samples.WORDS` and the numbers up to 120), as a person who knows
    what signs say would."""
    if not os.path.exists(os.path.join(ASR_DIR, "pocketsphinx")):
        print(f"installing {ASR_PACKAGE} into {os.path.relpath(ASR_DIR, ROOT)} (from PyPI)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--target", ASR_DIR, ASR_PACKAGE], check=True)
    sys.path.insert(0, ASR_DIR)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from pocketsphinx import Decoder
    from samples import WORDS

    vocabulary = sorted({w.lower() for w in WORDS} | {w for n in range(121) for w in number_words(n).split()})
    decoder = Decoder(samprate=16000, logfn=os.devnull)
    decoder.add_jsgf_string("signs", "#JSGF V1.0; grammar signs; public <line> = <word>+; <word> = "
                            + " | ".join(vocabulary) + ";")
    decoder.activate_search("signs")
    return decoder


def transcribe(decoder, wav_bytes):
    """The words PocketSphinx hears in a 16-bit mono WAV, resampled to its 16 kHz."""
    import numpy as np

    with wave.open(io.BytesIO(wav_bytes)) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float64)
    n = int(len(pcm) * 16000 / rate)
    pcm16 = np.interp(np.arange(n) * rate / 16000, np.arange(len(pcm)), pcm).astype(np.int16)
    decoder.start_utt()
    decoder.process_raw(pcm16.tobytes(), full_utt=True)
    decoder.end_utt()
    return decoder.hyp().hypstr.split() if decoder.hyp() else []


def score_voice(url, labels, decoder, repeats=3):
    """Word accuracy of every labelled line as PocketSphinx hears the voice say it, `repeats` times (the voice
    samples noise, so each saying differs); and the share of lines heard exactly."""
    found = total = exact = lines = 0
    for text_lines in labels.values():
        for line in text_lines * repeats:
            request = urllib.request.Request(
                url + "/v1/apps/sign-reader-voice-eval/invoke", data=line.encode(), method="POST"
            )
            answer = json.load(urllib.request.urlopen(request, timeout=60))
            heard = transcribe(decoder, base64.b64decode(answer["outputs"][0]["base64"]))
            truth = spoken_words(line)
            _, matched = align(heard, truth)
            found += sum(matched)
            total += len(truth)
            exact += heard == truth
            lines += 1
    return found / total, exact / lines


def jig_reader(url):
    """Reads an image's lines with the deployed text half of the sign reader."""
    def read(path):
        with open(path, "rb") as f:
            request = urllib.request.Request(url + "/v1/apps/sign-reader-eval/invoke", data=f.read(), method="POST")
        answer = json.load(urllib.request.urlopen(request, timeout=60))
        return [part["json"]["text"] for part in answer["outputs"]]
    return read


def reference_reader():
    """Reads an image's lines with rapidocr-onnxruntime, installing what it needs when missing."""
    if not os.path.exists(os.path.join(ASR_DIR, "pyclipper")):
        print(f"installing {' '.join(REFERENCE_PACKAGES)} into {os.path.relpath(ASR_DIR, ROOT)} (from PyPI)", flush=True)
        # Out of sight of .jig/python, where rapidocr asks for the full `opencv-python` (its headless build is
        # the same library without the GUI).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                        "--target", ASR_DIR, *REFERENCE_PACKAGES], check=True, env={**env, "PIP_ROOT_USER_ACTION": "ignore"})
    sys.path[:0] = [ASR_DIR, os.path.join(ROOT, ".jig", "python")]
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR()
    return lambda path: [text for _, text, _ in (engine(path)[0] or [])]


def score(read, directory, labels):
    """Word accuracy, character error rate and mean seconds per image of `read` over the labelled images (the
    first image read once more beforehand, untimed, to warm up)."""
    words_found = words_total = errors = chars = 0
    read(os.path.join(directory, min(labels)))
    started = time.perf_counter()
    for file, lines in sorted(labels.items()):
        read_lines = read(os.path.join(directory, file))
        truth_words = " ".join(lines).split()
        truth, got = "".join(truth_words), "".join(" ".join(read_lines).split())
        distance, matched = align(got, truth)
        start = 0
        for word in truth_words:
            words_found += all(matched[start : start + len(word)])
            start += len(word)
        words_total += len(truth_words)
        errors += distance
        chars += len(truth)
    return words_found / words_total, errors / chars, (time.perf_counter() - started) / len(labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jig", default=os.path.join(ROOT, "target", "release", "jig"))
    parser.add_argument("--write", action="store_true", help="store the word accuracies in the manifest")
    parser.add_argument("--slot", action="append", help="score only this slot's variants (det, rec, voice)")
    parser.add_argument("--set", default="eval", choices=["eval", "photos"], help="which labelled images to read")
    parser.add_argument("--reference", action="store_true", help="also read them with rapidocr-onnxruntime")
    args = parser.parse_args()
    directory = os.path.join(SAMPLES, args.set)
    labels = json.load(open(os.path.join(directory, "samples.json")))
    if args.set != "eval" and args.write:
        parser.error("--write stores accuracies measured on the evaluation set; leave out --set")
    if args.reference:
        found, error_rate, seconds = score(reference_reader(), directory, labels)
        print(f"{'ref':<5} {'rapidocr-onnxruntime':<22} word accuracy {found:.3f}   character error rate "
              f"{error_rate:.3f}   {seconds:.3f} s/image", flush=True)
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
            decoder = None

            def deploy(name, text):
                bundle = os.path.join(scratch, name)
                os.makedirs(bundle)
                with open(os.path.join(bundle, "jig.toml"), "w") as f:
                    f.write(text)
                for sub in ("glue", "models"):
                    os.symlink(os.path.join(BUNDLE, sub), os.path.join(bundle, sub))
                subprocess.run([args.jig, "deploy", bundle, "--gateway", url], check=True, capture_output=True)

            for slot, name, model in all_variants:
                if args.slot and slot not in args.slot:
                    continue
                if slot == "voice":
                    if args.set != "eval":
                        continue
                    decoder = decoder or transcriber()
                    deploy(name, voice_manifest((slot, name, model)))
                    results[name] = score_voice(url, labels, decoder)
                    second = f"lines heard exactly {results[name][1]:.3f}"
                else:
                    det = (slot, name, model) if slot == "det" else first["det"]
                    rec = (slot, name, model) if slot == "rec" else first["rec"]
                    deploy(name, manifest(det, rec))
                    results[name] = score(jig_reader(url), directory, labels)
                    second = f"character error rate {results[name][1]:.3f}   {results[name][2]:.3f} s/image"
                print(f"{slot:<5} {name:<22} word accuracy {results[name][0]:.3f}   {second}", flush=True)
        finally:
            gateway.terminate()
            gateway.wait()

    if args.write:
        path = os.path.join(BUNDLE, "jig.toml")
        text = open(path).read()
        for name, (accuracy, *_) in results.items():
            text = re.sub(
                rf'(name = "{re.escape(name)}"\nmodel = "[^"]+"\n)(accuracy = [0-9.]+\n)?',
                rf"\g<1>accuracy = {accuracy:.3f}\n",
                text,
            )
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote the accuracies into {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
