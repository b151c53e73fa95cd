"""Render the sample images the sign reader is tested and demonstrated on: signs with known text.

    python3 scripts/samples.py OUT_DIR

Writes OUT_DIR/<name>.png and OUT_DIR/samples.json ({"<name>.png": ["LINE", ...]}, the lines in reading
order). Deterministic: Pillow's built-in font at fixed sizes, no randomness. Skips what exists.
"""

import json
import os
import sys

from PIL import Image, ImageDraw, ImageFont

# name: (background, foreground, size, lines)
SIGNS = {
    "stop": ((200, 16, 32), (255, 255, 255), (480, 240), ["STOP"]),
    "main-street": ((16, 110, 60), (255, 255, 255), (720, 200), ["MAIN STREET"]),
    "no-parking": ((250, 250, 245), (180, 20, 20), (640, 360), ["NO PARKING", "ANY TIME"]),
    "exit": ((20, 120, 40), (255, 255, 255), (520, 220), ["EXIT 12"]),
    "blank": ((90, 110, 160), (90, 110, 160), (400, 300), []),
}


def render(background, foreground, size, lines):
    image = Image.new("RGB", size, background)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=64)
    heights = [draw.textbbox((0, 0), line, font=font)[3] for line in lines]
    y = (size[1] - sum(heights) - 30 * (len(lines) - 1)) // 2
    for line, height in zip(lines, heights):
        width = draw.textlength(line, font=font)
        draw.text(((size[0] - width) // 2, y), line, font=font, fill=foreground)
        y += height + 30
    return image


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else ".jig/samples"
    os.makedirs(out, exist_ok=True)
    written = []
    for name, (background, foreground, size, lines) in SIGNS.items():
        path = os.path.join(out, name + ".png")
        if not os.path.exists(path):
            render(background, foreground, size, lines).save(path + ".tmp", format="PNG")
            os.replace(path + ".tmp", path)
            written.append(name)
    index = os.path.join(out, "samples.json")
    with open(index + ".tmp", "w") as f:
        json.dump({name + ".png": lines for name, (_, _, _, lines) in SIGNS.items()}, f, indent=1)
    os.replace(index + ".tmp", index)
    if written:
        print(f"samples: wrote {', '.join(written)} to {out}")


if __name__ == "__main__":
    main()
