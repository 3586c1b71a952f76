import gc

import torch
import torch.nn.functional as F


def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if step % 500 == 0:
                gc.collect()
        gc.collect()


def evaluate_population(population, episodes):
    fitness = []
    for agent in population:
        fitness.append(agent.run())
    return fitness


def main(population, generations):
    for generation in range(generations):
        evaluate_population(population, 1)
        gc.collect()
    gc.collect()


class Trainer:
    def on_validation_epoch_end(self):
        gc.collect()

    def save_checkpoint(self, path):
        gc.collect()
        torch.save(self.model.state_dict(), path)


def step(batch):
    try:
        return batch.run()
    except MemoryError:
        gc.collect()
        raise


def gc_collect_harder():
    # A few rounds so objects resurrected by finalizers are collected too.
    for _ in range(5):
        gc.collect()
