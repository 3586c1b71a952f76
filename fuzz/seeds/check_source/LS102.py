import gc

import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    for step, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        del loss
        gc.collect()  # expect: LS102


def collect(env, policy, steps):
    for t in range(steps):
        obs, reward, done, _ = env.step(policy(env.obs))
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        gc.collect()  # expect: LS102


class Agent:
    def learn(self, batch):
        loss = self.critic(batch).mean()
        loss.backward()
        self.optimizer.step()
        gc.collect()  # expect: LS102

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        freed = gc.collect()  # expect: LS102
        module.log("gc/freed", freed)
