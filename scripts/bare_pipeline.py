"""The sign reader without jig: the bare pipeline whose throughput jig's served rate is measured against.

Per request, the work examples/sign-reader does: decode the PNG; resize, PP-OCRv4 detection and DB post-
processing (functions/ocr-detect, with the manifest's `min_side` 320, `max_side` 960); each line cut out,
turned upright, read by PP-OCRv4 recognition and CTC-decoded (functions/ocr-recognize); each line with text
phonemised (CMU dictionary) and said by the Piper voice into a WAV (functions/tts-frame). The glue is numpy and
Pillow; each model a pool of ONNX Runtime sessions (CPU or CUDA) shared by the worker threads of a process,
each worker carrying one request through its stages; `--processes` more such processes on one queue.

Load: open-loop Poisson arrivals drawn as `jig bench` draws them (SplitMix64: the same `--seed` gives the same
arrival times), cycling over the inputs, each timed from when it was due to its answer, so queueing counts.
As jig's gateway answers 504 at the deadline, a request past its SLO is dropped before its next stage and
counts as a violation. One JSON line per rate: sent, ok, in_slo (fraction answered within the SLO), goodput
(those per second), p50/p95/p99 ms of all requests. `--find-capacity` searches the highest rate with >= 99% in
SLO as scripts/capacity.sh does for jig: from --rate a quarter up or down until the verdict turns (at most 12
times), then 3 bisections; it ends with {"capacity_rps": ..., "bounded": ...}, bounded false where every rate tried
passed (the capacity is then at least that).

    # CPU, as jig's plan runs the sign reader on the 2-core machine (det-480, rec and voice fp32):
    PYTHONPATH=.jig/python python3 scripts/bare_pipeline.py --det .jig/models/ppocr-det-480.onnx \\
        --rate 12 --duration 30 --find-capacity
    # GPU (onnxruntime-gpu): det and rec on CUDA, the voice on CUDA and on CPU threads (a line takes whichever
    # session is free; `--voice-provider cpu` for CPU alone); the glue needs processes to use 16 cores.
    # Sessions, workers, processes: as many as help.
    PYTHONPATH=.jig/python python3 scripts/bare_pipeline.py --det-provider cuda --rec-provider cuda \\
        --voice-provider cuda --voice-cpu-sessions 1 --processes 8 --workers 4 --rate 50 --duration 30 \\
        --find-capacity
    # The voice cut in two (scripts/models.py): its front on CPU threads, its decoder on CUDA
    PYTHONPATH=.jig/python python3 scripts/bare_pipeline.py --det-provider cuda --rec-provider cuda \\
        --voice .jig/models/piper-joe.front.onnx --voice-decoder .jig/models/piper-joe.back.onnx \\
        --voice-decoder-provider cuda --processes 8 --workers 4 --rate 50 --duration 30 --find-capacity
    # What it reads: each input once, its lines' text, confidence and WAV bytes
    PYTHONPATH=.jig/python python3 scripts/bare_pipeline.py --check

Approximations (the same work, not the same bits):
* Regions of the thresholded map are labelled from runs of pixels joined by union-find (8-connected, as the
  glue's flood fill, whose per-pixel loop would be Python); boxes, scores, unclip, top-k and reading order
  follow the glue's formulas, in float64 where it has f32.
* Resizes are Pillow's bilinear (area-aware when shrinking, as the glue's `fast_image_resize` convolution is).
* The dictionary is a dict loaded once, where the glue binary-searches its text per word.
* No batching, no envelopes, JSON or HTTP, and a request's lines are read and said one after another (jig
  runs each as its own invocation, and batches concurrent ones).
"""

import argparse, functools, glob, io, json, math, multiprocessing, os, queue, struct, sys, threading, time

try:
    import numpy as np
    import onnxruntime as ort
    from PIL import Image
except ImportError as e:
    sys.exit(f"bare_pipeline.py needs numpy, onnxruntime (onnxruntime-gpu for cuda) and Pillow: {e}; "
             "in a jig checkout run it with PYTHONPATH=.jig/python")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, ".jig", "models")
# The `detect` task's config in examples/sign-reader/jig.toml, and the glue's defaults.
MIN_SIDE, MAX_SIDE, THRESHOLD, BOX_THRESHOLD, UNCLIP, TOP_K, MAX_PIXELS = 320, 960, 0.3, 0.5, 1.6, 32, 20_000_000
REC_HEIGHT, SAMPLE_RATE, SILENCE_S = 48, 22050, 0.2
SCALES = np.array([0.667, 1.0, 0.8], dtype=np.float32)  # Piper's noise, length and noise-w scales
F32 = np.float32


def half_up(x):
    """Rust's `round` (halves away from zero; Python's `round` takes them to even)."""
    return math.floor(x + 0.5)


class Expired(Exception):
    """The request's SLO passed before its next stage: jig's gateway would have answered 504 by now."""


# ---- detect (functions/ocr-detect) ---------------------------------------------------------------------------

def normalise(rgb):
    """HxWx3 RGB bytes to [1, 3, H, W] f32, BGR (PP-OCR was trained on OpenCV's order), in [-1, 1]."""
    x = np.ascontiguousarray(rgb[:, :, ::-1].transpose(2, 0, 1), dtype=F32)
    x *= F32(1 / 127.5)
    x -= F32(1)
    return x[None]


def det_input(image):
    """Up until the shorter side is >= min_side, then down until the longer is <= max_side, both sides
    multiples of 32. The ratio in f32 as the glue computes it, so that sizes agree at the rounding edges."""
    w, h = image.size
    ratio = min(max(F32(MIN_SIDE) / F32(max(min(w, h), 1)), F32(1)), F32(MAX_SIDE) / F32(max(w, h)))
    size = [max(half_up(float(F32(v) * ratio / F32(32))), 1) * 32 for v in (w, h)]
    return normalise(np.asarray(image.resize(size, Image.BILINEAR)))


def regions(mask):
    """The 8-connected regions of `mask` as (xs, ys) arrays, in the order a raster scan meets them (the glue's
    order, which its stable sorts keep for ties). Rows are cut into runs with numpy; runs of adjacent rows that
    touch, diagonally included, are joined by union-find: Python pays per run, not per pixel."""
    w = mask.shape[1]
    edges = np.diff(np.pad(mask, ((0, 0), (1, 1))).view(np.int8), axis=1)
    ys, x0 = np.nonzero(edges == 1)
    x1 = np.nonzero(edges == -1)[1]  # exclusive ends; starts and ends both come row-major, so they pair up
    if len(ys) == 0:
        return []
    # Keys that sort runs row-major: the runs of row y-1 touching run b of row y are one slice of them, from
    # the first ending at or after b.x0 to the last starting at or before b.x1.
    stride = w + 2
    lo = np.searchsorted(ys * stride + x1, (ys - 1) * stride + x0, "left").tolist()
    hi = np.searchsorted(ys * stride + x0, (ys - 1) * stride + x1, "right").tolist()
    parent = list(range(len(ys)))

    def find(i):
        while parent[i] != i:
            parent[i] = i = parent[parent[i]]
        return i

    for b in range(len(ys)):
        for a in range(lo[b], hi[b]):
            ra, rb = find(a), find(b)
            parent[max(ra, rb)] = min(ra, rb)  # the earlier run roots its region: raster order
    lengths = x1 - x0
    run = np.repeat(np.arange(len(ys)), lengths)  # each pixel's run
    xs = np.arange(len(run)) - np.repeat(np.cumsum(lengths) - lengths, lengths) + x0[run]
    root = np.array([find(i) for i in range(len(ys))])[run]
    order = np.argsort(root, kind="stable")
    counts = np.bincount(root)
    cuts = np.cumsum(counts[counts > 0])[:-1]
    return list(zip(np.split(xs[order], cuts), np.split(ys[run][order], cuts)))


def enclose(xs, ys):
    """The glue's `enclose`: (cx, cy, width, height, degrees) of the box along the region's principal axis for a
    line (its variance >= 4x across it, turned <= 45 degrees), upright for anything else."""
    mx, my = float(xs.mean()), float(ys.mean())
    dx, dy = xs - mx, ys - my
    cxx, cyy, cxy = float(dx @ dx), float(dy @ dy), float(dx @ dy)
    angle = 0.5 * math.atan2(2 * cxy, cxx - cyy)
    spread = math.hypot((cxx - cyy) / 2, cxy)
    if not ((cxx + cyy) / 2 + spread >= 4 * ((cxx + cyy) / 2 - spread) and abs(angle) <= math.pi / 4):
        angle = 0.0
    sin, cos = math.sin(angle), math.cos(angle)
    u, v = dx * cos + dy * sin, -dx * sin + dy * cos
    if angle != 0 and (float(u.max() - u.min()) + 1) / 2 * abs(sin) <= 1:
        sin, cos, angle, u, v = 0.0, 1.0, 0.0, dx, dy  # its ends move less than a pixel: cut it upright
    u0, u1, v0, v1 = float(u.min()), float(u.max()), float(v.min()), float(v.max())
    uc, vc = (u0 + u1) / 2, (v0 + v1) / 2
    return (mx + uc * cos - vc * sin + 0.5, my + uc * sin + vc * cos + 0.5, u1 - u0 + 1, v1 - v0 + 1,
            math.degrees(angle))


def bounds(box):
    """(x0, y0, x1, y1): the axis-aligned box around a turned one."""
    cx, cy, w, h, a = box
    s, c = abs(math.sin(math.radians(a))), abs(math.cos(math.radians(a)))
    dx, dy = c * w / 2 + s * h / 2, s * w / 2 + c * h / 2
    return cx - dx, cy - dy, cx + dx, cy + dy


def pixels_within(box, width, height):
    """The whole pixels (x, y, w, h) of a width x height image that a box's bounds cover, or None."""
    b = bounds(box)
    x0, y0 = min(max(math.floor(b[0]), 0), width), min(max(math.floor(b[1]), 0), height)
    x1, y1 = min(max(math.ceil(b[2]), 0), width), min(max(math.ceil(b[3]), 0), height)
    return (x0, y0, x1 - x0, y1 - y0) if x1 > x0 and y1 > y0 else None


def mean_inside(prob, box):
    """DB's "fast" score: the mean probability over the pixels whose centres lie inside the turned box."""
    cx, cy, w, h, a = box
    window = pixels_within(box, prob.shape[1], prob.shape[0])
    if window is None:
        return 0.0
    x, y, ww, hh = window
    s, c = math.sin(math.radians(a)), math.cos(math.radians(a))
    gx, gy = np.arange(x, x + ww) + 0.5 - cx, np.arange(y, y + hh)[:, None] + 0.5 - cy
    inside = (np.abs(gx * c + gy * s) <= w / 2 + 1e-3) & (np.abs(gy * c - gx * s) <= h / 2 + 1e-3)
    values = prob[y:y + hh, x:x + ww][inside]
    return float(values.mean()) if values.size else 0.0


def reading_order(a, b):
    """Top to bottom; left to right when their tops are within half the thinner one's height."""
    (ax, ay, _, ay1), (bx, by, _, by1) = bounds(a[0]), bounds(b[0])
    same_line = abs(ay - by) < 0.5 * min(ay1 - ay, by1 - by)
    return (ax > bx) - (ax < bx) if same_line else (ay > by) - (ay < by)


def db_boxes(prob):
    """The glue's `boxes`: threshold, 2x2 dilation (PP-OCR's, so a line's glyphs join up), a box per region,
    those under 3 px or the box threshold dropped, DB's unclip (area x ratio / perimeter), the best top_k."""
    on = prob > THRESHOLD
    mask = on.copy()
    mask[:, 1:] |= on[:, :-1]
    mask[1:] |= mask[:-1].copy()
    found = []
    for xs, ys in regions(mask):
        cx, cy, w, h, a = box = enclose(xs.astype(np.float64), ys.astype(np.float64))
        if min(w, h) >= 3 and (score := mean_inside(prob, box)) >= BOX_THRESHOLD:
            d = w * h * UNCLIP / (2 * (w + h))
            found.append(((cx, cy, w + 2 * d, h + 2 * d, a), score))
    found.sort(key=lambda f: -f[1])
    return sorted(found[:TOP_K], key=functools.cmp_to_key(reading_order))


def scaled(box, sx, sy):
    """From the map's pixels to the image's: the box's axes scale, so a turned box turns a little."""
    cx, cy, w, h, a = box
    s, c = math.sin(math.radians(a)), math.cos(math.radians(a))
    ux, uy, vx, vy = c * w / 2 * sx, s * w / 2 * sy, -s * h / 2 * sx, c * h / 2 * sy
    return cx * sx, cy * sy, 2 * math.hypot(ux, uy), 2 * math.hypot(vx, vy), math.degrees(math.atan2(uy, ux))


def crop_rotated(img, box):
    """The SDK's `crop_rotated`: an upright box cut as whole pixels; a turned one resampled bilinearly (f32, as
    the SDK), upright, edges repeated; None when empty or centred off the image."""
    ih, iw = img.shape[:2]
    cx, cy, w, h, a = box
    if a == 0:
        window = pixels_within(box, iw, ih)
        return None if window is None else img[window[1]:sum(window[1::2]), window[0]:sum(window[0::2])].copy()
    w, h = half_up(w), half_up(h)
    if not (w >= 1 and h >= 1 and 0 <= cx < iw and 0 <= cy < ih):
        return None
    s, c = F32(math.sin(math.radians(a))), F32(math.cos(math.radians(a)))
    du, dv = np.arange(w, dtype=F32) + F32(0.5 - w / 2), np.arange(h, dtype=F32)[:, None] + F32(0.5 - h / 2)
    x = np.clip(F32(cx) + du * c - dv * s - F32(0.5), 0, iw - 1)
    y = np.clip(F32(cy) + du * s + dv * c - F32(0.5), 0, ih - 1)
    x0, y0 = x.astype(np.intp), y.astype(np.intp)
    x1, y1 = np.minimum(x0 + 1, iw - 1), np.minimum(y0 + 1, ih - 1)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    top = img[y0, x0] * (1 - fx) + img[y0, x1] * fx
    bottom = img[y1, x0] * (1 - fx) + img[y1, x1] * fx
    return np.floor(top * (1 - fy) + bottom * fy + F32(0.5)).astype(np.uint8)


def detect(infer, png):
    """The `detect` task: [(line pixels, box in the image, score)] in reading order."""
    image = Image.open(io.BytesIO(png))  # reads the header only: the size is checked before decoding
    if image.size[0] * image.size[1] > MAX_PIXELS:
        raise ValueError(f"the image is {image.size[0]}x{image.size[1]}; at most {MAX_PIXELS} pixels")
    image = image.convert("RGB")
    prob = infer(det_input(image))[0][0, 0]
    rgb, (sx, sy) = np.asarray(image), (image.size[0] / prob.shape[1], image.size[1] / prob.shape[0])
    lines = [(crop_rotated(rgb, box), box, score) for box, score in
             ((scaled(box, sx, sy), score) for box, score in db_boxes(prob))]
    return [line for line in lines if line[0] is not None]


# ---- recognize (functions/ocr-recognize) ---------------------------------------------------------------------

def rec_input(line):
    """Height 48, width rounded up to a multiple of 160 (at least 320), zero-padded on the right."""
    h, w = line.shape[:2]
    scaled_w = min(max(math.ceil(float(F32(w) * F32(REC_HEIGHT) / F32(max(h, 1)))), 1), 4096)
    x = np.zeros((1, 3, REC_HEIGHT, max(-(-scaled_w // 160), 2) * 160), dtype=F32)
    x[..., :scaled_w] = normalise(np.asarray(Image.fromarray(line).resize((scaled_w, REC_HEIGHT), Image.BILINEAR)))
    return x


def recognize(infer, line, charset):
    """The `recognize` task: (text, confidence) by greedy CTC: the best class per step, repeats merged, blanks
    (class 0) dropped, class K+1 a space; confidence the mean probability of the kept steps."""
    probs = infer(rec_input(line))[0][0]
    if probs.shape[1] != len(charset) + 2:
        raise ValueError(f"the recognizer has {probs.shape[1]} classes, the charset {len(charset)} characters")
    best = probs.argmax(axis=1)
    keep = np.nonzero((best != 0) & (best != np.concatenate(([0], best[:-1]))))[0]
    text = "".join(charset[b - 1] if b <= len(charset) else " " for b in best[keep].tolist()).strip()
    return text, float(probs[keep, best[keep]].mean()) if len(keep) else 0.0


# ---- speak (functions/tts-frame and its g2p) -----------------------------------------------------------------

IPA = dict(AA="ɑː", AE="æ", AO="ɔː", AW="aʊ", AY="aɪ", EH="ɛ", EY="eɪ", IH="ɪ", IY="iː", OW="oʊ", OY="ɔɪ",
           UH="ʊ", UW="uː", B="b", CH="tʃ", D="d", DH="ð", F="f", G="ɡ", HH="h", JH="dʒ", K="k", L="l", M="m",
           N="n", NG="ŋ", P="p", R="ɹ", S="s", SH="ʃ", T="t", TH="θ", V="v", W="w", Y="j", Z="z", ZH="ʒ")
REDUCED = {"AH": ("ə", "ʌ"), "ER": ("ɚ", "ɜː")}  # unstressed, stressed
LETTERS = ["EY1", "B IY1", "S IY1", "D IY1", "IY1", "EH1 F", "JH IY1", "EY1 CH", "AY1", "JH EY1", "K EY1",
           "EH1 L", "EH1 M", "EH1 N", "OW1", "P IY1", "K Y UW1", "AA1 R", "EH1 S", "T IY1", "Y UW1", "V IY1",
           "D AH1 B AH0 L Y UW0", "EH1 K S", "W AY1", "Z IY1"]
ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def arpabet_to_ipa(phones):
    out = []
    for phone in phones.split():
        base, stress = (phone[:-1], int(phone[-1])) if phone[-1] in "012" else (phone, 0)
        out.append({1: "ˈ", 2: "ˌ"}.get(stress, "") + (REDUCED[base][stress != 0] if base in REDUCED
                                                       else IPA.get(base, "")))
    return "".join(out)


def number_words(n):
    """Up to 999 999 999 in words, digit by digit beyond, as `g2p::number_words`."""
    if n == 0 or n >= 1_000_000_000:
        return " ".join(ONES[int(d)] for d in str(n))

    def below_thousand(n):
        out, r = [ONES[n // 100], "hundred"] if n >= 100 else [], n % 100
        if r >= 20:
            return out + [TENS[r // 10]] + ([ONES[r % 10]] if r % 10 else [])
        return out + [ONES[r]] if r else out

    out = []
    for scale, name in ((1_000_000, "million"), (1_000, "thousand")):
        if n // scale % 1000:
            out += below_thousand(n // scale % 1000) + [name]
    return " ".join(out + below_thousand(n % 1000))


def phonemize(text, lexicon):
    """IPA of `text` as `g2p::phonemize`: dictionary words, numbers spelled out, unknown words spelled letter by
    letter, `,.!?;:` kept after their word (the voice pauses on them)."""
    words, token = [], []

    def flush():
        word = "".join(token).lower()
        token.clear()
        if word and all("0" <= c <= "9" for c in word):
            n = int(word)  # beyond u64 the glue says each digit
            spoken = number_words(n) if n < 1 << 64 else " ".join(number_words(int(d)) for d in word)
            words.extend(arpabet_to_ipa(lexicon[w]) for w in spoken.split(" ") if w in lexicon)
        elif word in lexicon:
            words.append(arpabet_to_ipa(lexicon[word]))
        elif spelled := [arpabet_to_ipa(LETTERS[ord(c) - 97]) for c in word if "a" <= c <= "z"]:
            words.append(" ".join(spelled))

    for c in text:
        if c.isalnum() or c == "'":
            token.append(c)
        else:
            flush()
            if c in ",.!?;:" and words:
                words[-1] += c
    flush()
    return " ".join(words)


def sentences(text):
    """Split after `.!?…` followed by whitespace or the end, and at line breaks; trimmed, empty ones dropped."""
    out, start = [], 0
    for i, c in enumerate(text):
        if c == "\n" or (c in ".!?…" and (i + 1 == len(text) or text[i + 1].isspace())):
            out.append(text[start:i + 1].strip())
            start = i + 1
    return [s for s in out + [text[start:].strip()] if s]


def speak(infer, text, lexicon, ids_of):
    """The `speak` task: per sentence, phonemes framed as Piper frames them (^, each phoneme then the pad _, $),
    voiced; the 16-bit PCM of the sentences 0.2 s apart, as a WAV."""
    pad, samples = ids_of.get("_", []), []
    for i, sentence in enumerate(sentences(text)):
        ids = ids_of.get("^", []) + pad
        for c in phonemize(sentence, lexicon):
            ids += ids_of[c] + pad if c in ids_of else []
        ids += ids_of.get("$", [])
        audio = infer(np.array([ids], dtype=np.int64), np.array([len(ids)], dtype=np.int64), SCALES)[0]
        samples += [np.zeros(int(SILENCE_S * SAMPLE_RATE), np.int16)] if i > 0 else []
        samples.append((np.clip(audio.ravel(), -1, 1) * 32767).astype(np.int16))
    pcm = np.concatenate(samples).tobytes() if samples else b""
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(pcm), b"WAVE", b"fmt ", 16, 1, 1, SAMPLE_RATE,
                       2 * SAMPLE_RATE, 2, 16, b"data", len(pcm)) + pcm


# ---- the pipeline --------------------------------------------------------------------------------------------

def runner(session):
    """`infer(*inputs)` on one session: inputs in the model's order, as the glue's `jig_sdk::infer` passes them."""
    names = [i.name for i in session.get_inputs()]
    return lambda *inputs: session.run(None, dict(zip(names, inputs)))


class Pool:
    """Sessions of one model, `n` on each provider `(provider, n)` of `sessions`, each running one inference at a
    time and held only for it (not for the glue around it), as jig's instances are: more sessions, more
    inferences at once. An inference takes whichever session is free, so the faster provider serves more."""

    def __init__(self, path, sessions, threads):
        options = ort.SessionOptions()  # as jig's model host sets them
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        self.all, self.free = [], queue.Queue()
        for provider, n in sessions:
            # cuDNN's heuristics pick each convolution's algorithm, as jig's model host has them do: ONNX Runtime's
            # default times every algorithm at each new shape, and the voice meets a new length with almost every
            # line.
            name = "CUDAExecutionProvider" if provider == "cuda" else "CPUExecutionProvider"
            providers = [(name, {"cudnn_conv_algo_search": "HEURISTIC"})] if provider == "cuda" else [name]
            for _ in range(n):
                session = ort.InferenceSession(path, options, providers=providers)
                if name not in session.get_providers():
                    sys.exit(f"{path}: this ONNX Runtime has no {name} ({ort.get_available_providers()}); "
                             "for cuda install onnxruntime-gpu")
                self.all.append(session)
                self.free.put(runner(session))

    def infer(self, *inputs):
        infer = self.free.get()
        try:
            return infer(*inputs)
        finally:
            self.free.put(infer)


class Pipeline:
    """The sign reader's three tasks, their models and their files, for the worker threads of one process."""

    def __init__(self, a):
        providers = (a.det_provider, a.rec_provider, a.voice_provider, a.voice_decoder_provider)
        if "cuda" in providers and hasattr(ort, "preload_dlls"):
            ort.preload_dlls()  # the CUDA and cuDNN of onnxruntime-gpu's nvidia-* wheels, wherever pip put them
        self.det = Pool(a.det, [(a.det_provider, a.sessions_det)], a.threads)
        self.rec = Pool(a.rec, [(a.rec_provider, a.sessions_rec)], a.threads)
        self.voice = Pool(a.voice, [(a.voice_provider, a.sessions_voice), ("cpu", a.voice_cpu_sessions)], a.threads)
        self.decoder = None
        if a.voice_decoder:
            self.decoder = Pool(a.voice_decoder, [(a.voice_decoder_provider, a.sessions_voice_decoder)], a.threads)
        with open(a.charset, encoding="utf-8") as f:  # as Rust's `lines()`: no line after a final newline
            self.charset = [line.removesuffix("\r") for line in f.read().removesuffix("\n").split("\n")]
        with open(a.phonemes, encoding="utf-8") as f:
            self.ids = json.load(f)
        with open(a.lexicon, encoding="utf-8") as f:
            self.lexicon = dict(line.split("\t", 1) for line in f.read().splitlines() if "\t" in line)

    def serve(self, png, deadline=math.inf):
        """One request's answer: per line its text, confidence, box, score and WAV. Raises Expired when the
        deadline passes before a stage: the client has had its 504 by then, and the work would delay others."""

        def due():
            if time.monotonic() > deadline:
                raise Expired

        due()
        answer = []
        for crop, box, score in detect(self.det.infer, png):
            due()
            text, confidence = recognize(self.rec.infer, crop, self.charset)
            answer.append({"text": text, "confidence": confidence, "box": box, "score": score})
            if text:  # `recognize` emits to `speak` only lines with text
                due()
                answer[-1]["wav"] = speak(self.say, text, self.lexicon, self.ids)
        return answer

    def say(self, *inputs):
        """The voice's outputs for one sentence: the whole voice's, or its front's through its decoder."""
        outputs = self.voice.infer(*inputs)
        return outputs if self.decoder is None else self.decoder.infer(outputs[0])

    def warm_up(self, pngs):
        """Every input through every session before the clock starts, so that each has met every shape (on
        CUDA the first run of a shape chooses its kernels)."""
        for png in pngs:
            for crop, _, _ in [detect(runner(s), png) for s in self.det.all][0]:
                for text in {recognize(runner(s), crop, self.charset)[0] for s in self.rec.all} - {""}:
                    for s in self.voice.all:
                        speak(runner(s), text, self.lexicon, self.ids)
                    for s in self.decoder.all if self.decoder else []:
                        speak(lambda *x: runner(s)(self.voice.infer(*x)[0]), text, self.lexicon, self.ids)


# ---- load ----------------------------------------------------------------------------------------------------

def arrivals(rate, duration, seed):
    """`jig bench`'s arrival times: SplitMix64 uniforms (top 53 bits), exponential gaps -ln(1 - u) / rate."""
    mask, state, t, out = (1 << 64) - 1, seed, 0.0, []
    while True:
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        t += -math.log(1.0 - ((z ^ (z >> 31)) >> 11) / (1 << 53)) / rate
        if t >= duration:
            return out
        out.append(t)


def read_inputs(a):
    if not a.inputs:
        sys.exit("no inputs: give --inputs FILE..., or render .jig/samples (make setup)")
    return [open(path, "rb").read() for path in a.inputs]


def start_workers(a, todo, done):
    """A pipeline, warmed up, and --workers threads serving (arrival time, input) from `todo` until None,
    each putting (answered, seconds from arrival) on `done`."""
    pngs, slo = read_inputs(a), a.slo_ms / 1e3
    pipeline = Pipeline(a)
    pipeline.warm_up(pngs)

    def worker():
        while (item := todo.get()) is not None:
            arrived, i = item
            try:
                pipeline.serve(pngs[i], arrived + slo)
                answered = True
            except Expired:
                answered = False
            except Exception as e:  # as a 5xx to jig bench: a violation
                print(f"request failed: {e!r}", file=sys.stderr)
                answered = False
            done.put((answered, time.monotonic() - arrived))  # CLOCK_MONOTONIC: one clock for all processes

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(a.workers)]
    for t in threads:
        t.start()
    return threads


def process_main(a, todo, done):
    """A --processes child: its own sessions and workers on the shared queues. Python runs one thread's glue
    at a time per process; on a machine with many cores the glue needs several processes to keep up."""
    parent = os.getppid()
    threads = start_workers(a, todo, done)
    done.put("ready")
    while any(t.is_alive() for t in threads):
        if os.getppid() != parent:  # orphaned (the run was killed): leave nothing behind
            os._exit(1)
        time.sleep(1)


def run_load(todo, done, a, rate, inputs):
    """Open-loop load at `rate`; its summary as `jig bench` counts (quantiles over all requests, failed ones
    at the time they failed; the nearest rank, as jig's `stats::quantile`)."""
    times, slo = arrivals(rate, a.duration, a.seed), a.slo_ms / 1e3
    start = time.monotonic()
    for i, t in enumerate(times):
        time.sleep(max(0.0, start + t - time.monotonic()))
        todo.put((start + t, i % inputs))  # timed from when it was due, however late it is sent
    # Every request is answered or dropped by its deadline, give or take a stage.
    records = [done.get(timeout=slo + 120) for _ in times]
    latencies = sorted(latency for _, latency in records)
    good = sum(1 for answered, latency in records if answered and latency <= slo)
    q = lambda p: round(latencies[half_up((len(latencies) - 1) * p)] * 1e3, 1) if latencies else 0.0
    return {"rate": rate, "sent": len(times), "ok": sum(1 for answered, _ in records if answered),
            "in_slo": round(good / max(len(times), 1), 4), "goodput": round(good / a.duration, 2),
            "p50_ms": q(0.5), "p95_ms": q(0.95), "p99_ms": q(0.99)}


def find_capacity(in_slo, rate, steps=3, reach=12):
    """scripts/capacity.sh's search: a quarter up or down until the verdict (>= 99% in SLO) turns, at most `reach`
    times (1.25^12 is 14.6x either way), then `steps` bisections of the bracket. The highest rate that passed, and
    whether a rate above it failed: where none did, the capacity is at least that (six steps once stopped the
    bare pipeline's search on an H200 at 33.81 req/s, every rate passed)."""
    lo, hi = 0.0, None
    for _ in range(reach):
        if in_slo(rate) >= 0.99:
            lo, rate = rate, round(rate * 1.25, 2)
        else:
            hi, rate = rate, round(rate / 1.25, 2)
        if hi is not None and lo > 0:
            break
    for _ in range(steps if hi is not None else 0):
        rate = round((lo + hi) / 2, 2)
        lo, hi = (rate, hi) if in_slo(rate) >= 0.99 else (lo, rate)
    return lo, hi is not None


def check(a):
    """Each input once: what was read, and how long it took alone."""
    pipeline = Pipeline(a)
    for path, png in zip(a.inputs, read_inputs(a)):
        t = time.monotonic()
        lines = pipeline.serve(png)
        print(json.dumps({"input": os.path.basename(path), "ms": round((time.monotonic() - t) * 1e3, 1),
                          "lines": [[line["text"], round(line["confidence"], 3), len(line.get("wav", b""))]
                                    for line in lines]}, ensure_ascii=False))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("det", "ppocr-det.onnx"), ("rec", "ppocr-rec.onnx"), ("voice", "piper-joe.onnx"),
                          ("charset", "ppocr-rec.charset.txt"), ("phonemes", "piper-joe.phonemes.json"),
                          ("lexicon", "cmudict.txt")):
        p.add_argument(f"--{name}", default=os.path.join(MODELS, default), metavar="PATH",
                       help=f"default .jig/models/{default}")
    # Defaults for 2 cores: the voice is over half of a request's CPU, so with one session it would hold one
    # core while the other idles. With 3 voice sessions and 6 workers --find-capacity found 15.0 and 15.94
    # req/s, with 2 and 4 13.88 (det-480, 2026-11-28, on the 2-vCPU machine of BENCHMARKS.md).
    for model, sessions in (("det", 1), ("rec", 1), ("voice", 3)):
        p.add_argument(f"--{model}-provider", choices=["cpu", "cuda"], default="cpu")
        p.add_argument(f"--sessions-{model}", type=int, default=sessions, metavar="N",
                       help=f"{model} sessions per process ({sessions})")
    p.add_argument("--voice-cpu-sessions", type=int, default=0, metavar="N",
                   help="voice sessions per process on CPU threads beside the --voice-provider cuda ones; a line "
                        "takes whichever is free (0)")
    p.add_argument("--voice-decoder", metavar="PATH",
                   help="the voice cut in two (scripts/models.py): --voice is then its front, and this its decoder, "
                        "which each line's front output goes through next")
    p.add_argument("--voice-decoder-provider", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--sessions-voice-decoder", type=int, default=1, metavar="N",
                   help="decoder sessions per process (1)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per CPU session (1)")
    p.add_argument("--workers", type=int, default=6, help="request threads per process (6)")
    p.add_argument("--processes", type=int, default=1, help="processes, each with its own sessions (1)")
    p.add_argument("--inputs", nargs="+", metavar="FILE", help="PNGs, cycled (default .jig/samples/*.png)",
                   default=sorted(glob.glob(os.path.join(ROOT, ".jig", "samples", "*.png"))))
    p.add_argument("--rate", type=float, default=12.0, help="req/s; where --find-capacity starts (12)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals per rate (30)")
    p.add_argument("--slo-ms", type=float, default=5000.0, help="the latency SLO (the app's: 5000)")
    p.add_argument("--seed", type=int, default=1, help="of the arrival times (1, as jig bench's)")
    p.add_argument("--find-capacity", action="store_true", help="search the highest rate with >= 99%% in SLO")
    p.add_argument("--check", action="store_true", help="read each input once, print what was read, and exit")
    a = p.parse_args()
    if a.check:
        return check(a)
    if a.processes == 1:
        todo, done = queue.Queue(), queue.Queue()
        start_workers(a, todo, done)
    else:  # spawned, not forked: CUDA and ONNX Runtime's threads do not survive a fork
        ctx = multiprocessing.get_context("spawn")
        todo, done = ctx.Queue(), ctx.Queue()
        children = [ctx.Process(target=process_main, args=(a, todo, done), daemon=True)
                    for _ in range(a.processes)]
        for child in children:
            child.start()
        ready = 0
        while ready < a.processes:  # each says "ready" once loaded and warmed up
            try:
                ready += done.get(timeout=1) == "ready"
            except queue.Empty:
                if not all(child.is_alive() for child in children):
                    sys.exit("a worker process ended before it was ready (its error is above)")

    def in_slo(rate):
        summary = run_load(todo, done, a, rate, len(a.inputs))
        print(json.dumps(summary), flush=True)
        time.sleep(1)  # every request has been answered or dropped; a breath before the next rate
        return summary["in_slo"]

    if a.find_capacity:
        capacity, bounded = find_capacity(in_slo, a.rate)
        print(json.dumps({"capacity_rps": capacity, "bounded": bounded}))
    else:
        in_slo(a.rate)
    for _ in range(a.processes * a.workers):
        todo.put(None)


if __name__ == "__main__":
    main()
