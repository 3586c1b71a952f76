"""ImageNet ResNet-50 with Horovod (in the style of its example): a per-rank `Metric` keeps the
epoch's running loss, and each step's loss reaches it with its graph.

Source: horovod/horovod pull request #641, "Fix memory leak in pytorch_imagenet_resnet50.py
example": the example reduced the loss, which carries the computation graph, and ran out of
memory; fixed by detaching the value before it is reduced (`val.detach().cpu()`).
"""

import horovod.torch as hvd
import torch
import torch.nn.functional as F
from torchvision import models

from utils.metrics import Metric, accuracy


def train(epoch, model, optimizer, train_loader, train_sampler):
    model.train()
    train_sampler.set_epoch(epoch)
    train_loss = Metric("train_loss")
    train_accuracy = Metric("train_accuracy")
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        train_loss.update(loss)
        train_accuracy.update(accuracy(output, target))
    if hvd.rank() == 0:
        print(f"epoch {epoch}: loss {train_loss.avg.item():.4f}, acc {train_accuracy.avg.item():.4f}")


def main():
    hvd.init()
    torch.cuda.set_device(hvd.local_rank())
    model = models.resnet50().cuda()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0125 * hvd.size()),
                                         named_parameters=model.named_parameters())
    train_loader, train_sampler = build_loader()
    for epoch in range(90):
        train(epoch, model, optimizer, train_loader, train_sampler)
