"""A stable-baselines3 callback that keeps the policy's value estimates, in
two versions:

    python sb3_value_callback.py leak|healthy [SECONDS]

`leak` evaluates the value head on each new observation in `_on_step`
and keeps the result in `ValueLoggerCallback.values`: the evaluation
runs with autograd on, so each value carries the graph of the value
network's forward pass (and its activations). `healthy` evaluates it
under `torch.no_grad()` and keeps floats. PPO on CartPole-v1
(gymnasium), CPU; it trains for SECONDS of its own CPU time (default 25;
a busy machine stretches the run, it does not cut its work) and prints
how many optimizer steps PPO made (epochs x minibatches per rollout).
"""

import sys
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback


class ValueLoggerCallback(BaseCallback):
    def __init__(self, keep_graphs):
        super().__init__()
        self.keep_graphs = keep_graphs
        self.values = []

    def _on_step(self):
        obs = torch.as_tensor(self.locals["new_obs"], dtype=torch.float32)
        if self.keep_graphs:
            self.values.append(self.model.policy.predict_values(obs))  # LEAK_LINE
        else:
            with torch.no_grad():
                self.values.append(float(self.model.policy.predict_values(obs).mean()))
            del self.values[:-1000]
        return True


class StopAfter(BaseCallback):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.t0 = None

    def _on_step(self):
        if self.t0 is None:
            self.t0 = time.process_time()
        return time.process_time() - self.t0 < self.seconds


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "leak"
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 25.0
    torch.set_num_threads(1)
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=256, batch_size=64, n_epochs=4,
                policy_kwargs={"net_arch": [128, 128]}, seed=0, device="cpu", verbose=0)
    model.learn(total_timesteps=10**8,
                callback=[ValueLoggerCallback(keep_graphs=(mode == "leak")), StopAfter(seconds)])
    per_update = model.n_steps * model.n_envs // model.batch_size
    print("optimizer steps:", model._n_updates * per_update, flush=True)


if __name__ == "__main__":
    main()
