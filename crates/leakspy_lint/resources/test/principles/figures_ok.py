# A plotting script that draws once per environment (or per run it reads) and exits is not a
# training loop: nothing in it steps, backpropagates or reads batches.
import json

import matplotlib.pyplot as plt

ENVS = ["HalfCheetah-v4", "Hopper-v4", "Walker2d-v4"]


def plot_results(results_dir):
    for env in ENVS:
        with open(f"{results_dir}/{env}.json") as f:
            curve = json.load(f)
        fig, ax = plt.subplots()
        ax.plot(curve["steps"], curve["returns"])
        ax.set_title(env)
        fig.savefig(f"{results_dir}/{env}.png")


if __name__ == "__main__":
    for env_name in ENVS:
        plt.figure()
        plt.plot(range(10))
        plt.savefig(f"{env_name}.png")
