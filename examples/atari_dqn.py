"""DQN on an Atari 2600 game (gymnasium + ale-py), every training step measured.

Standard preprocessing (ALE frame skip 4, grayscale, 84x84, a stack of 4
frames), a replay buffer, a target network synced every --target-every
steps, a linear epsilon schedule, and a custom tf.GradientTape step measured
with PerfMonitor's custom-loop API (``with perf.step():``). ale-py ships the
ROMs, so it runs offline.

    python examples/atari_dqn.py --env ALE/Pong-v5 --steps 30
"""

from __future__ import annotations

import collections

import ale_py
import gymnasium as gym
import numpy as np
import tensorflow as tf

from tf_mobileperf import PerfMonitor
from tf_mobileperf.zoo.rl import build_dqn

from _common import every, finish, parser, setup_logging

gym.register_envs(ale_py)


class Frames:
    """Grayscale frames resized to 84x84 and stacked 4 deep (Mnih et al. 2015)."""

    def __init__(self, env_id: str, seed: int):
        self.env = gym.make(env_id, obs_type="grayscale", frameskip=4, repeat_action_probability=0.0)
        self.stack: collections.deque = collections.deque(maxlen=4)
        self.seed = seed

    @staticmethod
    def _small(frame: np.ndarray) -> np.ndarray:
        return tf.image.resize(frame[..., None], (84, 84), method="area").numpy()[..., 0].astype(np.uint8)

    def reset(self) -> np.ndarray:
        frame, _ = self.env.reset(seed=self.seed)
        for _ in range(4):
            self.stack.append(self._small(frame))
        return np.stack(self.stack, -1)

    def step(self, action: int):
        frame, reward, terminated, truncated, _ = self.env.step(action)
        self.stack.append(self._small(frame))
        return np.stack(self.stack, -1), float(np.sign(reward)), terminated or truncated


def main() -> None:
    p = parser(__doc__.splitlines()[0], batch_size=32, steps=50, logdir="runs/atari_dqn")
    p.add_argument("--env", default="ALE/Pong-v5")
    p.add_argument("--buffer", type=int, default=10_000)
    p.add_argument("--learn-start", type=int, default=200, help="environment steps before training")
    p.add_argument("--target-every", type=int, default=100)
    p.add_argument("--gamma", type=float, default=0.99)
    args = p.parse_args()
    setup_logging()

    frames = Frames(args.env, seed=0)
    actions = int(frames.env.action_space.n)
    online, target = build_dqn(84, actions), build_dqn(84, actions)
    target.set_weights(online.get_weights())
    optimizer = tf.keras.optimizers.Adam(1e-4)
    huber = tf.keras.losses.Huber()
    buffer: collections.deque = collections.deque(maxlen=args.buffer)
    rng = np.random.default_rng(0)

    @tf.function
    def train_step(s, a, r, s2, done):
        q_next = tf.reduce_max(target(s2), axis=1)
        y = r + args.gamma * (1.0 - done) * q_next
        with tf.GradientTape() as tape:
            q = tf.reduce_sum(online(s) * tf.one_hot(a, actions), axis=1)
            loss = huber(y, q)
        grads = tape.gradient(loss, online.trainable_variables)
        optimizer.apply_gradients(zip(grads, online.trainable_variables))
        return loss

    state = frames.reset()
    updates, env_steps, episode_reward, last_episode = 0, 0, 0.0, None
    with PerfMonitor(args.logdir, sensors=args.sensors, batch_size=args.batch_size) as perf:
        perf.model_name = "dqn"
        while updates < args.steps:
            epsilon = max(0.1, 1.0 - env_steps / 10_000)
            if rng.random() < epsilon:
                action = int(rng.integers(actions))
            else:
                action = int(np.argmax(online(state[None].astype(np.float32))[0]))
            next_state, reward, done = frames.step(action)
            buffer.append((state, action, reward, next_state, float(done)))
            episode_reward += reward
            if done:
                last_episode, episode_reward = episode_reward, 0.0
            state = frames.reset() if done else next_state
            env_steps += 1
            if env_steps < args.learn_start:
                continue
            batch = [buffer[i] for i in rng.integers(len(buffer), size=args.batch_size)]
            s, a, r, s2, d = (np.array(x) for x in zip(*batch))
            with perf.step():
                loss = train_step(
                    s.astype(np.float32),
                    a.astype(np.int32),
                    r.astype(np.float32),
                    s2.astype(np.float32),
                    d.astype(np.float32),
                )
            updates += 1
            if updates % every(args.steps) == 0 or updates == args.steps:
                episode = "none finished yet" if last_episode is None else f"{last_episode:+.0f}"
                print(
                    f"update {updates}/{args.steps}  loss {float(loss):.4f}  epsilon {epsilon:.3f}  "
                    f"last episode reward {episode}  (this one so far {episode_reward:+.0f})",
                    flush=True,
                )
            if updates % args.target_every == 0:
                target.set_weights(online.get_weights())
    finish(perf.report, perf.logdir)


if __name__ == "__main__":
    main()
