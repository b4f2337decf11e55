"""Image models: the paper's small CNN, ResNet50/152, VGG19, and a DCGAN."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tf_mobileperf.zoo.base import ModelSpec
from tf_mobileperf.zoo.shapes import CNN_WINDOWS


def _classifier(model: keras.Model) -> keras.Model:
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _images(rng, n, size, classes=10):
    return rng.random((n, size, size, 3), dtype=np.float32), rng.integers(0, classes, n)


def build_cnn(size: int) -> keras.Model:
    """Convolutions (ReLU) and poolings of ``shapes.CNN_WINDOWS``, then two dense layers.

    Args:
        size: Side of the square RGB images in pixels (at least 10: ``shapes.RULES``).

    Returns:
        The compiled ``keras.Model`` named "cnn" (10 class logits, SGD).
    """
    windows = [w.layer(activation="relu") if w.filters else w.layer() for w in CNN_WINDOWS]
    return _classifier(
        keras.Sequential(
            [
                keras.Input((size, size, 3)),
                *windows,
                keras.layers.Flatten(),
                keras.layers.Dense(128, activation="relu"),
                keras.layers.Dense(10),
            ],
            name="cnn",
        )
    )


def _application(factory, name):
    def build(size: int) -> keras.Model:
        return _classifier(factory(weights=None, input_shape=(size, size, 3), classes=10, name=name))

    return build


class _DCGAN(keras.Model):
    """Generator and discriminator trained in one step, each with its own optimizer."""

    def __init__(self, size: int, latent: int = 100):
        super().__init__(name="dcgan")
        self.latent = latent
        base = size // 4
        self.generator = keras.Sequential(
            [
                keras.Input((latent,)),
                keras.layers.Dense(base * base * 128),
                keras.layers.LeakyReLU(0.2),
                keras.layers.Reshape((base, base, 128)),
                keras.layers.Conv2DTranspose(128, 4, strides=2, padding="same"),
                keras.layers.LeakyReLU(0.2),
                keras.layers.Conv2DTranspose(64, 4, strides=2, padding="same"),
                keras.layers.LeakyReLU(0.2),
                keras.layers.Conv2D(3, 3, padding="same", activation="tanh"),
            ]
        )
        self.discriminator = keras.Sequential(
            [
                keras.Input((size, size, 3)),
                keras.layers.Conv2D(64, 4, strides=2, padding="same"),
                keras.layers.LeakyReLU(0.2),
                keras.layers.Conv2D(128, 4, strides=2, padding="same"),
                keras.layers.LeakyReLU(0.2),
                keras.layers.Flatten(),
                keras.layers.Dense(1),
            ]
        )
        self.loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

    def compile(self):
        super().compile()
        self.d_optimizer = keras.optimizers.Adam(2e-4, beta_1=0.5)
        self.g_optimizer = keras.optimizers.Adam(2e-4, beta_1=0.5)

    def call(self, z):
        return self.generator(z)

    def train_step(self, data):
        real = data[0] if isinstance(data, tuple) else data
        n = tf.shape(real)[0]
        z = tf.random.normal((n, self.latent))
        with tf.GradientTape() as tape:
            fake = self.generator(z)
            logits = tf.concat([self.discriminator(real), self.discriminator(fake)], 0)
            labels = tf.concat([tf.ones((n, 1)), tf.zeros((n, 1))], 0)
            d_loss = self.loss_fn(labels, logits)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        with tf.GradientTape() as tape:
            g_loss = self.loss_fn(tf.ones((n, 1)), self.discriminator(self.generator(z)))
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        return {"d_loss": d_loss, "g_loss": g_loss}


def build_dcgan(size: int) -> keras.Model:
    """A DCGAN whose generator and discriminator train in one step, each with its own Adam.

    Args:
        size: Side of the square RGB images in pixels, a multiple of 4 (the generator doubles ``size // 4`` twice).

    Returns:
        The compiled ``keras.Model`` named "dcgan"; its ``fit`` reports ``d_loss`` and ``g_loss``.
    """
    model = _DCGAN(size)
    model.compile()
    return model


def _gan_images(rng, n, size):
    x = rng.uniform(-1, 1, (n, size, size, 3)).astype(np.float32)
    return x, np.zeros((n, 1), np.float32)


CNN = ModelSpec("cnn", "CNN", build_cnn, _images, 32, "keras.datasets.cifar10")
RESNET50 = ModelSpec(
    "resnet50", "CNN", _application(keras.applications.ResNet50, "resnet50"), _images, 32, "keras.datasets.cifar10"
)
RESNET152 = ModelSpec(
    "resnet152", "CNN", _application(keras.applications.ResNet152, "resnet152"), _images, 32, "keras.datasets.cifar10"
)
VGG19 = ModelSpec(
    "vgg19", "CNN", _application(keras.applications.VGG19, "vgg19"), _images, 32, "keras.datasets.cifar10"
)
DCGAN = ModelSpec("dcgan", "GAN", build_dcgan, _gan_images, 32, "keras.datasets.cifar10")
