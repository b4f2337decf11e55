"""The seed's CNN case: a small CNN on CIFAR-10, measured per step.

    python examples/cifar10_cnn.py --steps 30 [--synthetic] [--no-prefetch]

Without network (CIFAR-10 cannot be downloaded) it says so and trains on
random images, as with ``--synthetic``.

The input pipeline normalizes and randomly flips each image in tf.data, with
or without ``prefetch``: steps 5 and 6 are traced, and the example prints
how long each waited for its batch.
"""

from __future__ import annotations

import functools

import keras
import tensorflow as tf

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.zoo import get

from _common import download_or, finish, parser, progress, setup_logging, traced_steps, with_prefetch


def cifar10(samples: int):
    """The first ``samples`` CIFAR-10 training images, scaled to [0, 1], and their labels."""
    (x, y), _ = keras.datasets.cifar10.load_data()
    return x[:samples].astype("float32") / 255.0, y[:samples]


def main() -> None:
    p = parser(__doc__.splitlines()[0], batch_size=32, steps=50, logdir="runs/cifar10")
    p.add_argument("--synthetic", action="store_true", help="random images instead of keras.datasets.cifar10")
    p.add_argument("--no-prefetch", action="store_true")
    args = p.parse_args()
    setup_logging()
    spec = get("cnn")
    synthetic = functools.partial(spec.synthetic, args.batch_size, args.steps)
    x, y = (
        synthetic()
        if args.synthetic
        else download_or("CIFAR-10", lambda: cifar10(args.batch_size * args.steps), synthetic)
    )
    data = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .map(lambda image, label: (tf.image.random_flip_left_right(tf.image.per_image_standardization(image)), label))
        .batch(args.batch_size)
    )
    data = with_prefetch(data, not args.no_prefetch)
    cb = MobilePerfCallback(
        args.logdir, sensors=args.sensors, batch_size=args.batch_size, profile_steps=traced_steps(args.steps)
    )
    # A tf.data pipeline is not shuffled by fit (Keras warns that shuffle=True is ignored); the order is the data's.
    spec.build(32).fit(data, epochs=1, shuffle=False, callbacks=[cb, progress(args.steps)], verbose=0)
    finish(cb.report, cb.monitor.logdir)


if __name__ == "__main__":
    main()
