"""What the figure tests share: the command line run in-process, a figure's spec, the pixels of its lines, and replayed
boards."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import matplotlib.image

from tf_mobileperf.cli.parser import main
from tf_mobileperf.figures.specs import figures

DATA = Path(__file__).resolve().parents[1] / "data"


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def line_pixels(png: Path) -> int:
    """How many pixels of ``png`` are coloured (lines, markers, their legend): not white, grey or black."""
    image = matplotlib.image.imread(png)[..., :3]
    return int((image.max(axis=-1) - image.min(axis=-1) > 0.25).sum())


def spec(rows: list[dict], name: str):
    return next(s for s in figures(rows) if s.name == name)


#: board_type -> (board, host, jetpack), as the fleet sweep records them.
BOARDS = {
    "agx-orin": ("NVIDIA Jetson AGX Orin Developer Kit (p3701-0005)", "agx-orin-1", "6.0"),
    "tx2": ("NVIDIA Jetson TX2 Developer Kit (p3310-1000)", "tx2-1", "4.6.4"),
    "nano": ("NVIDIA Jetson Nano Developer Kit (p3450-0000)", "nano-1", "4.6.4"),
}


def replay_log(tmp: Path, name: str) -> Path:
    """The recorded log repeated to 6000 lines, five minutes at 20x (a line a second: its timestamps are dropped, or
    the repeats of a two-line log would be read as one second). A run of 10 steps takes seconds, but a minute
    when four test workers share two cores, and a run that outlasts its log has no energy after it."""
    text = "".join(
        re.sub(r"^\d\d-\d\d-\d{4} \d\d:\d\d:\d\d ", "", line)
        for line in (DATA / f"{name}_tegrastats.log").read_text().splitlines(keepends=True)
    )
    path = tmp / f"{name}_long.log"
    path.write_text(text * (6000 // text.count("\n")))
    return path


def make_fleet(base: Path) -> Path:
    """The fleet sweep of three replayed boards under ``base``: made the first time, found after that (the caller
    holds a lock where several processes share ``base``)."""
    tmp = base / "fleet"
    if (tmp / "fleet" / "results.json").exists():
        return tmp / "fleet"
    shutil.rmtree(tmp, ignore_errors=True)  # a run that died while making it
    tmp.mkdir()
    sweeps = {
        "agx-orin": [
            "--models",
            "cnn,lstm",
            "--batch-sizes",
            "1,4",
            "--steps",
            "5",
            "--sensors",
            f"replay:{replay_log(tmp, 'orin')}@20",
        ],
        "tx2": [
            "--models",
            "cnn",
            "--batch-sizes",
            "1,4",
            "--steps",
            "5",
            "--sensors",
            f"replay:{replay_log(tmp, 'tx2')}@20",
        ],
        "nano": [
            "--models",
            "cnn",
            "--batch-sizes",
            "64",
            "--input-size",
            "224",
            "--memory-limit",
            "1GiB",
            "--steps",
            "4",
        ],
    }
    out = tmp / "fleet"
    rows = []
    for board_type, argv in sweeps.items():
        code, _, stderr = run_cli(["sweep", *argv, "--out", str(tmp / board_type)])
        assert code == 0, stderr[-3000:]
        board, host, jetpack = BOARDS[board_type]
        for row in json.loads((tmp / board_type / "results.json").read_text()):
            run = out / "runs" / board_type / Path(row["logdir"]).name
            run.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(row["logdir"], run)
            relabel(run, {"board": board, "hostname": host, "jetpack": jetpack})
            rows.append(
                row
                | {
                    "board_type": board_type,
                    "board": board,
                    "host": host,
                    "jetpack": jetpack,
                    "logdir": str(run),
                    "config": row["config"] | {"board_type": board_type},
                }
            )
    (out / "results.json").write_text(json.dumps(rows))
    return out


def relabel(run: Path, device: dict) -> None:
    """Sets the board of a run's report and of its run summary (the dashboard's entry) to ``device``'s fields."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter
    from tensorboard.util import tensor_util

    from tf_mobileperf.format import names
    from tf_mobileperf.format.summary import run_summary

    for name in ("report.json", "summary.json"):
        if not (run / name).exists():  # a child killed before its first report
            continue
        data = json.loads((run / name).read_text())
        data["device"] |= device
        (run / name).write_text(json.dumps(data))
    for path in (run / "train").glob("events.out.tfevents.*"):
        events = [event_pb2.Event.FromString(r) for r in RawEventFileLoader(str(path)).Load()]
        for event in events:
            for value in event.summary.value:
                if value.tag == names.RUN_TAG:
                    summary = json.loads(tensor_util.make_ndarray(value.tensor).item())
                    if "device" in summary:
                        summary["device"] |= device
                        value.CopyFrom(run_summary(summary).value[0])
        with open(path, "wb") as f:
            writer = RecordWriter(f)
            for event in events:
                writer.write(event.SerializeToString())
            writer.close()
