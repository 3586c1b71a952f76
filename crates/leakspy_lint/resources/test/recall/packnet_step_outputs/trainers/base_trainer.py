"""Self-supervised depth training (in the style of packnet-sfm): the trainer keeps each batch's
output dict for the epoch-end metrics, and the dict still holds the loss with its graph.

Source: TRI-ML/packnet-sfm issue #47, "About memory leaks" (memory grows from 21 GB to 38 GB in
one epoch: `outputs` holds `output['loss']` for the whole epoch), fixed by pull request #51
("Detach loss before appending it to the training output list").
"""

import torch
from tqdm import tqdm


class HorovodTrainer:
    def __init__(self, max_epochs=50, grad_scale=1.0):
        self.max_epochs = max_epochs
        self.grad_scale = grad_scale

    def fit(self, module):
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            train_dataloader = module.train_dataloader()
            output = self.train(train_dataloader, module, optimizer)
            module.training_epoch_end(output)

    def train(self, dataloader, module, optimizer):
        module.train()
        outputs = []
        progress_bar = tqdm(enumerate(dataloader, 0), total=len(dataloader))
        for i, batch in progress_bar:
            optimizer.zero_grad()
            batch = {k: v.cuda() if torch.is_tensor(v) else v for k, v in batch.items()}
            output = module.training_step(batch, i)
            output["loss"].backward()
            optimizer.step()
            outputs.append(output)  # expect: LS002
        return outputs
