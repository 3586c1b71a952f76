# Construction is not training: lists filled while a dataset or an ensemble is built.
import torch
import torch.nn as nn


class Split(torch.utils.data.Dataset):
    def __init__(self, root, encoder):
        self.items = []
        self.encoder = encoder
        self._prepare(root)

    def _prepare(self, root):
        for path in sorted(root):
            x = torch.load(path)
            self.items.append(self.encoder(x))

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


class Boosted(nn.Module):
    def __init__(self, num_nets):
        super().__init__()
        self.nets = []
        self.num_nets = num_nets

    def add_stage(self, features):
        net = nn.Linear(features, 1)
        self.nets.append(net)

    def build(self, features):
        for stage in range(self.num_nets):
            self.add_stage(features)


def main(roots, loader, opt):
    data = Split(roots, nn.Linear(4, 4))
    model = Boosted(10)
    model.build(4)
    return data, model


class PageSet(torch.utils.data.Dataset):
    # Filled page by page through a public method; what `__getitem__` serves is its storage.
    def __init__(self):
        self.images = []
        self.targets = []

    def add(self, image, target):
        self.images.append(torch.as_tensor(image))
        self.targets.append(torch.as_tensor(target))

    def __getitem__(self, idx):
        return self.images[idx], self.targets[idx]

    def __len__(self):
        return len(self.images)


def build_pages(data):
    pages = PageSet()
    for sample in data:
        pages.add(**sample)
    return pages
