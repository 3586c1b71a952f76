import torch
import torch.nn.functional as F


def train(model, loader, optimizer, num_epochs):
    for epoch in range(num_epochs):
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            # Every 1000 steps, not every step.
            if step % 1000 == 0:
                torch.cuda.empty_cache()
            if (step + 1) % 500 == 0 and torch.cuda.is_available():
                torch.cuda.empty_cache()
        # Once per epoch: the cost is paid once for thousands of steps.
        torch.cuda.empty_cache()


def evolve(population, generations):
    for gen in range(generations):
        for agent in population:
            agent.evaluate()
        torch.cuda.empty_cache()


def train_with_oom_retry(model, loader, optimizer):
    for x, y in loader:
        try:
            loss = F.mse_loss(model(x), y)
            loss.backward()
        except torch.cuda.OutOfMemoryError:
            # Freeing the cache before retrying with a smaller batch is legitimate.
            optimizer.zero_grad()
            torch.cuda.empty_cache()
            continue
        optimizer.step()


def release(model):
    # Once, after dropping a large model: hands the memory back to other processes.
    del model
    torch.cuda.empty_cache()


class Callback:
    def on_train_epoch_end(self, trainer, module):
        torch.cuda.empty_cache()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if batch_idx % 200 == 0:
            torch.cuda.empty_cache()


def report(results):
    for r in results:
        # Not torch's empty_cache.
        r.cache.empty_cache()
