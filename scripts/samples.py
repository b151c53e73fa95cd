"""Render the images the sign reader is tested, demonstrated and evaluated on: signs with known text.

    python3 scripts/samples.py OUT_DIR

Writes OUT_DIR/<name>.png and OUT_DIR/samples.json ({"<name>.png": ["LINE", ...]}, the lines in reading
order): five sample signs, and OUT_DIR/eval/ with the labelled evaluation set (same layout) that variant
accuracies are measured on (`scripts/eval_sign_reader.py`). Deterministic: Pillow's built-in font, and a
seeded generator for the evaluation set's words, sizes, colours and noise. Skips what exists.
"""

import json
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFilter, ImageFont

# name: (background, foreground, size, lines)
SIGNS = {
    "stop": ((200, 16, 32), (255, 255, 255), (480, 240), ["STOP"]),
    "main-street": ((16, 110, 60), (255, 255, 255), (720, 200), ["MAIN STREET"]),
    "no-parking": ((250, 250, 245), (180, 20, 20), (640, 360), ["NO PARKING", "ANY TIME"]),
    "exit": ((20, 120, 40), (255, 255, 255), (520, 220), ["EXIT 12"]),
    "blank": ((90, 110, 160), (90, 110, 160), (400, 300), []),
}


def render(background, foreground, size, lines, font_size=64):
    image = Image.new("RGB", size, background)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=font_size)
    heights = [draw.textbbox((0, 0), line, font=font)[3] for line in lines]
    gap = font_size // 2
    y = (size[1] - sum(heights) - gap * (len(lines) - 1)) // 2
    for line, height in zip(lines, heights):
        width = draw.textlength(line, font=font)
        draw.text(((size[0] - width) // 2, y), line, font=font, fill=foreground)
        y += height + gap
    return image


# Words signs carry, for the evaluation set.
WORDS = """STOP EXIT ENTRANCE NO PARKING ONE WAY SPEED LIMIT SLOW SCHOOL ZONE DETOUR ROAD WORK AHEAD YIELD
LEFT RIGHT LANE ONLY BUS TAXI BIKE PATH KEEP CLEAR OPEN CLOSED PUSH PULL PRIVATE DANGER CAUTION WET FLOOR
STAFF FIRE DOOR ALARM LIFT STAIRS TOILETS CAFE PHARMACY HOTEL STATION PLATFORM MARKET STREET AVENUE ROAD
BRIDGE TUNNEL CENTRE NORTH SOUTH EAST WEST AIRPORT HARBOUR MUSEUM LIBRARY PARK GARDEN SQUARE""".split()


def eval_signs(count=40, seed=7):
    """`count` signs of one or two lines of one to three words, with their lines."""
    rng = random.Random(seed)
    signs = {}
    for i in range(count):
        lines = []
        for _ in range(rng.choice([1, 1, 2])):
            words = [rng.choice(WORDS) for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.25:
                words.append(str(rng.randint(1, 120)))
            lines.append(" ".join(words))
        background = tuple(rng.randint(0, 255) for _ in range(3))
        # Contrast from faint to full: the foreground moves from the background towards its opposite.
        contrast = rng.uniform(0.25, 1.0)
        opposite = tuple(0 if c > 127 else 255 for c in background)
        foreground = tuple(round(b + contrast * (o - b)) for b, o in zip(background, opposite))
        size = rng.choice([12, 16, 20, 28, 40, 56])
        signs[f"eval-{i:02}"] = (background, foreground, size, lines, rng.random() * 12, rng.uniform(0, 1.5))
    return signs


def render_eval(background, foreground, font_size, lines, noise, blur, rng):
    font = ImageFont.load_default(size=font_size)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    widths = [probe.textlength(line, font=font) for line in lines]
    width, height = int(max(widths)) + 2 * font_size, (len(lines) * 2 + 1) * font_size
    image = render(background, foreground, (width, height), lines, font_size)
    if noise:
        pixels = image.load()
        for _ in range(width * height // 8):
            x, y = rng.randrange(width), rng.randrange(height)
            pixels[x, y] = tuple(max(0, min(255, c + rng.randint(-int(noise) * 4, int(noise) * 4))) for c in pixels[x, y])
    return image.filter(ImageFilter.GaussianBlur(blur)) if blur > 0.3 else image


def write_set(out, signs, render_one):
    os.makedirs(out, exist_ok=True)
    written = []
    for name, spec in signs.items():
        path = os.path.join(out, name + ".png")
        if not os.path.exists(path):
            render_one(name, spec).save(path + ".tmp", format="PNG")
            os.replace(path + ".tmp", path)
            written.append(name)
    index = os.path.join(out, "samples.json")
    with open(index + ".tmp", "w") as f:
        json.dump({name + ".png": spec[3] for name, spec in signs.items()}, f, indent=1)
    os.replace(index + ".tmp", index)
    if written:
        print(f"samples: wrote {len(written)} images to {out}")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else ".jig/samples"
    write_set(out, SIGNS, lambda name, spec: render(*spec))
    write_set(os.path.join(out, "eval"), eval_signs(), lambda name, spec: render_eval(*spec, rng=random.Random(name)))


if __name__ == "__main__":
    main()
