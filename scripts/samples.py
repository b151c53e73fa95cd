"""Render the images the sign reader is tested, demonstrated and evaluated on: signs with known text.

    python3 scripts/samples.py OUT_DIR

Writes OUT_DIR/<name>.png and OUT_DIR/samples.json ({"<name>.png": ["LINE", ...]}, the lines in reading
order): five sample signs, OUT_DIR/eval/ with the labelled evaluation set (same layout) that variant
accuracies are measured on (`scripts/eval_sign_reader.py`), and OUT_DIR/photos/ with signs as people
photograph them: a coloured panel with serif or sans capitals, large or small, turned up to 10° either way in
a grey surround (`scripts/eval_sign_reader.py --set photos --reference` compares jig with rapidocr on them).
Deterministic: Pillow's built-in font and DejaVu's (Debian's `fonts-dejavu-core`, which set-up installs), and
seeded generators for words, sizes, colours, turns and noise. Skips what exists.
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


def render(background, foreground, size, lines, font_size=64, font=None):
    image = Image.new("RGB", size, background)
    draw = ImageDraw.Draw(image)
    font = font or ImageFont.load_default(size=font_size)
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


# DejaVu, from Debian's fonts-dejavu-core.
FONTS = {
    "sans": "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    "serif": "/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf",
}
# (panel, text) colours of signs.
PANELS = [
    ((236, 232, 222), (190, 30, 30)),  # red on a light panel
    ((20, 110, 60), (250, 250, 250)),  # white on green
    ((245, 200, 20), (20, 20, 20)),  # black on yellow
    ((25, 60, 150), (250, 250, 250)),  # white on blue
    ((250, 250, 250), (30, 60, 160)),  # blue on white
    ((120, 30, 40), (240, 220, 150)),  # cream on maroon
]


def photo_signs(count=40, seed=11):
    """`count` signs as photographed, with their lines: one or two lines of one or two words."""
    rng = random.Random(seed)
    signs = {}
    for i in range(count):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 2))) for _ in range(rng.choice([1, 2]))]
        panel, text = rng.choice(PANELS)
        font = rng.choice(sorted(FONTS))
        size = rng.choice([rng.randint(64, 110), rng.randint(20, 32)])
        turn = rng.uniform(-10, 10)
        signs[f"photo-{i:02}"] = (panel, text, (font, size, turn), lines, rng.randint(90, 170))
    return signs


def render_photo(panel, text, style, lines, surround, rng):
    font_name, size, turn = style
    font = ImageFont.truetype(FONTS[font_name], size)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    width = int(max(probe.textlength(line, font=font) for line in lines)) + 2 * size
    height = (len(lines) * 2 + 1) * size
    sign = render(panel, text, (width, height), lines, size, font=font).convert("RGBA")
    sign = sign.rotate(turn, resample=Image.BICUBIC, expand=True)
    margin = size * 2
    photo = Image.new("RGB", (sign.width + 2 * margin, sign.height + 2 * margin), (surround,) * 3)
    photo.paste(sign, (margin, margin), sign)
    pixels = photo.load()
    for _ in range(photo.width * photo.height // 10):
        x, y = rng.randrange(photo.width), rng.randrange(photo.height)
        pixels[x, y] = tuple(max(0, min(255, c + rng.randint(-24, 24))) for c in pixels[x, y])
    return photo.filter(ImageFilter.GaussianBlur(0.6))


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
    if all(os.path.exists(f) for f in FONTS.values()):
        write_set(os.path.join(out, "photos"), photo_signs(), lambda name, spec: render_photo(*spec, rng=random.Random(name)))
    else:
        print("samples: no DejaVu fonts (Debian's fonts-dejavu-core); skipping the photographed signs", file=sys.stderr)


if __name__ == "__main__":
    main()
