"""Makes the README's two pictures small: the dashboard's time view and one figure of `mobileperf plot`.

The browser and plot tests save full-size screenshots under tests/_output/; this crops the dashboard's
to the top of the tab (runs table, cross-run chart, overlaid time view) and writes both as small PNGs here.
Run through `make docs-images`, which runs those tests first.
"""

from pathlib import Path

from PIL import Image

HERE = Path(__file__).parent
OUTPUT = HERE.parent / "tests" / "_output"


def shrink(source: str, target: str, width: int, crop_height: int | None = None) -> None:
    image = Image.open(OUTPUT / source).convert("RGB")
    if crop_height:
        image = image.crop((0, 0, image.width, min(crop_height, image.height)))
    image = image.resize((width, round(image.height * width / image.width)), Image.LANCZOS)
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(HERE / target, optimize=True)


if __name__ == "__main__":
    shrink("timeview-overlaid.png", "dashboard.png", 900, crop_height=1520)
    shrink("plot-memory-cpu-sweep.png", "figure-memory.png", 800)
