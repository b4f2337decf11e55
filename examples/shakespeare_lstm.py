"""Character-level LSTM language model on Shakespeare, measured per step.

Loads the usual tinyshakespeare text with keras.utils.get_file (or --data
PATH); --synthetic uses random characters, as does a machine without network
(it says so).

    python examples/shakespeare_lstm.py --steps 30 [--synthetic] [--no-prefetch]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.zoo.sequence import build_char_lstm

from _common import download_or, finish, parser, progress, setup_logging, traced_steps, with_prefetch

URL = "https://storage.googleapis.com/download.tensorflow.org/data/shakespeare.txt"


def random_text() -> str:
    rng = np.random.default_rng(0)
    return "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz ,.\n"), 200_000))


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def load_text(path: str | None, synthetic: bool) -> str:
    if synthetic:
        return random_text()
    if path:
        return read(path)
    return download_or("tinyshakespeare", lambda: read(keras.utils.get_file("shakespeare.txt", URL)), random_text)


def dataset(text: str, seq_len: int, batch_size: int, prefetch: bool) -> tuple[tf.data.Dataset, int]:
    vocab = sorted(set(text))
    ids = np.array([vocab.index(c) for c in text[:500_000]] if len(vocab) > 0 else [], dtype=np.int32)
    chunks = tf.data.Dataset.from_tensor_slices(ids).batch(seq_len + 1, drop_remainder=True)
    data = chunks.map(lambda c: (c[:-1], c[1:])).shuffle(10_000, seed=0).batch(batch_size, drop_remainder=True).repeat()
    return with_prefetch(data, prefetch), len(vocab)


def _readable(path: str) -> str:
    if not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"{path} is not a file" if Path(path).exists() else f"{path} does not exist")
    return path


def main() -> None:
    p = parser(__doc__.splitlines()[0], batch_size=32, steps=50, logdir="runs/shakespeare")
    p.add_argument("--seq-len", type=int, default=100)
    p.add_argument("--data", type=_readable, default=None, help="a text file instead of tinyshakespeare")
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--no-prefetch", action="store_true")
    args = p.parse_args()
    setup_logging()
    data, vocab = dataset(load_text(args.data, args.synthetic), args.seq_len, args.batch_size, not args.no_prefetch)
    model = build_char_lstm(args.seq_len, vocab=vocab)
    cb = MobilePerfCallback(
        args.logdir, sensors=args.sensors, batch_size=args.batch_size, profile_steps=traced_steps(args.steps)
    )
    # Shuffled by the pipeline: fit does not shuffle a tf.data.Dataset (and warns if asked to).
    model.fit(
        data, steps_per_epoch=args.steps, epochs=1, shuffle=False, callbacks=[cb, progress(args.steps)], verbose=0
    )
    finish(cb.report, cb.monitor.logdir)


if __name__ == "__main__":
    main()
