"""The seed's CNN case: a small CNN on CIFAR-10, measured per step.

    python examples/cifar10_cnn.py --steps 30 [--synthetic]
"""

from __future__ import annotations

import keras

from _common import finish, parser, setup_logging
from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.zoo import get


def main() -> None:
    p = parser(__doc__.splitlines()[0], batch_size=32, steps=50, logdir="runs/cifar10")
    p.add_argument("--synthetic", action="store_true", help="random images instead of keras.datasets.cifar10")
    args = p.parse_args()
    setup_logging()
    spec = get("cnn")
    if args.synthetic:
        x, y = spec.synthetic(args.batch_size, args.steps)
    else:
        (x, y), _ = keras.datasets.cifar10.load_data()
        x, y = x[: args.batch_size * args.steps].astype("float32") / 255.0, y[: args.batch_size * args.steps]
    cb = MobilePerfCallback(args.logdir, sensors=args.sensors, batch_size=args.batch_size)
    spec.build(32).fit(x, y, batch_size=args.batch_size, epochs=1, callbacks=[cb], verbose=2)
    finish(cb.report, cb.monitor.logdir)


if __name__ == "__main__":
    main()
