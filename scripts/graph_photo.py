"""The photo scripts/validate_graph.sh sends: eval-03.png (570x200, "ROAD" / "PATH PLATFORM DETOUR") in the middle
of a grey 960x640 frame, the size the script profiles the detector at. Made once here so that a machine without
Pillow (a lent GPU's) can be given the same photo (docs/benchmarks/2026-11-29-h200/stage.sh).

Usage: PYTHONPATH=.jig/python python3 scripts/graph_photo.py SIGN.png OUT.png
"""

import sys

from PIL import Image

sign = Image.open(sys.argv[1]).convert("RGB")
photo = Image.new("RGB", (960, 640), (128, 128, 128))
photo.paste(sign, ((960 - sign.width) // 2, (640 - sign.height) // 2))
photo.save(sys.argv[2])
