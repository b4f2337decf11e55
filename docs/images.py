"""Makes the README's pictures small: the dashboard with three runs of three devices overlaid, and every figure
of `mobileperf plot` (of a recorded sweep on a replayed TX2, and an empty panel of a CPU-only sweep).

The browser and plot tests save full-size screenshots under tests/_output/; this crops the dashboard's
to the top of the tab (runs table, cross-run chart, the overlaid power and memory charts) and writes them all
as small PNGs here. Run through `make docs-images`, which runs those tests first.
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


#: The figures `mobileperf plot` writes, in its order.
FIGURES = ("step_time", "throughput", "gpu_util", "cpu_util", "power", "energy", "memory")

if __name__ == "__main__":
    shrink("timeview-three-devices.png", "dashboard.png", 900, crop_height=1560)
    for name in FIGURES:
        panels = round(Image.open(OUTPUT / f"plot-{name}.png").width / 550)  # 5.5 in at 100 dpi a panel
        shrink(f"plot-{name}.png", f"figure-{name}.png", {1: 550, 2: 900}.get(panels, 1100))
    shrink("plot-gpu_util-cpu-only.png", "figure-empty-panel.png", 450)
